//! The read models' database: one SQLite file in the data dir (`read-models.sqlite`) holding every
//! record projection's records (a `WITHOUT ROWID` table `rec_<name>` per projection, keyed by the
//! order-preserving byte keys of `od_projections::records::Key`) and every projection's checkpoint
//! (`checkpoints`: name → `{version, seq, state}`; `state` only for in-memory projections). sled
//! holds the log's index only.
//!
//! Why SQLite and these settings:
//! - Read models are rebuildable from the log, so `synchronous=NORMAL` in WAL mode: a commit is a
//!   WAL append (no fsync per fold); a kill -9 loses nothing committed, a power loss may lose the
//!   last commits but never leaves a torn state — every folded chunk's records and its checkpoint
//!   commit in ONE transaction, so what survives is a consistent point the fold resumes from. A
//!   checkpoint can never run ahead of the log: only durable (published) events are folded.
//! - One writer connection (a `Mutex`: the follower and a read's catch-up take turns, as they did
//!   over sled) and up to [`READ_MODEL_READERS`] reader connections, opened on first use, for
//!   HTTP reads; WAL lets them read while a fold writes. rusqlite's `Connection` is `Send` but not
//!   `Sync`, hence one mutex per connection.
//! - Every connection's page cache is bounded ([`READ_MODEL_WRITER_CACHE_KB`],
//!   [`READ_MODEL_READER_CACHE_KB`]); the WAL is truncated back to [`READ_MODEL_WAL_LIMIT_BYTES`]
//!   after each checkpoint; statements are prepared once per connection and cached.
//!
//! One [`ReadModels`] is shared by every projector of a data dir in this process ([`ReadModels::for_store`]):
//! the store's sled lock already makes the data dir this process's alone.

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::limits::{
    READ_MODEL_BUSY_TIMEOUT_MS, READ_MODEL_READERS, READ_MODEL_READER_CACHE_KB, READ_MODEL_STATEMENTS,
    READ_MODEL_WAL_LIMIT_BYTES, READ_MODEL_WRITER_CACHE_KB,
};
use crate::store::{Store, StoreError};

/// The database's file name in the data dir.
pub const READ_MODELS_FILE: &str = "read-models.sqlite";

/// A projection's checkpoint: the VERSION of the fold that wrote it, the seq it reflects, and an
/// in-memory projection's state (JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub version: u32,
    pub seq: u64,
    pub state: Option<Vec<u8>>,
}

/// Maps a SQLite error to the store's error type (a full disk stays `Full`).
pub fn sql_err(during: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DiskFull) => StoreError::Full { during, message: e.to_string() },
        _ => StoreError::Io { during, message: e.to_string() },
    }
}

/// The read models' database of one data dir.
pub struct ReadModels {
    path: PathBuf,
    writer: Mutex<Connection>,
    readers: Vec<Mutex<Option<Connection>>>,
    next: AtomicUsize,
}

/// Databases open in this process, by data dir (dropped with their last projector).
static OPEN: Mutex<Vec<(PathBuf, Weak<ReadModels>)>> = Mutex::new(Vec::new());

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS checkpoints (
    name TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL, seq INTEGER NOT NULL, state BLOB
) WITHOUT ROWID;";

