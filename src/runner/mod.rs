//! The runner: takes queued runs and drives each one's pipeline (stage by stage, devloops, agents)
//! on the async runtime, at most [`crate::limits::MAX_CONCURRENT_RUNS`] at a time; it owns the
//! cancel switches of the runs in flight. Run facts are recorded by [`pipeline`]; the executor's
//! helpers live in one module each.

pub mod acp;
pub mod agent;
mod awaiting;
pub mod cluster;
pub mod code_index;
pub mod dialects;
pub mod dry_run;
pub mod exec;
mod file_tools;
pub mod launch;
pub mod lines;
pub mod orphans;
pub mod output;
pub mod pipeline;

pub mod reap;
mod recorder;
pub mod trial;
pub mod wire;
pub mod workers;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{watch, Semaphore};

use crate::engine::Engine;

/// A run in flight: its cancel switch, and whether its executor lost the run's lease (then it
/// stops — its agent's process group ended through the cancel — and records nothing more).
pub struct RunGuard {
    cancel: watch::Sender<bool>,
    lost: AtomicBool,
    /// The epoch its lease was taken at (0 until taken).
    epoch: AtomicU64,
}

impl RunGuard {
    fn new(cancel: watch::Sender<bool>) -> Arc<Self> {
        Arc::new(Self { cancel, lost: AtomicBool::new(false), epoch: AtomicU64::new(0) })
    }

    /// Asks the executor to stop (its agent is ended).
    pub fn cancel(&self) {
        let _ = self.cancel.send(true);
    }

    /// The lease is lost: the executor stops at once and records nothing more.
    pub fn lose(&self) {
        self.lost.store(true, Ordering::Release);
        self.cancel();
    }

    /// Whether the lease was lost.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }
}

/// Runs in flight (queued for a permit or executing), by id.
pub struct Runner {
    engine: Arc<Engine>,
    permits: Arc<Semaphore>,
    active: Mutex<HashMap<String, Arc<RunGuard>>>,
    /// `host:port` of the HTTP API (for agents calling back); set once the server is bound.
    daemon_url: Arc<std::sync::OnceLock<String>>,
    /// The API's scheme: `https` when the daemon serves TLS.
    scheme: &'static str,
}

impl Runner {
    pub fn new(engine: Arc<Engine>, daemon_url: Arc<std::sync::OnceLock<String>>, scheme: &'static str) -> Arc<Self> {
        let me = Arc::new(Self {
            engine,
            permits: Arc::new(Semaphore::new(crate::limits::MAX_CONCURRENT_RUNS)),
            active: Mutex::new(HashMap::new()),
            daemon_url,
            scheme,
        });
        // Leases this daemon learns it lost (a heartbeat back after a gap) stop their executors.
        let weak = Arc::downgrade(&me);
        me.engine.leases().on_lost(Box::new(move |lost| {
            if let Some(me) = weak.upgrade() {
                for (run, epoch) in lost {
                    me.lose(&run, epoch);
                }
            }
        }));
        me
    }

    /// The executor of `run_id` holding its lease at `epoch` lost it: it stops, recording nothing.
    pub fn lose(&self, run_id: &str, epoch: u64) {
        if let Some(g) = self.active.lock().expect("runner lock").get(run_id) {
            if g.epoch.load(Ordering::Acquire) == epoch {
                tracing::error!("run {run_id}: lease lost (epoch {epoch}); stopping its executor");
                g.lose();
            }
        }
    }

    /// The engine the runner records into.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Starts driving `run_id` (already recorded as `queued`). Must be called on the runtime.
    pub fn start(self: &Arc<Self>, run_id: String) {
        let (tx, rx) = watch::channel(false);
        let guard = RunGuard::new(tx);
        {
            let mut a = self.active.lock().expect("runner lock");
            if a.contains_key(&run_id) {
                return;
            }
            a.insert(run_id.clone(), guard.clone());
        }
        let me = self.clone();
        tokio::spawn(async move {
            let permit = me.permits.clone().acquire_owned().await;
            // On a shared log another daemon may have taken the run while it waited for a permit:
            // it executes where its lease is.
            let leases = me.engine.leases().clone();
            let rid = run_id.clone();
            let taken = tokio::task::spawn_blocking(move || leases.take(&rid)).await;
            let Ok(Ok(Some(epoch))) = taken else {
                if let Ok(Err(e)) = taken {
                    tracing::warn!("run {run_id} not started here: its lease could not be taken: {e}");
                }
                drop(permit);
                me.active.lock().expect("runner lock").remove(&run_id);
                return;
            };
            guard.epoch.store(epoch, Ordering::Release);
            let fence = me.engine.leases().fence(&run_id, epoch);
            let url = me.daemon_url.get().map(|a| format!("{}://{a}", me.scheme)).unwrap_or_default();
            tracing::info!("run {run_id} executing (lease epoch {epoch})");
            let run = pipeline::Executing { guard: guard.clone(), fence, cancel: rx };
            pipeline::execute(me.engine.clone(), &run_id, run, url).await;
            tracing::info!("run {run_id} left the runner");
            let leases = me.engine.leases().clone();
            let rid = run_id.clone();
            let _ = tokio::task::spawn_blocking(move || leases.release(&rid)).await;
            drop(permit);
            me.active.lock().expect("runner lock").remove(&run_id);
            // Reads of the run caught projections up on this thread: free what sled retired.
            crate::reclaim::flush_deferred();
        });
    }

    /// Asks a run in flight to stop; false when it is not in flight here.
    pub fn cancel(&self, run_id: &str) -> bool {
        match self.active.lock().expect("runner lock").get(run_id) {
            Some(g) => {
                g.cancel();
                true
            }
            None => false,
        }
    }

    /// Whether `run_id` is in flight here.
    pub fn is_active(&self, run_id: &str) -> bool {
        self.active.lock().expect("runner lock").contains_key(run_id)
    }

    /// Runs this runner could start at once without queueing.
    pub fn spare(&self) -> usize {
        self.permits.available_permits().saturating_sub(self.waiting())
    }

    fn waiting(&self) -> usize {
        self.active_count().saturating_sub(crate::limits::MAX_CONCURRENT_RUNS - self.permits.available_permits())
    }

    /// Number of runs in flight.
    pub fn active_count(&self) -> usize {
        self.active.lock().expect("runner lock").len()
    }

    /// Cancels every run in flight (daemon shutdown).
    pub fn cancel_all(&self) {
        for g in self.active.lock().expect("runner lock").values() {
            g.cancel();
        }
    }
}
