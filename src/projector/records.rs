//! Record-backed projections on disk: a [`RecordProjector`] folds the log into its own sled tree
//! (`proj:<name>`) through [`SledRecords`] — reads see the chunk's pending writes over the tree —
//! and writes each folded chunk's records together with its checkpoint `{version, seq}` in ONE
//! `sled::Batch`, so whatever sled keeps after a crash is a consistent point the fold resumes from.
//! A missing or other-VERSION checkpoint clears the tree and rebuilds it from the log.

use od_projections::records::scan_bounds;
use od_projections::{MemRecords, RecordFold, Records, RecordsRead};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::{Mutex, RwLock};

use crate::limits::{PROJECTION_BATCH_EVENTS, PROJECTION_CHUNK_EVENTS};
use crate::store::{decode_frame, EventLog, Store, StoreError};

/// The checkpoint's key in a projection's tree (outside every table: table keys start with a name).
pub const META_KEY: &[u8] = b"\x00checkpoint";

#[derive(Serialize, Deserialize)]
struct Meta {
    version: u32,
    seq: u64,
}

fn sled_err(during: &'static str) -> impl Fn(sled::Error) -> StoreError {
    move |e| StoreError::Io { during, message: e.to_string() }
}

/// A projection's sled tree, with the writes of the chunk being folded on top (none for a reader).
pub struct SledRecords<'a> {
    tree: &'a sled::Tree,
    pending: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    error: RefCell<Option<sled::Error>>,
}

impl<'a> SledRecords<'a> {
    /// A view of `tree` with no pending writes.
    pub fn new(tree: &'a sled::Tree) -> Self {
        Self { tree, pending: BTreeMap::new(), error: RefCell::new(None) }
    }

    fn note(&self, e: sled::Error) {
        self.error.borrow_mut().get_or_insert(e);
    }

    /// The first sled error a read met (the reads returned nothing for it).
    pub fn take_error(&self) -> Result<(), StoreError> {
        match self.error.borrow_mut().take() {
            Some(e) => Err(sled_err("reading projection records")(e)),
            None => Ok(()),
        }
    }

    /// Writes the pending records and the checkpoint `(version, seq)` in one atomic batch.
    fn commit(self, version: u32, seq: u64) -> Result<(), StoreError> {
        self.take_error()?;
        let mut b = sled::Batch::default();
        for (k, v) in self.pending {
            match v {
                Some(v) => b.insert(k, v),
                None => b.remove(k),
            }
        }
        b.insert(META_KEY, serde_json::to_vec(&Meta { version, seq }).expect("meta serialises"));
        self.tree.apply_batch(b).map_err(sled_err("writing projection records"))
    }
}

impl RecordsRead for SledRecords<'_> {
    fn get_raw(&self, key: &[u8]) -> Option<Vec<u8>> {
        if let Some(v) = self.pending.get(key) {
            return v.clone();
        }
        match self.tree.get(key) {
            Ok(v) => v.map(|v| v.to_vec()),
            Err(e) => {
                self.note(e);
                None
            }
        }
    }

    fn scan_raw(&self, prefix: &[u8], after: Option<&[u8]>, descending: bool, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let bounds = scan_bounds(prefix, after, descending);
        let pend: Vec<(&Vec<u8>, &Option<Vec<u8>>)> = self.pending.range(bounds.clone()).collect();
        // Each pending write can hide at most one stored entry: read that many more.
        let take = limit.saturating_add(pend.len());
        let range = self.tree.range(bounds);
        let iter: Box<dyn Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>> =
            if descending { Box::new(range.rev()) } else { Box::new(range) };
        let mut merged = BTreeMap::new();
        for item in iter.take(take) {
            match item {
                Ok((k, v)) => {
                    merged.insert(k.to_vec(), v.to_vec());
                }
                Err(e) => {
                    self.note(e);
                    break;
                }
            }
        }
        // At least `limit` of the stored entries read survive the pending deletes, so the first
        // `limit` of the merge are all within what was read.
        for (k, v) in pend {
            match v {
                Some(v) => merged.insert(k.clone(), v.clone()),
                None => merged.remove(k),
            };
        }
        match descending {
            true => merged.into_iter().rev().take(limit).collect(),
            false => merged.into_iter().take(limit).collect(),
        }
    }
}