impl ReadModels {
    /// The database of `store`'s data dir, shared with every projector of it in this process.
    /// Opening it the first time drops read models an older od kept in sled (its `proj:*` trees
    /// and `projections` checkpoints): they are rebuilt here from the log.
    pub fn for_store(store: &Store) -> Result<Arc<Self>, StoreError> {
        let dir = store.dir().to_path_buf();
        let mut open = OPEN.lock().expect("read models registry");
        open.retain(|(_, w)| w.strong_count() > 0);
        if let Some(db) = open.iter().find(|(d, _)| *d == dir).and_then(|(_, w)| w.upgrade()) {
            return Ok(db);
        }
        store.drop_sled_read_models()?;
        let db = Arc::new(Self::open(&dir.join(READ_MODELS_FILE))?);
        open.push((dir, Arc::downgrade(&db)));
        Ok(db)
    }

    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let writer = connect(path, READ_MODEL_WRITER_CACHE_KB)?;
        writer.execute_batch(SCHEMA).map_err(sql_err("creating the read models' schema"))?;
        Ok(Self {
            path: path.to_path_buf(),
            writer: Mutex::new(writer),
            readers: (0..READ_MODEL_READERS).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
        })
    }

    /// The writer connection (held while a chunk is folded and committed).
    pub fn writer(&self) -> MutexGuard<'_, Connection> {
        self.writer.lock().expect("read models writer")
    }

    /// Runs `f` on a reader connection: a free one, else the next in turn (waiting for it).
    pub fn read<R>(&self, f: impl FnOnce(&Connection) -> Result<R, StoreError>) -> Result<R, StoreError> {
        let mut slot = self.readers.iter().find_map(|r| r.try_lock().ok());
        let mut guard = match slot.take() {
            Some(g) => g,
            None => {
                let i = self.next.fetch_add(1, Ordering::Relaxed) % self.readers.len();
                self.readers[i].lock().expect("read models reader")
            }
        };
        if guard.is_none() {
            *guard = Some(connect(&self.path, READ_MODEL_READER_CACHE_KB)?);
        }
        f(guard.as_ref().expect("connected"))
    }

    /// Creates projection `name`'s records table when missing; returns its name.
    pub fn records_table(&self, name: &str) -> Result<String, StoreError> {
        let table = table_name(name)?;
        let sql = format!(
            "CREATE TABLE IF NOT EXISTS {table} (key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL) WITHOUT ROWID"
        );
        self.writer().execute_batch(&sql).map_err(sql_err("creating a read model's table"))?;
        Ok(table)
    }

    /// Projection `name`'s checkpoint, if any.
    pub fn checkpoint(&self, name: &str) -> Result<Option<Checkpoint>, StoreError> {
        let w = self.writer();
        read_checkpoint(&w, name)
    }

    /// Writes projection `name`'s checkpoint (an in-memory projection's state with it).
    pub fn put_checkpoint(&self, name: &str, cp: &Checkpoint) -> Result<(), StoreError> {
        put_checkpoint(&self.writer(), name, cp).map_err(sql_err("writing a projection checkpoint"))
    }

    /// Copies the WAL into the database and truncates it (a clean stop: the next open has no WAL
    /// to read).
    pub fn checkpoint_wal(&self) -> Result<(), StoreError> {
        let w = self.writer();
        w.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(sql_err("checkpointing the read models' WAL"))
    }

    /// Empties projection `name`'s records and removes its checkpoint, in one transaction.
    pub fn clear(&self, name: &str) -> Result<(), StoreError> {
        let table = table_name(name)?;
        let w = self.writer();
        let run = || -> rusqlite::Result<()> {
            let tx = w.unchecked_transaction()?;
            tx.execute_batch(&format!("DELETE FROM {table}"))?;
            tx.execute("DELETE FROM checkpoints WHERE name = ?1", params![name])?;
            tx.commit()
        };
        run().map_err(sql_err("clearing a read model"))
    }
}

/// `rec_<name>`, for a projection name of lowercase letters, digits and `_` (names are constants
/// of the folds; anything else is refused rather than quoted into SQL).
fn table_name(name: &str) -> Result<String, StoreError> {
    let ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    match ok {
        true => Ok(format!("rec_{name}")),
        false => Err(StoreError::Invalid { field: "projection name", reason: format!("{name:?} is not [a-z0-9_]+") }),
    }
}

fn connect(path: &Path, cache_kb: i64) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let c = Connection::open_with_flags(path, flags).map_err(sql_err("opening the read models' database"))?;
    let setup = || -> rusqlite::Result<()> {
        c.busy_timeout(std::time::Duration::from_millis(READ_MODEL_BUSY_TIMEOUT_MS))?;
        c.pragma_update(None, "journal_mode", "WAL")?;
        c.pragma_update(None, "synchronous", "NORMAL")?;
        c.pragma_update(None, "cache_size", -cache_kb)?;
        c.pragma_update(None, "journal_size_limit", READ_MODEL_WAL_LIMIT_BYTES)?;
        c.set_prepared_statement_cache_capacity(READ_MODEL_STATEMENTS);
        Ok(())
    };
    setup().map_err(sql_err("configuring the read models' database"))?;
    Ok(c)
}

/// Projection `name`'s checkpoint as `c` sees it.
pub fn read_checkpoint(c: &Connection, name: &str) -> Result<Option<Checkpoint>, StoreError> {
    let mut st = c
        .prepare_cached("SELECT version, seq, state FROM checkpoints WHERE name = ?1")
        .map_err(sql_err("reading a projection checkpoint"))?;
    st.query_row(params![name], |r| {
        Ok(Checkpoint { version: r.get::<_, i64>(0)? as u32, seq: r.get::<_, i64>(1)? as u64, state: r.get(2)? })
    })
    .optional()
    .map_err(sql_err("reading a projection checkpoint"))
}

/// Writes projection `name`'s checkpoint on `c` (inside the caller's transaction, if any).
pub fn put_checkpoint(c: &Connection, name: &str, cp: &Checkpoint) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(
        "INSERT INTO checkpoints (name, version, seq, state) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (name) DO UPDATE SET version = excluded.version, seq = excluded.seq, state = excluded.state",
    )?;
    st.execute(params![name, cp.version as i64, cp.seq as i64, cp.state])?;
    Ok(())
}
