//! Keeps projections live and checkpointed, continuously.
//!
//! Two kinds: a [`Projector`] holds one small, bounded projection in memory (plugins,
//! marketplaces, tool definitions, log stats) and writes it as one checkpoint row (the read
//! models' database, `db.rs`: `checkpoints`, name → `{version, seq, state}`) every
//! [`PROJECTION_CHECKPOINT_EVENTS`] events and when the log goes idle; a [`RecordProjector`]
//! (`records.rs`) keeps a projection that grows with history on disk, one record per entity,
//! written with its checkpoint seq in one transaction (folded records wait in memory between such
//! writes). Both rebuild from the log when the stored VERSION differs and catch up on read
//! (a read reflects every acknowledged event); the daemon's follower (`follow.rs`) also folds as
//! the log grows, so a restart — clean or after a kill — folds only the tail. [`fold_until`] folds
//! an in-memory projection from scratch up to a chosen seq — the state "as of" then.

pub mod db;
pub mod follow;
pub mod records;

pub use db::{ReadModels, READ_MODELS_FILE};
pub use follow::{Managed, ProjectionStatus};
pub use records::{fold_records_until, RecordProjector, SqliteRecords};

use od_projections::Projection;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

use crate::limits::{PROJECTION_CHECKPOINT_EVENTS, PROJECTION_CHUNK_EVENTS};
use crate::store::{decode_frame, EventLog, Store, StoreError};

#[derive(Serialize, Deserialize)]
struct Checkpoint<P> {
    version: u32,
    seq: u64,
    state: P,
}

struct State<P> {
    value: P,
    seq: u64,
    /// The seq of the last checkpoint written (or loaded).
    checkpointed: u64,
}

/// One in-memory projection kept up to date with the log.
pub struct Projector<P: Projection> {
    store: Store,
    db: Arc<ReadModels>,
    inner: Mutex<State<P>>,
    resumed_from: u64,
}

/// Folds `state` (reflecting `at`) forward through the log up to `upto`; returns the new position.
fn fold_forward<P: Projection>(log: &dyn EventLog, state: &mut P, mut at: u64, upto: u64) -> Result<u64, StoreError> {
    while at < upto {
        let frames = log.read_from(at + 1, PROJECTION_CHUNK_EVENTS.min((upto - at) as usize))?;
        if frames.is_empty() {
            break;
        }
        for f in &frames {
            let view = f.view();
            if !od_projections::wants::<P>(view.kind()) {
                #[cfg(debug_assertions)]
                unchanged_by(state, &decode_frame(view)?);
                at = view.seq();
                continue;
            }
            let s = decode_frame(view)?;
            state.apply(&s.envelope, &s.event);
            at = s.envelope.seq;
        }
    }
    Ok(at)
}

