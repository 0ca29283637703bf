//! The PostgreSQL backend's group commit: queued appends are taken in batches (up to
//! `MAX_BATCH_REQUESTS` or `MAX_BATCH_BYTES`) and each batch is ONE transaction of two pipelined
//! round trips (`sql.rs`): lock the head row and read every stream head, op id, run end and lease
//! the batch names; then check each group in order against what is committed and what the batch
//! staged before it (op id, fence, run end, every part's expected version), encode the admitted
//! groups' frames into the blake3 chain exactly as the embedded log does, write them all, move the
//! heads, notify `od_log` and commit (`synchronous_commit = on`). Only then is anyone acked.
//!
//! A group that fails a check (a conflict, a lost lease, an ended run) is answered with its error
//! and stages nothing, so it never takes its neighbours down: every check is made before the first
//! write, against the reads of round trip 1 and the batch's own staged state. A transaction the
//! server refuses writes nothing; its requests are then committed one per transaction, so a
//! request the server refuses fails alone (a lost connection fails them all).

use od_events::{Frame, FrameHeader, Hash};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, Notify};

use crate::clock::SharedClock;
use crate::limits::{MAX_BATCH_BYTES, MAX_BATCH_REQUESTS};
use crate::store::group::{ack_all, deduplicated, fail_all, Ack, Group, Outcome, Prepared};
use crate::store::{AppendResult, StoreError};

use super::sql::{self, Conn, Keys, Rows};

pub(super) struct PgWriter {
    pub target: super::conn::Target,
    /// The writer's connection, None after it failed in a way that leaves its state unknown.
    pub conn: Option<Conn>,
    pub rx: mpsc::Receiver<(Group, Ack)>,
    pub clock: SharedClock,
    /// Wakes the tailer, which publishes committed frames in seq order.
    pub committed: Arc<Notify>,
    /// The highest durable seq this daemon knows: raised after each commit, before the acks.
    pub tail: Arc<std::sync::atomic::AtomicU64>,
    /// What `/api/health` reports: failing while commits fail, ok after the next one succeeds.
    pub health: crate::store::health::SharedHealth,
}

/// What one batch stages before it commits.
#[derive(Default)]
struct Staged {
    seqs: Vec<i64>,
    streams: Vec<String>,
    versions: Vec<i64>,
    frames: Vec<Vec<u8>>,
    /// Every stream the batch names: its head, committed or as staged so far.
    heads: HashMap<String, Option<u64>>,
    /// Op ids this batch wrote (a repeat in the same batch is deduplicated against them).
    ops: HashMap<String, Vec<AppendResult>>,
    /// The streams this batch appends to, with their new heads (only these are written back).
    moved: HashMap<String, u64>,
    /// Op ids already committed, with their stored results.
    stored_ops: HashMap<String, Vec<AppendResult>>,
    /// Run streams ended and fences holding their leases (`fence.rs`).
    life: crate::store::fence::Lifecycle,
}

impl PgWriter {
    pub async fn run(mut self) {
        while let Some(first) = self.rx.recv().await {
            let mut bytes = first.0.bytes;
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH_REQUESTS && bytes < MAX_BATCH_BYTES {
                match self.rx.try_recv() {
                    Ok(m) => {
                        bytes += m.0.bytes;
                        batch.push(m);
                    }
                    Err(_) => break,
                }
            }
            let result = self.commit(&batch).await;
            match result {
                // The server refused something one request carried (the connection is fine): the
                // batch is retried one request per transaction, so only that request fails.
                Err(_) if batch.len() > 1 && self.connected() => self.commit_each(batch).await,
                result => self.settle(batch, result),
            }
        }
    }

    /// Commits each request of a failed batch alone. Once the connection itself is gone, the
    /// rest fail with that error rather than each reconnecting.
    async fn commit_each(&mut self, batch: Vec<(Group, Ack)>) {
        let mut lost: Option<StoreError> = None;
        for one in batch {
            let one = vec![one];
            let result = match &lost {
                Some(e) => Err(e.clone()),
                None => self.commit(&one).await,
            };
            if let (Err(e), false) = (&result, self.connected()) {
                lost.get_or_insert_with(|| e.clone());
            }
            self.settle(one, result);
        }
    }

    /// Acks a batch with its outcome: each request's own on a commit, the error to all on a failure.
    fn settle(&self, batch: Vec<(Group, Ack)>, result: Result<(Vec<Outcome>, u64), StoreError>) {
        match result {
            Ok((outcomes, last)) => {
                self.tail.fetch_max(last, std::sync::atomic::Ordering::AcqRel);
                self.health.set_ok_if_not();
                ack_all(batch, outcomes);
                self.committed.notify_one();
            }
            Err(e) => {
                self.health.set_failed(&e);
                fail_all(batch, &e);
            }
        }
    }

    /// Whether the writer's connection is up.
    fn connected(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| !c.client.is_closed())
    }

    /// One transaction for the batch; the outcomes and the last seq committed. A transaction
    /// that failed is rolled back; a connection that cannot say so is dropped (the next batch
    /// reconnects).
    async fn commit(&mut self, batch: &[(Group, Ack)]) -> Result<(Vec<Outcome>, u64), StoreError> {
        if !self.connected() {
            // The server went away since the last batch: a new connection (or this batch fails).
            self.conn = None;
            self.conn = Some(Conn::open(&self.target, "reconnecting to PostgreSQL").await?);
        }
        let conn = self.conn.as_ref().expect("connected");
        let result = transact(conn, batch, self.clock.now_ms()).await;
        if result.is_err() && sql::rollback(conn).await.is_err() {
            self.conn = None;
        }
        result
    }
}

