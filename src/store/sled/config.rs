//! Options for opening the embedded log: its directory, segment size, clock, file layer, how much
//! opening verifies, and the writer's timings.

use std::path::PathBuf;
use std::sync::Arc;

use super::files::{RealFiles, SharedFiles};
use crate::clock::{SharedClock, SystemClock};
use crate::limits::*;

/// Options for opening a [`SledLog`].
#[derive(Clone)]
pub struct StoreConfig {
    pub dir: PathBuf,
    /// Size of each segment file.
    pub segment_bytes: u64,
    pub clock: SharedClock,
    /// Published batches kept for live subscribers (see [`SUBSCRIBER_BUFFER`]).
    pub subscriber_buffer: usize,
    /// How much of the log opening verifies.
    pub verify_on_open: VerifyOnOpen,
    /// Where the log's own writes go (segments, commit mark): the real file system, or a layer that
    /// injects faults in tests.
    pub files: SharedFiles,
    /// While commits fail, how long the writer waits idle before probing whether writes work again
    /// (see [`STORE_PROBE_INTERVAL_MS`]).
    pub probe_interval: std::time::Duration,
    /// Longest a commit stays out of a checkpoint (see [`CHECKPOINT_INTERVAL_MS`]).
    pub checkpoint_interval: std::time::Duration,
}

/// How much of the log [`SledLog::open`] verifies before it accepts writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyOnOpen {
    /// Every frame: hash, chain, position, payload, and the whole index (linear in the log; what
    /// `od log verify` does).
    Full,
    /// The tail only, whatever the log's size: the checkpoint is the durable "verified through
    /// seq S, head hash H" mark (every frame before it was verified when it was written, or by the
    /// recovery that indexed it); opening checks that frame S still hashes to H, verifies and
    /// re-indexes the frames after S (hash, chain, whole batches, the commit mark), and checks the
    /// index for holes from S on. Damage to older frames surfaces as a `Corrupt` error when they
    /// are read, in the daemon's background pass (`/api/health` degraded) and in `od log verify`.
    /// What the daemon and the CLI use.
    FromCheckpoint,
}

impl StoreConfig {
    /// Defaults for `dir`: the system clock, [`DEFAULT_SEGMENT_BYTES`] segments.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            clock: Arc::new(SystemClock),
            subscriber_buffer: SUBSCRIBER_BUFFER,
            verify_on_open: VerifyOnOpen::Full,
            files: Arc::new(RealFiles),
            probe_interval: std::time::Duration::from_millis(STORE_PROBE_INTERVAL_MS),
            checkpoint_interval: std::time::Duration::from_millis(CHECKPOINT_INTERVAL_MS),
        }
    }
}
