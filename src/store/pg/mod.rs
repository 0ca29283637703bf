//! The PostgreSQL backend of [`EventLog`]: several daemons share one log kept by PostgreSQL, with
//! the embedded log's contract — a gap-free global seq whose commit order is seq order (appends
//! serialise on one head row; `writer.rs` batches this daemon's queued appends into one
//! transaction), per-stream versions with `Any | NoStream | Exactly(v)`, op-id idempotency stored
//! in the database (it survives restarts), all-or-nothing appends, acks only after a durable
//! commit (`synchronous_commit = on`), and the same frames and blake3 chain, so verification works
//! unchanged. Live subscribers get every frame exactly once in order, whichever daemon wrote it
//! (`tail.rs`: LISTEN/NOTIFY as a wake-up, reads by seq, polling as the safety net). The schema is
//! versioned and migrated on open (`schema.rs`).
//!
//! The log runs on its own small tokio runtime (its connections live there), so it can be used
//! from blocking code and from async code alike: a call sends its query to that runtime and waits.

mod conn;
mod fence;
mod import;
mod lease;
mod schema;
mod sql;
mod tail;
pub(crate) mod tls;
mod writer;

pub use lease::PgLeases;

use bytes::Bytes;
use od_events::{FrameRef, Hash, GENESIS_HASH};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot, Notify};
use tokio_postgres::Client;

use super::group::{Ack, Group};
use super::health::SharedHealth;
use super::prepare::{prepare, prepare_all};
use super::{
    AckAllReceiver, AckReceiver, Append, BadFrame, EventLog, Published, RawFrame, StoreError, StoreHealth, VerifyReport,
};
use crate::clock::SharedClock;
use crate::limits::{PG_POLL_INTERVAL_MS, SUBSCRIBER_BUFFER, WRITER_QUEUE};

/// A PostgreSQL error with its server message (tokio-postgres' Display alone says "db error").
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {} ({})", db.severity(), db.message(), db.code().code()),
        None => e.to_string(),
    }
}

fn pg_error(during: &'static str) -> impl Fn(tokio_postgres::Error) -> StoreError {
    move |e| StoreError::io(during, describe(&e))
}

