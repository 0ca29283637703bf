//! The exec agent: runs the configured command as a child process for one [`Invocation`].
//!
//! It owns the child's whole life: the environment (`OD_RUN_ID`, `OD_PROMPT_FILE`, …), the prompt
//! on stdin and in `<project>/.od/prompts/<stage>-<iteration>-<attempt>.md`, reading stdout through
//! [`LineParser`] and stderr as `stderr` output (both bounded per line), the total and idle
//! timeouts, cancellation, and turning the exit into an outcome. The child runs in its own process
//! group (unix) so a timeout or cancel also ends the helpers it started.
//!
//! Options (`inv.config`): `command` (`[program, args…]`, or a string run by `sh -c`), `protocol`
//! (`auto` | `od` | `claude-stream-json`), `timeoutMs` (600000), `idleTimeoutMs` (120000), `env`.

use crate::runner::agent::{AgentEvent, AgentFailure, CancelFlag, EventSink, Invocation};
use crate::runner::protocol::{LineParser, Parsed, Protocol};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Default total wall time of one invocation.
pub const DEFAULT_TIMEOUT_MS: u64 = 600_000;
/// Default longest silence (no stdout or stderr line) before the agent counts as hung.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 120_000;
/// A longer stdout/stderr line is truncated (the rest of it is read and dropped).
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// The stderr tail kept for a crash report: at most this many lines …
const TAIL_LINES: usize = 20;
/// … and this many bytes.
const TAIL_BYTES: usize = 4096;
/// After the child exited, how long to keep draining pipes a leftover helper still holds open.
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
}

impl ExecConfig {
    /// Reads the options; a missing or malformed one is an [`AgentFailure::Spawn`].
    pub fn from_config(config: &Value) -> Result<ExecConfig, AgentFailure> {
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
                .ok_or_else(|| bad(format!("unknown agent protocol {v} (expected auto, od or claude-stream-json)")))?,
        };
        let millis = |key: &str, default: u64| match config.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v.as_u64().filter(|ms| *ms > 0).ok_or_else(|| bad(format!("{key} must be a positive integer"))),
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
        Ok(ExecConfig {
            argv,
            protocol,
            timeout_ms: millis("timeoutMs", DEFAULT_TIMEOUT_MS)?,
            idle_timeout_ms: millis("idleTimeoutMs", DEFAULT_IDLE_TIMEOUT_MS)?,
            env,
        })
    }
}

enum Line {
    Out(String),
    Err(String),
}

/// Runs the configured agent command for one invocation; see the module documentation.
pub async fn invoke(inv: &Invocation, sink: &EventSink, mut cancel: CancelFlag) -> Result<(), AgentFailure> {
    let cfg = ExecConfig::from_config(&inv.config)?;
    if *cancel.borrow() {
        return Err(AgentFailure::Canceled);
    }
    let prompt_file = write_prompt(inv)?;
    let mut cmd = Command::new(&cfg.argv[0]);
    cmd.args(&cfg.argv[1..])
        .current_dir(&inv.project_dir)
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
        .envs(cfg.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd.spawn().map_err(|e| AgentFailure::Spawn(format!("{}: {e}", cfg.argv[0])))?;
    let pid = child.id();

    // Feed the prompt on its own task: a child that never reads stdin must not block us.
    if let Some(mut stdin) = child.stdin.take() {
        let prompt = inv.prompt.clone();
        tokio::spawn(async move {
            let _ = stdin.write_all(prompt.as_bytes()).await;
            let _ = stdin.shutdown().await;
        });
    }
    let (tx, mut rx) = mpsc::channel::<Line>(256);
    if let Some(out) = child.stdout.take() {
        tokio::spawn(pump(out, tx.clone(), Line::Out));
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(pump(err, tx.clone(), Line::Err));
    }
    drop(tx);

    let mut lines = Lines { parser: LineParser::new(cfg.protocol), reported: None, tail: VecDeque::new() };
    let deadline = Instant::now() + Duration::from_millis(cfg.timeout_ms);
    let idle = Duration::from_millis(cfg.idle_timeout_ms);
    let mut last_output = Instant::now();
    let mut status: Option<ExitStatus> = None;
    let mut exited_at: Option<Instant> = None;
    let mut pipes_open = true;
    let mut watch_cancel = true;
    let status = loop {
        if let (false, Some(st)) = (pipes_open, status) {
            break st;
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
                    exited_at = Some(Instant::now());
                }
                Err(e) => {
                    kill(&mut child, pid).await;
                    return Err(AgentFailure::Crashed { status: format!("unknown ({e})"), stderr_tail: lines.tail() });
                }
            },
            changed = cancel.changed(), if watch_cancel => {
                if changed.is_err() {
                    watch_cancel = false; // the run side went away; nobody can cancel any more
                } else if *cancel.borrow_and_update() {
                    kill(&mut child, pid).await;
                    return Err(AgentFailure::Canceled);
                }
            }
            _ = tokio::time::sleep_until(wake) => {
                if let Some(st) = status.filter(|_| Instant::now() < timeout_at) {
                    // Exited, but a leftover helper holds the pipes open: take what was read, stop.
                    while let Ok(line) = rx.try_recv() {
                        lines.handle(line, sink);
                    }
                    break st;
                }
                kill(&mut child, pid).await;
                let after_ms = if Instant::now() >= deadline { cfg.timeout_ms } else { cfg.idle_timeout_ms };
                return Err(AgentFailure::TimedOut { after_ms });
            }
        }
    };
    match lines.reported {
        Some(msg) => Err(AgentFailure::Reported(msg)),
        None if status.success() => Ok(()),
        None => Err(AgentFailure::Crashed { status: describe(status), stderr_tail: lines.tail() }),
    }
}

