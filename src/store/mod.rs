//! The event log: one append-only, hash-chained, durable log with global order and per-stream
//! versions.
//!
//! [`EventLog`] is the backend contract (a PostgreSQL backend for several daemons could implement
//! it without touching engine code); [`SledLog`] is the embedded backend: frames are appended to
//! preallocated segment files, fdatasynced per group commit (the commit point), and sled indexes
//! them (global order, per-stream order, op ids, checkpoints). See `writer.rs` for the commit path
//! and the checkpoints (bounded in bytes and in time; the single place sled is flushed),
//! `prepare.rs` for the checks before it, `open.rs` for recovery (tail only), `segments.rs` for
//! the files, `mark.rs` for the commit mark, `pending.rs` for the index entries not yet in sled,
//! `files.rs` for the (injectable) file layer, `subscribe.rs` for tails, `verify.rs` and `pass.rs`
//! for the full walk (at once, or stepped by the daemon's background pass), `import.rs` for
//! appending frames copied from another log (`od log copy`).

mod chunks;
mod error;
mod fence;
mod files;
mod health;
mod ident;
mod import;
pub mod lease;
mod mark;
mod open;
mod pack;
mod pass;
mod pending;
mod pg;
mod prepare;
mod resume;
mod scan;
mod segments;
mod spec;
mod subscribe;
mod tables;
mod types;
mod verify;
mod writer;

pub use error::StoreError;
pub use files::{FileLayer, LayerFile, RealFiles, SharedFiles};
pub use health::{LogCheck, StoreHealth, StoreState};
pub use ident::{check_ident, IdentError};
pub use lease::{Fence, LocalFences, LocalLeases, RunLeases};
pub use pg::{PgLeases, PgLog};
pub use resume::SavedPass;
/// Bytes the embedded log adds to each frame in a segment (its record header): what an import's
/// byte bound ([`MAX_IMPORT_BYTES`]) counts besides the frames.
pub use segments::RECORD_HEADER as RECORD_BYTES;
pub use spec::{Opened, StoreSpec};
pub use subscribe::Subscription;
pub use types::{decode_frame, Append, AppendResult, Expected, RawFrame};
pub use verify::{verify_dir, BadFrame, VerifyPass, VerifyReport};
pub use writer::Published;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast, oneshot};

use crate::clock::{SharedClock, SystemClock};
use crate::limits::*;
use prepare::{prepare, prepare_all};
use segments::Segments;
use tables::Tables;
use writer::{Ack, Group, Msg, Writer};

/// A pending durable ack.
pub type AckReceiver = oneshot::Receiver<Result<AppendResult, StoreError>>;

/// A pending durable ack of an atomic multi-stream append: one result per part, in order.
pub type AckAllReceiver = oneshot::Receiver<Result<Vec<AppendResult>, StoreError>>;

