//! The error of project, conversation, snapshot, run and file commands. Each variant maps to one
//! stable code (the HTTP envelope's `code`, the CLI's exit code).

use super::apply::ApplyError;
use super::plugins::PluginError;
use crate::store::StoreError;

/// Why a project/run/snapshot/file command failed. Nothing is written when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum WorkError {
    #[error("project {0} does not exist")]
    ProjectNotFound(String),
    #[error("conversation {0} does not exist")]
    ConversationNotFound(String),
    #[error("run {0} does not exist")]
    RunNotFound(String),
    #[error("snapshot {0} does not exist")]
    SnapshotNotFound(String),
    /// The snapshot was marked stale (its plugin changed); re-apply the plugin to get a fresh one.
    #[error("snapshot {snapshot_id} of {plugin_id}@{snapshot_version} is stale: the plugin changed since it was applied; re-apply it (or use the project's pinned snapshot)")]
    SnapshotStale { snapshot_id: String, plugin_id: String, snapshot_version: String },
    /// An id that must be new is taken.
    #[error("{what} {id} already exists")]
    Exists { what: &'static str, id: String },
    /// A request field is malformed.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// The run already ended (or has not got to the state the request needs).
    #[error("run {run_id} is {status}: {message}")]
    RunState { run_id: String, status: od_events::vocab::RunStatus, message: String },
    /// A project file path leaves the project directory.
    #[error("path {0:?} escapes the project directory")]
    PathEscapes(String),
    /// A project file does not exist.
    #[error("file {0} does not exist in the project")]
    FileNotFound(String),
    /// A GenUI answer does not satisfy the surface's schema; nothing recorded.
    #[error("the answer to {surface_id} is invalid: {}", violations.join("; "))]
    InvalidAnswer { surface_id: String, violations: Vec<String> },
    /// A GenUI request the snapshot does not allow (undeclared id, other kind, wrong trigger).
    #[error("surface {surface_id} was refused: {reason}")]
    SurfaceRefused { surface_id: String, reason: String },
    /// No request for this surface is waiting in the run.
    #[error("no request for surface {surface_id} is waiting in run {run_id}")]
    SurfaceNotPending { run_id: String, surface_id: String },
    /// A prefix names several ids of its kind.
    #[error("{kind} id prefix {prefix:?} is ambiguous: {}{}", candidates.join(", "), if *more { ", …" } else { "" })]
    AmbiguousId { kind: String, prefix: String, candidates: Vec<String>, more: bool },
    /// The caller may not make od run a program or reach outside a project (`gate.rs`).
    #[error("{field}: only a caller with the exec right may {what} — the daemon's token (the od CLI sends it) or a daemon run with OD_ALLOW_HTTP_EXEC=1")]
    ExecForbidden { field: String, what: String },
    /// A request names an agent this od cannot run (yet); nothing written.
    #[error("{field}: od does not run the agent {id:?}; this od runs {}", runnable.join(", "))]
    UnknownAgent { field: String, id: String, runnable: Vec<String> },
    /// A catalog agent a run may not use as asked (unavailable, a model or permission mode it does
    /// not take); nothing written.
    #[error("{field}: {message}")]
    AgentRefused { field: String, message: String },
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error(transparent)]
    Plugin(#[from] PluginError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{during}: {message}")]
    Io { during: &'static str, message: String },
}

impl WorkError {
    /// A field-level validation error.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        WorkError::Invalid { field: field.to_string(), message: message.into() }
    }

    /// An I/O failure while doing `during`.
    pub fn io(during: &'static str, e: impl std::fmt::Display) -> Self {
        WorkError::Io { during, message: e.to_string() }
    }

    /// Stable code for the error envelope.
    pub fn code(&self) -> &'static str {
        match self {
            WorkError::ProjectNotFound(_) => "project-not-found",
            WorkError::ConversationNotFound(_) => "conversation-not-found",
            WorkError::RunNotFound(_) => "run-not-found",
            WorkError::SnapshotNotFound(_) => "snapshot-not-found",
            WorkError::SnapshotStale { .. } => "snapshot-stale",
            WorkError::Exists { .. } => "already-exists",
            WorkError::Invalid { .. } => "invalid-input",
            WorkError::RunState { .. } => "run-state",
            WorkError::PathEscapes(_) => "path-escapes-project",
            WorkError::FileNotFound(_) => "file-not-found",
            WorkError::InvalidAnswer { .. } => "invalid-answer",
            WorkError::SurfaceRefused { .. } => "genui-surface-refused",
            WorkError::SurfaceNotPending { .. } => "genui-surface-not-pending",
            WorkError::AmbiguousId { .. } => "ambiguous-id",
            WorkError::ExecForbidden { .. } => "exec-forbidden",
            WorkError::UnknownAgent { .. } => "unknown-agent",
            WorkError::AgentRefused { .. } => "agent-refused",
            WorkError::Apply(_) | WorkError::Plugin(_) => "plugin",
            WorkError::Store(e) => e.code(),
            WorkError::Io { .. } => "io",
        }
    }
}

/// An agent option the agent-config checks (`src/agents/`) refused: a malformed one is `invalid`,
/// one the agent cannot honour `agent-refused` (both 422, naming the field).
impl From<crate::agents::AgentConfigError> for WorkError {
    fn from(e: crate::agents::AgentConfigError) -> Self {
        match e {
            crate::agents::AgentConfigError::Invalid { field, message } => WorkError::Invalid { field, message },
            crate::agents::AgentConfigError::Refused { field, message } => WorkError::AgentRefused { field, message },
        }
    }
}
