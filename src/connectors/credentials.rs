//! Connector credential storage: each connected account's tokens in
//! `<data dir>/credentials/connectors/<id>.json`, the folder mode 0700 and the files 0600, written
//! through the durable-write primitive (`safe_fs::Root::write_atomic`: a temp file under a name
//! unique to the write, renamed over the target, never a link followed). This is the only place
//! tokens are kept: the log records that an account was connected and its label, never a token.
//!
//! An expired token is refreshed by one caller at a time per credential ([`Credentials::fresh`],
//! single-flight): parallel tool calls on an expired token make one refresh, and the others use
//! the token it stored.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::oauth::OAuthError;

/// A connected account's tokens.
#[derive(Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Credential {
    pub access_token: String,
    #[serde(default)]
    pub refresh_token: String,
    #[serde(default)]
    pub token_type: String,
    /// Unix ms; 0: the provider gave no expiry.
    #[serde(default)]
    pub expires_at: i64,
    #[serde(default)]
    pub scopes: Vec<String>,
    pub account_label: String,
    pub connected_at: i64,
    /// Where to refresh it, for a token whose client is not in the catalog (an MCP server's: its
    /// token endpoint, od's registered client id, the resource).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token_url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
}

// Tokens are never printed, not even in a debug print.
impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential").field("account_label", &self.account_label).finish_non_exhaustive()
    }
}

impl Credential {
    /// Whether it expired at `now` and can be refreshed (the provider gave a refresh token).
    pub fn needs_refresh(&self, now: i64) -> bool {
        self.expires_at != 0 && self.expires_at <= now && !self.refresh_token.is_empty()
    }
}

/// Why [`Credentials::fresh`] could not hand out a fresh credential.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// The provider refused the refresh (or could not be reached).
    #[error(transparent)]
    OAuth(#[from] OAuthError),
    /// The refreshed credential could not be stored.
    #[error("storing the credential: {0}")]
    Store(std::io::Error),
}

/// The credential folder, and which of its credentials are being refreshed.
#[derive(Debug, Clone)]
pub struct Credentials {
    dir: PathBuf,
    /// One lock per credential being refreshed (entries are dropped when nobody holds them).
    refreshing: Arc<Mutex<HashMap<String, Arc<Mutex<()>>>>>,
}

impl Credentials {
    pub fn new(data_dir: &std::path::Path) -> Self {
        Self::in_folder(data_dir, "connectors")
    }

    /// The credential folder `credentials/<folder>` (`connectors`, `mcp`).
    pub fn in_folder(data_dir: &std::path::Path, folder: &str) -> Self {
        Self { dir: data_dir.join("credentials").join(folder), refreshing: Default::default() }
    }

    fn path(&self, id: &str) -> PathBuf {
        // Ids are checked by the catalog (`[a-z0-9_-]`), so this cannot leave the folder.
        self.dir.join(format!("{id}.json"))
    }

    /// The stored credential of connector `id` (None: not connected, or unreadable).
    pub fn get(&self, id: &str) -> Option<Credential> {
        let bytes = std::fs::read(self.path(id)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Stores `c` for `id`, replacing what was there.
    pub fn put(&self, id: &str, c: &Credential) -> std::io::Result<()> {
        self.write_private(id, &serde_json::to_vec(c).expect("a credential serialises"))
    }

    /// Writes `<name>.json` owner-only through the durable-write primitive: a temp file named for
    /// this write alone, renamed over the target (concurrent writers never share a temp file). The
    /// folder is 0700 before anything is written in it, so the file is never readable by others.
    pub fn write_private(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        for d in [self.dir.parent().expect("credentials/<folder> has a parent"), &self.dir] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))?;
        }
        // Owner-only from its first byte, durable, through a temp file of its own.
        crate::durable::write_file_mode(&self.dir.join(format!("{name}.json")), bytes, 0o600)
    }

    /// The credential `id`, fresh: when it expired and can be refreshed, `refresh` is called by
    /// one caller at a time per credential; a caller that waited for another's refresh reads the
    /// credential again and uses what that refresh stored. None: not connected.
    pub fn fresh(
        &self,
        id: &str,
        now: i64,
        refresh: impl FnOnce(&Credential) -> Result<Credential, OAuthError>,
    ) -> Result<Option<Credential>, RefreshError> {
        match self.get(id) {
            Some(c) if c.needs_refresh(now) => {}
            other => return Ok(other),
        }
        let lock = self.refreshing.lock().expect("refresh locks").entry(id.to_string()).or_default().clone();
        let done = {
            let _one = lock.lock().unwrap_or_else(|p| p.into_inner());
            match self.get(id) {
                Some(c) if c.needs_refresh(now) => refresh(&c)
                    .map_err(RefreshError::from)
                    .and_then(|next| self.put(id, &next).map(|()| Some(next)).map_err(RefreshError::Store)),
                other => Ok(other),
            }
        };
        let mut locks = self.refreshing.lock().expect("refresh locks");
        // Ours and the table's: nobody else holds or waits for it.
        if Arc::strong_count(&lock) <= 2 {
            locks.remove(id);
        }
        done
    }

    /// Reads `<name>.json` (None: absent or unreadable).
    pub fn read_private(&self, name: &str) -> Option<Vec<u8>> {
        std::fs::read(self.path(name)).ok()
    }

    /// Forgets `id`'s credential; whether there was one.
    pub fn remove(&self, id: &str) -> std::io::Result<bool> {
        match std::fs::remove_file(self.path(id)) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_owner_only_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let c = Credentials::new(dir.path());
        assert!(c.get("slack").is_none());
        let cred = Credential { access_token: "t0k".into(), account_label: "acme".into(), ..Default::default() };
        c.put("slack", &cred).unwrap();
        let mode =
            std::fs::metadata(dir.path().join("credentials/connectors/slack.json")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let mode = std::fs::metadata(dir.path().join("credentials/connectors")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(c.get("slack").unwrap().access_token, "t0k");
        assert!(!format!("{:?}", c.get("slack").unwrap()).contains("t0k"));
        assert!(c.remove("slack").unwrap() && !c.remove("slack").unwrap());
    }
}