/// What every log backend provides.
pub trait EventLog: Send + Sync + 'static {
    /// Queues an append; the receiver resolves once it is durable (or refused).
    fn submit(&self, append: Append) -> Result<AckReceiver, StoreError>;
    /// Queues an atomic append across streams: one command's events for several streams land all
    /// or nothing. Every part's expected version is checked and every limit applies (to each part,
    /// and the group's bytes to [`MAX_APPEND_BYTES`]); then all parts are written in one group commit,
    /// or none is (a conflict on any part writes nothing, for any part). Parts name distinct streams
    /// (at most [`MAX_APPEND_PARTS`]). The group's op id is its first part's: later parts carry none
    /// or the same, every frame of the group is stored with it, and a retry with it returns the
    /// original results, one per part (a single `submit` retried with it gets the part on its own
    /// stream). The receiver resolves to one result per part, in the order given.
    fn submit_all(&self, parts: Vec<Append>) -> Result<AckAllReceiver, StoreError>;
    /// Up to `limit` frames with seq ≥ `from`, in order.
    fn read_from(&self, from: u64, limit: usize) -> Result<Vec<RawFrame>, StoreError>;
    /// Up to `limit` frames of `stream` with version ≥ `from_version`, in order.
    fn read_stream(&self, stream: &str, from_version: u64, limit: usize) -> Result<Vec<RawFrame>, StoreError>;
    /// Calls `f` on every frame of `stream` in order, without collecting them.
    fn fold_stream(&self, stream: &str, f: &mut dyn FnMut(&[u8])) -> Result<u64, StoreError>;
    /// The last version of `stream`, or `None` if it has no events.
    fn stream_version(&self, stream: &str) -> Result<Option<u64>, StoreError>;
    /// The highest durable seq (0 for an empty log).
    fn last_seq(&self) -> u64;
    /// A receiver of frames published after they became durable.
    fn live(&self) -> broadcast::Receiver<Published>;
    /// Verifies the whole log up to the current tail.
    fn verify(&self) -> Result<VerifyReport, StoreError>;
    /// Which backend holds the log: `embedded` or `postgres`.
    fn backend(&self) -> &'static str;
    /// This process's data directory (its read models, agents, discovery file): the log's own
    /// directory for the embedded backend, a local directory beside the database for PostgreSQL.
    fn dir(&self) -> &Path;
    /// Whether commits succeed, and if not, why and whether only a restart helps.
    fn health(&self) -> StoreHealth;
    /// What the last whole-log pass of this process found, if one finished.
    fn log_check(&self) -> Option<LogCheck> {
        None
    }
    /// What the background verification saved last, if the backend keeps it.
    fn saved_verify(&self) -> Option<SavedPass> {
        None
    }
    /// Makes everything committed durable in the backend's own index (a no-op where every commit
    /// already is).
    fn checkpoint(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Stops taking appends after everything queued is committed.
    fn close(&self);
    /// Drops read models an older od kept inside the log's index (embedded backend only).
    fn drop_sled_read_models(&self) -> Result<bool, StoreError> {
        Ok(false)
    }
    /// Bytes the log takes on this machine's disk (0 when a database server holds it).
    fn disk_bytes(&self) -> u64 {
        0
    }
    /// Size of each segment file (0 when the backend has none).
    fn segment_bytes(&self) -> u64 {
        0
    }
    /// Makes every commit that is durable in the backend (by any daemon) visible here — the log's
    /// last seq included — before it returns that seq: a barrier for reading another daemon's
    /// writes. The embedded log is always up to date.
    fn sync_head(&self) -> Result<u64, StoreError> {
        Ok(self.last_seq())
    }
    /// Where the log lives, for people: the data directory, or the database without its password.
    fn location(&self) -> String {
        self.dir().display().to_string()
    }
    /// Appends frames that already exist — a copy of another log (`od log copy`) — verbatim: same
    /// bytes, so the same seqs, hashes, timestamps and op ids. Nothing is written unless every frame
    /// verifies (hash, stream, payload), the first carries this log's next seq and chains to its
    /// head hash, each follows the one before, and each version is its stream's next. Everything
    /// an append maintains is maintained: stream heads, op-id records (a retry with an op id after
    /// the import returns the original results, one per part of its group; a group an earlier
    /// import cut is extended), durability before the return (the embedded log: one group commit
    /// through its writer; PostgreSQL: one transaction under the head-row lock), and live
    /// subscribers get the frames. At most [`MAX_IMPORT_FRAMES`] frames and [`MAX_IMPORT_BYTES`]
    /// bytes per call. Returns the new last seq. Blocking: do not call on an async runtime thread.
    fn import(&self, frames: Vec<RawFrame>) -> Result<u64, StoreError>;
    /// The lease table this log's writer checks fenced appends against, when the log keeps one in
    /// this process (the embedded log; PostgreSQL checks `od_leases` in the database).
    fn local_fences(&self) -> Option<Arc<LocalFences>> {
        None
    }
}

/// A shared handle to a log, whichever backend holds it: what the engine, runner, HTTP API and
/// CLI use.
pub type Store = Arc<dyn EventLog>;

impl dyn EventLog {
    /// Appends and waits for the durable ack (blocking; do not call on an async runtime thread).
    pub fn append(&self, append: Append) -> Result<AppendResult, StoreError> {
        self.submit(append)?.blocking_recv().map_err(|_| StoreError::Closed)?
    }

