//! The agent interface the pipeline executor drives: one [`Invocation`] per stage iteration (the
//! composed prompt plus where and for whom), a stream of [`AgentEvent`]s back, and an outcome.
//! Adapters: [`super::dry_run`] (deterministic, no model), [`super::exec`] (a configured command)
//! and [`super::acp`] (an Agent Client Protocol agent).

use od_events::vocab::FailureCategory;
use serde_json::Value;
use std::path::PathBuf;
use tokio::sync::{mpsc, oneshot, watch};

/// One stage iteration handed to an agent.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub run_id: String,
    pub project_id: String,
    /// The project directory: the agent's working directory.
    pub project_dir: PathBuf,
    pub snapshot_id: String,
    pub task_kind: String,
    pub stage_id: String,
    /// 0-based devloop iteration.
    pub iteration: u32,
    /// 1-based attempt (retries of a failed iteration count up).
    pub attempt: u32,
    pub atoms: Vec<String>,
    /// The exact prompt (its digest is recorded before the agent starts).
    pub prompt: String,
    /// The run's agent options (`RunCreated.agent_config_json`).
    pub config: Value,
    /// Where the agent can reach od's HTTP API (`OD_DAEMON_URL` for `od run signal …`).
    pub daemon_url: String,
    /// The data dir (`OD_DATA_DIR` for callbacks through the `od` CLI).
    pub data_dir: PathBuf,
    /// The run's scoped tool token (`OD_TOOL_TOKEN`: connector calls, `engine/connectors.rs`).
    pub tool_token: String,
}

/// An artifact the agent reports having written (path relative to the project directory).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ArtifactDraft {
    pub path: String,
    pub title: String,
    pub artifact_kind: String,
    pub render_kind: String,
    pub handoff_kind: String,
    pub parent_artifact_id: String,
    pub export_targets: Vec<String>,
}

/// Something the agent produced, recorded as an event by the executor.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// `channel` = `agent` (payload tagged by `type`: `text_delta`, `status`, `thinking_delta`,
    /// `tool_use`, `tool_result`, `usage`, `raw`, …), `stdout` or `stderr` (payload `{chunk}`).
    Output { channel: String, payload: Value },
    /// A devloop signal (`critique.score` number, `build.passing` bool, …).
    Signal { name: String, value: Value },
    /// A file the agent wrote.
    Artifact(ArtifactDraft),
    /// The agent asks the user through a declared GenUI surface (answered before the stage goes on);
    /// `options`: a choice's options it proposes (a JSON array, checked by the engine).
    SurfaceRequest { surface_id: String, kind: Option<String>, atom: Option<String>, options: Option<Value> },
    /// The agent asks the user while it waits (an ACP permission request): the executor raises
    /// the built-in surface `spec` and sends its answer back ([`Ask`]).
    Ask(Ask),
}

/// A question an agent waits on mid-invocation: `spec` is a GenUI surface, raised like a declared
/// one (its tier's remembered answer reused); `reply` takes the answer's value (`None`: skipped
/// or timed out). Dropping it unanswered tells the agent nobody will answer.
#[derive(Debug, Clone)]
pub struct Ask {
    pub spec: Value,
    pub reply: AskReply,
}

impl PartialEq for Ask {
    fn eq(&self, other: &Ask) -> bool {
        self.spec == other.spec && std::sync::Arc::ptr_eq(&self.reply.0, &other.reply.0)
    }
}

/// Where an [`Ask`]'s answer goes (taken once).
#[derive(Clone)]
pub struct AskReply(std::sync::Arc<std::sync::Mutex<Option<oneshot::Sender<Option<Value>>>>>);

impl AskReply {
    /// A reply slot and the receiver the asking agent waits on.
    pub fn new() -> (AskReply, oneshot::Receiver<Option<Value>>) {
        let (tx, rx) = oneshot::channel();
        (AskReply(std::sync::Arc::new(std::sync::Mutex::new(Some(tx)))), rx)
    }

    /// Sends the answer (the first call only).
    pub fn send(&self, answer: Option<Value>) {
        if let Some(tx) = self.0.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(answer);
        }
    }

    /// Whether the asking agent stopped waiting.
    pub fn is_closed(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).as_ref().is_none_or(|tx| tx.is_closed())
    }
}

impl std::fmt::Debug for AskReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AskReply")
    }
}

/// How an invocation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AgentFailure {
    /// The agent could not be started.
    #[error("the agent could not be started: {0}")]
    Spawn(String),
    /// The agent process exited non-zero or was killed by a signal.
    #[error("the agent exited with {status}{}", if .stderr_tail.is_empty() { String::new() } else { format!(": {}", .stderr_tail) })]
    Crashed { status: String, stderr_tail: String },
    /// The agent ran past its timeout (or went silent past its idle timeout) and was killed.
    #[error("the agent did not finish within {after_ms} ms and was killed")]
    TimedOut { after_ms: u64 },
    /// The agent reported an error itself (protocol `error` line, a failed `result`).
    #[error("the agent reported an error: {0}")]
    Reported(String),
    /// The run was canceled while the agent worked.
    #[error("canceled")]
    Canceled,
}

impl AgentFailure {
    /// The `failureCategory` recorded on the run's end.
    pub fn category(&self) -> FailureCategory {
        match self {
            AgentFailure::Spawn(_) => FailureCategory::AgentSpawnFailed,
            AgentFailure::Crashed { .. } => FailureCategory::AgentCrashed,
            AgentFailure::TimedOut { .. } => FailureCategory::AgentTimeout,
            AgentFailure::Reported(_) => FailureCategory::AgentError,
            AgentFailure::Canceled => FailureCategory::Canceled,
        }
    }
}

/// Where an agent sends what it produces.
pub type EventSink = mpsc::UnboundedSender<AgentEvent>;

/// Flips to true when the run is canceled.
pub type CancelFlag = watch::Receiver<bool>;
