//! Run-area events: a run's creation, each stage invocation of its agent (the prompt digest, what the
//! agent said, the signals), the pipeline's stage and devloop facts, artifacts, user responses, and
//! the end. Stream: `run:<id>`; the stream version is the run's event id (from 0).

use crate::vocab::{
    AgentKind, Channel, ExpiryReason, FailureAction, FailureCategory, FollowUpRule, McpConfigMode, ResponseAction,
    Role, RunStatus, SectionStatus, StagedKind, Termination,
};
use serde::{Deserialize, Serialize};

/// A run was accepted (status `queued`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCreated {
    pub run_id: String,
    pub project_id: String,
    pub conversation_id: String,
    /// The client's idempotency key (empty when none).
    pub client_request_id: String,
    pub snapshot_id: String,
    pub plugin_id: String,
    /// The user's message (empty: the snapshot's templated query is the brief).
    pub message: String,
    /// `dry-run` or `exec`.
    pub agent: AgentKind,
    /// Agent options (command, protocol, timeout, dry-run script) as compact JSON.
    pub agent_config_json: String,
    pub created_at: i64,
}

/// The agent was started for one stage iteration (wire `start`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStarted {
    pub run_id: String,
    pub stage_id: String,
    pub iteration: u32,
    pub agent_id: String,
    pub bin: String,
    pub cwd: String,
    pub started_at: i64,
}

/// Something the agent produced: `channel` is `agent` (payload tagged by `type`: `text_delta`,
/// `status`, `tool_use`, `tool_result`, `usage`, …), `stdout` or `stderr` (payload `{chunk}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentOutput {
    pub run_id: String,
    pub stage_id: String,
    pub iteration: u32,
    pub channel: Channel,
    pub payload_json: String,
}

/// The exact prompt handed to the agent for a stage iteration, by digest (blake3 hex) and size,
/// and (schema 2) what it was made of: each part of the prompt stack in order, what the token
/// budget kept of it, the estimated total, the budget and the estimator that counted. A schema-1
/// event (before the stack was recorded) reads back with no sections, `budget_tokens` 0 and an
/// empty estimator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptComposed {
    pub run_id: String,
    pub stage_id: String,
    pub iteration: u32,
    pub digest: String,
    pub bytes: u64,
    pub sections: Vec<PromptSection>,
    /// Estimated tokens of the whole prompt as sent.
    pub total_tokens: u64,
    /// The agent's prompt budget in tokens (0: none applied).
    pub budget_tokens: u64,
    /// The token estimator's name and version (e.g. `od-est/1`).
    pub estimator: String,
    /// The project facts the prompt's `## Project` part named (`{"id","name","folder"}`, compact
    /// JSON; empty when it named none): replay of a run imported without its project's events
    /// recomposes with them.
    pub project_json: String,
}

/// One part of a composed prompt (schema 2 of `prompt_composed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptSection {
    /// The part's name (`base`, `project`, `design-system`, `craft`, `skill`, …).
    pub name: String,
    /// The `## …` heading that opens it in the prompt.
    pub marker: String,
    /// Where its text came from (`snapshot:basePrompt`, a staged path, `plugin:<id>@<version>/…`).
    pub source: String,
    /// blake3 hex of the part's full text (before any trimming).
    pub digest: String,
    pub bytes: u64,
    /// Estimated tokens of the full text.
    pub tokens: u64,
    /// `included`, `trimmed` or `dropped`.
    pub status: SectionStatus,
    /// Estimated tokens of what the prompt holds of it.
    pub tokens_kept: u64,
}

/// A devloop signal was reported (`critique.score`, `build.passing`, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignalRecorded {
    pub run_id: String,
    pub stage_id: String,
    pub iteration: u32,
    pub name: String,
    /// A JSON number or boolean.
    pub value_json: String,
    /// `agent`, `cli`, `worker:<atom>`.
    pub source: String,
}

