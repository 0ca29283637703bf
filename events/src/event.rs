//! The event enum, its kind codes and schema numbers, the envelope, and payload (de)serialisation.
//!
//! rkyv is the storage contract (payload bytes inside a frame); serde JSON is the wire contract.
//! Every kind has a stable `u16` code and a current schema number; payloads stored under an older
//! schema are upcast by `od-migrations` before they reach [`Event::decode`].

use crate::connectors::{ConnectorConnected, ConnectorDisconnected, McpServerAuthorized, McpServerDeauthorized};
use crate::genui::{
    SurfaceInvalidated, SurfacePrefilled, SurfaceRefused, SurfaceRequested, SurfaceResponded, SurfaceRevoked,
    SurfaceTimedOut,
};
use crate::marketplaces::{MarketplaceAdded, MarketplaceRefreshed, MarketplaceRemoved, MarketplaceTrusted};
use crate::plugins::{CapabilitiesGranted, CapabilitiesRevoked, PluginInstalled, PluginReloaded, PluginUninstalled};
use crate::projects::{ConversationCreated, ProjectCreated, ProjectDeleted};
use crate::runs::{
    AgentOutput, AgentStarted, ArtifactRecorded, BlobExpired, BlobUnreferenced, ConversationMessage, DevloopIteration,
    FollowUpPlanned, LoopBroken, PromptComposed, RunCreated, RunEnded, RunForked, RunResponded, SignalRecorded,
    StageCompleted, StageFailed, StageStarted, SubstrateStaged,
};
use crate::snapshots::{SnapshotBodyRecorded, SnapshotExpired, SnapshotMarkedStale, SnapshotRecorded};
use crate::system::{DaemonStarted, DaemonStopped, LogVerified, NoteRecorded};
use crate::tools::{BrowserActionRequested, BrowserActionResulted, ToolRegistered, ToolRemoved, ToolsAdvertised};
use rkyv::rancor;
use serde::{Deserialize, Serialize};

/// Why a payload could not be turned into an [`Event`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The kind code is not one this build knows.
    #[error("unknown event kind code {0}")]
    UnknownKind(u16),
    /// The payload's schema is not the current one (upcast it first) or is newer than this build.
    #[error("event kind {kind} has schema {found}; this build reads schema {current}")]
    SchemaMismatch { kind: &'static str, found: u16, current: u16 },
    /// The rkyv bytes failed validation.
    #[error("event {kind} payload is malformed: {reason}")]
    Malformed { kind: &'static str, reason: String },
}

macro_rules! kinds {
    ($( $variant:ident = $code:literal, $name:literal, schema $schema:literal; )*) => {
        /// Every event kind, with its stable storage code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        #[repr(u16)]
        pub enum EventKind { $( $variant = $code, )* }

        impl EventKind {
            /// All kinds, in code order.
            pub const ALL: &'static [EventKind] = &[$( EventKind::$variant, )*];

            /// The kind with this storage code.
            pub fn from_code(code: u16) -> Option<Self> {
                match code { $( $code => Some(EventKind::$variant), )* _ => None }
            }
            /// The stable storage code.
            pub fn code(self) -> u16 { self as u16 }
            /// The wire name (snake_case), used as the ND-JSON/SSE event name.
            pub fn name(self) -> &'static str {
                match self { $( EventKind::$variant => $name, )* }
            }
            /// The schema number new events of this kind are written with.
            pub fn current_schema(self) -> u16 {
                match self { $( EventKind::$variant => $schema, )* }
            }
        }

        /// An event: a fact in the past tense.
        // Events are built once and moved, never stored in bulk in memory as this enum (frames are),
        // so the size of the largest variant costs nothing worth a Box per event.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(tag = "kind", content = "data", rename_all = "snake_case")]
        pub enum Event { $( $variant($variant), )* }

        impl Event {
            /// This event's kind.
            pub fn kind(&self) -> EventKind {
                match self { $( Event::$variant(_) => EventKind::$variant, )* }
            }
            /// The rkyv payload bytes (current schema).
            pub fn encode_payload(&self) -> Vec<u8> {
                match self {
                    $( Event::$variant(e) => rkyv::to_bytes::<rancor::Error>(e)
                        .expect("serialising plain data cannot fail").into_vec(), )*
                }
            }
            /// Decodes a current-schema payload.
            pub fn decode(code: u16, schema: u16, payload: &[u8]) -> Result<Self, DecodeError> {
                let kind = EventKind::from_code(code).ok_or(DecodeError::UnknownKind(code))?;
                if schema != kind.current_schema() {
                    return Err(DecodeError::SchemaMismatch {
                        kind: kind.name(), found: schema, current: kind.current_schema(),
                    });
                }
                let bad = |e: rancor::Error| DecodeError::Malformed { kind: kind.name(), reason: e.to_string() };
                Ok(match kind {
                    $( EventKind::$variant => Event::$variant(
                        rkyv::from_bytes::<$variant, rancor::Error>(payload).map_err(bad)?), )*
                })
            }
        }
    };
}

