//! The log writer's health, as `/api/health` reports it (each backend's writer sets it: ok, full,
//! failing, poisoned — the embedded writer's recovery from a failed commit is in
//! `sled/writer.rs`), and what the last whole-log verification found.

use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

use super::verify::BadFrame;
use super::StoreError;

/// The state of the store's writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StoreState {
    /// Commits succeed.
    Ok,
    /// The last commit (or probe) failed for lack of space; writes are refused until space returns.
    Full,
    /// The last commit (or probe) failed with another I/O error; writes are retried.
    Failing,
    /// A failure the writer cannot recover from in place: every write is refused until a restart.
    Poisoned,
}

/// What `/api/health` says about the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoreHealth {
    pub state: StoreState,
    /// The last failure, while not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Only restarting od makes the store accept writes again.
    pub restart_needed: bool,
}

impl StoreHealth {
    pub(crate) fn ok() -> Self {
        Self { state: StoreState::Ok, reason: None, restart_needed: false }
    }
}

/// What the last whole-log verification found (this process's, or the one saved before a restart) (the daemon's background pass):
/// opening verifies only the log's tail, so this is what says the rest is sound — or names the
/// first damaged frame (the daemon's health is then degraded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogCheck {
    /// Frames from seq 1 that verified.
    pub verified: u64,
    /// The last seq the pass set out to check (the tail when it began).
    pub through_seq: u64,
    /// When the pass began (unix ms, the daemon's clock).
    pub started_at: i64,
    /// The first bad frame, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_bad: Option<BadFrame>,
}

/// The health shared by the writer (which sets it) and the store handle (which reads it).
#[derive(Clone)]
pub struct SharedHealth(Arc<Mutex<StoreHealth>>, Arc<Mutex<Option<LogCheck>>>);

impl Default for SharedHealth {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(StoreHealth::ok())), Arc::default())
    }
}

impl SharedHealth {
    /// The last whole-log verification's result, if one finished.
    pub fn log_check(&self) -> Option<LogCheck> {
        self.1.lock().expect("health lock").clone()
    }

    pub fn set_log_check(&self, c: LogCheck) {
        *self.1.lock().expect("health lock") = Some(c);
    }

    pub fn get(&self) -> StoreHealth {
        self.0.lock().expect("health lock").clone()
    }

    pub fn set_ok(&self) {
        *self.0.lock().expect("health lock") = StoreHealth::ok();
    }

    /// After a successful commit (and checkpoint): ok again, unless poisoned.
    pub fn set_ok_if_not(&self) {
        let mut h = self.0.lock().expect("health lock");
        if !matches!(h.state, StoreState::Ok | StoreState::Poisoned) {
            *h = StoreHealth::ok();
        }
    }

    /// A failed commit or probe that later writes retry.
    pub fn set_failed(&self, e: &StoreError) {
        let state = match e {
            StoreError::Full { .. } => StoreState::Full,
            _ => StoreState::Failing,
        };
        *self.0.lock().expect("health lock") =
            StoreHealth { state, reason: Some(e.to_string()), restart_needed: false };
    }

    pub fn set_poisoned(&self, why: &str) {
        *self.0.lock().expect("health lock") =
            StoreHealth { state: StoreState::Poisoned, reason: Some(why.to_string()), restart_needed: true };
    }
}
