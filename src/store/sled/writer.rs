//! The single writer: group commit, durable ack, then publish.
//!
//! One thread owns every write. It takes whatever appends are queued (up to the batch limits),
//! checks each one's expected version and op id, encodes its frames into the hash chain, writes the
//! whole batch to the current segment file and fdatasyncs it (the commit point), indexes it in sled,
//! then acks every append in the batch, and only then publishes the frames to subscribers. Every
//! [`CHECKPOINT_BYTES`] it makes the index durable. A failed sync poisons the writer: nothing after
//! it is acknowledged.
//! Imports of existing frames (`import.rs`, for `od log copy`) go through it too, each committed
//! as a batch of its own after what was queued before it.
//!
//! After a failed commit (health: `store/health.rs`): a commit that fails before it is durable and
//! marked (a segment write or fdatasync, a segment roll-over, the commit mark) acknowledges
//! nothing: the writer rolls its state back to the last durable position, every append of the
//! batch gets `storage-full` (ENOSPC/EDQUOT) or `storage-io`, and later batches are written at that
//! same position — so appends succeed again by themselves once space returns. While idle in that
//! state the writer probes every
//! [`STORE_PROBE_INTERVAL_MS`](crate::limits::STORE_PROBE_INTERVAL_MS) (a page of zeros written
//! and fdatasynced where the next batch goes — past the commit mark, so harmless), so health turns
//! back to ok without waiting for a write. A failure after the commit point (the index could not
//! take a durable batch) cannot be undone in place: the store is poisoned and a restart is needed.

use bytes::Bytes;
use od_events::{Frame, FrameHeader, Hash};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, oneshot};

use super::mark::Mark;
use super::segments::{push_record, Pos, Segments, RECORD_HEADER};
use super::tables::{Checkpoint, Tables};
use crate::clock::SharedClock;
use crate::limits::{CHECKPOINT_BYTES, HEAD_CACHE_ENTRIES, MAX_BATCH_BYTES, MAX_BATCH_REQUESTS};
use crate::store::group::{ack_all, deduplicated, fail_all, Ack, Group, Outcome, Prepared};
use crate::store::health::SharedHealth;
use crate::store::import::ops_of;
use crate::store::lease::LocalFences;
use crate::store::{AppendResult, Published, StoreError};

/// Messages to the writer.
pub(crate) enum Msg {
    Append(Group, Ack),
    /// Make the index durable and record a checkpoint (used on close and by tests).
    Checkpoint(oneshot::Sender<Result<(), StoreError>>),
    /// sled was written outside the log (a read model): include it in the next timed checkpoint.
    Dirty,
    /// Frames copied from another log, checked and committed as one batch of their own
    /// (`import.rs`); the ack carries the new last seq.
    Import(Vec<Bytes>, oneshot::Sender<Result<u64, StoreError>>),
}

pub(crate) struct Writer {
    pub rx: Receiver<Msg>,
    pub tables: Tables,
    pub sled_dir: PathBuf,
    pub segments: Segments,
    /// Where the next batch is written.
    pub pos: Pos,
    pub since_checkpoint: u64,
    pub next_seq: u64,
    pub prev_hash: Hash,
    pub packer: super::chunks::IndexState,
    pub heads: HashMap<String, Option<u64>>,
    pub clock: SharedClock,
    pub publish: broadcast::Sender<Published>,
    pub tail: Arc<AtomicU64>,
    pub poisoned: Option<String>,
    pub mark: super::mark::MarkFile,
    pub health: SharedHealth,
    /// Where the last failed commit was to go and its bytes, while commits fail (for the probe).
    pub failed: Option<(Pos, usize)>,
    pub probe_interval: Duration,
    /// The last automatic checkpoint failed (health stays failing until one succeeds).
    pub checkpoint_failing: bool,
    /// Longest a commit (or a read model's sled write) stays out of a checkpoint.
    pub checkpoint_interval: Duration,
    /// When the last checkpoint was attempted.
    pub last_checkpoint: Instant,
    /// sled was written outside the log since the last checkpoint.
    pub dirty: bool,
    /// The leases fenced appends are checked against (`fence.rs`).
    pub fences: Arc<LocalFences>,
    /// Run streams known to hold their `run_ended` (or not), cached like `heads`.
    pub ended: HashMap<String, bool>,
}

