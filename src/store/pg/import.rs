//! The PostgreSQL backend's import of frames that already exist (`EventLog::import`, for `od log
//! copy`): one transaction per import on a connection of its own, under the head-row lock, so it
//! serialises with every daemon's appends. It reads the head and, in two queries, the heads of the
//! streams and the op ids the frames carry, checks the frames against them (`store/import.rs`,
//! shared with the embedded log), inserts them verbatim, moves the stream heads, records (or
//! extends) the op ids' results (all but op ids holding NUL, see [`indexable`]), moves `od_head`, notifies `od_log` (so every daemon's publisher,
//! this one's included, hands the frames to live subscribers) and commits with
//! `synchronous_commit = on` before it returns.

use bytes::Bytes;
use od_events::{FrameRef, Hash};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio_postgres::Client;

use super::writer::{write_rows, Rows};
use super::{pg_error, PgLog};
use crate::store::import::{precheck, stage};
use crate::store::{AppendResult, RawFrame, StoreError};

/// The import's own connection, opened on first use and reopened when the server dropped it.
pub(super) type Importer = Arc<tokio::sync::Mutex<Option<Client>>>;

impl PgLog {
    pub(super) fn import_frames(&self, frames: Vec<RawFrame>) -> Result<u64, StoreError> {
        precheck(&frames)?;
        let frames: Vec<Bytes> = frames.into_iter().map(|f| f.0).collect();
        let (conn, target) = (self.importer.clone(), self.target.clone());
        let last = self.call(async move {
            let mut guard = conn.lock().await;
            if guard.as_ref().is_none_or(Client::is_closed) {
                *guard = Some(super::conn::connect(&target, "connecting to PostgreSQL (import)").await?);
            }
            commit(guard.as_mut().expect("connected"), &frames).await
        })?;
        self.tail.fetch_max(last, Ordering::AcqRel);
        Ok(last)
    }
}

/// Whether `od_ops` can hold op id `op`. A NUL, which PostgreSQL's `text` refuses, reached the
/// embedded log before the identifier rule (`store/ident.rs`) refused it at every edge: its frames
/// are copied verbatim (the chain is intact), and only the op-id record is left out — no request
/// can carry that op id again, so no retry ever needs it.
fn indexable(op: &str) -> bool {
    !op.contains('\0')
}

async fn commit(client: &mut Client, frames: &[Bytes]) -> Result<u64, StoreError> {
    let tx = client.transaction().await.map_err(pg_error("beginning an import"))?;
    let head = tx
        .query_one("SELECT next_seq, last_hash FROM od_head WHERE id = 1 FOR UPDATE", &[])
        .await
        .map_err(pg_error("locking the log's head"))?;
    let next_seq = head.get::<_, i64>(0) as u64;
    let prev: Hash = head
        .get::<_, Vec<u8>>(1)
        .try_into()
        .map_err(|_| StoreError::Corrupt { seq: next_seq, reason: "od_head.last_hash is not 32 bytes".into() })?;
    let (mut seqs, mut streams, mut versions, mut bytes) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut ops: Vec<String> = Vec::new();
    for f in frames {
        let v = FrameRef::parse(f).expect("prechecked");
        seqs.push(v.seq() as i64);
        streams.push(v.stream().expect("prechecked").to_string());
        versions.push(v.version() as i64);
        bytes.push(f.to_vec());
        if let Some(op) = v.op_id().expect("prechecked").filter(|op| indexable(op)) {
            if ops.last().map(String::as_str) != Some(op) {
                ops.push(op.to_string());
            }
        }
    }
    let mut names = streams.clone();
    names.sort();
    names.dedup();
    let mut heads: HashMap<String, u64> = HashMap::new();
    for r in tx
        .query("SELECT stream, version FROM od_streams WHERE stream = ANY($1)", &[&names])
        .await
        .map_err(pg_error("reading stream heads"))?
    {
        heads.insert(r.get(0), r.get::<_, i64>(1) as u64);
    }
    let mut stored: HashMap<String, Vec<AppendResult>> = HashMap::new();
    for r in tx
        .query("SELECT op_id, results FROM od_ops WHERE op_id = ANY($1)", &[&ops])
        .await
        .map_err(pg_error("reading op ids"))?
    {
        let op: String = r.get(0);
        let rs = AppendResult::decode_all(&r.get::<_, Vec<u8>>(1))
            .ok_or_else(|| StoreError::Corrupt { seq: 0, reason: format!("od_ops[{op}] does not decode") })?;
        stored.insert(op, rs);
    }
    let staged =
        stage(frames, next_seq, &prev, &mut |s| Ok(heads.get(s).copied()), &mut |op| Ok(stored.get(op).cloned()))?;
    let moved = staged.moved.into_iter().map(|(s, v)| (s, v as i64)).collect();
    let rows = Rows { seqs: &seqs, streams: &streams, versions: &versions, frames: &bytes, moved };
    let ops = staged.ops.iter().filter(|(k, _)| indexable(k)).map(|(k, rs)| (k, rs));
    write_rows(&tx, rows, ops, staged.last_seq + 1, &staged.last_hash).await?;
    // The commit point: with synchronous_commit = on, it returns once the WAL is flushed.
    tx.commit().await.map_err(pg_error("committing an import"))?;
    Ok(staged.last_seq)
}
