//! The daemon's periodic background work, started by `daemon::start` (moved out of `daemon.rs`
//! as is): expiring snapshots and collecting blobs, and the background verification of the whole
//! log. Each task runs on the engine's clock and ends when the daemon stops.

use od_events::system::{BadFrameFound, LogVerified};
use od_events::{Event, StreamId};
use std::sync::Arc;
use tokio::sync::watch;

use crate::clock::SharedClock;
use crate::store::{Append, SavedPass, SledLog};

/// Every `OD_SNAPSHOT_GC_INTERVAL_MS` (default 6 h) on the engine's clock, and once at start,
/// expires unreferenced snapshots past their TTL, then collects artifact blobs by the same rule
/// (each step an event).
pub fn spawn_snapshot_gc(engine: Arc<crate::engine::Engine>, mut stop: watch::Receiver<bool>) {
    let every = std::env::var("OD_SNAPSHOT_GC_INTERVAL_MS")
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
        .filter(|v| *v > 0)
        .unwrap_or(crate::limits::SNAPSHOT_GC_INTERVAL_MS);
    tokio::spawn(async move {
        loop {
            let e = engine.clone();
            match tokio::task::spawn_blocking(move || e.prune_snapshots(None)).await {
                Ok(Err(err)) => tracing::warn!("snapshot expiry failed: {err}"),
                Err(err) => tracing::warn!("snapshot expiry failed: {err}"),
                Ok(Ok(_)) => {}
            }
            // Artifact blobs follow the same rule, in the same pass.
            let e = engine.clone();
            match tokio::task::spawn_blocking(move || e.gc_blobs(None)).await {
                Ok(Err(err)) => tracing::warn!("blob collection failed: {err}"),
                Err(err) => tracing::warn!("blob collection failed: {err}"),
                Ok(Ok(_)) => {}
            }
            let next = engine.clock().sleep_until(engine.clock().now_ms().saturating_add(every));
            tokio::select! {
                _ = next => {}
                _ = stop.wait_for(|v| *v) => return,
            }
        }
    });
}

/// The background verification of the whole log (opening checked only its tail):
/// [`BACKGROUND_VERIFY_DELAY_MS`](crate::limits::BACKGROUND_VERIFY_DELAY_MS) after the start and
/// then every [`BACKGROUND_VERIFY_INTERVAL_MS`](crate::limits::BACKGROUND_VERIFY_INTERVAL_MS), on
/// the engine's clock, a pass walks every frame (hash, chain, seq, payload) and the index, a
/// bounded number of bytes per step with a pause between steps. Its result is recorded as a
/// `log_verified` event on the `system` stream, and damage turns `/api/health` degraded, naming the
/// first bad frame. Where a pass got is saved after every step (`store/resume.rs`): a restart
/// resumes it there, and after a finished clean pass the next one is due
/// `BACKGROUND_VERIFY_INTERVAL_MS` after that one began (not at every start).
pub fn spawn_background_verify(store: Arc<SledLog>, clock: SharedClock, mut stop: watch::Receiver<bool>) {
    use crate::limits::*;
    let mut next = clock.now_ms().saturating_add(BACKGROUND_VERIFY_DELAY_MS);
    let mut resume = None;
    match store.saved_verify() {
        Some(SavedPass::Running { pass, started_at }) => resume = Some((pass, started_at)),
        Some(SavedPass::Finished(check)) => {
            // A clean pass is due again a day after it began; damage is looked at again soon.
            if check.first_bad.is_none() {
                next = next.max(check.started_at.saturating_add(BACKGROUND_VERIFY_INTERVAL_MS));
            }
            store.restore_log_check(check);
        }
        None => {}
    }
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = clock.sleep_until(next) => {}
                _ = stop.wait_for(|v| *v) => return,
            }
            let (mut pass, started_at) = resume.take().unwrap_or_else(|| (store.verify_pass(), clock.now_ms()));
            let report = loop {
                let s = store.clone();
                let stepped = tokio::task::spawn_blocking(move || {
                    let r = s.verify_step(&mut pass, BACKGROUND_VERIFY_STEP_BYTES);
                    (pass, r)
                })
                .await;
                let Ok((back, r)) = stepped else { return };
                pass = back;
                if let Some(r) = r {
                    break r;
                }
                if let Err(e) = store.save_verify_progress(&pass, started_at) {
                    tracing::warn!("could not save the background verification's progress: {e}");
                }
                tokio::select! {
                    _ = clock.sleep_until(clock.now_ms().saturating_add(BACKGROUND_VERIFY_PAUSE_MS)) => {}
                    _ = stop.wait_for(|v| *v) => return,
                }
            };
            store.note_verified(&pass, &report, started_at);
            if let Some(bad) = &report.first_bad {
                tracing::error!("the background verification found damage at seq {}: {}", bad.seq, bad.reason);
            }
            let verified = Event::LogVerified(LogVerified {
                through_seq: pass.upto(),
                verified: report.verified,
                head_hash: report.head_hash.clone(),
                started_at,
                first_bad: report.first_bad.map(|b| BadFrameFound { seq: b.seq, reason: b.reason }),
            });
            let stream = StreamId::new("system").expect("valid stream id");
            if let Err(e) = store.append_async(Append::new(stream, vec![verified])).await {
                tracing::warn!("could not record the background verification: {e}");
            }
            next = started_at.saturating_add(BACKGROUND_VERIFY_INTERVAL_MS);
        }
    });
}
