//! Record-backed projections on disk: a [`RecordProjector`] folds the log into its own table of the
//! read models' SQLite database (`rec_<name>`, see `db.rs`) through [`SqliteRecords`] — reads see
//! the pending writes over the table — and writes its records together with their checkpoint
//! `{version, seq}` in ONE transaction, so whatever survives a crash is a consistent point the fold
//! resumes from. A missing or other-VERSION checkpoint clears the table and rebuilds it from the log.
//!
//! Folded writes are kept in memory (the overlay) and written to the table once
//! [`PROJECTION_CHECKPOINT_EVENTS`] events or [`PROJECTION_OVERLAY_RECORDS`] records piled up, when
//! the log goes idle, and at a clean stop — not once per appended batch (a dry run's ~15 batches
//! were ~15 SQLite transactions of ~20 pages each; issue 33). Readers read the overlay over the
//! table under the same lock a write to the table takes, so a read sees one consistent state. A
//! kill loses only the overlay, which the fold makes again from the log.

use od_projections::records::scan_bounds;
use od_projections::{MemRecords, RecordFold, Records, RecordsRead};
use rusqlite::{params, Connection, OptionalExtension};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::{Arc, Mutex, RwLock};

use super::db::{put_checkpoint, sql_err, Checkpoint, ReadModels};
use crate::limits::{
    PROJECTION_BATCH_EVENTS, PROJECTION_CHECKPOINT_EVENTS, PROJECTION_CHUNK_EVENTS, PROJECTION_OVERLAY_RECORDS,
};
use crate::store::{decode_frame, EventLog, Store, StoreError};

/// The statements of one records table, built once per projector (and prepared once per
/// connection, through the connection's statement cache).
pub struct TableSql {
    get: String,
    put: String,
    delete: String,
    /// Indexed by `[descending][start excluded][end bounded]`.
    scan: [[[String; 2]; 2]; 2],
    all: String,
}

impl TableSql {
    /// The statements of `table` (a name checked by `db.rs`).
    pub fn new(table: &str) -> Self {
        let scan = |desc: bool, excl: bool, end: bool| {
            format!(
                "SELECT key, value FROM {table} WHERE key {} ?1{} ORDER BY key {} LIMIT ?3",
                if excl { ">" } else { ">=" },
                if end { " AND key < ?2" } else { " AND ?2 IS NULL" },
                if desc { "DESC" } else { "ASC" },
            )
        };
        let by = |desc| {
            let by_excl = |excl| [scan(desc, excl, false), scan(desc, excl, true)];
            [by_excl(false), by_excl(true)]
        };
        Self {
            get: format!("SELECT value FROM {table} WHERE key = ?1"),
            put: format!("INSERT OR REPLACE INTO {table} (key, value) VALUES (?1, ?2)"),
            delete: format!("DELETE FROM {table} WHERE key = ?1"),
            scan: [by(false), by(true)],
            all: format!("SELECT key, value FROM {table} ORDER BY key"),
        }
    }
}

/// Writes not in the table yet, by key (`None`: deleted).
pub type Overlay = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// A projection's table, with writes not in it yet on top (what a fold wrote, what a reader sees).
pub struct SqliteRecords<'a> {
    conn: &'a Connection,
    sql: &'a TableSql,
    pending: Cow<'a, Overlay>,
    error: RefCell<Option<rusqlite::Error>>,
}

impl<'a> SqliteRecords<'a> {
    /// A view of the table through `conn` with no pending writes.
    pub fn new(conn: &'a Connection, sql: &'a TableSql) -> Self {
        Self::over(conn, sql, Cow::Owned(Overlay::new()))
    }

    /// A view of the table through `conn` with `pending` on top.
    pub fn over(conn: &'a Connection, sql: &'a TableSql, pending: Cow<'a, Overlay>) -> Self {
        Self { conn, sql, pending, error: RefCell::new(None) }
    }

    /// The writes not in the table, once the first read error (if any) is reported.
    fn into_pending(self) -> Result<Overlay, StoreError> {
        self.take_error()?;
        Ok(self.pending.into_owned())
    }