/// The batch's transaction on `conn`: read, stage every group, write and commit (or, when no
/// group was admitted, end the transaction having written nothing).
async fn transact(conn: &Conn, batch: &[(Group, Ack)], now: i64) -> Result<(Vec<Outcome>, u64), StoreError> {
    let read = sql::read(conn, &keys(batch)).await?;
    let (mut next_seq, mut prev) = (read.next_seq, read.last_hash);
    let mut st = Staged { stored_ops: read.ops, ..Staged::default() };
    for (s, v) in read.heads {
        st.heads.insert(s, Some(v));
    }
    super::fence::apply(read.life, &mut st.life);
    let mut outcomes = Vec::with_capacity(batch.len());
    for (g, _) in batch {
        outcomes.push(stage(g, now, &mut next_seq, &mut prev, &mut st)?);
    }
    if st.frames.is_empty() {
        sql::rollback(conn).await?;
        return Ok((outcomes, 0));
    }
    let rows = Rows {
        seqs: &st.seqs,
        streams: &st.streams,
        versions: &st.versions,
        frames: &st.frames,
        moved: st.moved.iter().map(|(s, v)| (s.clone(), *v as i64)).collect(),
        ops: st.ops.iter().map(|(k, rs)| (k.clone(), AppendResult::encode_all(rs))).collect(),
        next_seq,
        last_hash: &prev,
    };
    sql::write(conn, rows).await?;
    Ok((outcomes, next_seq - 1))
}

/// What the batch's transaction reads: every stream it names, the op ids it carries, its run
/// streams and fences.
fn keys(batch: &[(Group, Ack)]) -> Keys {
    let mut streams: Vec<String> =
        batch.iter().flat_map(|(g, _)| g.parts.iter().map(|p| p.stream.as_str().to_string())).collect();
    streams.sort();
    streams.dedup();
    let ops = batch.iter().filter_map(|(g, _)| g.op_id().map(str::to_string)).collect();
    let mut k = Keys { streams, ops, ..Keys::default() };
    super::fence::keys(batch, &mut k);
    k
}

/// Checks one group (op id, then every part's expected version, so a conflict on any part stages
/// nothing) against what is committed and what the batch staged before it, and encodes its frames
/// after `next_seq` / `prev`.
fn stage(g: &Group, now: i64, next_seq: &mut u64, prev: &mut Hash, st: &mut Staged) -> Result<Outcome, StoreError> {
    let op = g.op_id();
    if let Some(op) = op {
        if let Some(rs) = st.ops.get(op) {
            return Ok(deduplicated(rs));
        }
        if let Some(rs) = st.stored_ops.get(op) {
            return Ok(Outcome::Done(Ok(rs.clone())));
        }
    }
    if let Err(e) = st.life.admit(&g.parts) {
        return Ok(Outcome::Done(Err(e)));
    }
    let mut actuals = Vec::with_capacity(g.parts.len());
    for p in &g.parts {
        let stream = p.stream.as_str();
        let actual = st.heads.get(stream).copied().flatten();
        if !p.expected.admits(actual) {
            return Ok(Outcome::Done(Err(StoreError::Conflict {
                stream: stream.to_string(),
                expected: p.expected.to_string(),
                actual,
            })));
        }
        actuals.push(actual);
    }
    let rs: Vec<AppendResult> =
        g.parts.iter().zip(actuals).map(|(p, actual)| encode_part(p, actual, now, next_seq, prev, st)).collect();
    if let Some(op) = op {
        st.ops.insert(op.to_string(), rs.clone());
    }
    st.life.staged(&g.parts);
    Ok(Outcome::Written(rs))
}

fn encode_part(
    p: &Prepared,
    actual: Option<u64>,
    now: i64,
    next_seq: &mut u64,
    prev: &mut Hash,
    st: &mut Staged,
) -> AppendResult {
    let stream = p.stream.as_str();
    let first_version = actual.map_or(0, |v| v + 1);
    let first_seq = *next_seq;
    for (i, (kind, schema, payload)) in p.payloads.iter().enumerate() {
        let version = first_version + i as u64;
        let h = FrameHeader {
            kind: *kind,
            schema: *schema,
            seq: *next_seq,
            version,
            recorded_at: now,
            stream,
            op_id: p.op_id.as_deref(),
        };
        let bytes = Frame::encode(&h, payload, prev);
        *prev = bytes[bytes.len() - 32..].try_into().expect("32-byte hash");
        st.seqs.push(*next_seq as i64);
        st.streams.push(stream.to_string());
        st.versions.push(version as i64);
        st.frames.push(bytes);
        *next_seq += 1;
    }
    let last_version = first_version + p.payloads.len() as u64 - 1;
    st.heads.insert(stream.to_string(), Some(last_version));
    st.moved.insert(stream.to_string(), last_version);
    AppendResult {
        stream: stream.to_string(),
        first_seq,
        last_seq: *next_seq - 1,
        first_version,
        last_version,
        deduplicated: false,
    }
}