impl Records for SledRecords<'_> {
    fn put_raw(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.pending.insert(key, Some(value));
    }
    fn delete_raw(&mut self, key: &[u8]) {
        self.pending.insert(key.to_vec(), None);
    }
}

/// One record-backed projection kept up to date with the log.
pub struct RecordProjector<F: RecordFold> {
    store: Store,
    tree: sled::Tree,
    /// The seq the records reflect (held while folding).
    seq: Mutex<u64>,
    /// Readers hold it shared while they read; a rebuild holds it exclusively.
    gate: RwLock<()>,
    /// The checkpoint seq found when loading (where the fold resumed).
    resumed_from: u64,
    _fold: PhantomData<F>,
}

impl<F: RecordFold> RecordProjector<F> {
    /// Opens the projection's tree; keeps its records when their checkpoint is of this VERSION (and
    /// not past the log), else clears them; then catches up with the log.
    pub fn load(store: &Store) -> Result<Self, StoreError> {
        Self::load_at_most(store, u64::MAX)
    }

    /// Like [`Self::load`], catching up no further than `upto` (a fold stopped part way, as a kill
    /// would stop it).
    pub fn load_at_most(store: &Store, upto: u64) -> Result<Self, StoreError> {
        let tree = store.projection_records(F::NAME)?;
        let meta = tree.get(META_KEY).map_err(sled_err("reading a projection checkpoint"))?;
        let meta: Option<Meta> = meta.and_then(|m| serde_json::from_slice(&m).ok());
        let seq = match meta {
            Some(m) if m.version == F::VERSION && m.seq <= store.last_seq() => m.seq,
            _ => {
                tree.clear().map_err(sled_err("clearing projection records"))?;
                0
            }
        };
        let p = Self {
            store: store.clone(),
            tree,
            seq: Mutex::new(seq),
            gate: RwLock::new(()),
            resumed_from: seq,
            _fold: PhantomData,
        };
        p.catch_up_to(upto.min(store.last_seq()))?;
        Ok(p)
    }

    /// The checkpoint seq found at load: where the fold resumed (0: folded from the start).
    pub fn resumed_from(&self) -> u64 {
        self.resumed_from
    }

    /// The seq the records reflect now.
    pub fn seq(&self) -> u64 {
        *self.seq.lock().expect("projector lock")
    }

    /// Folds every event the log has that the records do not reflect yet.
    pub fn catch_up(&self) -> Result<u64, StoreError> {
        self.catch_up_to(self.store.last_seq())
    }

    /// Folds up to `upto`: reads [`PROJECTION_CHUNK_EVENTS`] at a time, and writes the records with
    /// their checkpoint seq in one sled batch per [`PROJECTION_BATCH_EVENTS`] (a backlog's many
    /// writes to the same leaves reach sled once per batch, not once per chunk).
    pub fn catch_up_to(&self, upto: u64) -> Result<u64, StoreError> {
        let mut seq = self.seq.lock().expect("projector lock");
        while *seq < upto {
            let mut rec = SledRecords::new(&self.tree);
            let mut at = *seq;
            while at < upto && at - *seq < PROJECTION_BATCH_EVENTS as u64 {
                let frames = self.store.read_from(at + 1, PROJECTION_CHUNK_EVENTS.min((upto - at) as usize))?;
                if frames.is_empty() {
                    break;
                }
                for f in &frames {
                    let s = decode_frame(f.view())?;
                    F::apply(&mut rec, &s.envelope, &s.event);
                    at = s.envelope.seq;
                }
            }
            if at == *seq {
                break;
            }
            rec.commit(F::VERSION, at)?;
            // The log may be idle by now (its timed checkpoint already past): have the store's next
            // checkpoint make these records durable too.
            self.store.note_sled_written();
            *seq = at;
        }
        Ok(*seq)
    }

