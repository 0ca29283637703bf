//! Snapshot-area events: the immutable `AppliedPluginSnapshot` recorded when a project or run is
//! created with a plugin, its later marking as stale (never a rewrite), and its expiry — stream
//! `snapshot:<id>` — and the snapshot bodies those reference, each stored once under its digest —
//! stream `snapshot-body:<digest>`.

use crate::vocab::ExpiryReason;
use serde::{Deserialize, Serialize};

/// Where a snapshot's body (the whole `AppliedPluginSnapshot` but its id and `appliedAt`) is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum SnapshotBody {
    /// In the event itself, as compact JSON: how schema-1 snapshots recorded it (the whole
    /// snapshot, id and `appliedAt` included).
    Inline { json: String },
    /// Stored once in `snapshot-body:<digest>` (a [`SnapshotBodyRecorded`]), shared by every
    /// snapshot with the same body; `digest` is the blake3 hex of its JSON.
    Stored { digest: String },
}

/// An applied plugin was frozen into an immutable snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotRecorded {
    pub snapshot_id: String,
    pub plugin_id: String,
    pub plugin_version: String,
    pub manifest_source_digest: String,
    /// The installed plugin's `sourceDigest` at apply time (doctor compares it to mark staleness).
    pub plugin_source_digest: String,
    /// The project the snapshot was recorded for (empty when none).
    pub project_id: String,
    /// The run the snapshot was recorded for (empty when recorded at project creation).
    pub run_id: String,
    /// Everything needed to recompose prompts: by reference since schema 2, inline before.
    pub body: SnapshotBody,
    /// Unix ms.
    pub applied_at: i64,
}

/// A snapshot body, stored once under its digest (stream `snapshot-body:<digest>`, one event):
/// recorded in the same atomic append as the first `snapshot_recorded` that uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotBodyRecorded {
    /// blake3 hex of `body_json`.
    pub digest: String,
    /// The `AppliedPluginSnapshot` without `snapshotId` and `appliedAt`, as compact JSON.
    pub body_json: String,
}

/// `od plugin doctor` found the plugin changed since the snapshot; the snapshot itself is untouched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotMarkedStale {
    pub snapshot_id: String,
    pub plugin_id: String,
    /// The version and source digest the installed plugin has now.
    pub current_version: String,
    pub current_source_digest: String,
}

/// An unreferenced snapshot passed its TTL (or was pruned) and is retired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotExpired {
    pub snapshot_id: String,
    /// `ttl` (unreferenced past `OD_SNAPSHOT_UNREFERENCED_TTL_DAYS`) or `prune`.
    pub reason: ExpiryReason,
}
