//! The embedded backend of [`EventLog`]: frames are appended to preallocated segment files,
//! fdatasynced per group commit (the commit point), and sled indexes them (global order,
//! per-stream order, op ids, checkpoints).
//!
//! See `writer.rs` for the commit path and the checkpoints (bounded in bytes and in time; the
//! single place sled is flushed), `import.rs` for the writer's side of an import, `open.rs` for
//! recovery (tail only), `segments.rs` for the files, `mark.rs` for the commit mark, `tables.rs`
//! for sled's trees, `pack.rs` and `chunks.rs` for the index entries, `ahead.rs` for reading a
//! stream's packs ahead (cold reads), `pending.rs` for the index entries not yet in sled,
//! `files.rs` for the (injectable) file layer, `verify.rs` and `pass.rs` for the full walk (at
//! once, or stepped by the daemon's background pass, saved by `resume.rs`).

mod ahead;
mod chunks;
mod config;
mod files;
mod import;
mod mark;
mod open;
mod pack;
mod pass;
mod pending;
mod resume;
mod scan;
mod segments;
mod tables;
mod verify;
mod writer;

pub use config::{StoreConfig, VerifyOnOpen};
pub use files::{FileLayer, LayerFile, RealFiles, SharedFiles};
pub use pass::VerifyPass;
pub use resume::SavedPass;
pub use segments::RECORD_HEADER as RECORD_BYTES;
pub use verify::verify_dir;

use bytes::Bytes;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast, oneshot};

use super::group::{Ack, Group};
use super::health::{self, LogCheck, StoreHealth};
use super::lease::LocalFences;
use super::prepare::{prepare, prepare_all};
use super::{
    import as checks, AckAllReceiver, AckReceiver, Append, AppendResult, EventLog, Published, RawFrame, StoreError,
    Subscription, VerifyReport,
};
use crate::limits::{MIN_SEGMENT_BYTES, SUBSCRIBER_BUFFER, WRITER_QUEUE};
use segments::Segments;
use tables::Tables;
use writer::{Msg, Writer};

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
    /// next timed checkpoint (within
    /// [`CHECKPOINT_INTERVAL_MS`](crate::limits::CHECKPOINT_INTERVAL_MS)) makes it durable.
    /// Non-blocking.
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
        self.tables.scan_stream(stream, from_version, limit, &mut |f| {
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
        self.tables.scan_stream(stream, 0, usize::MAX, &mut |frame| {
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
        checks::precheck(&frames)?;
        let (ack, rx) = oneshot::channel();
        let frames: Vec<Bytes> = frames.into_iter().map(|f| f.0).collect();
        self.send(Msg::Import(frames, ack))?;
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