/// Debug builds (every test): an event of a kind the projection does not list must not change it,
/// or its `KINDS` left out a kind its `apply` acts on.
#[cfg(debug_assertions)]
fn unchanged_by<P: Projection>(state: &P, s: &od_events::Stored) {
    let mut probe = state.clone();
    probe.apply(&s.envelope, &s.event);
    assert!(
        probe == *state,
        "projection {} changed on a {} event, a kind its KINDS does not list",
        P::NAME,
        s.event.kind().name()
    );
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
        let db = ReadModels::for_store(store)?;
        let (value, seq) = Self::read_checkpoint(store, &db)?.unwrap_or_default();
        let p = Self {
            store: store.clone(),
            db,
            inner: Mutex::new(State { value, seq, checkpointed: seq }),
            resumed_from: seq,
        };
        p.catch_up()?;
        Ok(p)
    }

    fn read_checkpoint(store: &Store, db: &ReadModels) -> Result<Option<(P, u64)>, StoreError> {
        let Some(raw) = db.checkpoint(P::NAME)?.and_then(|c| c.state) else { return Ok(None) };
        let cp: Checkpoint<P> = match serde_json::from_slice(&raw) {
            Ok(cp) => cp,
            Err(_) => return Ok(None),
        };
        if cp.version != P::VERSION || cp.seq > store.last_seq() {
            return Ok(None);
        }
        Ok(Some((cp.state, cp.seq)))
    }

    /// The checkpoint seq found at load: where the fold resumed (0: folded from the start).
    pub fn resumed_from(&self) -> u64 {
        self.resumed_from
    }

    /// Folds every event the log has that the state does not reflect yet; checkpoints once the
    /// state is [`PROJECTION_CHECKPOINT_EVENTS`] past the last checkpoint.
    pub fn catch_up(&self) -> Result<u64, StoreError> {
        let mut guard = self.inner.lock().expect("projector lock");
        let g = &mut *guard;
        g.seq = fold_forward(&*self.store, &mut g.value, g.seq, self.store.last_seq())?;
        if g.seq >= g.checkpointed + PROJECTION_CHECKPOINT_EVENTS {
            self.write(g)?;
        }
        Ok(g.seq)
    }

    /// The current state (caught up first) and the seq it reflects.
    pub fn get(&self) -> Result<(P, u64), StoreError> {
        self.catch_up()?;
        let g = self.inner.lock().expect("projector lock");
        Ok((g.value.clone(), g.seq))
    }

    /// Runs `f` on the current state (caught up first) without copying it.
    pub fn read<R>(&self, f: impl FnOnce(&P) -> R) -> Result<R, StoreError> {
        self.catch_up()?;
        Ok(f(&self.inner.lock().expect("projector lock").value))
    }

    fn write(&self, g: &mut State<P>) -> Result<u64, StoreError> {
        let cp = Checkpoint { version: P::VERSION, seq: g.seq, state: &g.value };
        let bytes = serde_json::to_vec(&cp).expect("projection state serialises");
        self.db.put_checkpoint(P::NAME, &db::Checkpoint { version: P::VERSION, seq: g.seq, state: Some(bytes) })?;
        g.checkpointed = g.seq;
        Ok(g.seq)
    }

    /// Writes the state and its seq to the read models' database.
    pub fn checkpoint(&self) -> Result<u64, StoreError> {
        let mut g = self.inner.lock().expect("projector lock");
        self.write(&mut g)
    }

    /// Writes the checkpoint when the state moved since the last one.
    pub fn checkpoint_if_moved(&self) -> Result<u64, StoreError> {
        let mut g = self.inner.lock().expect("projector lock");
        if g.seq == g.checkpointed {
            return Ok(g.seq);
        }
        self.write(&mut g)
    }

    /// Folds the whole log again from an empty state, then checkpoints it.
    pub fn rebuild(&self) -> Result<u64, StoreError> {
        let mut g = self.inner.lock().expect("projector lock");
        let mut value = P::default();
        let seq = fold_forward(&*self.store, &mut value, 0, self.store.last_seq())?;
        g.value = value;
        g.seq = seq;
        self.write(&mut g)
    }
}

#[cfg(test)]
mod kinds_tests {
    use super::*;
    use od_events::system::NoteRecorded;
    use od_events::{Envelope, Event, EventKind, Stored};

    /// Counts notes, but says it only wants `daemon_started`: a wrong `KINDS`.
    #[derive(Default, Clone, PartialEq, Debug, Serialize, Deserialize)]
    struct Notes(u32);

    impl Projection for Notes {
        const NAME: &'static str = "notes";
        const VERSION: u32 = 1;
        const KINDS: Option<&'static [EventKind]> = Some(&[EventKind::DaemonStarted]);
        fn apply(&mut self, _: &Envelope, event: &Event) {
            if let Event::NoteRecorded(_) = event {
                self.0 += 1;
            }
        }
    }

    fn note() -> Stored {
        let envelope =
            Envelope { seq: 1, stream: "note".into(), version: 0, recorded_at: 0, op_id: None, stored_schema: 2 };
        Stored { envelope, event: Event::NoteRecorded(NoteRecorded { text: "hi".into(), tags: vec![] }) }
    }

    #[test]
    fn only_the_listed_kinds_are_wanted() {
        assert!(od_projections::wants::<Notes>(EventKind::DaemonStarted.code()));
        assert!(!od_projections::wants::<Notes>(EventKind::NoteRecorded.code()));
        assert!(od_projections::wants::<od_projections::LogStats>(EventKind::NoteRecorded.code()));
        let registries = [
            od_projections::wants::<od_projections::ToolCatalog>(EventKind::RunEnded.code()),
            od_projections::wants::<od_projections::Marketplaces>(EventKind::AgentOutput.code()),
            od_projections::wants::<od_projections::PluginRegistry>(EventKind::StageStarted.code()),
        ];
        assert_eq!(registries, [false; 3], "a run's events are not the registries'");
        assert!(od_projections::wants::<od_projections::PluginRegistry>(EventKind::PluginInstalled.code()));
    }

    #[test]
    #[should_panic(expected = "a kind its KINDS does not list")]
    #[cfg(debug_assertions)]
    fn a_kind_left_out_of_kinds_that_apply_acts_on_is_caught() {
        unchanged_by(&Notes::default(), &note());
    }
}