    fn note(&self, e: rusqlite::Error) {
        self.error.borrow_mut().get_or_insert(e);
    }

    /// The first SQLite error a read met (the reads returned nothing for it).
    pub fn take_error(&self) -> Result<(), StoreError> {
        match self.error.borrow_mut().take() {
            Some(e) => Err(sql_err("reading projection records")(e)),
            None => Ok(()),
        }
    }

    /// Writes the pending records (in key order) and the checkpoint of `name` in one transaction.
    fn commit(self, name: &str, version: u32, seq: u64) -> Result<(), StoreError> {
        self.take_error()?;
        let run = || -> rusqlite::Result<()> {
            let tx = self.conn.unchecked_transaction()?;
            {
                let mut put = tx.prepare_cached(&self.sql.put)?;
                let mut delete = tx.prepare_cached(&self.sql.delete)?;
                for (k, v) in self.pending.iter() {
                    match v {
                        Some(v) => put.execute(params![k, v])?,
                        None => delete.execute(params![k])?,
                    };
                }
            }
            put_checkpoint(&tx, name, &Checkpoint { version, seq, state: None })?;
            tx.commit()
        };
        run().map_err(sql_err("writing projection records"))
    }

    fn stored_get(&self, key: &[u8]) -> rusqlite::Result<Option<Vec<u8>>> {
        self.conn.prepare_cached(&self.sql.get)?.query_row(params![key], |r| r.get(0)).optional()
    }

    fn stored_scan(
        &self,
        bounds: &(Bound<Vec<u8>>, Bound<Vec<u8>>),
        descending: bool,
        take: usize,
    ) -> rusqlite::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let (start, excl) = match &bounds.0 {
            Bound::Included(s) => (s, false),
            Bound::Excluded(s) => (s, true),
            Bound::Unbounded => unreachable!("a scan starts at its prefix"),
        };
        let end = match &bounds.1 {
            Bound::Excluded(e) => Some(e),
            _ => None,
        };
        let sql = &self.sql.scan[descending as usize][excl as usize][end.is_some() as usize];
        let mut st = self.conn.prepare_cached(sql)?;
        let limit = i64::try_from(take).unwrap_or(i64::MAX);
        let rows = st.query_map(params![start, end, limit], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect()
    }
}

impl RecordsRead for SqliteRecords<'_> {
    fn get_raw(&self, key: &[u8]) -> Option<Vec<u8>> {
        if let Some(v) = self.pending.get(key) {
            return v.clone();
        }
        self.stored_get(key).unwrap_or_else(|e| {
            self.note(e);
            None
        })
    }

    fn scan_raw(&self, prefix: &[u8], after: Option<&[u8]>, descending: bool, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let bounds = scan_bounds(prefix, after, descending);
        let pend: Vec<(&Vec<u8>, &Option<Vec<u8>>)> = self.pending.range(bounds.clone()).collect();
        // Each pending write can hide at most one stored entry: read that many more.
        let take = limit.saturating_add(pend.len());
        let stored = self.stored_scan(&bounds, descending, take).unwrap_or_else(|e| {
            self.note(e);
            Vec::new()
        });
        if pend.is_empty() {
            return stored;
        }
        let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = stored.into_iter().collect();
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

impl Records for SqliteRecords<'_> {
    fn put_raw(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.pending.to_mut().insert(key, Some(value));
    }
    fn delete_raw(&mut self, key: &[u8]) {
        self.pending.to_mut().insert(key.to_vec(), None);
    }
}

/// Where a record projection stands.
struct Pos {
    /// The seq the records reflect.
    seq: u64,
    /// The seq of the stored checkpoint (behind `seq` only over events that wrote no record).
    checkpointed: u64,
}

/// One record-backed projection kept up to date with the log.
pub struct RecordProjector<F: RecordFold> {
    store: Store,
    db: Arc<ReadModels>,
    sql: TableSql,
    /// The seq the records reflect and the seq of their stored checkpoint (held while folding).
    pos: Mutex<Pos>,
    /// The folded writes not in the table yet (see the module's first lines). Readers hold it
    /// shared while they read; a fold, a write to the table and a rebuild hold it exclusively
    /// (always after `pos`).
    gate: RwLock<Overlay>,
    /// The checkpoint seq found when loading (where the fold resumed).
    resumed_from: u64,
    _fold: PhantomData<F>,
}