impl Writer {
    /// Runs until every sender is gone, then checkpoints (when anything was written since the last
    /// checkpoint).
    pub fn run(mut self) {
        while let Some(first) = self.next_message() {
            let mut batch = Vec::new();
            let mut bytes = 0;
            let mut pending = Some(first);
            while let Some(msg) = pending.take() {
                match msg {
                    Msg::Checkpoint(ack) => {
                        self.commit_batch(std::mem::take(&mut batch));
                        let _ = ack.send(self.checkpoint());
                    }
                    Msg::Append(g, ack) => {
                        bytes += g.bytes;
                        batch.push((g, ack));
                    }
                    Msg::Dirty => self.dirty = true,
                    Msg::Import(frames, ack) => {
                        self.commit_batch(std::mem::take(&mut batch));
                        let _ = ack.send(self.import(frames));
                    }
                }
                if batch.len() >= MAX_BATCH_REQUESTS || bytes >= MAX_BATCH_BYTES {
                    break;
                }
                match self.rx.try_recv() {
                    Ok(m) => pending = Some(m),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => {}
                }
            }
            self.commit_batch(batch);
        }
        // Nothing written since the last checkpoint: it stands, and sled is left untouched (a
        // rewrite of the same checkpoint would make sled's next open write and fsync a snapshot).
        let written = self.since_checkpoint > 0 || self.dirty || self.tables.sled_dirty.load(Ordering::Acquire);
        if self.poisoned.is_none() && written {
            if let Err(e) = self.checkpoint() {
                tracing::error!("final checkpoint failed (the segments still hold everything): {e}");
            }
        }
    }

