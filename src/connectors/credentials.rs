//! Connector credential storage: each connected account's tokens in
//! `<data dir>/credentials/connectors/<id>.json`, the folder mode 0700 and the files 0600 (written
//! to a temp file, synced, renamed). This is the only place tokens are kept: the log records that
//! an account was connected and its label, never a token.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

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

/// The credential folder.
#[derive(Debug, Clone)]
pub struct Credentials {
    dir: PathBuf,
}

impl Credentials {
    pub fn new(data_dir: &std::path::Path) -> Self {
        Self::in_folder(data_dir, "connectors")
    }

    /// The credential folder `credentials/<folder>` (`connectors`, `mcp`).
    pub fn in_folder(data_dir: &std::path::Path, folder: &str) -> Self {
        Self { dir: data_dir.join("credentials").join(folder) }
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

    /// Writes `<name>.json` owner-only (temp file, fsync, rename).
    pub fn write_private(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        for d in [self.dir.parent().expect("credentials/<folder> has a parent"), &self.dir] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))?;
        }
        let tmp = self.dir.join(format!(".{name}.json.tmp"));
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, self.path(name))?;
        std::fs::File::open(&self.dir)?.sync_all()
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
