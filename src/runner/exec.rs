//! The exec agent: runs the configured command as a child process for one [`Invocation`].
//!
//! It owns the child's whole life: the environment (`OD_RUN_ID`, `OD_PROMPT_FILE`, …), the prompt
//! on stdin and in `<project>/.od/prompts/<stage>-<iteration>-<attempt>.md`, reading its output
//! ([`super::lines`]: stdout through [`LineParser`], stderr as `stderr` output, bounded per line and
//! per invocation by [`super::output`]), the total and idle timeouts, cancellation, and turning the
//! exit into an outcome. The child leads its own process group; when the invocation ends — exit,
//! timeout or cancel — the group and whatever escaped it are ended ([`super::reap`]). The group is
//! recorded under the data dir while it runs, so a start after od was killed ends it
//! ([`super::orphans`]).
//!
//! Options (`inv.config`): `command` (`[program, args…]`, or a string run by `sh -c`), `protocol`
//! (`auto` or a dialect of [`crate::runner::dialects`]), `timeoutMs` (600000), `idleTimeoutMs` (120000), `env`,
//! `outputMaxBytes` / `outputMaxEvents` (see [`OutputLimits`]). A catalog agent's command line is
//! built by `runner/launch.rs` and run through [`invoke_with`] (its prompt on stdin only when its
//! entry says so).

use crate::engine::safe_fs::{temp_tag, Root};
use crate::limits::MAX_TIMEOUT_MS;
use crate::runner::agent::{AgentFailure, CancelFlag, EventSink, Invocation};
use crate::runner::dialects::{LineParser, Protocol, PROTOCOL_NAMES};
use crate::runner::lines::{pump, Line, Lines, LINE_QUEUE};
use crate::runner::output::{OutputBudget, OutputLimits};
use crate::runner::{orphans, reap};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

pub use crate::runner::lines::{read_line_capped, MAX_LINE_BYTES};

/// Default total wall time of one invocation.
pub const DEFAULT_TIMEOUT_MS: u64 = 600_000;
/// Default longest silence (no stdout or stderr line) before the agent counts as hung.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 120_000;
/// After the agent exited and what it left behind was ended, how long to keep draining pipes
/// something od could not end (see [`reap`]) still holds open.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// The exec agent's options, read from `inv.config`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecConfig {
    /// Program and arguments.
    pub argv: Vec<String>,
    pub protocol: Protocol,
    pub timeout_ms: u64,
    pub idle_timeout_ms: u64,
    pub env: Vec<(String, String)>,
    /// What one invocation may record (defaults from the environment, see [`OutputLimits`]).
    pub output: OutputLimits,
    /// Whether the prompt is written to stdin (a catalog agent taking it in argv or a file gets
    /// stdin closed at once).
    pub stdin_prompt: bool,
}

impl ExecConfig {
    /// Reads the options; a missing or malformed one is an [`AgentFailure::Spawn`]. A command or
    /// environment the run supplied passes the gate here.
    pub fn from_config(config: &Value) -> Result<ExecConfig, AgentFailure> {
        let cfg = Self::parse(config)?;
        // The one gate, at the executor too: a command (or environment) other than the daemon's own
        // runs only for a run whose creator held the exec right (an imported record holds none).
        if crate::engine::gate::supplied_command(config) {
            let right = crate::engine::gate::ExecRight::of_run(config);
            let reach = crate::engine::gate::Reach::AgentCommand { field: "agentCommand" };
            crate::engine::gate::pass(right, reach, None).map_err(|e| AgentFailure::Spawn(e.to_string()))?;
        }
        Ok(cfg)
    }

