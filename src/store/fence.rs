//! The writer's two lifecycle rules for run streams, the same on every backend:
//!
//! - **Fencing.** An append carrying a [`Fence`] (an executor's) is written only while the fence's
//!   (daemon, epoch) still holds the run's lease — checked inside the commit: on PostgreSQL in the
//!   transaction that locks the head row, reading the lease row `FOR SHARE` (so a take waits for
//!   the commit, and sees it); on the embedded log against the process's [`LocalFences`] in the
//!   writer thread. Refused: [`StoreError::LeaseLost`].
//! - **Nothing follows an end.** An append to a run stream whose `run_ended` is recorded — or
//!   staged earlier in the same batch — is refused with [`StoreError::RunEnded`]: a cancel is
//!   final, a second end is impossible, a stalled executor cannot reopen a run.
//!
//! A refused group writes nothing, for any of its parts.

use od_events::EventKind;
use std::collections::HashSet;

use super::group::Prepared;
use super::lease::{Fence, LocalFences};
use super::{Append, StoreError};

/// The stream prefix of runs (`run:<id>`).
pub(crate) const RUN_PREFIX: &str = "run:";

/// Whether `stream` is a run's stream.
pub(crate) fn is_run_stream(stream: &str) -> bool {
    stream.starts_with(RUN_PREFIX)
}

/// Whether `p` records its run's end.
pub(crate) fn ends_run(p: &Prepared) -> bool {
    p.payloads.iter().any(|(k, _, _)| *k == EventKind::RunEnded.code())
}

/// A fence must name the run whose stream it appends to.
pub(crate) fn check_request(a: &Append) -> Result<(), StoreError> {
    let Some(f) = &a.fence else { return Ok(()) };
    match a.stream.as_str().strip_prefix(RUN_PREFIX) {
        Some(run) if run == f.run_id => Ok(()),
        _ => Err(StoreError::Invalid {
            field: "fence",
            reason: format!("the fence of run {} cannot guard stream {}", f.run_id, a.stream.as_str()),
        }),
    }
}

/// What a batch knows while it stages: run streams ended (committed or staged), and which fences
/// hold their leases.
#[derive(Default)]
pub(crate) struct Lifecycle {
    pub ended: HashSet<String>,
    /// (run, daemon, epoch) pairs holding their lease, read in the commit.
    pub holding: HashSet<(String, String, u64)>,
}

impl Lifecycle {
    /// Checks one group's parts (before anything of it is staged).
    pub fn admit(&self, parts: &[Prepared]) -> Result<(), StoreError> {
        for p in parts {
            if let Some(f) = &p.fence {
                if !self.holding.contains(&(f.run_id.clone(), f.daemon_id.clone(), f.epoch)) {
                    return Err(StoreError::LeaseLost { run_id: f.run_id.clone(), epoch: f.epoch });
                }
            }
            if self.ended.contains(p.stream.as_str()) {
                return Err(StoreError::RunEnded { stream: p.stream.as_str().to_string() });
            }
        }
        Ok(())
    }

    /// Notes what a staged group changed (the runs it ended).
    pub fn staged(&mut self, parts: &[Prepared]) {
        for p in parts.iter().filter(|p| is_run_stream(p.stream.as_str()) && ends_run(p)) {
            self.ended.insert(p.stream.as_str().to_string());
        }
    }
}

/// The embedded writer's check of one group: fences against the process's table, ends through
/// `ended` (which says whether a run stream's end is recorded).
pub(crate) fn admit_local(
    parts: &[Prepared],
    fences: &LocalFences,
    mut ended: impl FnMut(&str) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    for p in parts {
        if let Some(Fence { run_id, epoch, .. }) = &p.fence {
            if !fences.holds(run_id, *epoch) {
                return Err(StoreError::LeaseLost { run_id: run_id.clone(), epoch: *epoch });
            }
        }
        let stream = p.stream.as_str();
        if is_run_stream(stream) && ended(stream)? {
            return Err(StoreError::RunEnded { stream: stream.to_string() });
        }
    }
    Ok(())
}
