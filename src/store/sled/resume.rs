//! The background verification's durable progress, in sled's `meta` tree under `verify_pass`: the
//! pass in progress as of its last step (so a restart resumes it where it got instead of starting
//! again from seq 1), or, once it finished, what it found (so `/api/health` still reports it after a
//! restart, and the next pass is due a day after it began rather than at every start).
//!
//! Written outside the log's commits: it becomes durable at the next timed checkpoint (see
//! [`SledLog::note_sled_written`]). Losing the last steps to a crash only means a resumed pass
//! checks them again; an unreadable or impossible value is ignored (the next pass starts at seq 1).

use serde::{Deserialize, Serialize};

use super::pass::VerifyPass;
use super::tables::sled_error;
use super::SledLog;
use crate::store::health::LogCheck;
use crate::store::{EventLog, StoreError, VerifyReport};

const KEY: &str = "verify_pass";

/// What the daemon's background verification saved last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SavedPass {
    /// A pass under way: where it got, and when (unix ms, the daemon's clock) it began.
    Running { pass: VerifyPass, started_at: i64 },
    /// The last pass finished with this result.
    Finished(LogCheck),
}

impl SledLog {
    /// What the background verification saved last, if anything usable: a saved pass that meant to
    /// check beyond this log's tail is not (a new data dir copied over an old one's sled, say).
    pub fn saved_verify(&self) -> Option<SavedPass> {
        let v = self.tables.meta.get(KEY).ok()??;
        let saved: SavedPass = serde_json::from_slice(&v).ok()?;
        match &saved {
            SavedPass::Running { pass, .. } if pass.upto() > self.last_seq() => None,
            SavedPass::Finished(c) if c.through_seq > self.last_seq() => None,
            _ => Some(saved),
        }
    }

    /// Saves where a pass got (after each of its steps).
    pub fn save_verify_progress(&self, pass: &VerifyPass, started_at: i64) -> Result<(), StoreError> {
        self.save(&SavedPass::Running { pass: pass.clone(), started_at })
    }

    fn save(&self, saved: &SavedPass) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(saved).expect("a saved pass serializes");
        self.tables.meta.insert(KEY, bytes).map_err(sled_error("saving the verification's progress", 0))?;
        self.note_sled_written();
        Ok(())
    }

    /// Records what a whole-log pass found: health reports it (damage makes it degraded), and it is
    /// saved so that a restart still reports it.
    pub fn note_verified(&self, pass: &VerifyPass, report: &VerifyReport, started_at: i64) {
        let check = LogCheck {
            verified: report.verified,
            through_seq: pass.upto(),
            started_at,
            first_bad: report.first_bad.clone(),
        };
        if let Err(e) = self.save(&SavedPass::Finished(check.clone())) {
            tracing::warn!("could not save the background verification's result: {e}");
        }
        self.health.set_log_check(check);
    }

    /// Reports a finished pass saved by an earlier process (health shows it until a new one ends).
    pub fn restore_log_check(&self, check: LogCheck) {
        if self.health.log_check().is_none() {
            self.health.set_log_check(check);
        }
    }
}