    /// Reads the options without the gate (the caller built the command: a catalog agent,
    /// `runner/launch.rs`).
    pub fn parse(config: &Value) -> Result<ExecConfig, AgentFailure> {
        let bad = |msg: String| AgentFailure::Spawn(msg);
        let argv = match config.get("command") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) if s.trim().is_empty() => Vec::new(),
            Some(Value::String(s)) => vec!["sh".to_string(), "-c".to_string(), s.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad("the agent command must be an array of strings".to_string()))?,
            Some(_) => return Err(bad("the agent command must be an array of strings or a string".to_string())),
        };
        if argv.first().is_none_or(|p| p.is_empty()) {
            return Err(bad("no agent command configured (set agentCommand or OD_AGENT_CMD)".to_string()));
        }
        let protocol = match config.get("protocol") {
            None | Some(Value::Null) => Protocol::Auto,
            Some(v) => v
                .as_str()
                .and_then(Protocol::parse)
                .ok_or_else(|| bad(format!("unknown agent protocol {v} (expected {PROTOCOL_NAMES})")))?,
        };
        let env = match config.get("env") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(vars)) => vars
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    Value::Number(_) | Value::Bool(_) => Ok((k.clone(), v.to_string())),
                    _ => Err(bad(format!("env.{k} must be a string"))),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(bad("env must be an object of strings".to_string())),
        };
        let (timeout_ms, idle_timeout_ms, output) = ExecConfig::limits(config)?;
        Ok(ExecConfig { argv, protocol, timeout_ms, idle_timeout_ms, env, output, stdin_prompt: true })
    }

    /// The timeouts and output bounds of agent options (`timeoutMs`, `idleTimeoutMs`,
    /// `outputMaxBytes`, `outputMaxEvents`), shared with the ACP agent.
    pub fn limits(config: &Value) -> Result<(u64, u64, OutputLimits), AgentFailure> {
        let bad = |msg: String| AgentFailure::Spawn(msg);
        let millis = |key: &str, default: u64| match config.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v
                .as_u64()
                .filter(|ms| (1..=MAX_TIMEOUT_MS).contains(ms))
                .ok_or_else(|| bad(format!("{key} must be a positive integer of at most {MAX_TIMEOUT_MS} ms"))),
        };
        Ok((
            millis("timeoutMs", DEFAULT_TIMEOUT_MS)?,
            millis("idleTimeoutMs", DEFAULT_IDLE_TIMEOUT_MS)?,
            OutputLimits::from_env().with_config(config).map_err(|e| bad(e.message().to_string()))?,
        ))
    }
}

/// The agent's process group and what identifies its descendants (see [`super::reap`]).
pub(crate) struct Group {
    pid: Option<u32>,
    token: String,
    started: u64,
    ended: bool,
    /// Where the group is recorded for the next start, should od be killed ([`orphans`]).
    record: Option<PathBuf>,
}

impl Group {
    /// The group of a child just spawned with `token` in its environment, recorded under the data
    /// dir for the next start should od be killed ([`orphans`]); a group that cannot be recorded is
    /// ended and the agent not started.
    pub(crate) async fn start(inv: &Invocation, child: &mut Child, token: String) -> Result<Group, AgentFailure> {
        let pid = child.id();
        let mut group = Group { pid, token, started: pid.map_or(0, reap::start_time), ended: false, record: None };
        if let Some(pid) = pid {
            let rec = orphans::Record {
                run_id: inv.run_id.clone(),
                pid,
                pgid: pid,
                start_time: group.started,
                token: group.token.clone(),
            };
            match orphans::record(&inv.data_dir, &rec) {
                Ok(path) => group.record = Some(path),
                Err(e) => {
                    // An agent nobody could find after a crash is not started.
                    group.end(child).await;
                    return Err(AgentFailure::Spawn(format!("could not record the agent's process group: {e}")));
                }
            }
        }
        Ok(group)
    }

    /// Ends the agent and everything it started (once), then reaps the agent.
    pub(crate) async fn end(&mut self, child: &mut Child) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        if let Some(pid) = self.pid {
            let (token, since) = (self.token.clone(), self.started);
            let _ = tokio::task::spawn_blocking(move || reap::sweep(pid, &token, since)).await;
        }
        let _ = child.start_kill();
        let _ = child.wait().await;
        if let Some(path) = self.record.take() {
            orphans::forget(&path);
        }
    }
}