/// The PostgreSQL-backed log.
pub struct PgLog {
    rt: std::mem::ManuallyDrop<tokio::runtime::Runtime>,
    reader: Arc<conn::Shared>,
    tx: Mutex<Option<mpsc::Sender<(Group, Ack)>>>,
    publish: broadcast::Sender<Published>,
    tail: Arc<AtomicU64>,
    schema_version: i32,
    dir: PathBuf,
    url: String,
    /// How every connection of this log is opened (TLS included).
    target: conn::Target,
    health: SharedHealth,
    importer: import::Importer,
    /// Held while the log is open: the data dir's `od.lock`.
    _lock: std::fs::File,
    /// The commit task, awaited by `close` once its queue is drained.
    writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl PgLog {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/database[?sslmode=…&sslrootcert=…]`,
    /// libpq's TLS modes: `tls.rs`), migrates the schema and starts the writer and the publisher.
    /// A malformed URL or TLS setting is `Config` naming the parameter, before anything is
    /// written; an unreachable or refusing database (a failed TLS handshake included) is an `Io`
    /// error naming what failed. `dir` is this process's own data directory (its read models,
    /// agents, discovery file).
    pub fn open(url: &str, dir: &Path, clock: SharedClock) -> Result<Arc<PgLog>, StoreError> {
        let target = conn::Target::parse(url)?;
        let lock = lock_data_dir(dir)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("od-pg")
            .enable_all()
            .build()
            .map_err(|e| StoreError::io("starting the PostgreSQL runtime", e))?;
        let t = target.clone();
        let c = rt.block_on(async move { Connected::open(&t).await })?;
        let reader = Arc::new(conn::Shared::pool(target.clone(), c.reader, crate::limits::PG_READ_CONNECTIONS));
        let log = PgLog {
            rt: std::mem::ManuallyDrop::new(rt),
            reader,
            tx: Mutex::new(None),
            publish: broadcast::channel(SUBSCRIBER_BUFFER).0,
            tail: Arc::new(AtomicU64::new(c.head)),
            schema_version: c.schema_version,
            dir: dir.to_path_buf(),
            url: url.to_string(),
            target,
            health: SharedHealth::default(),
            importer: Default::default(),
            _lock: lock,
            writer: Mutex::new(None),
        };
        log.start(c.writer, c.listener, c.head, clock);
        Ok(Arc::new(log))
    }

    /// Starts the commit task (appends queue to it from now on) and the tailer, which publishes
    /// every commit after `head`, whichever daemon made it.
    fn start(&self, conn: sql::Conn, listener: conn::Listener, head: u64, clock: SharedClock) {
        let committed = Arc::new(Notify::new());
        let (tx, rx) = mpsc::channel(WRITER_QUEUE);
        let writer = writer::PgWriter {
            target: self.target.clone(),
            conn: Some(conn),
            rx,
            clock,
            committed: committed.clone(),
            tail: self.tail.clone(),
            health: self.health.clone(),
        };
        let tailer = tail::Tailer {
            target: self.target.clone(),
            reader: self.reader.clone(),
            listener: Some(listener),
            published: head,
            committed,
            publish: self.publish.clone(),
            tail: self.tail.clone(),
            poll: Duration::from_millis(PG_POLL_INTERVAL_MS),
        };
        *self.writer.lock().expect("writer task") = Some(self.rt.spawn(writer.run()));
        self.rt.spawn(tailer.run());
        *self.tx.lock().expect("writer sender") = Some(tx);
    }

    /// The schema version the database is at.
    pub fn schema_version(&self) -> i32 {
        self.schema_version
    }

    /// Runs `f` on the log's runtime and waits for it (from blocking or async code).
    fn call<T: Send + 'static>(&self, f: impl std::future::Future<Output = T> + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.rt.spawn(async move {
            let _ = tx.send(f.await);
        });
        rx.recv().expect("the log's runtime outlives its calls")
    }

    fn send(&self, g: Group, ack: Ack) -> Result<(), StoreError> {
        let tx = self.tx.lock().expect("writer sender").clone().ok_or(StoreError::Closed)?;
        // Callable from async code too (tokio's `blocking_send` is not): a full queue makes the
        // caller wait, as the embedded log's bounded queue does.
        let mut msg = (g, ack);
        loop {
            match tx.try_send(msg) {
                Ok(()) => return Ok(()),
                Err(mpsc::error::TrySendError::Closed(_)) => return Err(StoreError::Closed),
                Err(mpsc::error::TrySendError::Full(m)) => {
                    msg = m;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
}

/// The connections opening makes, and what it reads, before the log starts.
struct Connected {
    writer: sql::Conn,
    reader: Client,
    listener: conn::Listener,
    schema_version: i32,
    /// The last committed seq.
    head: u64,
}

impl Connected {
    /// Connects the writer, a reader and the listener, migrates the schema and reads the head.
    async fn open(t: &conn::Target) -> Result<Self, StoreError> {
        let mut writer = conn::connect(t, "connecting to PostgreSQL").await?;
        let reader = conn::connect(t, "connecting to PostgreSQL (reader)").await?;
        let listener = conn::listen(t).await?;
        let schema_version = schema::migrate(&mut writer).await.map_err(pg_error("migrating the schema"))?;
        // The commit path's statements name the tables, so they are prepared after the migration.
        let writer = sql::Conn::with(writer).await?;
        let head = reader
            .query_one("SELECT next_seq FROM od_head WHERE id = 1", &[])
            .await
            .map_err(pg_error("reading the log's head"))?;
        let head = head.get::<_, i64>(0) as u64 - 1;
        Ok(Connected { writer, reader, listener, schema_version, head })
    }
}

/// Creates `dir` and takes its `od.lock`: one process per data dir, as the embedded log's sled
/// lock ensures (the read models there are this process's alone).
fn lock_data_dir(dir: &Path) -> Result<std::fs::File, StoreError> {
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io("creating the data directory", e))?;
    let lock = std::fs::File::create(dir.join("od.lock")).map_err(|e| StoreError::io("creating the lock file", e))?;
    if lock.try_lock().is_err() {
        return Err(StoreError::Locked(dir.display().to_string()));
    }
    Ok(lock)
}

impl Drop for PgLog {
    fn drop(&mut self) {
        // The last handle may go on an async thread, where a runtime cannot be dropped in place.
        // SAFETY: `rt` is taken once, here, and never used again.
        let rt = unsafe { std::mem::ManuallyDrop::take(&mut self.rt) };
        rt.shutdown_background();
    }
}

/// `url` without its password, for messages and status.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let userinfo = &url[s + 3..at];
            match userinfo.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &userinfo[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

fn frames(rows: Vec<tokio_postgres::Row>) -> Vec<RawFrame> {
    rows.into_iter().map(|r| RawFrame(Bytes::from(r.get::<_, Vec<u8>>(0)))).collect()
}

impl EventLog for PgLog {
    fn submit(&self, append: Append) -> Result<AckReceiver, StoreError> {
        let p = prepare(append)?;
        let (ack, rx) = oneshot::channel();
        self.send(Group { bytes: p.bytes, parts: vec![p] }, Ack::One(ack))?;
        Ok(rx)
    }

    fn submit_all(&self, parts: Vec<Append>) -> Result<AckAllReceiver, StoreError> {
        let g = prepare_all(parts)?;
        let (ack, rx) = oneshot::channel();
        self.send(g, Ack::All(ack))?;
        Ok(rx)
    }

    fn read_from(&self, from: u64, limit: usize) -> Result<Vec<RawFrame>, StoreError> {
        let c = self.reader.clone();
        let (from, limit) = (from.max(1) as i64, limit.min(i64::MAX as usize) as i64);
        self.call(async move {
            let c = c.get().await?;
            c.query("SELECT frame FROM od_frames WHERE seq >= $1 ORDER BY seq LIMIT $2", &[&from, &limit])
                .await
                .map_err(pg_error("reading the log"))
        })
        .map(frames)
    }

    fn read_stream(&self, stream: &str, from_version: u64, limit: usize) -> Result<Vec<RawFrame>, StoreError> {
        let c = self.reader.clone();
        let stream = stream.to_string();
        let (from, limit) = (from_version.min(i64::MAX as u64) as i64, limit.min(i64::MAX as usize) as i64);
        self.call(async move {
            let c = c.get().await?;
            c.query(
                "SELECT frame FROM od_frames WHERE stream = $1 AND version >= $2 ORDER BY version LIMIT $3",
                &[&stream, &from, &limit],
            )
            .await
            .map_err(pg_error("reading a stream"))
        })
        .map(frames)
    }

    fn fold_stream(&self, stream: &str, f: &mut dyn FnMut(&[u8])) -> Result<u64, StoreError> {
        let mut n = 0;
        let mut from = 0;
        loop {
            let page = self.read_stream(stream, from, 1024)?;
            for fr in &page {
                f(fr.bytes());
                n += 1;
            }
            match page.last() {
                Some(last) if page.len() == 1024 => from = last.view().version() + 1,
                _ => return Ok(n),
            }
        }
    }

    fn stream_version(&self, stream: &str) -> Result<Option<u64>, StoreError> {
        let c = self.reader.clone();
        let stream = stream.to_string();
        let row = self.call(async move {
            let c = c.get().await?;
            c.query_opt("SELECT version FROM od_streams WHERE stream = $1", &[&stream])
                .await
                .map_err(pg_error("reading a stream head"))
        })?;
        Ok(row.map(|r| r.get::<_, i64>(0) as u64))
    }

    fn last_seq(&self) -> u64 {
        self.tail.load(Ordering::Acquire)
    }

    fn live(&self) -> broadcast::Receiver<Published> {
        self.publish.subscribe()
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn dir(&self) -> &Path {
        &self.dir
    }

    fn health(&self) -> StoreHealth {
        self.health.get()
    }

    /// Stops taking appends (queued ones are still committed).
    fn close(&self) {
        self.tx.lock().expect("writer sender").take();
        if let Some(h) = self.writer.lock().expect("writer task").take() {
            // Everything queued before the close is committed (or refused) and acked first.
            self.call(async move {
                let _ = h.await;
            });
        }
    }

    fn location(&self) -> String {
        redact_url(&self.url)
    }

    fn sync_head(&self) -> Result<u64, StoreError> {
        let c = self.reader.clone();
        let row = self.call(async move {
            let c = c.get().await?;
            c.query_one("SELECT next_seq FROM od_head WHERE id = 1", &[])
                .await
                .map_err(pg_error("reading the log's head"))
        })?;
        // Committed with the head row, so every frame up to it is readable.
        let head = row.get::<_, i64>(0) as u64 - 1;
        Ok(self.tail.fetch_max(head, Ordering::AcqRel).max(head))
    }

    fn import(&self, frames: Vec<RawFrame>) -> Result<u64, StoreError> {
        self.import_frames(frames)
    }

    fn verify(&self) -> Result<VerifyReport, StoreError> {
        let mut prev: Hash = GENESIS_HASH;
        let mut verified = 0u64;
        loop {
            let page = self.read_from(verified + 1, 1024)?;
            for f in &page {
                let seq = verified + 1;
                let bad = |reason: String| {
                    Ok(VerifyReport {
                        verified,
                        head_hash: hex(&prev),
                        first_bad: Some(BadFrame { seq, reason }),
                        runs_ended_twice: Vec::new(),
                    })
                };
                let view = match FrameRef::parse_verified(f.bytes()) {
                    Ok(v) => v,
                    Err(e) => return bad(format!("frame does not verify: {e}")),
                };
                if view.seq() != seq {
                    return bad(format!("frame at position {seq} says seq {}", view.seq()));
                }
                if view.prev_hash() != &prev {
                    return bad("prev hash does not chain to the frame before".into());
                }
                prev = *view.hash();
                verified = seq;
            }
            if page.len() < 1024 {
                let runs_ended_twice = self.runs_ended_twice()?;
                return Ok(VerifyReport { verified, head_hash: hex(&prev), first_bad: None, runs_ended_twice });
            }
        }
    }
}

impl PgLog {
    /// Run streams holding more than one `run_ended` (see [`VerifyReport::runs_ended_twice`]).
    fn runs_ended_twice(&self) -> Result<Vec<String>, StoreError> {
        let c = self.reader.clone();
        let (code, limit) = (
            od_events::EventKind::RunEnded.code().to_le_bytes().to_vec(),
            crate::limits::MAX_VERIFY_DOUBLE_ENDS as i64,
        );
        let rows = self.call(async move {
            let c = c.get().await?;
            c.query(
                "SELECT stream FROM od_frames WHERE stream LIKE 'run:%' AND substring(frame from 5 for 2) = $1
                 GROUP BY stream HAVING count(*) > 1 ORDER BY stream LIMIT $2",
                &[&code, &limit],
            )
            .await
            .map_err(pg_error("looking for runs ended twice"))
        })?;
        Ok(rows.into_iter().map(|r| r.get(0)).collect())
    }
}

fn hex(h: &Hash) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}
