//! System-area events: facts about the daemon itself and free-form notes.
//!
//! `NoteRecorded` is an annotation an operator or a tool attaches to any stream (`od log note`);
//! it is also the workload of the log's benches and crash tests. Its schema 1 shape (text only) is
//! frozen in `od-migrations`, which upcasts it to schema 2 (text + tags) on read.

use serde::{Deserialize, Serialize};

/// The daemon opened the log and started serving.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonStarted {
    /// od's package version.
    pub version: String,
    /// Process id of the daemon.
    pub pid: u32,
    /// Address the HTTP API listens on (`host:port`).
    pub listen: String,
}

/// The daemon shut down gracefully.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonStopped {
    /// Why it stopped (`signal`, `api`, …).
    pub reason: String,
}

/// A free-text note attached to a stream. Schema 2 (schema 1 had no tags).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoteRecorded {
    pub text: String,
    #[serde(default)]
    pub tags: Vec<String>,
}

/// The daemon's background pass walked the log from seq 1 and checked every frame (hash, chain,
/// seq, payload) and the index, up to `through_seq` (the tail when the pass began). Opening the
/// log only verifies its tail; this is how the rest is checked while the daemon runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogVerified {
    /// The last seq the pass set out to check.
    pub through_seq: u64,
    /// Frames that verified, from seq 1 (equals `through_seq` when nothing was wrong).
    pub verified: u64,
    /// Hex blake3 hash of the last verified frame (the chain's head as far as it verified).
    pub head_hash: String,
    /// Unix ms at which the pass began (it is throttled, so it may take a while).
    pub started_at: i64,
    /// The first frame that failed, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_bad: Option<BadFrameFound>,
}

/// A frame the background pass found damaged (or missing), and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BadFrameFound {
    /// Its seq (0 when the damage is in the index and names no frame).
    pub seq: u64,
    pub reason: String,
}
