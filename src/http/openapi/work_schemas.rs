//! Schemas of the work routes' wire shapes (projects, snapshots, runs, GenUI surfaces, tools),
//! for the document only, re-exported by `schemas.rs`: field names exactly as the wire has them.

#![allow(dead_code)]

use serde_json::Value;
use utoipa::ToSchema;

use super::schemas::Object;

/// A project.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct Project {
    pub id: String,
    pub name: String,
    /// Its folder on disk.
    pub dir: String,
    pub applied_plugin_snapshot_id: Option<String>,
    pub metadata: Object,
    pub imported_from: Option<String>,
    pub created_at: i64,
    /// The first conversations, oldest first.
    pub conversations: Vec<Value>,
    pub run_count: u64,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct ProjectCreated {
    pub project: Project,
    pub conversation_id: String,
    pub applied_plugin_snapshot_id: Option<String>,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct ProjectList {
    pub projects: Vec<Project>,
    pub next_cursor: Option<String>,
}

#[derive(ToSchema)]
pub struct ProjectShow {
    /// The project's folder (also `project.dir`).
    pub cwd: String,
    pub project: Project,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct ProjectDeleted {
    pub ok: bool,
    pub project_id: String,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct Conversations {
    pub project_id: String,
    pub conversations: Vec<Value>,
    pub next_cursor: Option<String>,
}

/// A conversation's messages, oldest first (`{messageId, runId, role: user|agent, text, at}` each),
/// and the follow-up plans of its runs.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct ConversationMessages {
    pub project_id: String,
    pub conversation_id: String,
    pub messages: Vec<Object>,
    pub follow_ups: Vec<Object>,
    /// True when the conversation's oldest runs were left out (`MAX_CONVERSATION_RUNS_LISTED`).
    pub truncated: bool,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct NewConversation {
    pub project_id: String,
    pub conversation_id: String,
}

/// A project's files by path (`{path, size, …}` each).
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct ProjectFiles {
    pub project_id: String,
    pub files: Vec<Object>,
    pub next_cursor: Option<String>,
}

/// A file written or deleted.
#[derive(ToSchema)]
pub struct FileChanged {
    pub ok: bool,
    pub file: Value,
}

/// A snapshot's bookkeeping.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct SnapshotInfo {
    pub snapshot_id: String,
    pub plugin_id: String,
    pub plugin_version: String,
    pub manifest_source_digest: String,
    pub applied_at: i64,
    /// `fresh`, `stale` or `expired`.
    pub status: String,
    pub referenced_by: Vec<String>,
    pub ref_count: u64,
    pub unreferenced_since: Option<i64>,
}

/// Snapshots, oldest first (`projectId` on a project's list).
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct SnapshotList {
    pub snapshots: Vec<SnapshotInfo>,
    pub next_cursor: Option<String>,
    #[schema(required = false)]
    pub project_id: String,
}

/// One snapshot: the resolved plugin, inputs and digests, immutable.
#[derive(ToSchema)]
pub struct SnapshotShow {
    pub snapshot: Object,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct SnapshotRecorded {
    pub snapshot_id: String,
    pub snapshot: Object,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct Pruned {
    pub ok: bool,
    /// The snapshots expired.
    pub expired: Vec<Value>,
    pub ttl_days: u64,
}

/// A shell line (run with `sh -c`) or an argv.
#[derive(ToSchema)]
#[schema(no_recursion)]
pub enum AgentCommand {
    Line(String),
    Argv(Vec<String>),
}

/// A run.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct Run {
    pub id: String,
    pub run_id: String,
    pub project_id: String,
    pub conversation_id: String,
    pub client_request_id: Option<String>,
    pub applied_plugin_snapshot_id: String,
    pub plugin_id: String,
    pub agent: String,
    /// `queued`, `running`, `awaiting-input`, `succeeded`, `failed` or `canceled`.
    pub status: String,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub stage_id: Option<String>,
    pub iteration: u64,
    pub reason: Option<String>,
    pub failure_category: Option<String>,
    pub artifact_count: u64,
    /// The run stream's last version (an SSE `id:`).
    pub last_event_id: u64,
    /// Why the run has its agent: `request`, `OD_AGENT`, `OD_AGENT_CMD` or `default` (nothing
    /// configured). Shown by `GET /api/runs/{id}` only.
    pub agent_source: Option<String>,
    /// Set when the dry-run agent was chosen only because nothing is configured.
    pub agent_note: Option<String>,
    /// A catalog agent's recorded options (`GET /api/runs/{id}` only): its permission mode
    /// (`accept-edits`, `bypass`, `ask`), model and reasoning effort as the run asked for them.
    pub permission_mode: Option<String>,
    pub model: Option<String>,
    pub reasoning: Option<String>,
}

/// `POST /api/runs` (202).
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct RunStarted {
    pub run_id: String,
    pub conversation_id: String,
    pub assistant_message_id: Option<String>,
    pub client_request_id: Option<String>,
    /// A repeated `clientRequestId` returned the existing run.
    pub reused: bool,
    pub resumed: bool,
    pub applied_plugin_snapshot_id: String,
    pub plugin_id: String,
    pub project_id: String,
    pub status: String,
    /// The agent the run uses: `exec`, `dry-run` or a catalog agent's id (`claude`, …).
    pub agent: String,
    /// Why: `request`, `OD_AGENT`, `OD_AGENT_CMD` or `default` (nothing configured).
    pub agent_source: String,
    /// Set when the dry-run agent was chosen only because nothing is configured.
    pub agent_note: Option<String>,
    /// A follow-up's plan (`follow_up_planned`: `{stages, rule, buildsOn, …}`); null for a
    /// conversation's first run.
    pub follow_up: Option<Object>,
}

/// An agent this daemon can run (upstream's `AgentInfo` names where they fit).
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct AgentInfo {
    /// `exec`, `dry-run` or a catalog agent's id (what `agent` / `agentId` of `POST /api/runs` take).
    pub id: String,
    pub name: String,
    /// The binary's name (empty for od's own agents and the ACP entry).
    pub bin: String,
    /// Whether a run naming it can start now (`exec` needs `OD_AGENT_CMD` or a request's command).
    pub available: bool,
    /// The agent a run that names none uses.
    pub default: bool,
    /// `exec`: the daemon's `OD_AGENT_CMD` (inline `NAME=value` words show the name only).
    pub command: Option<String>,
    /// `exec`: the output protocols `agentProtocol` may name; a catalog agent: its stream protocol.
    pub protocols: Vec<String>,
    /// Why it is not available.
    pub reason: Option<String>,
    /// Catalog agents: `ok`, `missing` or `unknown`.
    pub auth_status: Option<String>,
    pub auth_message: Option<String>,
    /// The resolved binary.
    pub path: Option<String>,
    /// What its `--version` said (parsed).
    pub version: Option<String>,
    /// Why it is unavailable or only partly usable, each with the fix.
    pub diagnostics: Option<Vec<AgentDiagnostic>>,
    pub models: Option<Vec<AgentModelOption>>,
    /// `live` (the CLI listed them; a run's `model` must be one) or `fallback` (the catalog's).
    pub models_source: Option<String>,
    pub reasoning_options: Option<Vec<AgentModelOption>>,
    pub install_url: Option<String>,
    pub docs_url: Option<String>,
    /// The permission modes a run may ask of it (`bypass`, `accept-edits`, `ask`).
    pub permission_modes: Option<Vec<String>>,
    /// `accept-edits`.
    pub default_permission_mode: Option<String>,
    /// Where its catalog entry came from: `built-in` or a `<data-dir>/agents/*.json` file.
    pub source: Option<String>,
}

/// A model or reasoning effort an agent offers (upstream's `AgentModelOption`).
#[derive(ToSchema)]
pub struct AgentModelOption {
    pub id: String,
    pub label: String,
}

/// A typed detection diagnostic.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct AgentDiagnostic {
    /// `not-installed`, `not-executable`, `version-failed`, `auth-missing`, `probe-timeout` or
    /// `protocol-unsupported`.
    pub reason: String,
    /// `error` (unavailable) or `warning`.
    pub severity: String,
    pub message: String,
    /// What to do about it.
    pub fix: String,
    /// `not-installed`: the folders searched.
    #[schema(required = false)]
    pub searched_dirs: Vec<String>,
}

/// `GET /api/agents`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct AgentList {
    pub agents: Vec<AgentInfo>,
    /// The default agent's id.
    pub default: String,
    /// Why it is the default: `OD_AGENT`, `OD_AGENT_CMD` or `default` (nothing configured).
    pub default_source: String,
    /// Set when the default is dry-run only because nothing is configured.
    pub note: Option<String>,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct RunList {
    pub runs: Vec<Run>,
    pub next_cursor: Option<String>,
}

#[derive(ToSchema)]
pub struct RunShow {
    pub run: Run,
}

/// `{ok, run}` after a change.
#[derive(ToSchema)]
pub struct RunOk {
    pub ok: bool,
    pub run: Run,
}

/// `{ok, run, alreadyEnded?}` after a cancel: `alreadyEnded` when the run had ended before it
/// (nothing changed; the run is as it ended).
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct RunCanceled {
    pub ok: bool,
    pub run: Run,
    pub already_ended: Option<bool>,
}

/// The agent's output lines: `{id, channel, stageId, text}` each.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct RunLogs {
    pub run_id: String,
    pub entries: Vec<Object>,
    pub next_cursor: Option<String>,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct RunDevloop {
    pub run_id: String,
    pub iterations: Vec<Object>,
    pub next_cursor: Option<String>,
}

/// A GenUI surface row: one ask and its answer.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct SurfaceRow {
    pub id: Value,
    pub project_id: String,
    pub conversation_id: Value,
    pub run_id: Value,
    pub plugin_snapshot_id: Value,
    pub surface_id: String,
    pub kind: String,
    pub persist: Value,
    pub schema_digest: Value,
    pub value: Value,
    pub status: String,
    pub responded_by: Value,
    pub requested_at: Value,
    pub responded_at: Value,
    pub expires_at: Option<i64>,
    pub timeout_at: Option<i64>,
    pub stage_id: Value,
}

/// Surface rows, oldest first (`runId` or `projectId` names whose).
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct SurfaceList {
    pub surfaces: Vec<SurfaceRow>,
    pub next_cursor: Option<String>,
    #[schema(required = false)]
    pub run_id: String,
    #[schema(required = false)]
    pub project_id: String,
}

/// The latest row of a surface (null before it was asked) and its spec.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct SurfaceShow {
    pub run_id: String,
    pub surface: Option<SurfaceRow>,
    pub spec: Object,
}