impl<F: RecordFold> RecordProjector<F> {
    /// Opens the projection's table; keeps its records when their checkpoint is of this VERSION
    /// (and not past the log), else clears them; then catches up with the log.
    pub fn load(store: &Store) -> Result<Self, StoreError> {
        Self::load_at_most(store, u64::MAX)
    }

    /// Like [`Self::load`], catching up no further than `upto` (a fold stopped part way, as a kill
    /// would stop it).
    pub fn load_at_most(store: &Store, upto: u64) -> Result<Self, StoreError> {
        let db = ReadModels::for_store(store)?;
        let table = db.records_table(F::NAME)?;
        let seq = match db.checkpoint(F::NAME)? {
            Some(m) if m.version == F::VERSION && m.seq <= store.last_seq() => m.seq,
            _ => {
                db.clear(F::NAME)?;
                0
            }
        };
        let p = Self {
            store: store.clone(),
            sql: TableSql::new(&table),
            db,
            pos: Mutex::new(Pos { seq, checkpointed: seq }),
            gate: RwLock::new(Overlay::new()),
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
        self.pos.lock().expect("projector lock").seq
    }

    /// Folds every event the log has that the records do not reflect yet.
    pub fn catch_up(&self) -> Result<u64, StoreError> {
        self.catch_up_to(self.store.last_seq())
    }

    /// Folds up to `upto`: reads [`PROJECTION_CHUNK_EVENTS`] at a time, at most
    /// [`PROJECTION_BATCH_EVENTS`] per round, into the overlay. A round writes the overlay and its
    /// checkpoint seq to the table in one transaction when there is no checkpoint yet (without one
    /// a restart rebuilds from seq 0), when [`PROJECTION_CHECKPOINT_EVENTS`] events went by since
    /// the last, or when the overlay holds [`PROJECTION_OVERLAY_RECORDS`] records; otherwise the
    /// writes wait in memory (refolding events from the older checkpoint gives the same records).
    /// [`Self::checkpoint_if_moved`] writes what waits when the log goes idle.
    pub fn catch_up_to(&self, upto: u64) -> Result<u64, StoreError> {
        let mut pos = self.pos.lock().expect("projector lock");
        if pos.seq >= upto {
            return Ok(pos.seq);
        }
        let mut overlay = self.gate.write().expect("projector gate");
        let conn = self.db.writer();
        while pos.seq < upto {
            let rec = SqliteRecords::over(&conn, &self.sql, Cow::Owned(std::mem::take(&mut *overlay)));
            match self.round(rec, &mut pos, upto) {
                Ok((more, pending)) => {
                    *overlay = pending;
                    if !more {
                        break;
                    }
                }
                Err(e) => {
                    // The overlay went with the round (mixed with its part, which cannot be told
                    // apart): the records fall back to the table, at its checkpoint, and the next
                    // catch-up folds again from there.
                    pos.seq = pos.checkpointed;
                    return Err(e);
                }
            }
        }
        Ok(pos.seq)
    }

    /// One round of [`Self::catch_up_to`]: folds into `rec`, then writes it with its checkpoint
    /// when one is due; whether it folded anything, and the overlay left waiting in memory.
    fn round(&self, mut rec: SqliteRecords<'_>, pos: &mut Pos, upto: u64) -> Result<(bool, Overlay), StoreError> {
        let at = self.fold_round(&mut rec, pos.seq, upto)?;
        if at == pos.seq {
            return Ok((false, rec.into_pending()?));
        }
        let due = pos.checkpointed == 0
            || at - pos.checkpointed >= PROJECTION_CHECKPOINT_EVENTS
            || rec.pending.len() >= PROJECTION_OVERLAY_RECORDS;
        let pending = match due {
            true => {
                rec.commit(F::NAME, F::VERSION, at)?;
                pos.checkpointed = at;
                Overlay::new()
            }
            false => rec.into_pending()?,
        };
        pos.seq = at;
        Ok((true, pending))
    }

    /// Folds the events after `from` (up to `upto`, at most [`PROJECTION_BATCH_EVENTS`]) into
    /// `rec`; the seq of the last one folded (`from` when there were none).
    fn fold_round(&self, rec: &mut SqliteRecords<'_>, from: u64, upto: u64) -> Result<u64, StoreError> {
        let mut at = from;
        while at < upto && at - from < PROJECTION_BATCH_EVENTS as u64 {
            let frames = self.store.read_from(at + 1, PROJECTION_CHUNK_EVENTS.min((upto - at) as usize))?;
            if frames.is_empty() {
                break;
            }
            for f in &frames {
                let s = decode_frame(f.view())?;
                F::apply(rec, &s.envelope, &s.event);
                at = s.envelope.seq;
            }
        }
        Ok(at)
    }

    /// Writes what the records reflect and the table does not (the overlay, and the checkpoint over
    /// events that wrote no record): the follower calls it once the log is idle, a clean stop
    /// before closing.
    pub fn checkpoint_if_moved(&self) -> Result<u64, StoreError> {
        let mut pos = self.pos.lock().expect("projector lock");
        if pos.checkpointed != pos.seq {
            let mut overlay = self.gate.write().expect("projector gate");
            let conn = self.db.writer();
            let rec = SqliteRecords::over(&conn, &self.sql, Cow::Borrowed(&*overlay));
            rec.commit(F::NAME, F::VERSION, pos.seq)?;
            *overlay = Overlay::new();
            pos.checkpointed = pos.seq;
        }
        Ok(pos.seq)
    }

    /// Runs `f` on the records, caught up first (a read reflects every acknowledged event), in one
    /// read transaction of a reader connection (one consistent state, whatever the fold commits
    /// meanwhile).
    pub fn read<R>(&self, f: impl FnOnce(&SqliteRecords<'_>) -> R) -> Result<R, StoreError> {
        self.catch_up()?;
        let overlay = self.gate.read().expect("projector gate");
        self.db.read(|conn| {
            let tx = conn.unchecked_transaction().map_err(sql_err("reading projection records"))?;
            let view = SqliteRecords::over(&tx, &self.sql, Cow::Borrowed(&*overlay));
            let out = f(&view);
            view.take_error()?;
            Ok(out)
        })
    }

    /// Clears the records and folds the whole log again.
    pub fn rebuild(&self) -> Result<u64, StoreError> {
        {
            let mut pos = self.pos.lock().expect("projector lock");
            let mut overlay = self.gate.write().expect("projector gate");
            self.db.clear(F::NAME)?;
            *overlay = Overlay::new();
            *pos = Pos { seq: 0, checkpointed: 0 };
        }
        self.catch_up()
    }

    /// Every record, to compare with a fold into memory.
    pub fn dump(&self) -> Result<MemRecords, StoreError> {
        let overlay = self.gate.read().expect("projector gate");
        let conn = self.db.writer();
        let run = || -> rusqlite::Result<MemRecords> {
            let mut st = conn.prepare_cached(&self.sql.all)?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(MemRecords { map: rows.collect::<rusqlite::Result<_>>()? })
        };
        let mut m = run().map_err(sql_err("reading projection records"))?;
        for (k, v) in overlay.iter() {
            match v {
                Some(v) => m.map.insert(k.clone(), v.clone()),
                None => m.map.remove(k),
            };
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
        /// Reads through pending writes over SQLite (what a fold sees) equal the same writes in memory.
        #[test]
        fn the_overlay_reads_like_memory(ops in proptest::collection::vec(op(), 1..80)) {
            let tmp = tempfile::tempdir().unwrap();
            let db = ReadModels::open(&tmp.path().join("t.sqlite")).unwrap();
            let table = db.records_table("t").unwrap();
            let sql = TableSql::new(&table);
            let conn = db.writer();
            let mut mem = MemRecords::default();
            let mut rec = SqliteRecords::new(&conn, &sql);
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
                        rec.commit("t", 1, 1).unwrap();
                        rec = SqliteRecords::new(&conn, &sql);
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
