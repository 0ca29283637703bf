//! The PostgreSQL backend's commit path: queued appends are taken in batches (up to
//! `MAX_BATCH_REQUESTS` or `MAX_BATCH_BYTES`) and each batch is ONE transaction that locks the head
//! row, checks every group's op id and expected versions against what is committed (and what the
//! batch staged before it), encodes the frames into the blake3 chain exactly as the embedded log
//! does, inserts them, moves the stream heads and the head row, notifies `od_log`, and commits
//! (`synchronous_commit = on`). Only then is anyone acked. A failed transaction writes nothing;
//! its requests are then committed one per transaction, so a request the server refuses fails
//! alone and never its neighbours (a lost connection fails them all).

use od_events::{Frame, FrameHeader, Hash};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, Notify};
use tokio_postgres::Client;

use crate::clock::SharedClock;
use crate::limits::{MAX_BATCH_BYTES, MAX_BATCH_REQUESTS};
use crate::store::group::{ack_all, deduplicated, fail_all, Ack, Group, Outcome, Prepared};
use crate::store::{AppendResult, StoreError};

pub(super) struct PgWriter {
    pub target: super::conn::Target,
    pub client: Client,
    pub rx: mpsc::Receiver<(Group, Ack)>,
    pub clock: SharedClock,
    /// Wakes the tailer, which publishes committed frames in seq order.
    pub committed: Arc<Notify>,
    /// The highest durable seq this daemon knows: raised after each commit, before the acks.
    pub tail: Arc<std::sync::atomic::AtomicU64>,
    /// What `/api/health` reports: failing while commits fail, ok after the next one succeeds.
    pub health: crate::store::health::SharedHealth,
}

