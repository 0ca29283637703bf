//! Run leases: which daemon executes a run. With the embedded log one process holds the data dir,
//! so every run is this process's ([`LocalLeases`]). With PostgreSQL several daemons share the log,
//! and a run executes on exactly one of them: the one holding its lease (`pg/lease.rs`). A lease
//! is held as long as its daemon's heartbeat is fresh; a daemon that stops heart-beating for the
//! lease TTL loses its leases to whichever live daemon takes them (and applies the restart
//! semantics to those runs).

use super::StoreError;

/// Who executes which run.
pub trait RunLeases: Send + Sync + 'static {
    /// Whether other daemons share the log (a lease can be held elsewhere).
    fn shared(&self) -> bool;
    /// This daemon's id (stable across its restarts: kept in its data dir).
    fn daemon_id(&self) -> &str;
    /// Takes `run_id` for this daemon: true when this daemon holds it now (it already did, it was
    /// free, or its holder's heartbeat is older than the TTL); false while a live daemon holds it.
    fn take(&self, run_id: &str) -> Result<bool, StoreError>;
    /// Which of `runs` no live daemon other than this one holds (one query for a scan).
    fn free(&self, runs: &[String]) -> Result<Vec<String>, StoreError> {
        Ok(runs.to_vec())
    }
    /// Gives `run_id` up (after its end, or when this daemon will not execute it).
    fn release(&self, run_id: &str);
    /// Gives every lease up at once (a graceful stop): other daemons may take them at once.
    fn retire(&self) {}
}

/// The embedded log's leases: this process holds every run.
pub struct LocalLeases(pub String);

impl RunLeases for LocalLeases {
    fn shared(&self) -> bool {
        false
    }

    fn daemon_id(&self) -> &str {
        &self.0
    }

    fn take(&self, _run_id: &str) -> Result<bool, StoreError> {
        Ok(true)
    }

    fn release(&self, _run_id: &str) {}
}

/// This data dir's daemon id: read from `daemon-id`, or minted by `mint` and written there durably
/// (fsynced with its folder before the daemon uses it, so a power cut cannot change its identity).
/// A file that is there but unreadable or not an id (empty, torn) is reported in the daemon log
/// before a new id replaces it — never silently.
pub fn daemon_id(dir: &std::path::Path, mint: impl FnOnce() -> String) -> Result<String, StoreError> {
    let path = dir.join("daemon-id");
    match std::fs::read_to_string(&path) {
        Ok(s) => {
            let s = s.trim();
            if !s.is_empty() && s.len() <= 128 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                return Ok(s.to_string());
            }
            tracing::error!(
                "{} holds no daemon id ({} bytes); this daemon gets a new identity",
                path.display(),
                s.len()
            );
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::error!("cannot read {}: {e}; this daemon gets a new identity", path.display()),
    }
    let id = mint();
    crate::durable::write_file(&path, id.as_bytes()).map_err(|e| StoreError::io("writing the daemon id", e))?;
    Ok(id)
}
