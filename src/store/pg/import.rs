//! The PostgreSQL backend's import of frames that already exist (`EventLog::import`, for `od log
//! copy`): one transaction per import on a connection of its own, under the head-row lock, so it
//! serialises with every daemon's appends. It reads the head and, in the same round trip
//! (`sql.rs`), the heads of the streams and the op ids the frames carry, checks the frames against them (`store/import.rs`,
//! shared with the embedded log), inserts them verbatim, moves the stream heads, records (or
//! extends) the op ids' results (all but op ids holding NUL, see [`indexable`]), moves `od_head`, notifies `od_log` (so every daemon's publisher,
//! this one's included, hands the frames to live subscribers) and commits with
//! `synchronous_commit = on` before it returns.

use super::sql::{self, Conn, Keys, Rows};
use super::PgLog;
use crate::store::import::{precheck, stage};
use crate::store::{AppendResult, RawFrame, StoreError};
use bytes::Bytes;
use od_events::{FrameRef, Hash};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The import's own connection, opened on first use and reopened when the server dropped it.
pub(super) type Importer = Arc<tokio::sync::Mutex<Option<Conn>>>;

impl PgLog {
    pub(super) fn import_frames(&self, frames: Vec<RawFrame>) -> Result<u64, StoreError> {
        precheck(&frames)?;
        let frames: Vec<Bytes> = frames.into_iter().map(|f| f.0).collect();
        let (conn, target) = (self.importer.clone(), self.target.clone());
        let last = self.call(async move {
            let mut guard = conn.lock().await;
            if guard.as_ref().is_none_or(|c| c.client.is_closed()) {
                *guard = Some(Conn::open(&target, "connecting to PostgreSQL (import)").await?);
            }
            let conn = guard.as_ref().expect("connected");
            let result = commit(conn, &frames).await;
            if result.is_err() && sql::rollback(conn).await.is_err() {
                // A connection that cannot end its transaction is not used again.
                *guard = None;
            }
            result
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

/// One import: one transaction of two round trips (`sql.rs`), the frames checked in between.
async fn commit(conn: &Conn, frames: &[Bytes]) -> Result<u64, StoreError> {
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
    let read = sql::read(conn, &Keys { streams: names, ops, ..Keys::default() }).await?;
    let heads: HashMap<String, u64> = read.heads.into_iter().collect();
    let stored: HashMap<String, Vec<AppendResult>> = read.ops;
    let prev: Hash = read.last_hash;
    let staged =
        stage(frames, read.next_seq, &prev, &mut |s| Ok(heads.get(s).copied()), &mut |op| Ok(stored.get(op).cloned()))?;
    let rows = Rows {
        seqs: &seqs,
        streams: &streams,
        versions: &versions,
        frames: &bytes,
        moved: staged.moved.into_iter().map(|(s, v)| (s, v as i64)).collect(),
        ops: staged
            .ops
            .iter()
            .filter(|(k, _)| indexable(k))
            .map(|(k, rs)| (k.clone(), AppendResult::encode_all(rs)))
            .collect(),
        next_seq: staged.last_seq + 1,
        last_hash: &staged.last_hash,
    };
    // Committed (the WAL flushed, synchronous_commit = on) once this returns.
    sql::write(conn, rows).await?;
    Ok(staged.last_seq)
}
