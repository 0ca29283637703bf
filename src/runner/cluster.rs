//! Several daemons on one shared log (PostgreSQL): what this daemon does for runs that execute
//! elsewhere or nowhere.
//!
//! - [`spawn_takeover`]: every [`LEASE_SCAN_MS`](crate::limits::LEASE_SCAN_MS) it looks at the
//!   runs that have not ended and that no live daemon holds — queued runs it has room for, runs
//!   whose daemon stopped heart-beating — takes their leases and applies the restart semantics
//!   (`Engine::take_over`): resumed here, or ended `failed` (`daemon-lost`) if their agent was
//!   working.
//! - [`spawn_signal_follower`]: what another daemon recorded for a run executing here reaches it —
//!   a GenUI answer (or timeout, revoke, prefill) wakes the runs waiting for answers, and a
//!   `run_responded` with action `cancel` (a cancel posted to another daemon) cancels the run, and
//!   a browser action's result posted to another daemon reaches the agent call waiting here.
//!   Break-loop needs nothing: the executor reads it from the log at each iteration's end.

use od_events::{Event, EventKind, FrameRef};
use std::sync::Arc;
use tokio::sync::watch;

use super::Runner;
use crate::clock::SharedClock;
use crate::engine::Engine;

/// The periodic scan for runs no live daemon holds.
pub fn spawn_takeover(runner: Arc<Runner>, clock: SharedClock, mut stop: watch::Receiver<bool>) {
    tokio::spawn(async move {
        loop {
            let next = clock.sleep_until(clock.now_ms().saturating_add(crate::limits::LEASE_SCAN_MS as i64));
            tokio::select! {
                _ = next => {}
                _ = stop.wait_for(|v| *v) => return,
            }
            let r = runner.clone();
            let found = tokio::task::spawn_blocking(move || scan(&r)).await;
            match found {
                Ok(Ok(ids)) => {
                    for id in ids {
                        tracing::info!("run {id} taken over from a daemon that is gone (or never started it)");
                        runner.start(id);
                    }
                }
                Ok(Err(e)) => tracing::warn!("the run lease scan failed (retrying): {e}"),
                Err(_) => return,
            }
        }
    });
}

/// Runs to resume here, their leases taken.
fn scan(runner: &Runner) -> Result<Vec<String>, crate::engine::WorkError> {
    let engine = runner.engine();
    if engine.is_shutting_down() {
        return Ok(Vec::new());
    }
    engine.store().sync_head()?;
    let active = engine.active_runs()?;
    let candidates: Vec<String> =
        active.iter().filter(|r| !runner.is_active(&r.run_id)).map(|r| r.run_id.clone()).collect();
    let free = engine.leases().free(&candidates)?;
    let mut room = runner.spare();
    let mut start = Vec::new();
    for id in free {
        let queued = active.iter().any(|r| r.run_id == id && r.status == od_events::vocab::RunStatus::Queued);
        if queued && room == 0 {
            continue; // another daemon with room picks it up
        }
        if engine.take_over(&id)? == Some(true) {
            room = room.saturating_sub(1);
            start.push(id);
        }
    }
    Ok(start)
}

/// Follows the log for what other daemons record for runs executing here.
pub fn spawn_signal_follower(runner: Arc<Runner>, tools: Arc<crate::tools::Tools>, mut stop: watch::Receiver<bool>) {
    let engine: Arc<Engine> = runner.engine().clone();
    let mut last = engine.store().last_seq();
    let mut sub = engine.store().subscribe(last);
    tokio::spawn(async move {
        let genui = EventKind::SurfaceRequested.code()..=EventKind::SurfacePrefilled.code();
        loop {
            let frame = tokio::select! {
                f = sub.next() => f,
                _ = stop.wait_for(|v| *v) => return,
            };
            let frame = match frame {
                Some(Ok(f)) => f,
                None => return,
                Some(Err(e)) => {
                    // The database went away (an outage): follow again from where it got, once
                    // it answers — answers posted elsewhere must still reach runs parked here.
                    tracing::warn!("following the log for other daemons' signals failed (retrying): {e}");
                    tokio::select! {
                        _ = tokio::time::sleep(std::time::Duration::from_millis(crate::limits::PG_POLL_INTERVAL_MS)) => {}
                        _ = stop.wait_for(|v| *v) => return,
                    }
                    sub = engine.store().subscribe(last);
                    continue;
                }
            };
            let Ok(view) = FrameRef::parse(frame.bytes()) else { continue };
            last = view.seq();
            let kind = view.kind();
            if genui.contains(&kind) {
                engine.genui_changed().notify_waiters();
            } else if kind == EventKind::BrowserActionResulted.code() {
                // A browser's result posted to another daemon for a call waiting here.
                if let Ok(stored) = frame.decode() {
                    if let Event::BrowserActionResulted(e) = stored.event {
                        if tools.deliver_action_result(&e) {
                            tracing::debug!("browser action {} resolved from another daemon", e.invocation_id);
                        }
                    }
                }
            } else if kind == EventKind::RunResponded.code() {
                if let Ok(stored) = frame.decode() {
                    if let Event::RunResponded(e) = stored.event {
                        if e.action == od_events::vocab::ResponseAction::Cancel && runner.cancel(&e.run_id) {
                            tracing::info!("run {} canceled from another daemon", e.run_id);
                        }
                    }
                }
            }
        }
    });
}