/// Runs the configured agent command for one invocation; see the module documentation.
pub async fn invoke(inv: &Invocation, sink: &EventSink, cancel: CancelFlag) -> Result<(), AgentFailure> {
    invoke_with(inv, ExecConfig::from_config(&inv.config)?, sink, cancel).await
}

/// Runs `cfg`'s command for one invocation (a catalog agent's command line is built by
/// `runner/launch.rs`; everything else is as for [`invoke`]).
pub async fn invoke_with(
    inv: &Invocation,
    cfg: ExecConfig,
    sink: &EventSink,
    cancel: CancelFlag,
) -> Result<(), AgentFailure> {
    if *cancel.borrow() {
        return Err(AgentFailure::Canceled);
    }
    let token = temp_tag();
    let mut cmd = agent_command(inv, &cfg.argv, &cfg.env, &token)?;
    let mut child = cmd.spawn().map_err(|e| AgentFailure::Spawn(format!("{}: {e}", cfg.argv[0])))?;
    let mut group = Group::start(inv, &mut child, token).await?;

    // Feed the prompt on its own task: a child that never reads stdin must not block us.
    if let Some(mut stdin) = child.stdin.take().filter(|_| cfg.stdin_prompt) {
        let prompt = inv.prompt.clone();
        tokio::spawn(async move {
            let _ = stdin.write_all(prompt.as_bytes()).await;
            let _ = stdin.shutdown().await;
        });
    }
    let (tx, rx) = mpsc::channel::<Line>(LINE_QUEUE);
    if let Some(out) = child.stdout.take() {
        tokio::spawn(pump(out, tx.clone(), Line::Out));
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(pump(err, tx.clone(), Line::Err));
    }
    drop(tx);

    let mut lines = Lines::new(LineParser::new(cfg.protocol), OutputBudget::new(cfg.output));
    let outcome = supervise(&cfg, &mut child, &mut group, rx, &mut lines, sink, cancel).await;
    group.end(&mut child).await;
    lines.finish(sink);
    if let Some(marker) = lines.budget.finish() {
        let _ = sink.send(marker);
    }
    let status = outcome?;
    match lines.reported {
        Some(msg) => Err(AgentFailure::Reported(msg)),
        None if status.success() => Ok(()),
        None => Err(AgentFailure::Crashed { status: describe(status), stderr_tail: lines.tail() }),
    }
}

/// Reads the agent's lines until it exited and its pipes closed (or a leftover still holds them
/// [`DRAIN_GRACE`] after its group was ended), a timeout, or a cancel; returns its exit status.
async fn supervise(
    cfg: &ExecConfig,
    child: &mut Child,
    group: &mut Group,
    mut rx: mpsc::Receiver<Line>,
    lines: &mut Lines,
    sink: &EventSink,
    mut cancel: CancelFlag,
) -> Result<ExitStatus, AgentFailure> {
    let deadline = Instant::now() + Duration::from_millis(cfg.timeout_ms);
    let idle = Duration::from_millis(cfg.idle_timeout_ms);
    let mut last_output = Instant::now();
    let mut status: Option<ExitStatus> = None;
    let mut exited_at: Option<Instant> = None;
    let mut pipes_open = true;
    let mut watch_cancel = true;
    loop {
        if let (false, Some(st)) = (pipes_open, status) {
            return Ok(st);
        }
        let timeout_at = deadline.min(last_output + idle);
        let wake = exited_at.map_or(timeout_at, |t| timeout_at.min(t + DRAIN_GRACE));
        tokio::select! {
            line = rx.recv(), if pipes_open => match line {
                Some(line) => {
                    last_output = Instant::now();
                    lines.handle(line, sink);
                }
                None => pipes_open = false,
            },
            st = child.wait(), if status.is_none() => match st {
                Ok(st) => {
                    status = Some(st);
                    // The agent is gone: end what it left behind now, so the pipes they hold close.
                    group.end(child).await;
                    exited_at = Some(Instant::now());
                }
                Err(e) => {
                    return Err(AgentFailure::Crashed { status: format!("unknown ({e})"), stderr_tail: lines.tail() });
                }
            },
            changed = cancel.changed(), if watch_cancel => {
                if changed.is_err() {
                    watch_cancel = false; // the run side went away; nobody can cancel any more
                } else if *cancel.borrow_and_update() {
                    return Err(AgentFailure::Canceled);
                }
            }
            _ = tokio::time::sleep_until(wake) => {
                if let Some(st) = status.filter(|_| Instant::now() < timeout_at) {
                    // Exited, but something od could not end holds the pipes open: take what was
                    // read, stop.
                    while let Ok(line) = rx.try_recv() {
                        lines.handle(line, sink);
                    }
                    return Ok(st);
                }
                let after_ms = if Instant::now() >= deadline { cfg.timeout_ms } else { cfg.idle_timeout_ms };
                return Err(AgentFailure::TimedOut { after_ms });
            }
        }
    }
}

