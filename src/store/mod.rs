//! The event log: one append-only, hash-chained, durable log with global order and per-stream
//! versions.
//!
//! This module is the seam: [`EventLog`] is the contract every backend keeps, and the types beside
//! it name no backend — appends and their results (`types.rs`), frames as bytes ([`RawFrame`],
//! [`Published`]), the group-commit machinery both writers share (`group.rs`: a checked append, a
//! group, its outcome and ack), the checks before a commit (`prepare.rs`, `ident.rs`, `fence.rs`,
//! `lease.rs`), an import's checks (`import.rs`), health and verification reports (`health.rs`,
//! `verify.rs`), tails (`subscribe.rs`) and errors. The backends sit beside each other:
//! [`SledLog`] in `sled/` (segment files fdatasynced per group commit, indexed by sled) and
//! [`PgLog`] in `pg/` (PostgreSQL, shared by several daemons); `spec.rs` chooses one.

mod error;
mod fence;
mod group;
mod health;
mod ident;
mod import;
pub mod lease;
mod pg;
mod prepare;
mod sled;
mod spec;
mod subscribe;
mod types;
mod verify;

/// Bytes the embedded log adds to each frame in a segment (its record header): what an import's
/// byte bound ([`MAX_IMPORT_BYTES`](crate::limits::MAX_IMPORT_BYTES)) counts besides the frames.
pub use self::sled::RECORD_BYTES;
pub use self::sled::{
    verify_dir, FileLayer, LayerFile, RealFiles, SavedPass, SharedFiles, SledLog, StoreConfig, VerifyOnOpen, VerifyPass,
};
pub use error::StoreError;
pub use health::{LogCheck, StoreHealth, StoreState};
pub use ident::{check_ident, IdentError};
pub use lease::{Fence, LocalFences, LocalLeases, RunLeases};
pub use pg::{PgLeases, PgLog};
pub use spec::{Opened, StoreSpec};
pub use subscribe::Subscription;
pub use types::{decode_frame, Append, AppendResult, Expected, Published, RawFrame};
pub use verify::{BadFrame, VerifyReport};

use std::path::Path;
use std::sync::Arc;
use tokio::sync::{broadcast, oneshot};

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
    /// and the group's bytes to [`MAX_APPEND_BYTES`](crate::limits::MAX_APPEND_BYTES)); then all
    /// parts are written in one group commit, or none is (a conflict on any part writes nothing,
    /// for any part). Parts name distinct streams (at most
    /// [`MAX_APPEND_PARTS`](crate::limits::MAX_APPEND_PARTS)). The group's op id is its first
    /// part's: later parts carry none or the same, every frame of the group is stored with it, and
    /// a retry with it returns the original results, one per part (a single `submit` retried with
    /// it gets the part on its own stream). The receiver resolves to one result per part, in the
    /// order given.
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
    /// subscribers get the frames. At most [`MAX_IMPORT_FRAMES`](crate::limits::MAX_IMPORT_FRAMES)
    /// frames and [`MAX_IMPORT_BYTES`](crate::limits::MAX_IMPORT_BYTES) bytes per call. Returns
    /// the new last seq. Blocking: do not call on an async runtime thread.
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