fn pg_error(during: &'static str) -> impl Fn(tokio_postgres::Error) -> StoreError {
    move |e| StoreError::io(during, super::describe(&e))
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
                Err(_) if batch.len() > 1 && !self.client.is_closed() => self.commit_each(batch).await,
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
            if let (Err(e), true) = (&result, self.client.is_closed()) {
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

    /// One transaction for the batch; the outcomes and the last seq committed.
    async fn commit(&mut self, batch: &[(Group, Ack)]) -> Result<(Vec<Outcome>, u64), StoreError> {
        if self.client.is_closed() {
            // The server went away since the last batch: a new connection (or this batch fails).
            self.client = super::conn::connect(&self.target, "reconnecting to PostgreSQL").await?;
        }
        let now = self.clock.now_ms();
        let tx = self.client.transaction().await.map_err(pg_error("beginning an append"))?;
        let head = tx
            .query_one("SELECT next_seq, last_hash FROM od_head WHERE id = 1 FOR UPDATE", &[])
            .await
            .map_err(pg_error("locking the log's head"))?;
        let mut next_seq = head.get::<_, i64>(0) as u64;
        let mut prev: Hash = head
            .get::<_, Vec<u8>>(1)
            .try_into()
            .map_err(|_| StoreError::Corrupt { seq: next_seq, reason: "od_head.last_hash is not 32 bytes".into() })?;
        let mut st = Staged::default();
        prefetch(&tx, batch, &mut st).await?;
        super::fence::read(&tx, batch, &mut st.life).await?;
        let mut outcomes = Vec::with_capacity(batch.len());
        for (g, _) in batch {
            outcomes.push(stage(g, now, &mut next_seq, &mut prev, &mut st)?);
        }
        if st.frames.is_empty() {
            tx.rollback().await.map_err(pg_error("ending a read-only batch"))?;
            return Ok((outcomes, 0));
        }
        let moved = st.moved.iter().map(|(s, v)| (s.clone(), *v as i64)).collect();
        let rows = Rows { seqs: &st.seqs, streams: &st.streams, versions: &st.versions, frames: &st.frames, moved };
        write_rows(&tx, rows, st.ops.iter(), next_seq, &prev).await?;
        // The commit point: with synchronous_commit = on, it returns once the WAL is flushed.
        tx.commit().await.map_err(pg_error("committing an append"))?;
        Ok((outcomes, next_seq - 1))
    }
}

/// Reads, in two queries for the whole batch, the committed head of every stream the batch names
/// and the stored results of every op id it carries (round trips, not rows, bound a batch's cost).
async fn prefetch(
    tx: &tokio_postgres::Transaction<'_>,
    batch: &[(Group, Ack)],
    st: &mut Staged,
) -> Result<(), StoreError> {
    let mut streams: Vec<String> =
        batch.iter().flat_map(|(g, _)| g.parts.iter().map(|p| p.stream.as_str().to_string())).collect();
    streams.sort();
    streams.dedup();
    for s in &streams {
        st.heads.insert(s.clone(), None);
    }
    let rows = tx
        .query("SELECT stream, version FROM od_streams WHERE stream = ANY($1)", &[&streams])
        .await
        .map_err(pg_error("reading stream heads"))?;
    for r in rows {
        st.heads.insert(r.get::<_, String>(0), Some(r.get::<_, i64>(1) as u64));
    }
    let ops: Vec<String> = batch.iter().filter_map(|(g, _)| g.parts[0].op_id.clone()).collect();
    if !ops.is_empty() {
        let rows = tx
            .query("SELECT op_id, results FROM od_ops WHERE op_id = ANY($1)", &[&ops])
            .await
            .map_err(pg_error("reading op ids"))?;
        for r in rows {
            let op: String = r.get(0);
            let bytes: Vec<u8> = r.get(1);
            let rs = AppendResult::decode_all(&bytes)
                .ok_or_else(|| StoreError::Corrupt { seq: 0, reason: format!("od_ops[{op}] does not decode") })?;
            st.stored_ops.insert(op, rs);
        }
    }
    Ok(())
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

/// The rows one commit writes.
pub(super) struct Rows<'a> {
    pub seqs: &'a [i64],
    pub streams: &'a [String],
    pub versions: &'a [i64],
    pub frames: &'a [Vec<u8>],
    /// The streams the commit moved, with their new heads.
    pub moved: Vec<(String, i64)>,
}

/// Writes one commit's rows inside `tx` — the frames, the moved stream heads, the op ids' results
/// (an op id already stored is replaced by its extended results: an import may continue a group),
/// the head row (`next_seq`, `last_hash`) — and notifies followers. The caller commits. Shared by
/// appends (`PgWriter`) and imports (`import.rs`).
pub(super) async fn write_rows<'a>(
    tx: &tokio_postgres::Transaction<'_>,
    rows: Rows<'_>,
    ops: impl Iterator<Item = (&'a String, &'a Vec<AppendResult>)>,
    next_seq: u64,
    last_hash: &Hash,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO od_frames (seq, stream, version, frame) SELECT * FROM UNNEST($1::bigint[], $2::text[], $3::bigint[], $4::bytea[])",
        &[&rows.seqs, &rows.streams, &rows.versions, &rows.frames],
    )
    .await
    .map_err(pg_error("inserting frames"))?;
    let (names, versions): (Vec<String>, Vec<i64>) = rows.moved.into_iter().unzip();
    tx.execute(
        "INSERT INTO od_streams (stream, version) SELECT * FROM UNNEST($1::text[], $2::bigint[])
         ON CONFLICT (stream) DO UPDATE SET version = EXCLUDED.version",
        &[&names, &versions],
    )
    .await
    .map_err(pg_error("moving stream heads"))?;
    let ended = super::fence::ended_streams(rows.streams, rows.frames);
    if !ended.is_empty() {
        tx.execute("INSERT INTO od_ended SELECT * FROM UNNEST($1::text[]) ON CONFLICT DO NOTHING", &[&ended])
            .await
            .map_err(pg_error("recording run ends"))?;
    }
    let (ids, results): (Vec<String>, Vec<Vec<u8>>) =
        ops.map(|(k, rs)| (k.clone(), AppendResult::encode_all(rs))).unzip();
    if !ids.is_empty() {
        tx.execute(
            "INSERT INTO od_ops (op_id, results) SELECT * FROM UNNEST($1::text[], $2::bytea[])
             ON CONFLICT (op_id) DO UPDATE SET results = EXCLUDED.results",
            &[&ids, &results],
        )
        .await
        .map_err(pg_error("recording op ids"))?;
    }
    tx.execute(
        "UPDATE od_head SET next_seq = $1, last_hash = $2 WHERE id = 1",
        &[&(next_seq as i64), &last_hash.to_vec()],
    )
    .await
    .map_err(pg_error("moving the log's head"))?;
    tx.execute("SELECT pg_notify('od_log', $1)", &[&(next_seq - 1).to_string()])
        .await
        .map_err(pg_error("notifying followers"))?;
    Ok(())
}
