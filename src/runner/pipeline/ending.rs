//! How a run ends: the [`Ending`] the executor arrives at (succeeded, failed with a category,
//! canceled, or suspended at a clean point during a shutdown) and the `run_ended` event made of it.

use od_events::runs::RunEnded;
use od_events::vocab::{FailureCategory, RunStatus};
use od_events::Event;

use super::Ctx;
use crate::engine::Engine;
use crate::runner::agent::CancelFlag;
use crate::store::StoreError;

/// How a run ended, before it is recorded.
pub(in crate::runner) struct Ending {
    pub(in crate::runner) status: RunStatus,
    pub(in crate::runner) code: i32,
    pub(in crate::runner) reason: String,
    pub(in crate::runner) category: FailureCategory,
    /// Stopped at a clean point (waiting for an answer) during a daemon shutdown: record no end,
    /// the next start resumes the run.
    pub(in crate::runner) suspend: bool,
}

impl Ending {
    pub(in crate::runner) fn succeeded() -> Self {
        Self {
            status: RunStatus::Succeeded,
            code: 0,
            reason: String::new(),
            category: FailureCategory::None,
            suspend: false,
        }
    }

    pub(in crate::runner) fn failed(category: impl Into<FailureCategory>, reason: impl Into<String>) -> Self {
        Self { status: RunStatus::Failed, code: 1, reason: reason.into(), category: category.into(), suspend: false }
    }

    fn canceled() -> Self {
        Self {
            status: RunStatus::Canceled,
            code: 130,
            reason: "canceled by the user".into(),
            category: FailureCategory::Canceled,
            suspend: false,
        }
    }

    pub(in crate::runner) fn suspended() -> Self {
        Self { suspend: true, ..Self::failed(FailureCategory::DaemonShutdown, "suspended while waiting for an answer") }
    }
}

pub(super) fn run_ended(engine: &Engine, run_id: &str, end: Ending, artifacts: u32) -> Event {
    Event::RunEnded(RunEnded {
        run_id: run_id.into(),
        status: end.status,
        code: end.code,
        reason: end.reason,
        failure_category: end.category,
        artifact_count: artifacts,
        ended_at: engine.clock().now_ms(),
    })
}

pub(in crate::runner) fn stop_ending(cancel: &CancelFlag, ctx: &Ctx) -> Option<Ending> {
    if !*cancel.borrow() {
        return None;
    }
    Some(if ctx.engine.is_shutting_down() {
        Ending::failed(FailureCategory::DaemonShutdown, "the daemon stopped while the run was in flight")
    } else {
        Ending::canceled()
    })
}

pub(in crate::runner) fn store_end(e: StoreError) -> Ending {
    Ending::failed(FailureCategory::Store, format!("recording the run failed: {e}"))
}