kinds! {
    DaemonStarted = 1, "daemon_started", schema 1;
    DaemonStopped = 2, "daemon_stopped", schema 1;
    NoteRecorded = 3, "note_recorded", schema 2;
    LogVerified = 4, "log_verified", schema 1;
    PluginInstalled = 10, "plugin_installed", schema 1;
    PluginUninstalled = 11, "plugin_uninstalled", schema 1;
    CapabilitiesGranted = 12, "capabilities_granted", schema 1;
    CapabilitiesRevoked = 13, "capabilities_revoked", schema 1;
    PluginReloaded = 14, "plugin_reloaded", schema 1;
    MarketplaceAdded = 20, "marketplace_added", schema 1;
    MarketplaceRefreshed = 21, "marketplace_refreshed", schema 1;
    MarketplaceTrusted = 22, "marketplace_trusted", schema 1;
    MarketplaceRemoved = 23, "marketplace_removed", schema 1;
    SnapshotRecorded = 30, "snapshot_recorded", schema 2;
    SnapshotMarkedStale = 31, "snapshot_marked_stale", schema 1;
    SnapshotExpired = 32, "snapshot_expired", schema 1;
    SnapshotBodyRecorded = 33, "snapshot_body_recorded", schema 1;
    ProjectCreated = 40, "project_created", schema 1;
    ProjectDeleted = 41, "project_deleted", schema 1;
    ConversationCreated = 42, "conversation_created", schema 1;
    RunCreated = 50, "run_created", schema 1;
    AgentStarted = 51, "agent_started", schema 1;
    AgentOutput = 52, "agent_output", schema 1;
    PromptComposed = 53, "prompt_composed", schema 2;
    SignalRecorded = 54, "signal_recorded", schema 1;
    StageStarted = 55, "stage_started", schema 1;
    StageCompleted = 56, "stage_completed", schema 1;
    StageFailed = 57, "stage_failed", schema 1;
    DevloopIteration = 58, "devloop_iteration", schema 1;
    LoopBroken = 59, "loop_broken", schema 1;
    RunResponded = 60, "run_responded", schema 1;
    ArtifactRecorded = 61, "artifact_recorded", schema 1;
    RunEnded = 62, "run_ended", schema 1;
    RunForked = 63, "run_forked", schema 1;
    BlobExpired = 64, "blob_expired", schema 1;
    BlobUnreferenced = 65, "blob_unreferenced", schema 1;
    SubstrateStaged = 66, "substrate_staged", schema 1;
    ConversationMessage = 67, "conversation_message", schema 1;
    FollowUpPlanned = 68, "follow_up_planned", schema 1;
    SurfaceRequested = 70, "surface_requested", schema 1;
    SurfaceResponded = 71, "surface_responded", schema 1;
    SurfaceTimedOut = 72, "surface_timed_out", schema 1;
    SurfaceRefused = 73, "surface_refused", schema 1;
    SurfaceInvalidated = 74, "surface_invalidated", schema 1;
    SurfaceRevoked = 75, "surface_revoked", schema 1;
    SurfacePrefilled = 76, "surface_prefilled", schema 1;
    ToolRegistered = 80, "tool_registered", schema 1;
    ToolRemoved = 81, "tool_removed", schema 1;
    ToolsAdvertised = 82, "tools_advertised", schema 1;
    BrowserActionRequested = 83, "browser_action_requested", schema 1;
    BrowserActionResulted = 84, "browser_action_resulted", schema 1;
    ConnectorConnected = 90, "connector_connected", schema 1;
    ConnectorDisconnected = 91, "connector_disconnected", schema 1;
    McpServerAuthorized = 92, "mcp_server_authorized", schema 1;
    McpServerDeauthorized = 93, "mcp_server_deauthorized", schema 1;
}

/// Where and when an event was recorded: everything in a frame but the payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    /// Global sequence number (from 1, no gaps).
    pub seq: u64,
    /// The stream the event belongs to.
    pub stream: String,
    /// Version within the stream (from 0, no gaps).
    pub version: u64,
    /// Unix milliseconds at which the writer recorded it.
    pub recorded_at: i64,
    /// The client-supplied idempotency key of the append that wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op_id: Option<String>,
    /// The schema the event was stored with (before any upcast).
    pub stored_schema: u16,
}

/// A stored event: envelope plus the event in its current shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    #[serde(flatten)]
    pub envelope: Envelope,
    pub event: Event,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_roundtrip_and_codes() {
        let e = Event::NoteRecorded(NoteRecorded { text: "hi".into(), tags: vec!["a".into()] });
        let p = e.encode_payload();
        assert_eq!(Event::decode(3, 2, &p).unwrap(), e);
        assert!(matches!(Event::decode(3, 1, &p), Err(DecodeError::SchemaMismatch { .. })));
        assert_eq!(Event::decode(999, 1, &p), Err(DecodeError::UnknownKind(999)));
        for k in EventKind::ALL {
            assert_eq!(EventKind::from_code(k.code()), Some(*k));
        }
    }

    #[test]
    fn garbage_payload_is_an_error_not_a_panic() {
        for n in 0..64 {
            let junk: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            let _ = Event::decode(3, 2, &junk);
            let _ = Event::decode(1, 1, &junk);
        }
    }

    #[test]
    fn wire_shape_is_stable() {
        let e = Event::NoteRecorded(NoteRecorded { text: "x".into(), tags: vec![] });
        assert_eq!(serde_json::to_string(&e).unwrap(), r#"{"kind":"note_recorded","data":{"text":"x","tags":[]}}"#);
    }
}