/// What the agent's output amounted to so far.
struct Lines {
    parser: LineParser,
    /// The first error the agent reported on stdout.
    reported: Option<String>,
    /// The last stderr lines (≤ `TAIL_LINES` lines, ≤ `TAIL_BYTES` bytes).
    tail: VecDeque<String>,
}

impl Lines {
    fn handle(&mut self, line: Line, sink: &EventSink) {
        match line {
            Line::Out(line) => {
                for parsed in self.parser.feed(&line) {
                    match parsed {
                        Parsed::Event(ev) => {
                            let _ = sink.send(ev);
                        }
                        Parsed::Error(msg) => {
                            self.reported.get_or_insert(msg);
                        }
                        // The exit status is what ends an invocation; `done` is informational.
                        Parsed::Done => {}
                    }
                }
            }
            Line::Err(line) => {
                let mut end = line.len().min(TAIL_BYTES);
                while !line.is_char_boundary(end) {
                    end -= 1;
                }
                self.tail.push_back(line[..end].to_string());
                while self.tail.len() > TAIL_LINES
                    || (self.tail.len() > 1 && self.tail.iter().map(|l| l.len() + 1).sum::<usize>() > TAIL_BYTES)
                {
                    self.tail.pop_front();
                }
                let _ =
                    sink.send(AgentEvent::Output { channel: "stderr".to_string(), payload: json!({"chunk": line}) });
            }
        }
    }

    fn tail(&self) -> String {
        self.tail.iter().map(String::as_str).collect::<Vec<_>>().join("\n")
    }
}

/// Writes the prompt to `<project>/.od/prompts/<stage>-<iteration>-<attempt>.md`.
fn write_prompt(inv: &Invocation) -> Result<PathBuf, AgentFailure> {
    let stage: String =
        inv.stage_id.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    let dir = inv.project_dir.join(".od").join("prompts");
    let path = dir.join(format!("{stage}-{}-{}.md", inv.iteration, inv.attempt));
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&path, inv.prompt.as_bytes()))
        .map_err(|e| AgentFailure::Spawn(format!("could not write the prompt file {}: {e}", path.display())))?;
    Ok(path)
}

/// Sends every line of `reader` (lossy UTF-8, without the line ending) until EOF or the receiver is gone.
async fn pump<R: AsyncRead + Unpin>(reader: R, tx: mpsc::Sender<Line>, wrap: fn(String) -> Line) {
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    while let Ok(true) = read_line_capped(&mut reader, &mut buf, MAX_LINE_BYTES).await {
        let mut line = String::from_utf8_lossy(&buf).into_owned();
        if line.ends_with('\r') {
            line.pop();
        }
        if tx.send(wrap(line)).await.is_err() {
            return;
        }
    }
}

/// Reads one line into `buf` (cleared first), keeping at most `cap` bytes of it and discarding
/// the rest up to the newline. `Ok(false)` at EOF with nothing read.
pub async fn read_line_capped<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<bool> {
    buf.clear();
    let mut read_any = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(read_any);
        }
        read_any = true;
        let (chunk, found) = match memchr::memchr(b'\n', available) {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        let room = cap.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = found.unwrap_or(available.len());
        reader.consume(used);
        if found.is_some() {
            return Ok(true);
        }
    }
}

fn describe(status: ExitStatus) -> String {
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

/// Kills the child and (unix) its process group, then reaps it.
async fn kill(child: &mut Child, pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid {
        // libc is not a dependency of the crate: kill(1) reaches the whole group.
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{pid}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
    }
    let _ = child.start_kill();
    let _ = child.wait().await;
}
