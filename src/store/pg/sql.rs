//! The PostgreSQL commit path's statements and its two round trips. Each statement is prepared
//! once per connection ([`Sql`], one pipelined round trip when the connection opens), and a commit
//! sends its statements pipelined (tokio-postgres sends requests polled together without waiting
//! for their answers), so a commit of any size costs two round trips plus the WAL flush:
//!
//! 1. [`read`]: `BEGIN`, lock the head row (`FOR UPDATE`), then read the named streams' heads, the
//!    op ids' stored results and (appends only) the run streams' ends and leases. The reads are
//!    statements of their own after the lock, so under READ COMMITTED each takes its snapshot once
//!    the lock is held: it sees every commit before this one, another daemon's included.
//! 2. [`write`]: insert the frames, move the stream heads, record run ends and op ids, move the
//!    head row, notify `od_log`, and `COMMIT` (`synchronous_commit = on`: it returns once the WAL
//!    is flushed).
//!
//! A statement that fails aborts the transaction, so the ones pipelined after it fail too and the
//! `COMMIT` rolls back: nothing of the transaction is written. [`rollback`] then ends it, so the
//! connection is ready for the next one.

use futures_util::future::{try_join, try_join3, try_join5};
use od_events::Hash;
use std::collections::HashMap;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

use super::pg_error;
use crate::store::{AppendResult, StoreError};

/// The commit path's statements, prepared on one connection.
pub(super) struct Sql {
    lock_head: Statement,
    stream_heads: Statement,
    ops: Statement,
    life: Statement,
    frames: Statement,
    move_streams: Statement,
    ended: Statement,
    record_ops: Statement,
    move_head: Statement,
}

/// A connection with the commit path's statements prepared on it.
pub(super) struct Conn {
    pub client: Client,
    pub sql: Sql,
}

impl Conn {
    /// Opens a connection (`conn::connect`) and prepares the statements on it.
    pub async fn open(target: &super::conn::Target, what: &'static str) -> Result<Conn, StoreError> {
        Conn::with(super::conn::connect(target, what).await?).await
    }

    /// Prepares the statements on `client`, in one pipelined round trip.
    pub async fn with(client: Client) -> Result<Conn, StoreError> {
        let p = |sql: &'static str| client.prepare(sql);
        let ((lock_head, stream_heads, ops), (life, frames, move_streams), (ended, record_ops, move_head)) = try_join3(
            try_join3(
                p("SELECT next_seq, last_hash FROM od_head WHERE id = 1 FOR UPDATE"),
                p("SELECT stream, version FROM od_streams WHERE stream = ANY($1)"),
                p("SELECT op_id, results FROM od_ops WHERE op_id = ANY($1)"),
            ),
            try_join3(
                p(super::fence::READ),
                p("INSERT INTO od_frames (seq, stream, version, frame)
                   SELECT * FROM UNNEST($1::bigint[], $2::text[], $3::bigint[], $4::bytea[])"),
                p("INSERT INTO od_streams (stream, version) SELECT * FROM UNNEST($1::text[], $2::bigint[])
                   ON CONFLICT (stream) DO UPDATE SET version = EXCLUDED.version"),
            ),
            try_join3(
                p("INSERT INTO od_ended SELECT * FROM UNNEST($1::text[]) ON CONFLICT DO NOTHING"),
                p("INSERT INTO od_ops (op_id, results) SELECT * FROM UNNEST($1::text[], $2::bytea[])
                   ON CONFLICT (op_id) DO UPDATE SET results = EXCLUDED.results"),
                // The notification rides on the head row's update (one statement, not two).
                p("UPDATE od_head SET next_seq = $1, last_hash = $2 WHERE id = 1
                   RETURNING pg_notify('od_log', ($1::bigint - 1)::text)"),
            ),
        )
        .await
        .map_err(pg_error("preparing the commit's statements"))?;
        let sql = Sql { lock_head, stream_heads, ops, life, frames, move_streams, ended, record_ops, move_head };
        Ok(Conn { client, sql })
    }
}

/// What a commit reads before it stages: the keys it names.
#[derive(Default)]
pub(super) struct Keys {
    /// Every stream named, sorted and distinct.
    pub streams: Vec<String>,
    /// Every op id carried (those with stored results are answered from them).
    pub ops: Vec<String>,
    /// The run streams named and the runs whose fences are carried (`fence.rs`); empty for an
    /// import, which is not fenced.
    pub runs: Vec<String>,
    pub fenced: Vec<String>,
}

/// What the first round trip read, under the head-row lock.
pub(super) struct Read {
    pub next_seq: u64,
    pub last_hash: Hash,
    /// The committed head of each named stream that has one.
    pub heads: Vec<(String, u64)>,
    /// The stored results of each named op id that has them.
    pub ops: HashMap<String, Vec<AppendResult>>,
    /// The run ends and leases (`fence::apply` reads them); empty when no run stream is named.
    pub life: Vec<Row>,
}

/// Round trip 1: begins the transaction, locks the head row and reads what `keys` name.
pub(super) async fn read(c: &Conn, keys: &Keys) -> Result<Read, StoreError> {
    let (cl, sql) = (&c.client, &c.sql);
    let life = async {
        match keys.runs.is_empty() {
            true => Ok(Vec::new()),
            false => cl.query(&sql.life, &[&keys.runs, &keys.fenced]).await,
        }
    };
    let (_, head, heads, ops, life) = try_join5(
        cl.batch_execute("BEGIN"),
        cl.query_one(&sql.lock_head, &[]),
        cl.query(&sql.stream_heads, &[&keys.streams]),
        cl.query(&sql.ops, &[&keys.ops]),
        life,
    )
    .await
    .map_err(pg_error("locking the log's head and reading the batch's streams"))?;
    let next_seq = head.get::<_, i64>(0) as u64;
    let last_hash: Hash = head
        .get::<_, Vec<u8>>(1)
        .try_into()
        .map_err(|_| StoreError::Corrupt { seq: next_seq, reason: "od_head.last_hash is not 32 bytes".into() })?;
    let heads = heads.into_iter().map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1) as u64)).collect();
    let mut stored = HashMap::with_capacity(ops.len());
    for r in ops {
        let op: String = r.get(0);
        let rs = AppendResult::decode_all(&r.get::<_, Vec<u8>>(1))
            .ok_or_else(|| StoreError::Corrupt { seq: 0, reason: format!("od_ops[{op}] does not decode") })?;
        stored.insert(op, rs);
    }
    Ok(Read { next_seq, last_hash, heads, ops: stored, life })
}

/// The rows one commit writes.
pub(super) struct Rows<'a> {
    pub seqs: &'a [i64],
    pub streams: &'a [String],
    pub versions: &'a [i64],
    pub frames: &'a [Vec<u8>],
    /// The streams the commit moved, with their new heads.
    pub moved: Vec<(String, i64)>,
    /// Op ids with their results (an op id already stored is replaced by its extended results:
    /// an import may continue a group).
    pub ops: Vec<(String, Vec<u8>)>,
    /// The new head: the next seq and the last frame's hash.
    pub next_seq: u64,
    pub last_hash: &'a Hash,
}