    /// Appends and awaits the durable ack.
    pub async fn append_async(&self, append: Append) -> Result<AppendResult, StoreError> {
        self.submit(append)?.await.map_err(|_| StoreError::Closed)?
    }

    /// Appends several streams' events atomically (see [`EventLog::submit_all`]) and waits for the
    /// durable ack (blocking; do not call on an async runtime thread).
    pub fn append_all(&self, parts: Vec<Append>) -> Result<Vec<AppendResult>, StoreError> {
        self.submit_all(parts)?.blocking_recv().map_err(|_| StoreError::Closed)?
    }

    /// Appends several streams' events atomically and awaits the durable ack.
    pub async fn append_all_async(&self, parts: Vec<Append>) -> Result<Vec<AppendResult>, StoreError> {
        self.submit_all(parts)?.await.map_err(|_| StoreError::Closed)?
    }

    /// A subscription delivering frames with seq > `after`.
    pub fn subscribe(self: &Arc<Self>, after: u64) -> Subscription {
        Subscription::new(self.clone(), after)
    }
}

/// Options for opening a [`SledLog`].
#[derive(Clone)]
pub struct StoreConfig {
    pub dir: PathBuf,
    /// Size of each segment file.
    pub segment_bytes: u64,
    pub clock: SharedClock,
    /// Published batches kept for live subscribers (see [`SUBSCRIBER_BUFFER`]).
    pub subscriber_buffer: usize,
    /// How much of the log opening verifies.
    pub verify_on_open: VerifyOnOpen,
    /// Where the log's own writes go (segments, commit mark): the real file system, or a layer that
    /// injects faults in tests.
    pub files: SharedFiles,
    /// While commits fail, how long the writer waits idle before probing whether writes work again
    /// (see [`STORE_PROBE_INTERVAL_MS`]).
    pub probe_interval: std::time::Duration,
    /// Longest a commit stays out of a checkpoint (see [`CHECKPOINT_INTERVAL_MS`]).
    pub checkpoint_interval: std::time::Duration,
}

/// How much of the log [`SledLog::open`] verifies before it accepts writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyOnOpen {
    /// Every frame: hash, chain, position, payload, and the whole index (linear in the log; what
    /// `od log verify` does).
    Full,
    /// The tail only, whatever the log's size: the checkpoint is the durable "verified through
    /// seq S, head hash H" mark (every frame before it was verified when it was written, or by the
    /// recovery that indexed it); opening checks that frame S still hashes to H, verifies and
    /// re-indexes the frames after S (hash, chain, whole batches, the commit mark), and checks the
    /// index for holes from S on. Damage to older frames surfaces as a `Corrupt` error when they
    /// are read, in the daemon's background pass (`/api/health` degraded) and in `od log verify`.
    /// What the daemon and the CLI use.
    FromCheckpoint,
}

impl StoreConfig {
    /// Defaults for `dir`: the system clock, [`DEFAULT_SEGMENT_BYTES`] segments.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            clock: Arc::new(SystemClock),
            subscriber_buffer: SUBSCRIBER_BUFFER,
            verify_on_open: VerifyOnOpen::Full,
            files: Arc::new(RealFiles),
            probe_interval: std::time::Duration::from_millis(STORE_PROBE_INTERVAL_MS),
            checkpoint_interval: std::time::Duration::from_millis(CHECKPOINT_INTERVAL_MS),
        }
    }
}

/// The embedded log: segment files + sled index.
pub struct SledLog {
    tx: Mutex<Option<SyncSender<Msg>>>,
    tables: Tables,
    publish: broadcast::Sender<Published>,
    tail: Arc<AtomicU64>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    dir: PathBuf,
    segment_bytes: u64,
    health: health::SharedHealth,
    fences: Arc<LocalFences>,
}

