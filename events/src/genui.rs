//! GenUI events: a declared surface requested during a run, answered (by the user, the agent, an
//! automatic prefill, the cache of an earlier answer, or a timeout's default), timed out, refused
//! (undeclared, wrong kind, wrong trigger), invalidated (schema drift, expiry), revoked and
//! prefilled. Run-scoped ones live in `run:<id>`; revokes and prefills in `project:<id>`.

use crate::vocab::{InvalidationReason, OnTimeout, Persist, RequestedBy, RespondedBy, SurfaceKind};
use serde::{Deserialize, Serialize};

/// A surface was raised and the run waits for its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SurfaceRequested {
    pub run_id: String,
    pub project_id: String,
    pub conversation_id: String,
    pub snapshot_id: String,
    pub surface_id: String,
    pub kind: SurfaceKind,
    pub persist: Persist,
    pub stage_id: String,
    /// The surface spec from the snapshot, as compact JSON.
    pub spec_json: String,
    /// blake3 of the canonical JSON of the surface's `schema` (empty when it has none).
    pub schema_digest: String,
    pub requested_at: i64,
    /// Unix ms after which the daemon applies `on_timeout`.
    pub timeout_at: i64,
    /// `abort`, `default` or `skip`.
    pub on_timeout: OnTimeout,
    /// `pipeline` (raised at its trigger) or `agent`.
    pub requested_by: RequestedBy,
}

/// A surface got its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SurfaceResponded {
    pub run_id: String,
    pub project_id: String,
    pub conversation_id: String,
    pub snapshot_id: String,
    pub surface_id: String,
    pub kind: SurfaceKind,
    pub persist: Persist,
    pub schema_digest: String,
    /// The answer, as compact JSON.
    pub value_json: String,
    /// `user`, `agent`, `auto`, `cache` or `timeout`.
    pub responded_by: RespondedBy,
    pub responded_at: i64,
    /// Unix ms after which a remembered answer is no longer reused (0: never expires).
    pub expires_at: i64,
}

/// The daemon applied a surface's `onTimeout`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SurfaceTimedOut {
    pub run_id: String,
    pub surface_id: String,
    /// `abort`, `default` or `skip`.
    pub resolution: OnTimeout,
    pub timed_out_at: i64,
}

/// A request for a surface was refused (not declared, wrong kind, or not allowed by its trigger).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SurfaceRefused {
    pub run_id: String,
    pub surface_id: String,
    pub kind: SurfaceKind,
    pub stage_id: String,
    pub atom: String,
    pub reason: String,
}

/// Remembered answers stopped counting (schema drift or expiry found at lookup).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SurfaceInvalidated {
    pub project_id: String,
    pub conversation_id: String,
    pub run_id: String,
    pub surface_id: String,
    /// `persist` tier whose answers were invalidated.
    pub persist: Persist,
    /// `schema-drift` or `expired`.
    pub reason: InvalidationReason,
}

/// The user revoked a project's remembered answers for a surface (`od ui revoke`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SurfaceRevoked {
    pub project_id: String,
    pub surface_id: String,
    pub revoked_at: i64,
}

/// An answer was given ahead of time for a project (or one conversation of it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SurfacePrefilled {
    pub project_id: String,
    pub conversation_id: String,
    pub snapshot_id: String,
    pub surface_id: String,
    pub kind: SurfaceKind,
    pub persist: Persist,
    pub schema_digest: String,
    pub value_json: String,
    pub expires_at: i64,
    pub prefilled_at: i64,
}
