//! Snapshot-area events: the immutable `AppliedPluginSnapshot` recorded when a project or run is
//! created with a plugin, its later marking as stale (never a rewrite), and its expiry. Stream:
//! `snapshot:<id>`.

use serde::{Deserialize, Serialize};

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
    /// The whole `AppliedPluginSnapshot` as compact JSON: everything needed to recompose prompts.
    pub snapshot_json: String,
    /// Unix ms.
    pub applied_at: i64,
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
    pub reason: String,
}
