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
