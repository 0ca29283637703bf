//! Every projection the daemon keeps, behind one interface ([`Managed`]): listed and rebuilt by
//! `od projections`, and followed by [`follow`] — a task that folds each batch the store publishes
//! (so records are written as the log grows, not at a stop) and checkpoints in-memory projections
//! once the log has been idle for [`PROJECTION_IDLE_CHECKPOINT_MS`].

use od_projections::{Projection, RecordFold};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

use super::{Projector, RecordProjector};
use crate::limits::PROJECTION_IDLE_CHECKPOINT_MS;
use crate::store::{Store, StoreError};

/// What `od projections list` shows of one projection.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectionStatus {
    pub name: &'static str,
    pub version: u32,
    /// `records` (on disk, per entity) or `memory` (one checkpointed value).
    pub kind: &'static str,
    /// The seq its state reflects (records: folded, though perhaps not yet written with their
    /// checkpoint; see `records.rs`).
    pub seq: u64,
}

/// One projection, whatever its kind.
pub trait Managed: Send + Sync {
    /// Its name, version, kind and seq.
    fn status(&self) -> ProjectionStatus;
    /// Folds what the log has that it does not reflect.
    fn catch_up(&self) -> Result<u64, StoreError>;
    /// Writes the checkpoint when the state moved past it (records: over events that wrote none).
    fn checkpoint_if_moved(&self) -> Result<u64, StoreError>;
    /// Folds the whole log again.
    fn rebuild(&self) -> Result<u64, StoreError>;
}

impl<P: Projection> Managed for Projector<P> {
    fn status(&self) -> ProjectionStatus {
        let seq = self.inner.lock().expect("projector lock").seq;
        ProjectionStatus { name: P::NAME, version: P::VERSION, kind: "memory", seq }
    }
    fn catch_up(&self) -> Result<u64, StoreError> {
        Projector::catch_up(self)
    }
    fn checkpoint_if_moved(&self) -> Result<u64, StoreError> {
        Projector::checkpoint_if_moved(self)
    }
    fn rebuild(&self) -> Result<u64, StoreError> {
        Projector::rebuild(self)
    }
}

impl<F: RecordFold> Managed for RecordProjector<F> {
    fn status(&self) -> ProjectionStatus {
        ProjectionStatus { name: F::NAME, version: F::VERSION, kind: "records", seq: self.seq() }
    }
    fn catch_up(&self) -> Result<u64, StoreError> {
        RecordProjector::catch_up(self)
    }
    fn checkpoint_if_moved(&self) -> Result<u64, StoreError> {
        RecordProjector::checkpoint_if_moved(self)
    }
    fn rebuild(&self) -> Result<u64, StoreError> {
        RecordProjector::rebuild(self)
    }
}

/// Follows the log: after each published batch every projection catches up; after
/// [`PROJECTION_IDLE_CHECKPOINT_MS`] without one, in-memory projections that moved are
/// checkpointed. Runs until `stop` turns true (or the log closes).
pub async fn follow(store: Store, all: Vec<Arc<dyn Managed>>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut live = store.live();
    let all = Arc::new(all);
    let mut moved = false;
    loop {
        let idle = tokio::time::sleep(Duration::from_millis(PROJECTION_IDLE_CHECKPOINT_MS));
        let woke = tokio::select! {
            r = live.recv() => match r {
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => true,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            },
            _ = idle => false,
            _ = stop.wait_for(|v| *v) => return,
        };
        if woke {
            // Take whatever else arrived meanwhile: one fold for all of it.
            while live.try_recv().is_ok() {}
            moved = true;
        } else if !moved {
            continue;
        }
        let all = all.clone();
        let _ = tokio::task::spawn_blocking(move || {
            for p in all.iter() {
                let r = if woke { p.catch_up().map(|_| ()) } else { p.checkpoint_if_moved().map(|_| ()) };
                if let Err(e) = r {
                    tracing::error!("projection {} could not follow the log: {e}", p.status().name);
                }
            }
            crate::reclaim::flush_deferred();
            if !woke {
                // The log went idle: what a burst freed goes back to the system.
                crate::reclaim::release_free_memory();
            }
        })
        .await;
        if !woke {
            moved = false;
        }
    }
}