    /// Runs `f` on the records, caught up first (a read reflects every acknowledged event).
    pub fn read<R>(&self, f: impl FnOnce(&SledRecords<'_>) -> R) -> Result<R, StoreError> {
        self.catch_up()?;
        let _g = self.gate.read().expect("projector gate");
        let view = SledRecords::new(&self.tree);
        let out = f(&view);
        view.take_error()?;
        Ok(out)
    }

    /// Clears the records and folds the whole log again.
    pub fn rebuild(&self) -> Result<u64, StoreError> {
        let _g = self.gate.write().expect("projector gate");
        {
            let mut seq = self.seq.lock().expect("projector lock");
            self.tree.clear().map_err(sled_err("clearing projection records"))?;
            *seq = 0;
        }
        self.catch_up()
    }

    /// Every record (the checkpoint aside), to compare with a fold into memory.
    pub fn dump(&self) -> Result<MemRecords, StoreError> {
        let _g = self.gate.read().expect("projector gate");
        let mut m = MemRecords::default();
        for item in self.tree.iter() {
            let (k, v) = item.map_err(sled_err("reading projection records"))?;
            if k.as_ref() != META_KEY {
                m.map.insert(k.to_vec(), v.to_vec());
            }
        }
        Ok(m)
    }
}

/// The records of `F` as of `upto` (inclusive), folded from the start of the log into memory.
pub fn fold_records_until<F: RecordFold>(log: &dyn EventLog, upto: u64) -> Result<MemRecords, StoreError> {
    let mut m = MemRecords::default();
    let upto = upto.min(log.last_seq());
    let mut at = 0;
    while at < upto {
        let frames = log.read_from(at + 1, PROJECTION_CHUNK_EVENTS.min((upto - at) as usize))?;
        if frames.is_empty() {
            break;
        }
        for f in &frames {
            let s = decode_frame(f.view())?;
            F::apply(&mut m, &s.envelope, &s.event);
            at = s.envelope.seq;
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use od_projections::Records;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Put(u8, u8),
        Delete(u8),
        Commit,
        Scan { prefix: u8, after: Option<u8>, descending: bool, limit: u8 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..40, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
            2 => (0u8..40).prop_map(Op::Delete),
            1 => Just(Op::Commit),
            3 => (0u8..3, proptest::option::of(0u8..40), any::<bool>(), 0u8..12)
                .prop_map(|(prefix, after, descending, limit)| Op::Scan { prefix, after, descending, limit }),
        ]
    }

    fn key(k: u8) -> Vec<u8> {
        vec![b'a' + k % 3, k]
    }

    proptest! {
        /// Reads through pending writes over sled (what a fold sees) equal the same writes in memory.
        #[test]
        fn the_overlay_reads_like_memory(ops in proptest::collection::vec(op(), 1..80)) {
            let db = sled::Config::new().temporary(true).open().unwrap();
            let tree = db.open_tree("t").unwrap();
            let mut mem = MemRecords::default();
            let mut rec = SledRecords::new(&tree);
            for op in ops {
                match op {
                    Op::Put(k, v) => {
                        rec.put_raw(key(k), vec![v]);
                        mem.put_raw(key(k), vec![v]);
                    }
                    Op::Delete(k) => {
                        rec.delete_raw(&key(k));
                        mem.delete_raw(&key(k));
                    }
                    Op::Commit => {
                        rec.commit(1, 1).unwrap();
                        rec = SledRecords::new(&tree);
                    }
                    Op::Scan { prefix, after, descending, limit } => {
                        let p = vec![b'a' + prefix];
                        let a = after.map(key);
                        let got = rec.scan_raw(&p, a.as_deref(), descending, limit as usize);
                        let want = mem.scan_raw(&p, a.as_deref(), descending, limit as usize);
                        prop_assert_eq!(got, want);
                    }
                }
            }
        }
    }
}
