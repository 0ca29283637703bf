//! How a run ends: the [`Ending`] the executor arrives at (succeeded, failed with a category,
//! canceled, or suspended at a clean point during a shutdown) and the `run_ended` event made of it.

use od_events::runs::RunEnded;
use od_events::Event;

use super::Ctx;
use crate::engine::Engine;
use crate::runner::agent::CancelFlag;
use crate::store::StoreError;

/// How a run ended, before it is recorded.
pub(in crate::runner) struct Ending {
    pub(in crate::runner) status: &'static str,
    pub(in crate::runner) code: i32,
    pub(in crate::runner) reason: String,
    pub(in crate::runner) category: String,
    /// Stopped at a clean point (waiting for an answer) during a daemon shutdown: record no end,
    /// the next start resumes the run.
    pub(in crate::runner) suspend: bool,
}

impl Ending {
    pub(in crate::runner) fn failed(category: &str, reason: impl Into<String>) -> Self {
        Self { status: "failed", code: 1, reason: reason.into(), category: category.into(), suspend: false }
    }

    fn canceled() -> Self {
        Self {
            status: "canceled",
            code: 130,
            reason: "canceled by the user".into(),
            category: "canceled".into(),
            suspend: false,
        }
    }

    pub(in crate::runner) fn suspended() -> Self {
        Self { suspend: true, ..Self::failed("daemon-shutdown", "suspended while waiting for an answer") }
    }
}

pub(super) fn run_ended(engine: &Engine, run_id: &str, end: Ending, artifacts: u32) -> Event {
    Event::RunEnded(RunEnded {
        run_id: run_id.into(),
        status: end.status.into(),
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
        Ending::failed("daemon-shutdown", "the daemon stopped while the run was in flight")
    } else {
        Ending::canceled()
    })
}

pub(in crate::runner) fn store_end(e: StoreError) -> Ending {
    Ending::failed("store", format!("recording the run failed: {e}"))
}