#[derive(ToSchema)]
pub struct SurfaceAnswered {
    pub ok: bool,
    pub surface: SurfaceRow,
}

#[derive(ToSchema)]
pub struct SurfaceRequested {
    pub ok: bool,
    /// A remembered answer was reused.
    pub cached: bool,
    pub surface: Option<SurfaceRow>,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct Revoked {
    pub ok: bool,
    pub project_id: String,
    pub surface_id: String,
    /// Remembered answers forgotten.
    pub invalidated: u64,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct PrefillDone {
    pub ok: bool,
    pub project_id: String,
    pub surfaces: Vec<SurfaceRow>,
}

/// `AgentToolSearchResult`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct ToolSearchResult {
    pub tools: Vec<Object>,
    pub total: u64,
    pub truncated: bool,
    #[schema(required = false)]
    pub next_cursor: Option<String>,
}

#[derive(ToSchema)]
pub struct ToolRemoved {
    pub ok: bool,
    pub name: String,
    pub source: String,
}

/// A tool call's outcome (a browser tool answers its BrowserActionResult instead).
#[derive(ToSchema)]
pub struct ToolCalled {
    #[schema(required = false)]
    pub ok: bool,
    #[schema(required = false)]
    pub tool: String,
    #[schema(required = false)]
    pub result: Value,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct RunActions {
    pub run_id: String,
    pub actions: Vec<Object>,
    pub next_cursor: Option<String>,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct BrowserSession {
    pub session_id: String,
    pub run_id: Value,
    pub tools: Value,
    pub advertised_at: i64,
}
