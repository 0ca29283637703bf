//! Keeps projections live and checkpointed.
//!
//! A [`Projector`] holds one projection's state and the seq it reflects. It loads its checkpoint
//! from sled (`projections` tree: name → `{version, seq, state}`), rebuilds from the log when the
//! stored VERSION differs, catches up from the log on demand (so a read always reflects every
//! acknowledged event), and checkpoints on request. [`fold_until`] folds any projection from scratch
//! up to a chosen seq — the state "as of" then.

use od_projections::Projection;
use serde::{Deserialize, Serialize};
use std::sync::Mutex;

use crate::store::{decode_frame, EventLog, SledLog, Store, StoreError};

const CHUNK: usize = 4096;

#[derive(Serialize, Deserialize)]
struct Checkpoint<P> {
    version: u32,
    seq: u64,
    state: P,
}

/// One projection kept up to date with the log.
pub struct Projector<P: Projection> {
    store: Store,
    inner: Mutex<(P, u64)>,
}

/// Folds `state` (reflecting `at`) forward through the log up to `upto`; returns the new position.
fn fold_forward<P: Projection>(log: &dyn EventLog, state: &mut P, mut at: u64, upto: u64) -> Result<u64, StoreError> {
    while at < upto {
        let frames = log.read_from(at + 1, CHUNK.min((upto - at) as usize))?;
        if frames.is_empty() {
            break;
        }
        for f in &frames {
            let s = decode_frame(f.view())?;
            state.apply(&s.envelope, &s.event);
            at = s.envelope.seq;
        }
    }
    Ok(at)
}

/// The projection's state as of `upto` (inclusive), folded from the start of the log.
pub fn fold_until<P: Projection>(log: &dyn EventLog, upto: u64) -> Result<P, StoreError> {
    let mut p = P::default();
    fold_forward(log, &mut p, 0, upto.min(log.last_seq()))?;
    Ok(p)
}

impl<P: Projection> Projector<P> {
    /// Loads the checkpoint (or rebuilds when absent, unreadable or of another VERSION), then
    /// catches up with the log.
    pub fn load(store: &Store) -> Result<Self, StoreError> {
        let (state, seq) = Self::read_checkpoint(store)?.unwrap_or_default();
        let p = Self { store: store.clone(), inner: Mutex::new((state, seq)) };
        p.catch_up()?;
        Ok(p)
    }

    fn read_checkpoint(store: &SledLog) -> Result<Option<(P, u64)>, StoreError> {
        let raw = store
            .projections_tree()
            .get(P::NAME)
            .map_err(|e| StoreError::Io { during: "reading a projection checkpoint", message: e.to_string() })?;
        let Some(raw) = raw else { return Ok(None) };
        let cp: Checkpoint<P> = match serde_json::from_slice(&raw) {
            Ok(cp) => cp,
            Err(_) => return Ok(None),
        };
        if cp.version != P::VERSION || cp.seq > store.last_seq() {
            return Ok(None);
        }
        Ok(Some((cp.state, cp.seq)))
    }

    /// Folds every event the log has that the state does not reflect yet.
    pub fn catch_up(&self) -> Result<u64, StoreError> {
        let mut g = self.inner.lock().expect("projector lock");
        let (state, seq) = &mut *g;
        *seq = fold_forward(&*self.store, state, *seq, self.store.last_seq())?;
        Ok(*seq)
    }

    /// The current state (caught up first) and the seq it reflects.
    pub fn get(&self) -> Result<(P, u64), StoreError> {
        self.catch_up()?;
        Ok(self.inner.lock().expect("projector lock").clone())
    }

    /// Runs `f` on the current state (caught up first) without copying it.
    pub fn read<R>(&self, f: impl FnOnce(&P) -> R) -> Result<R, StoreError> {
        self.catch_up()?;
        Ok(f(&self.inner.lock().expect("projector lock").0))
    }

    /// Writes the state and its seq to sled.
    pub fn checkpoint(&self) -> Result<u64, StoreError> {
        let g = self.inner.lock().expect("projector lock");
        let cp = Checkpoint { version: P::VERSION, seq: g.1, state: &g.0 };
        let bytes = serde_json::to_vec(&cp).expect("projection state serialises");
        self.store
            .projections_tree()
            .insert(P::NAME, bytes)
            .map_err(|e| StoreError::Io { during: "writing a projection checkpoint", message: e.to_string() })?;
        Ok(g.1)
    }
}