    /// The next message; while commits fail, probes whenever the queue stays idle for the probe
    /// interval; while something is not checkpointed, checkpoints once the checkpoint interval
    /// has passed. `None` once every sender is gone.
    fn next_message(&mut self) -> Option<Msg> {
        while self.poisoned.is_none() {
            let probe = self.failed.is_some().then_some(self.probe_interval);
            let due = self
                .checkpoint_pending()
                .then(|| self.checkpoint_interval.saturating_sub(self.last_checkpoint.elapsed()));
            let Some(wait) = probe.into_iter().chain(due).min() else { break };
            match self.rx.recv_timeout(wait) {
                Ok(m) => return Some(m),
                Err(RecvTimeoutError::Timeout) if self.failed.is_some() => self.probe(),
                Err(RecvTimeoutError::Timeout) => self.auto_checkpoint(),
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
        self.rx.recv().ok()
    }

    /// Something was written (to the log or to sled) since the last checkpoint, and commits work.
    fn checkpoint_pending(&self) -> bool {
        (self.since_checkpoint > 0 || self.dirty) && self.failed.is_none()
    }

    /// The automatic checkpoint. Not the commit point: batches are durable in the segments
    /// whatever happens here. A failure is reported by health and retried later.
    fn auto_checkpoint(&mut self) {
        let checkpointed = self.checkpoint();
        self.checkpoint_failing = checkpointed.is_err();
        match checkpointed {
            Ok(()) => self.health.set_ok_if_not(),
            Err(e) => self.health.set_failed(&e),
        }
    }

    /// Writes a page of zeros where the failed batch was to go (past the commit mark: nothing there
    /// was acknowledged) and fdatasyncs it; on success, commits are healthy again.
    fn probe(&mut self) {
        let Some((at, len)) = self.failed else { return };
        let zeros = vec![0u8; len.clamp(1, 4096)];
        match self.segments.commit(at, &zeros) {
            Ok(()) => {
                self.failed = None;
                if !self.checkpoint_failing {
                    self.health.set_ok();
                }
            }
            Err(e) => self.health.set_failed(&e),
        }
    }

    fn head(&mut self, stream: &str) -> Result<Option<u64>, StoreError> {
        if let Some(h) = self.heads.get(stream) {
            return Ok(*h);
        }
        let h = self.tables.stream_head(stream)?;
        self.heads.insert(stream.to_string(), h);
        Ok(h)
    }

    /// Whether run stream `stream` holds its `run_ended`: its last frame is one (nothing follows an
    /// end once this rule holds; a log written before it may show events after an end, which
    /// `od log verify` reports).
    fn run_ended(&mut self, stream: &str) -> Result<bool, StoreError> {
        if let Some(e) = self.ended.get(stream) {
            return Ok(*e);
        }
        let ended = match self.head(stream)? {
            None => false,
            Some(v) => {
                let mut last = false;
                self.tables.scan_stream(stream, v, 1, &mut |f| {
                    last =
                        od_events::FrameRef::parse(&f).is_ok_and(|f| f.kind() == od_events::EventKind::RunEnded.code());
                    false
                })?;
                last
            }
        };
        self.ended.insert(stream.to_string(), ended);
        Ok(ended)
    }

    fn commit_batch(&mut self, batch: Vec<(Group, Ack)>) {
        if batch.is_empty() {
            return;
        }
        if let Some(why) = &self.poisoned {
            return fail_all(batch, &StoreError::Poisoned(why.clone()));
        }
        // Only between batches: a batch's staged heads are not in sled yet, so clearing the cache
        // in the middle of one would let a later append in it reuse a version.
        if self.heads.len() >= HEAD_CACHE_ENTRIES {
            self.heads.clear();
        }
        if self.ended.len() >= HEAD_CACHE_ENTRIES {
            self.ended.clear();
        }
        let (start_seq, start_hash) = (self.next_seq, self.prev_hash);
        let mut frames: Vec<Bytes> = Vec::new();
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut batch_ops: HashMap<String, Vec<AppendResult>> = HashMap::new();
        let now = self.clock.now_ms();
        for (g, _) in &batch {
            outcomes.push(self.stage(g, now, &mut batch_ops, &mut frames));
        }
        if frames.is_empty() {
            return ack_all(batch, outcomes);
        }
        let mut records = Vec::with_capacity(frames.iter().map(|f| f.len() + RECORD_HEADER).sum());
        for f in &frames {
            push_record(&mut records, start_seq, self.next_seq - 1, f);
        }
        let ops = ops_of(frames.iter().map(|f| &f[..]));
        if let Err(e) = self.commit_frames((start_seq, start_hash), &records, &frames, &ops) {
            return fail_all(batch, &e);
        }
        ack_all(batch, outcomes);
        self.after_commit(frames);
    }

    /// Writes staged frames (`records`, already chained into `next_seq`/`prev_hash`) durably — the
    /// commit point — and indexes them with `ops`, then raises the tail. On failure nothing of them
    /// is acknowledged: the staged state is discarded (back to `start`; the head cache is refilled
    /// from the index rather than copied per batch to restore it) and health says why.
    pub(crate) fn commit_frames(
        &mut self,
        start: (u64, Hash),
        records: &[u8],
        frames: &[Bytes],
        ops: &[(String, Vec<AppendResult>)],
    ) -> Result<(), StoreError> {
        match self.durable_write(records, frames, ops) {
            Ok(()) => {
                // Healthy again before anyone hears of it (unless a checkpoint is still failing).
                self.failed = None;
                if !self.checkpoint_failing {
                    self.health.set_ok_if_not();
                }
            }
            Err(f) => {
                (self.next_seq, self.prev_hash) = start;
                self.heads.clear();
                self.ended.clear();
                return Err(match f {
                    Failure::Retry { error, at, len } => {
                        self.failed = Some((at, len));
                        self.health.set_failed(&error);
                        error
                    }
                    Failure::Fatal(error) => {
                        self.poisoned = Some(error.to_string());
                        self.health.set_poisoned(&error.to_string());
                        error
                    }
                });
            }
        }
        self.tail.store(self.next_seq - 1, Ordering::Release);
        Ok(())
    }

    /// After a commit's acks: publishes its frames and checkpoints when one is due.
    pub(crate) fn after_commit(&mut self, frames: Vec<Bytes>) {
        // The live ring keeps its last SUBSCRIBER_BUFFER batches until overwritten, so a big batch
        // is published as an empty wake-up: subscribers then read it from the log (mapped
        // segments), and the ring's memory stays bounded by batches × PUBLISH_INLINE_BYTES.
        let bytes: usize = frames.iter().map(|f| f.len()).sum();
        let published = if bytes <= crate::limits::PUBLISH_INLINE_BYTES { frames } else { Vec::new() };
        let _ = self.publish.send(Arc::new(published));
        // Bounded in bytes and in time: what a restart after a kill rescans.
        if self.since_checkpoint >= CHECKPOINT_BYTES || self.last_checkpoint.elapsed() >= self.checkpoint_interval {
            self.auto_checkpoint();
        }
    }

    /// Validates one group against the batch so far (op id, then every part's expected version,
    /// before anything is encoded, so a conflict on any part stages nothing) and encodes its frames.
    fn stage(
        &mut self,
        g: &Group,
        now: i64,
        batch_ops: &mut HashMap<String, Vec<AppendResult>>,
        frames: &mut Vec<Bytes>,
    ) -> Outcome {
        if let Some(op) = g.op_id() {
            if let Some(rs) = batch_ops.get(op) {
                return deduplicated(rs);
            }
            match self.tables.op_result(op) {
                Ok(Some(rs)) => return Outcome::Done(Ok(rs)),
                Ok(None) => {}
                Err(e) => return Outcome::Done(Err(e)),
            }
        }
        let fences = self.fences.clone();
        if let Err(e) = crate::store::fence::admit_local(&g.parts, &fences, |s| self.run_ended(s)) {
            return Outcome::Done(Err(e));
        }
        let mut actuals = Vec::with_capacity(g.parts.len());
        for p in &g.parts {
            let stream = p.stream.as_str();
            let actual = match self.head(stream) {
                Ok(h) => h,
                Err(e) => return Outcome::Done(Err(e)),
            };
            if !p.expected.admits(actual) {
                return Outcome::Done(Err(StoreError::Conflict {
                    stream: stream.to_string(),
                    expected: p.expected.to_string(),
                    actual,
                }));
            }
            actuals.push(actual);
        }
        let rs: Vec<AppendResult> =
            g.parts.iter().zip(actuals).map(|(p, actual)| self.encode_part(p, actual, now, frames)).collect();
        if let Some(op) = g.op_id() {
            batch_ops.insert(op.to_string(), rs.clone());
        }
        Outcome::Written(rs)
    }

    /// Encodes one checked part's frames into the chain after the stream's `actual` head.
    fn encode_part(&mut self, p: &Prepared, actual: Option<u64>, now: i64, frames: &mut Vec<Bytes>) -> AppendResult {
        let stream = p.stream.as_str();
        let first_version = actual.map_or(0, |v| v + 1);
        let first_seq = self.next_seq;
        for (i, (kind, schema, payload)) in p.payloads.iter().enumerate() {
            let h = FrameHeader {
                kind: *kind,
                schema: *schema,
                seq: self.next_seq,
                version: first_version + i as u64,
                recorded_at: now,
                stream,
                op_id: p.op_id.as_deref(),
            };
            let bytes = Frame::encode(&h, payload, &self.prev_hash);
            self.prev_hash = bytes[bytes.len() - 32..].try_into().expect("32-byte hash");
            frames.push(Bytes::from(bytes));
            self.next_seq += 1;
        }
        let last_version = first_version + p.payloads.len() as u64 - 1;
        self.heads.insert(stream.to_string(), Some(last_version));
        if crate::store::fence::is_run_stream(stream) && crate::store::fence::ends_run(p) {
            self.ended.insert(stream.to_string(), true);
        }
        AppendResult {
            stream: stream.to_string(),
            first_seq,
            last_seq: self.next_seq - 1,
            first_version,
            last_version,
            deduplicated: false,
        }
    }

    /// Segment write + fdatasync (the commit point) and the commit mark, then the index.
    fn durable_write(
        &mut self,
        records: &[u8],
        frames: &[Bytes],
        ops: &[(String, Vec<AppendResult>)],
    ) -> Result<(), Failure> {
        let mut at = self.pos;
        if !self.segments.fits(at, records.len()) {
            at = Pos { seg: at.seg + 1, off: 0 };
        }
        let retry = |error| Failure::Retry { error, at, len: records.len() };
        self.segments.commit(at, records).map_err(retry)?;
        let end = Pos { seg: at.seg, off: at.off + records.len() as u32 };
        self.mark.record(&Mark { end, next_seq: self.next_seq, last_hash: self.prev_hash }).map_err(retry)?;
        let mut off = at.off;
        let located: Vec<(Bytes, Pos)> = frames
            .iter()
            .map(|f| {
                let p = Pos { seg: at.seg, off };
                off += (RECORD_HEADER + f.len()) as u32;
                (f.clone(), p)
            })
            .collect();
        self.pos = end;
        self.tables.apply(&located, ops, &mut self.packer).map_err(Failure::Fatal)?;
        self.since_checkpoint += records.len() as u64;
        Ok(())
    }

    /// Records where recovery would resume and makes the index durable (sled flush + fdatasync).
    pub fn checkpoint(&mut self) -> Result<(), StoreError> {
        if let Some(why) = &self.poisoned {
            return Err(StoreError::Poisoned(why.clone()));
        }
        self.last_checkpoint = Instant::now();
        // Cleared before sled is flushed: a write after this is caught by the next checkpoint.
        self.tables.sled_dirty.store(false, Ordering::Release);
        let cp = Checkpoint { pos: self.pos, next_seq: self.next_seq, prev_hash: self.prev_hash };
        self.mark.sync()?;
        self.tables.note_mark()?;
        self.tables.flush_pending()?;
        self.tables.set_checkpoint(&cp)?;
        self.tables.make_durable(&self.sled_dir)?;
        self.since_checkpoint = 0;
        self.dirty = false;
        Ok(())
    }
}

/// How a commit failed.
pub(crate) enum Failure {
    /// Before the commit point: nothing of the batch is acknowledged or indexed, and the writer can
    /// retry at the same position (`at` is where the batch was to go, `len` its bytes).
    Retry { error: StoreError, at: Pos, len: usize },
    /// After it: the batch is durable but the index could not take it.
    Fatal(StoreError),
}