/// Round trip 2: writes one commit's rows — the frames, the moved stream heads, the run ends, the
/// op ids' results, the head row (which notifies followers) — and commits. Shared by appends
/// (`writer.rs`) and imports (`import.rs`). Ok means committed and durable.
pub(super) async fn write(c: &Conn, rows: Rows<'_>) -> Result<(), StoreError> {
    let (cl, sql) = (&c.client, &c.sql);
    let ended = super::fence::ended_streams(rows.streams, rows.frames);
    let (names, versions): (Vec<String>, Vec<i64>) = rows.moved.into_iter().unzip();
    let (ids, results): (Vec<String>, Vec<Vec<u8>>) = rows.ops.into_iter().unzip();
    let (next, hash) = (rows.next_seq as i64, rows.last_hash.to_vec());
    let ended_rows = async {
        match ended.is_empty() {
            true => Ok(0),
            false => cl.execute(&sql.ended, &[&ended]).await,
        }
    };
    let op_rows = async {
        match ids.is_empty() {
            true => Ok(0),
            false => cl.execute(&sql.record_ops, &[&ids, &results]).await,
        }
    };
    let (frame_params, head_params): ([&(dyn ToSql + Sync); 4], [&(dyn ToSql + Sync); 2]) =
        ([&rows.seqs, &rows.streams, &rows.versions, &rows.frames], [&next, &hash]);
    let stream_params: [&(dyn ToSql + Sync); 2] = [&names, &versions];
    let writes = try_join5(
        cl.execute(&sql.frames, &frame_params),
        cl.execute(&sql.move_streams, &stream_params),
        ended_rows,
        op_rows,
        cl.query_one(&sql.move_head, &head_params),
    );
    // The commit point: with synchronous_commit = on, COMMIT returns once the WAL is flushed. Had
    // any write failed, the transaction is aborted and this COMMIT only ends it (nothing written).
    try_join(writes, cl.batch_execute("COMMIT")).await.map_err(pg_error("writing and committing"))?;
    Ok(())
}

/// Ends a transaction that failed or wrote nothing (a no-op when none is open).
pub(super) async fn rollback(c: &Conn) -> Result<(), StoreError> {
    c.client.batch_execute("ROLLBACK").await.map_err(pg_error("ending a transaction"))
}