/// A pipeline stage iteration began (wire `pipeline_stage_started`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageStarted {
    pub run_id: String,
    pub snapshot_id: String,
    pub stage_id: String,
    /// 0-based.
    pub iteration: u32,
    pub started_at: i64,
}

/// A pipeline stage iteration ended (wire `pipeline_stage_completed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageCompleted {
    pub run_id: String,
    pub snapshot_id: String,
    pub stage_id: String,
    pub iteration: u32,
    pub completed_at: i64,
    pub converged: bool,
    pub diff_summary: String,
}

/// A stage iteration failed; `action` is what `onFailure` made of it (`abort`, `skip`, `retry`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageFailed {
    pub run_id: String,
    pub snapshot_id: String,
    pub stage_id: String,
    pub iteration: u32,
    pub message: String,
    pub action: FailureAction,
    /// 1-based attempt of this iteration.
    pub attempt: u32,
}

/// One devloop round of a stage (1-based `iteration`), with what decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DevloopIteration {
    pub run_id: String,
    pub stage_id: String,
    pub iteration: u32,
    pub artifact_diff_summary: String,
    pub critique_summary: String,
    pub tokens_used: u64,
    pub ended_at: i64,
    /// The signals the `until` was evaluated against, as a JSON object.
    pub signals_json: String,
    /// The satisfied conjunction, as source text (empty when not satisfied).
    pub matched: String,
    /// Empty while looping; `until-satisfied`, `iteration-cap`, `loop-broken` or `no-loop` on the last.
    pub termination: Termination,
}

/// The user asked to leave a devloop (`break-loop`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoopBroken {
    pub run_id: String,
    pub stage_id: String,
    pub iteration: u32,
    pub requested_by: String,
}

/// A user response to a run (`od run respond`), e.g. `{"action":"break-loop"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResponded {
    pub run_id: String,
    pub action: ResponseAction,
    pub payload_json: String,
    pub received_at: i64,
}

/// An artifact was written, with the spec's provenance fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactRecorded {
    pub run_id: String,
    pub project_id: String,
    pub artifact_id: String,
    /// Relative to the project directory.
    pub path: String,
    pub title: String,
    pub stage_id: String,
    pub source_plugin_snapshot_id: String,
    pub source_task_kind: String,
    /// `html`, `markdown`, `image`, `code`, …
    pub artifact_kind: String,
    /// `html`, `markdown`, `image`, `text`, …
    pub render_kind: String,
    /// `preview`, `export`, `deploy`, `code-patch` (empty when none).
    pub handoff_kind: String,
    pub parent_artifact_id: String,
    pub export_targets: Vec<String>,
    /// blake3 hex of the bytes.
    pub digest: String,
    pub bytes: u64,
    pub recorded_at: i64,
}

/// The run ended (wire `end`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEnded {
    pub run_id: String,
    /// `succeeded`, `failed` or `canceled`.
    pub status: RunStatus,
    pub code: i32,
    /// Why, in words (empty on success).
    pub reason: String,
    /// `agent-crashed`, `agent-timeout`, `stage-failed`, `daemon-restart`, `canceled`, … (empty on success).
    pub failure_category: FailureCategory,
    pub artifact_count: u32,
    pub ended_at: i64,
}

/// A run was forked from another run's recorded state: the first event of the new run's stream
/// (its `run_created` follows in the same append). The new run inherits the parent's events up to
/// and including `parent_event_id` — read from the parent's stream, never copied — and continues
/// live from there with what the fork changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunForked {
    pub run_id: String,
    pub parent_run_id: String,
    /// The last inherited event of the parent (its stream version).
    pub parent_event_id: u64,
    /// The fork point as asked for (`42`, `design:2`, `end`).
    pub at: String,
    /// Where the fork resumes: the stage and 0-based iteration (empty: from the first stage).
    pub stage_id: String,
    pub iteration: u32,
    /// GenUI answers given with the fork (`{"surfaceId": value}`), used when the fork raises them.
    pub answers_json: String,
    /// Inputs changed by the fork (`{"key": value}`; empty object when none).
    pub inputs_json: String,
    /// The fork's own working folder, relative to the shared dir (the inherited files are restored
    /// there from blobs).
    pub work_dir: String,
    pub created_at: i64,
}

