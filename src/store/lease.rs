//! Run leases: which daemon executes a run, and the fencing token that makes "one executor per
//! run" hold even when a daemon stalls. With the embedded log one process holds the data dir, so
//! every run is this process's ([`LocalLeases`]). With PostgreSQL several daemons share the log,
//! and a run executes on exactly one of them: the one holding its lease (`pg/lease.rs`). A lease
//! is held as long as its daemon's heartbeat is fresh; a daemon that stops heart-beating for the
//! lease TTL loses its leases to whichever live daemon takes them (and applies the restart
//! semantics to those runs).
//!
//! Every take of a lease gets a new epoch, greater than every epoch issued before (a counter that
//! only grows: a PostgreSQL sequence, or this process's counter). The executor carries its
//! (daemon, epoch) as a [`Fence`] on every append it makes to its run's stream, and the log's
//! writer admits such an append only while that (daemon, epoch) still holds the run's lease,
//! checked inside the commit (`store/fence.rs`). A daemon that wakes from a stall therefore cannot
//! write to a run another daemon took, whatever it believes: its append is refused with
//! [`StoreError::LeaseLost`], and the executor stops without recording anything more.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::StoreError;

/// The fencing token an executor's appends carry: the run, and the (daemon, epoch) that took its
/// lease. The writer refuses the append unless that pair still holds the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub run_id: String,
    pub daemon_id: String,
    pub epoch: u64,
}

/// Called with the leases a daemon learned it lost (run id, the epoch it held), so their
/// executors stop at once (`RunLeases::on_lost`).
pub type LostHook = Box<dyn Fn(Vec<(String, u64)>) + Send + Sync>;

/// Who executes which run.
pub trait RunLeases: Send + Sync + 'static {
    /// Whether other daemons share the log (a lease can be held elsewhere).
    fn shared(&self) -> bool;
    /// This daemon's id (stable across its restarts: kept in its data dir).
    fn daemon_id(&self) -> &str;
    /// Takes `run_id` for this daemon with a new epoch: `Some(epoch)` when this daemon holds it now
    /// (it already did, it was free, or its holder's heartbeat is older than the TTL and this
    /// daemon is not in its quiet period after a reconnect); `None` while another daemon holds it.
    fn take(&self, run_id: &str) -> Result<Option<u64>, StoreError>;
    /// The fence an executor holding `run_id` at `epoch` appends with (`None`: the log enforces
    /// no fence for these leases).
    fn fence(&self, run_id: &str, epoch: u64) -> Option<Fence> {
        Some(Fence { run_id: run_id.to_string(), daemon_id: self.daemon_id().to_string(), epoch })
    }
    /// Which of `runs` no live daemon other than this one holds (one query for a scan).
    fn free(&self, runs: &[String]) -> Result<Vec<String>, StoreError> {
        Ok(runs.to_vec())
    }
    /// Gives `run_id` up (after its end, or when this daemon will not execute it). The lease's
    /// epoch is never reused: a later take gets a greater one.
    fn release(&self, run_id: &str);
    /// Gives every lease up at once (a graceful stop): other daemons may take them at once.
    fn retire(&self) {}
    /// Registers what to do with leases this daemon learns it lost (a heartbeat back after a gap
    /// longer than the TTL finds them held by another daemon, or at a greater epoch).
    fn on_lost(&self, _hook: LostHook) {}
}

/// The embedded log's lease table: which epoch holds each run in this process. The writer checks
/// fenced appends against it (`store/fence.rs`); [`LocalLeases`] takes and releases in it.
#[derive(Default)]
pub struct LocalFences {
    held: Mutex<HashMap<String, u64>>,
    next: AtomicU64,
}

impl LocalFences {
    /// A new epoch for `run_id` (greater than every earlier one).
    pub fn take(&self, run_id: &str) -> u64 {
        let epoch = self.next.fetch_add(1, Ordering::AcqRel) + 1;
        self.held.lock().expect("fence table").insert(run_id.to_string(), epoch);
        epoch
    }

    /// Frees `run_id`: no fence holds it until the next take.
    pub fn release(&self, run_id: &str) {
        self.held.lock().expect("fence table").remove(run_id);
    }

    /// Whether `epoch` holds `run_id` now.
    pub fn holds(&self, run_id: &str, epoch: u64) -> bool {
        self.held.lock().expect("fence table").get(run_id) == Some(&epoch)
    }
}

/// The embedded log's leases: this process holds every run; epochs come from the log's own table
/// (so the writer enforces them), or — on a log that keeps none — fence nothing.
pub struct LocalLeases {
    id: String,
    fences: Option<Arc<LocalFences>>,
}

impl LocalLeases {
    /// Leases of daemon `id` over the table the log enforces (`EventLog::local_fences`).
    pub fn new(id: impl Into<String>, fences: Option<Arc<LocalFences>>) -> Self {
        Self { id: id.into(), fences }
    }
}

impl RunLeases for LocalLeases {
    fn shared(&self) -> bool {
        false
    }

    fn daemon_id(&self) -> &str {
        &self.id
    }

    fn take(&self, run_id: &str) -> Result<Option<u64>, StoreError> {
        Ok(Some(self.fences.as_ref().map_or(0, |f| f.take(run_id))))
    }

    fn fence(&self, run_id: &str, epoch: u64) -> Option<Fence> {
        self.fences.as_ref()?;
        Some(Fence { run_id: run_id.to_string(), daemon_id: self.id.clone(), epoch })
    }

    fn release(&self, run_id: &str) {
        if let Some(f) = &self.fences {
            f.release(run_id);
        }
    }
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
