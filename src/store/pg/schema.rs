//! The PostgreSQL schema of the event log, versioned: each migration is applied once, in order,
//! inside one transaction holding an advisory lock, so daemons starting together never race.
//!
//! - `od_head`: one row, the log's head (`next_seq`, `last_hash`). Every append transaction locks
//!   it first (`FOR UPDATE`), so appends are serialised and commit order equals seq order: a reader
//!   that sees a head has every frame before it committed (no "high-water mark" guessing).
//! - `od_frames`: the frames, byte for byte what the embedded log stores (same encoding, same
//!   blake3 chain), by seq, with their stream and version (unique per stream).
//! - `od_streams`: each stream's last version (the expected-version check reads it under the lock).
//! - `od_ops`: op id → the append's results (idempotency that survives restarts).
//! - `od_daemons`, `od_leases` (version 2): daemons' heartbeats and which daemon executes which
//!   run (`lease.rs`). Not part of the log: they say who works, never what happened.
//! - version 3 (`fence.rs`): lease epochs (`od_lease_epochs`, a sequence: every take gets a
//!   greater one), each daemon process's nonce, and `od_ended` (the run streams holding their
//!   `run_ended`, so nothing is appended after it), filled from the frames already stored.

use tokio_postgres::Client;

/// The migrations, in order; the index + 1 is the version recorded.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE od_head (id integer PRIMARY KEY CHECK (id = 1), next_seq bigint NOT NULL, last_hash bytea NOT NULL);
     INSERT INTO od_head VALUES (1, 1, decode(repeat('00', 32), 'hex'));
     CREATE TABLE od_frames (seq bigint PRIMARY KEY, stream text NOT NULL, version bigint NOT NULL,
                             frame bytea NOT NULL, UNIQUE (stream, version));
     CREATE TABLE od_streams (stream text PRIMARY KEY, version bigint NOT NULL);
     CREATE TABLE od_ops (op_id text PRIMARY KEY, results bytea NOT NULL);",
    "CREATE TABLE od_daemons (id text PRIMARY KEY, heartbeat timestamptz NOT NULL, listen text NOT NULL DEFAULT '');
     CREATE TABLE od_leases (run_id text PRIMARY KEY, daemon_id text NOT NULL,
                             taken_at timestamptz NOT NULL DEFAULT now());",
    super::fence::MIGRATION,
];

/// The advisory lock key migrations hold (any constant other od tables do not use).
const MIGRATION_LOCK: i64 = 0x6f64_6c6f_6731;

/// Applies the migrations this database lacks; returns the schema version.
pub(super) async fn migrate(client: &mut Client) -> Result<i32, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS od_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        .await?;
    let row = tx.query_one("SELECT coalesce(max(version), 0) FROM od_schema", &[]).await?;
    let have: i32 = row.get(0);
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(have as usize) {
        tx.batch_execute(sql).await?;
        tx.execute("INSERT INTO od_schema (version) VALUES ($1)", &[&(i as i32 + 1)]).await?;
    }
    tx.commit().await?;
    Ok(MIGRATIONS.len() as i32)
}