/// An unreferenced artifact blob was removed by garbage collection (stream `blob:<digest>`): no
/// artifact of an existing project named it for the unreferenced TTL (`reason` `ttl`), or it was
/// removed by a forced cleanup (`prune`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlobExpired {
    pub digest: String,
    pub bytes: u64,
    /// Unix ms since when nothing referenced it.
    pub unreferenced_since: i64,
    pub reason: ExpiryReason,
}

/// Garbage collection found an artifact blob no artifact of an existing project names (stream
/// `blob:<digest>`): it is unreferenced from `since` and expires after the unreferenced TTL unless
/// an artifact names it again first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlobUnreferenced {
    pub digest: String,
    pub bytes: u64,
    pub since: i64,
}

/// One file od staged into a run's working folder before its first agent invocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StagedFile {
    /// Relative to the run's working folder.
    pub path: String,
    /// `asset`, `context` or `mcp-config`.
    pub kind: StagedKind,
    /// Where the bytes came from: the path inside the plugin's installed folder (empty for the MCP
    /// configuration, which od writes).
    pub source: String,
    /// blake3 hex of the bytes (the blob holding them).
    pub digest: String,
    pub bytes: u64,
}

/// What od staged into the run's working folder before its first agent invocation (spec §14.3):
/// the plugin's `stageAt: run-start` assets, its skill context under `context_dir`, and an MCP
/// configuration naming `od mcp` and the plugin's MCP servers. Each file's bytes are a blob, so a
/// fork or an import restores exactly what the agent had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubstrateStaged {
    pub run_id: String,
    /// The run's project (its staged blobs are referenced while the project exists).
    pub project_id: String,
    /// The staged context folder, relative to the working folder (`.od/context`).
    pub context_dir: String,
    /// Where the MCP configuration went (`.mcp.json`, or `.od/mcp.json` beside a user's own).
    pub mcp_config: String,
    /// How the MCP configuration was written: `created`, `merged` or `beside-user-file`.
    pub mcp_config_mode: McpConfigMode,
    pub files: Vec<StagedFile>,
    /// Context references the plugin names that its installed folder does not hold.
    pub missing: Vec<String>,
    pub staged_at: i64,
}

/// A message of a run's conversation (issue 30 item 3), in the run's stream (`run:<id>`): the
/// user's message lands with the run's `run_created` (role `user`; runs without a message record
/// none); the agent's reply — the run's agent text output, joined — lands with its `run_ended`
/// (role `agent`; only for runs that recorded a user message, and only when the agent said
/// something). A conversation's messages are those of its runs, oldest run first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationMessage {
    pub conversation_id: String,
    pub project_id: String,
    /// `<runId>:user` or `<runId>:agent`.
    pub message_id: String,
    /// `user` or `agent`.
    pub role: Role,
    pub run_id: String,
    pub text: String,
    pub at: i64,
}

/// A follow-up run's plan, in the same append as its `run_created`: the stages it runs and why
/// (`rule` `declared`: the plugin's `od.pipeline.followUp` / stages with `followUp: true`;
/// `last-stage`: the plugin declares none, so only the pipeline's last stage), and the earlier runs
/// of the conversation whose messages and artifacts its prompts carry (all ended before it was
/// created, so the context is fixed — replay derives the same).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FollowUpPlanned {
    pub run_id: String,
    pub conversation_id: String,
    pub stages: Vec<String>,
    /// `declared` or `last-stage`.
    pub rule: FollowUpRule,
    /// The earlier runs of the conversation it builds on, oldest first.
    pub builds_on: Vec<String>,
    pub planned_at: i64,
}