impl SledLog {
    /// Opens (creating if needed) the log in `cfg.dir`, recovering from the segments and verifying
    /// from the last verified checkpoint.
    pub fn open(cfg: StoreConfig) -> Result<Arc<SledLog>, StoreError> {
        if cfg.segment_bytes < MIN_SEGMENT_BYTES || cfg.segment_bytes > u32::MAX as u64 {
            return Err(StoreError::Invalid {
                field: "segment_bytes",
                reason: format!("{} is outside {MIN_SEGMENT_BYTES}..=4 GiB", cfg.segment_bytes),
            });
        }
        std::fs::create_dir_all(&cfg.dir).map_err(|e| StoreError::io("creating the data directory", e))?;
        let (sled_dir, log_dir) = (cfg.dir.join("sled"), cfg.dir.join("log"));
        let mut segments = Segments::open(&log_dir, cfg.segment_bytes, cfg.files.clone())?;
        let tables = Tables::open(&sled_dir, segments.reader())?;
        let found = mark::read(&log_dir)?;
        let rec = open::recover(&tables, &segments, found.map(|(m, _)| m))?;
        if cfg.verify_on_open == VerifyOnOpen::Full {
            // The whole log, not only the tail recovery checked.
            let report = verify::verify_tables(&tables, rec.next_seq - 1)?;
            if let Some(bad) = report.first_bad {
                return Err(StoreError::Corrupt { seq: bad.seq, reason: bad.reason });
            }
        }
        // Only now, with the log judged sound (and sled's lock on the data dir held), is anything
        // written.
        segments.remove_stale()?;
        segments.open_at(rec.end)?;
        let recovered = mark::Mark { end: rec.end, next_seq: rec.next_seq, last_hash: rec.prev_hash };
        let mark = mark::MarkFile::open(&cfg.files, &log_dir, found, recovered)?;
        let (tx, rx) = sync_channel(WRITER_QUEUE);
        let (publish, _) = broadcast::channel(cfg.subscriber_buffer.clamp(1, SUBSCRIBER_BUFFER));
        let tail = Arc::new(AtomicU64::new(rec.next_seq - 1));
        let health = health::SharedHealth::default();
        let fences = Arc::new(LocalFences::default());
        let writer = Writer {
            rx,
            tables: tables.clone(),
            sled_dir,
            segments,
            pos: rec.end,
            since_checkpoint: 0,
            next_seq: rec.next_seq,
            prev_hash: rec.prev_hash,
            packer: rec.open,
            heads: Default::default(),
            clock: cfg.clock.clone(),
            publish: publish.clone(),
            tail: tail.clone(),
            poisoned: None,
            mark,
            health: health.clone(),
            failed: None,
            probe_interval: cfg.probe_interval,
            checkpoint_failing: false,
            checkpoint_interval: cfg.checkpoint_interval,
            last_checkpoint: std::time::Instant::now(),
            // What recovery re-indexed is in the overlay: the first timed checkpoint writes it.
            dirty: tables.has_pending(),
            fences: fences.clone(),
            ended: Default::default(),
        };
        let handle = std::thread::Builder::new()
            .name("od-log-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| StoreError::io("starting the writer thread", e))?;
        Ok(Arc::new(SledLog {
            tx: Mutex::new(Some(tx)),
            tables,
            publish,
            tail,
            writer: Mutex::new(Some(handle)),
            dir: cfg.dir,
            segment_bytes: cfg.segment_bytes,
            health,
            fences,
        }))
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether commits succeed, and if not, why and whether only a restart helps.
    pub fn health(&self) -> StoreHealth {
        self.health.get()
    }

    /// Size of each segment file in bytes.
    pub fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    /// Appends and waits for the durable ack, as `dyn EventLog` does (blocking).
    pub fn append(&self, append: Append) -> Result<AppendResult, StoreError> {
        (self as &dyn EventLog).append(append)
    }

    /// `append_async` on the embedded log.
    pub async fn append_async(&self, append: Append) -> Result<AppendResult, StoreError> {
        (self as &dyn EventLog).append_async(append).await
    }

    /// `append_all` on the embedded log.
    pub fn append_all(&self, parts: Vec<Append>) -> Result<Vec<AppendResult>, StoreError> {
        (self as &dyn EventLog).append_all(parts)
    }

    /// `append_all_async` on the embedded log.
    pub async fn append_all_async(&self, parts: Vec<Append>) -> Result<Vec<AppendResult>, StoreError> {
        (self as &dyn EventLog).append_all_async(parts).await
    }

    /// Makes the index durable and records a checkpoint.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        let (ack, rx) = oneshot::channel();
        self.send(Msg::Checkpoint(ack))?;
        rx.blocking_recv().map_err(|_| StoreError::Closed)?
    }

    /// Stops the writer after it has committed everything queued, and checkpoints.
    pub fn close(&self) {
        self.tx.lock().expect("tx lock").take();
        if let Some(h) = self.writer.lock().expect("writer lock").take() {
            let _ = h.join();
        }
    }

    /// A subscription delivering frames with seq > `after`.
    pub fn subscribe(self: &Arc<Self>, after: u64) -> Subscription {
        Subscription::new(self.clone(), after)
    }

    /// sled's `projections` tree: where an older od checkpointed projections (now empty; kept so
    /// tests can flush sled through it).
    pub fn projections_tree(&self) -> &sled::Tree {
        &self.tables.projections
    }

    /// Tells the writer that sled was written outside the log (old read models dropped), so the
    /// next timed checkpoint (within [`CHECKPOINT_INTERVAL_MS`]) makes it durable. Non-blocking.
    pub fn note_sled_written(&self) {
        self.tables.sled_dirty.store(true, Ordering::Release);
        if let Ok(Some(tx)) = self.tx.lock().map(|t| t.clone()) {
            let _ = tx.try_send(Msg::Dirty);
        }
    }

    /// A background verification pass over the whole log as it is now (see [`VerifyPass`]): step
    /// it with [`Self::verify_step`], then hand its report to [`Self::note_verified`].
    pub fn verify_pass(&self) -> VerifyPass {
        VerifyPass::new(self.last_seq(), true)
    }

    /// Checks about `budget` more bytes of `pass`; its report once it is over.
    pub fn verify_step(&self, pass: &mut VerifyPass, budget: u64) -> Option<VerifyReport> {
        pass.step(&self.tables, budget)
    }

    /// The seq through which the log is checkpointed: the durable "verified through" mark that
    /// opening starts from (0 before the first checkpoint).
    pub fn checkpointed_seq(&self) -> Result<u64, StoreError> {
        Ok(self.tables.checkpoint()?.map_or(0, |c| c.next_seq - 1))
    }

    /// What the last whole-log pass of this process found, if one finished.
    pub fn log_check(&self) -> Option<LogCheck> {
        self.health.log_check()
    }

    /// Drops the read models an older od kept in sled — the `proj:<name>` trees and the
    /// `projections` tree's checkpoints (they now live in `read-models.sqlite`, rebuilt from the
    /// log), so sled holds the log's index only. Returns whether anything was there. The drop
    /// becomes durable with the store's next checkpoint (a crash before it only repeats it).
    pub fn drop_sled_read_models(&self) -> Result<bool, StoreError> {
        let db = &self.tables.db;
        let mut dropped = false;
        for name in db.tree_names() {
            if name.starts_with(b"proj:") {
                db.drop_tree(&name).map_err(tables::sled_error("dropping an old read-model tree", 0))?;
                dropped = true;
            }
        }
        if !self.tables.projections.is_empty() {
            self.tables.projections.clear().map_err(tables::sled_error("clearing old projection checkpoints", 0))?;
            dropped = true;
        }
        if dropped {
            self.note_sled_written();
        }
        Ok(dropped)
    }

    /// Bytes the data dir takes on disk.
    pub fn disk_bytes(&self) -> u64 {
        dir_size(&self.dir)
    }

    /// Bytes of the segment files that hold records (the rest of each file is preallocated
    /// zeros). Walks the log index: for measurements, not for the hot path.
    pub fn segment_bytes_used(&self) -> u64 {
        self.tables.used_segment_bytes()
    }

    /// The live key + value bytes of each of the store's sled trees (what the index holds, before
    /// sled's own overhead). Walks every tree: for measurements.
    pub fn index_live_bytes(&self) -> Vec<(String, u64)> {
        self.tables.live_bytes()
    }

    fn send(&self, msg: Msg) -> Result<(), StoreError> {
        let tx = self.tx.lock().expect("tx lock").clone().ok_or(StoreError::Closed)?;
        tx.send(msg).map_err(|_| StoreError::Closed)
    }
}

impl Drop for SledLog {
    fn drop(&mut self) {
        self.close();
    }
}

fn dir_size(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

impl EventLog for SledLog {
    fn local_fences(&self) -> Option<Arc<LocalFences>> {
        Some(self.fences.clone())
    }

    fn submit(&self, append: Append) -> Result<AckReceiver, StoreError> {
        let p = prepare(append)?;
        let (ack, rx) = oneshot::channel();
        self.send(Msg::Append(Group { bytes: p.bytes, parts: vec![p] }, Ack::One(ack)))?;
        Ok(rx)
    }

    fn submit_all(&self, parts: Vec<Append>) -> Result<AckAllReceiver, StoreError> {
        let g = prepare_all(parts)?;
        let (ack, rx) = oneshot::channel();
        self.send(Msg::Append(g, Ack::All(ack)))?;
        Ok(rx)
    }

    fn read_from(&self, from: u64, limit: usize) -> Result<Vec<RawFrame>, StoreError> {
        self.tables.read_log(from.max(1), self.last_seq(), limit)
    }

    fn read_stream(&self, stream: &str, from_version: u64, limit: usize) -> Result<Vec<RawFrame>, StoreError> {
        let tail = self.last_seq();
        let mut out = Vec::new();
        self.tables.scan_stream(stream, from_version, &mut |f| {
            let f = RawFrame(f);
            if f.seq() > tail || out.len() >= limit {
                return false;
            }
            out.push(f);
            true
        })?;
        Ok(out)
    }

    fn fold_stream(&self, stream: &str, f: &mut dyn FnMut(&[u8])) -> Result<u64, StoreError> {
        let mut n = 0;
        self.tables.scan_stream(stream, 0, &mut |frame| {
            f(&frame);
            n += 1;
            true
        })?;
        Ok(n)
    }

    fn stream_version(&self, stream: &str) -> Result<Option<u64>, StoreError> {
        self.tables.stream_head(stream)
    }

    fn last_seq(&self) -> u64 {
        self.tail.load(Ordering::Acquire)
    }

    fn live(&self) -> broadcast::Receiver<Published> {
        self.publish.subscribe()
    }

    fn backend(&self) -> &'static str {
        "embedded"
    }

    fn dir(&self) -> &Path {
        SledLog::dir(self)
    }

    fn health(&self) -> StoreHealth {
        SledLog::health(self)
    }

    fn log_check(&self) -> Option<LogCheck> {
        SledLog::log_check(self)
    }

    fn saved_verify(&self) -> Option<SavedPass> {
        SledLog::saved_verify(self)
    }

    fn checkpoint(&self) -> Result<(), StoreError> {
        SledLog::checkpoint(self)
    }

    fn close(&self) {
        SledLog::close(self)
    }

    fn drop_sled_read_models(&self) -> Result<bool, StoreError> {
        SledLog::drop_sled_read_models(self)
    }

    fn disk_bytes(&self) -> u64 {
        SledLog::disk_bytes(self)
    }

    fn segment_bytes(&self) -> u64 {
        SledLog::segment_bytes(self)
    }

    fn import(&self, frames: Vec<RawFrame>) -> Result<u64, StoreError> {
        import::precheck(&frames)?;
        let (ack, rx) = oneshot::channel();
        self.send(Msg::Import(frames.into_iter().map(|f| f.0).collect(), ack))?;
        rx.blocking_recv().map_err(|_| StoreError::Closed)?
    }

    fn verify(&self) -> Result<VerifyReport, StoreError> {
        // A live pass: appends may go on while it walks (what they add is not its to judge).
        let mut pass = self.verify_pass();
        loop {
            if let Some(r) = pass.step(&self.tables, u64::MAX) {
                return Ok(r);
            }
        }
    }
}
