//! od-migrations: frozen old event shapes and the upcasters that lift them to today's shapes.
//!
//! Changing a stored event means: a new schema number in `od-events`, the old shape frozen here in
//! its own module, one upcaster hop per file (`<kind>_<from>_to_<to>.rs`), and a golden fixture of the
//! old bytes under `fixtures/` that every test run decodes. The store runs [`upcast`] on every frame it
//! reads, so projections only ever see current shapes.

// Functions of at most 70 lines (clippy.toml); tests are exempt.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod note_recorded_1_to_2;
mod prompt_composed_1_to_2;
mod snapshot_recorded_1_to_2;
pub mod v1;

use od_events::{DecodeError, Event, EventKind};
use std::borrow::Cow;

/// Why an old payload could not be upcast.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpcastError {
    /// No hop is registered from this (kind, schema).
    #[error("no upcaster for event kind {kind} from schema {schema}")]
    NoHop { kind: &'static str, schema: u16 },
    /// The frozen old shape failed validation.
    #[error("event {kind} schema {schema} payload is malformed: {reason}")]
    Malformed { kind: &'static str, schema: u16, reason: String },
    /// The upcast payload did not decode as the current shape.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// One hop: a payload at `from` becomes a payload at `from + 1`.
type Hop = fn(&[u8]) -> Result<Vec<u8>, String>;

fn hop(kind: EventKind, from: u16) -> Option<Hop> {
    match (kind, from) {
        (EventKind::NoteRecorded, 1) => Some(note_recorded_1_to_2::hop),
        (EventKind::SnapshotRecorded, 1) => Some(snapshot_recorded_1_to_2::hop),
        (EventKind::PromptComposed, 1) => Some(prompt_composed_1_to_2::hop),
        (EventKind::NoteRecorded, _)
        | (EventKind::DaemonStarted, _)
        | (EventKind::DaemonStopped, _)
        | (EventKind::LogVerified, _)
        | (EventKind::PluginInstalled, _)
        | (EventKind::PluginUninstalled, _)
        | (EventKind::CapabilitiesGranted, _)
        | (EventKind::CapabilitiesRevoked, _)
        | (EventKind::MarketplaceAdded, _)
        | (EventKind::MarketplaceRefreshed, _)
        | (EventKind::MarketplaceTrusted, _)
        | (EventKind::MarketplaceRemoved, _)
        | (EventKind::SnapshotRecorded, _)
        | (EventKind::SnapshotMarkedStale, _)
        | (EventKind::SnapshotExpired, _)
        | (EventKind::SnapshotBodyRecorded, _)
        | (EventKind::ProjectCreated, _)
        | (EventKind::ProjectDeleted, _)
        | (EventKind::ConversationCreated, _)
        | (EventKind::RunCreated, _)
        | (EventKind::AgentStarted, _)
        | (EventKind::AgentOutput, _)
        | (EventKind::PromptComposed, _)
        | (EventKind::SignalRecorded, _)
        | (EventKind::StageStarted, _)
        | (EventKind::StageCompleted, _)
        | (EventKind::StageFailed, _)
        | (EventKind::DevloopIteration, _)
        | (EventKind::LoopBroken, _)
        | (EventKind::RunResponded, _)
        | (EventKind::ArtifactRecorded, _)
        | (EventKind::RunEnded, _)
        | (EventKind::RunForked, _)
        | (EventKind::BlobExpired, _)
        | (EventKind::BlobUnreferenced, _)
        | (EventKind::SubstrateStaged, _)
        | (EventKind::ConversationMessage, _)
        | (EventKind::FollowUpPlanned, _)
        | (EventKind::SurfaceRequested, _)
        | (EventKind::SurfaceResponded, _)
        | (EventKind::SurfaceTimedOut, _)
        | (EventKind::SurfaceRefused, _)
        | (EventKind::SurfaceInvalidated, _)
        | (EventKind::SurfaceRevoked, _)
        | (EventKind::SurfacePrefilled, _)
        | (EventKind::ToolRegistered, _)
        | (EventKind::ConnectorConnected, _)
        | (EventKind::PluginReloaded, _)
        | (EventKind::ConnectorDisconnected, _)
        | (EventKind::McpServerAuthorized, _)
        | (EventKind::McpServerDeauthorized, _)
        | (EventKind::ToolRemoved, _)
        | (EventKind::ToolsAdvertised, _)
        | (EventKind::BrowserActionRequested, _)
        | (EventKind::BrowserActionResulted, _) => None,
    }
}

/// Lifts `payload` of `kind` stored at `schema` to the kind's current schema. Current payloads
/// are returned borrowed, untouched.
pub fn upcast(kind: EventKind, schema: u16, payload: &[u8]) -> Result<Cow<'_, [u8]>, UpcastError> {
    let mut bytes = Cow::Borrowed(payload);
    let mut at = schema;
    while at < kind.current_schema() {
        let h = hop(kind, at).ok_or(UpcastError::NoHop { kind: kind.name(), schema: at })?;
        let next = h(&bytes).map_err(|reason| UpcastError::Malformed { kind: kind.name(), schema: at, reason })?;
        bytes = Cow::Owned(next);
        at += 1;
    }
    Ok(bytes)
}

/// Decodes a payload stored under any known schema of `code` into the current event shape.
pub fn decode_any(code: u16, schema: u16, payload: &[u8]) -> Result<Event, UpcastError> {
    let kind = EventKind::from_code(code).ok_or(DecodeError::UnknownKind(code))?;
    if schema > kind.current_schema() {
        return Err(
            DecodeError::SchemaMismatch { kind: kind.name(), found: schema, current: kind.current_schema() }.into()
        );
    }
    let current = upcast(kind, schema, payload)?;
    Ok(Event::decode(code, kind.current_schema(), &current)?)
}
