//! The store's error type.

/// Everything that can go wrong talking to the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The stream's version was not what the append expected; nothing was written.
    #[error("stream {stream}: expected {expected}, but the stream is at {}", fmt_version(*.actual))]
    Conflict { stream: String, expected: String, actual: Option<u64> },
    /// Input exceeded a bound from `limits.rs`; nothing was written.
    #[error("{limit} exceeded: {value} > {max}")]
    LimitExceeded { limit: &'static str, value: u64, max: u64 },
    /// Input was malformed (empty append, bad stream id); nothing was written.
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    /// Stored data failed verification; the store refuses to guess.
    #[error("log corrupted at seq {seq}: {reason}")]
    Corrupt { seq: u64, reason: String },
    /// A filesystem or sled operation failed.
    #[error("storage I/O failed during {during}: {message}")]
    Io { during: &'static str, message: String },
    /// The disk (or a quota) is full; nothing of the failed write was acknowledged. The writer
    /// retries later writes at the same place, so appends succeed again once space is freed.
    #[error("storage full during {during}: {message}")]
    Full { during: &'static str, message: String },
    /// A failure the writer cannot recover from without a restart (e.g. the index could not be
    /// updated after a durable commit); it stops accepting writes until reopened.
    #[error("the store stopped accepting writes after an earlier durable-write failure (restart od): {0}")]
    Poisoned(String),
    /// The store was closed.
    #[error("the store is closed")]
    Closed,
    /// The setting that chooses the log's backend is malformed or unsupported; nothing was opened.
    #[error("{setting}: {reason}")]
    Config { setting: &'static str, reason: String },
    /// The log's database could not be reached or refused the connection (named by the setting it
    /// came from); nothing was written.
    #[error("the log's database ({location}, from {setting}) could not be reached: {message}")]
    Unreachable { setting: &'static str, location: String, message: String },
    /// The data directory is in use by another process.
    #[error("the data directory {0} is locked by another od process")]
    Locked(String),
    /// An executor's append was fenced off: its (daemon, epoch) no longer holds the run's lease
    /// (another daemon took it while this one stalled or was cut off). Nothing was written; the
    /// executor must stop and record nothing more.
    #[error("run {run_id}: lease lost (this daemon's epoch {epoch} no longer holds it); nothing was written")]
    LeaseLost { run_id: String, epoch: u64 },
    /// The append named a run stream that already holds its `run_ended`: a run's lifecycle is
    /// monotonic, nothing follows its end. Nothing was written.
    #[error("{stream} has ended: nothing is appended to a run after its run_ended")]
    RunEnded { stream: String },
    /// This daemon's id is held by another live daemon (another process started with the same
    /// `daemon-id`, e.g. a copied data dir): it refuses to start and touches no run.
    #[error("daemon id {id} is held by a live daemon (listening on {listen:?}, started with another nonce); refusing to start. Start with --new-daemon-id to mint a new id for this data dir")]
    DaemonIdInUse { id: String, listen: String },
}

fn fmt_version(v: Option<u64>) -> String {
    v.map_or_else(|| "no stream".to_string(), |v| format!("version {v}"))
}

impl StoreError {
    pub(crate) fn io(during: &'static str, e: impl std::fmt::Display) -> Self {
        StoreError::Io { during, message: e.to_string() }
    }

    /// An I/O error of the file layer: `Full` for ENOSPC/EDQUOT, `Io` otherwise.
    pub(crate) fn from_io(during: &'static str, e: std::io::Error) -> Self {
        match is_full(&e) {
            true => StoreError::Full { during, message: e.to_string() },
            false => StoreError::Io { during, message: e.to_string() },
        }
    }

    /// A stable machine-readable code for the error envelope.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Conflict { .. } => "expected-version-conflict",
            StoreError::LimitExceeded { .. } => "limit-exceeded",
            StoreError::Invalid { .. } => "invalid-input",
            StoreError::Corrupt { .. } => "log-corrupted",
            StoreError::Io { .. } => "storage-io",
            StoreError::Full { .. } => "storage-full",
            StoreError::Poisoned(_) => "store-poisoned",
            StoreError::Closed => "store-closed",
            StoreError::Locked(_) => "data-dir-locked",
            StoreError::Config { .. } => "store-config",
            StoreError::Unreachable { .. } => "store-unreachable",
            StoreError::LeaseLost { .. } => "lease-lost",
            StoreError::RunEnded { .. } => "run-ended",
            StoreError::DaemonIdInUse { .. } => "daemon-id-in-use",
        }
    }
}

/// Whether an I/O error means the disk (or a quota) is full.
pub(crate) fn is_full(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}