/// The command of one agent invocation, shared by exec and the ACP agent: `argv` in the project
/// folder with od's agent environment (`PWD`, `OD_*`, the prompt file, which this writes), `env`
/// added, the reaping token, piped stdio, and its own process group, so ending the invocation ends
/// the helpers it started.
pub(crate) fn agent_command(
    inv: &Invocation,
    argv: &[String],
    env: &[(String, String)],
    token: &str,
) -> Result<Command, AgentFailure> {
    let prompt_file = write_prompt(inv)?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(&inv.project_dir)
        // What the agent takes for its working folder when it trusts `$PWD` over getcwd (Bun and
        // Node CLIs such as OpenCode do): else it is od's, and the agent writes outside the project.
        .env("PWD", &inv.project_dir)
        .env("OD_RUN_ID", &inv.run_id)
        .env("OD_PROJECT_ID", &inv.project_id)
        .env("OD_PROJECT_DIR", &inv.project_dir)
        .env("OD_STAGE_ID", &inv.stage_id)
        .env("OD_ITERATION", inv.iteration.to_string())
        .env("OD_ATTEMPT", inv.attempt.to_string())
        .env("OD_SNAPSHOT_ID", &inv.snapshot_id)
        .env("OD_DAEMON_URL", &inv.daemon_url)
        .env("OD_DATA_DIR", &inv.data_dir)
        .env("OD_PROMPT_FILE", &prompt_file)
        .env("OD_TOOL_TOKEN", &inv.tool_token)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(reap::TOKEN_VAR, token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    Ok(cmd)
}

/// The prompt file's path relative to the project: `.od/prompts/<stage>-<iteration>-<attempt>.md`.
pub fn prompt_rel(inv: &Invocation) -> String {
    let stage: String =
        inv.stage_id.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    format!(".od/prompts/{stage}-{}-{}.md", inv.iteration, inv.attempt)
}

/// Writes the prompt to `<project>/.od/prompts/<stage>-<iteration>-<attempt>.md`.
fn write_prompt(inv: &Invocation) -> Result<PathBuf, AgentFailure> {
    let rel = prompt_rel(inv);
    let path = inv.project_dir.join(&rel);
    // Below the project without following links: `.od` or `prompts` may be links the agent made.
    Root::open(&inv.project_dir)
        .and_then(|root| root.write_atomic_unsynced(&rel, inv.prompt.as_bytes(), &temp_tag()))
        .map_err(|e| AgentFailure::Spawn(format!("could not write the prompt file {}: {e}", path.display())))?;
    Ok(path)
}

pub(crate) fn describe(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit code {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("signal {sig}");
        }
    }
    status.to_string()
}
