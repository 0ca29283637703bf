//! The ACP agent: an agent speaking the Agent Client Protocol (v1, JSON-RPC over stdio) — Qwen
//! Code `--acp`, Gemini CLI `--acp`, `claude-agent-acp`, `codex-acp`, any other by its command
//! line — driven for one [`Invocation`] with od as its client.
//!
//! Modules: [`conn`] (JSON-RPC framing), [`session`] (the handshake, the prompt turn, cancel and
//! timeouts), [`client`] (the files od serves and the permission decisions), [`updates`]
//! (`session/update` → od's agent output). The process side is the exec agent's: the agent leads
//! its own process group, recorded for orphan reaping, ended with everything it started when the
//! invocation ends ([`super::exec::Group`]); its environment is the exec agent's (`OD_RUN_ID`,
//! `OD_PROMPT_FILE`, …).
//!
//! Options (`inv.config`, beside the exec agent's `command`, `timeoutMs`, `idleTimeoutMs`, `env`,
//! output bounds): `permissionMode` (`bypass` | `accept-edits` (default) | `ask`),
//! `permissionTier` (`run` (default) | `conversation` | `project`: where a permission answer is
//! remembered), `authMethod` (the ACP auth method to use; default: one the environment holds the
//! key of).
//!
//! Why no SDK: the maintained crate `agent-client-protocol` (5.2.0 when this was written: five
//! major versions, its schema crate at 1.17 while the protocol is at 1.21) brings 21 crates od does
//! not already build — `derive_more`, `darling`, `serde_with`, `strum`, `futures-concurrency` and
//! their proc-macros — for what od uses of it: a dozen methods whose JSON this module reads with
//! `serde_json` like every other agent stream od parses. A small client over tokio keeps the tree
//! lean on a 2-core build and follows the protocol where od needs it (v1, negotiated at
//! `initialize`; v2 drops `fs/*`, so a v2-only agent is refused by name).

pub mod client;
pub mod conn;
pub mod session;
pub mod updates;

use std::collections::VecDeque;

use tokio::io::BufReader;
use tokio::sync::mpsc;

use crate::engine::safe_fs::temp_tag;
use crate::runner::agent::{AgentFailure, CancelFlag, EventSink, Invocation};
use crate::runner::exec::{agent_command, describe, ExecConfig, Group};
use crate::runner::lines::{read_line_capped, MAX_LINE_BYTES};
use crate::runner::output::OutputBudget;
use client::Client;
use conn::{Conn, Incoming};
use session::{Session, Settings, Stop};

pub use crate::agents::options::AcpOptions;

/// Runs the run's configured ACP agent (`command` in its agent options) for one invocation.
pub async fn invoke(inv: &Invocation, sink: &EventSink, cancel: CancelFlag) -> Result<(), AgentFailure> {
    let cfg = ExecConfig::from_config(&inv.config)?;
    run(inv, cfg.argv, cfg.env, sink, cancel).await
}

/// Drives the ACP agent `argv` (with `env` added to od's agent environment) for one invocation;
/// timeouts, output bounds and the ACP options come from `inv.config`. The one entry point: the
/// agent catalog maps its ACP agents (`qwen --acp`, `gemini --acp`, …) onto it.
pub async fn run(
    inv: &Invocation,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    sink: &EventSink,
    cancel: CancelFlag,
) -> Result<(), AgentFailure> {
    let (timeout_ms, idle_timeout_ms, output) = ExecConfig::limits(&inv.config)?;
    let opts = AcpOptions::from_config(&inv.config).map_err(|e| AgentFailure::Spawn(e.to_string()))?;
    let Some(program) = argv.first().filter(|p| !p.is_empty()) else {
        return Err(AgentFailure::Spawn("no ACP agent command configured".into()));
    };
    if *cancel.borrow() {
        return Err(AgentFailure::Canceled);
    }
    let token = temp_tag();
    let mut cmd = agent_command(inv, &argv, &env, &token)?;
    let mut child = cmd.spawn().map_err(|e| AgentFailure::Spawn(format!("{program}: {e}")))?;
    let mut group = Group::start(inv, &mut child, token).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        group.end(&mut child).await;
        return Err(AgentFailure::Spawn("the agent's stdio could not be opened".into()));
    };
    let conn = Conn::start(stdin, stdout, tx.clone());
    if let Some(err) = child.stderr.take() {
        tokio::spawn(async move {
            let mut reader = BufReader::new(err);
            let mut buf = Vec::new();
            while let Ok(Some(_)) = read_line_capped(&mut reader, &mut buf, MAX_LINE_BYTES).await {
                if tx.send(Incoming::Stderr(String::from_utf8_lossy(&buf).trim_end().to_string())).is_err() {
                    break;
                }
            }
        });
    } else {
        drop(tx);
    }
    let client = Client::new(inv.project_dir.clone(), opts.mode, opts.tier);
    let settings = Settings { timeout_ms, idle_timeout_ms, auth_method: opts.auth_method, env };
    let budget = OutputBudget::new(output);
    let (outcome, tail, marker) = {
        let mut s = Session::new(conn, rx, client, sink, budget, cancel, &mut child, settings);
        let outcome = s.run(inv).await;
        // What the agent wrote to stderr up to now is part of a crash report.
        while let Ok(m) = s.incoming.try_recv() {
            if let Incoming::Stderr(line) = m {
                s.stderr_tail.push_back(line);
            }
        }
        let tail = trimmed(&s.stderr_tail);
        (outcome, tail, s.budget.finish())
    };
    group.end(&mut child).await;
    if let Some(marker) = marker {
        let _ = sink.send(marker);
    }
    match outcome {
        Ok(()) => Ok(()),
        Err(Stop::Canceled) => Err(AgentFailure::Canceled),
        Err(Stop::TimedOut(after_ms)) => Err(AgentFailure::TimedOut { after_ms }),
        Err(Stop::Exited(st)) => Err(AgentFailure::Crashed { status: describe(st), stderr_tail: tail }),
        Err(Stop::Rpc(method, e)) if e.is_closed() => {
            let status = match child.try_wait() {
                Ok(Some(st)) => describe(st),
                _ => "closed its output".to_string(),
            };
            Err(AgentFailure::Crashed { status: format!("{status} during {method}"), stderr_tail: tail })
        }
        Err(Stop::Rpc(method, e)) => Err(AgentFailure::Reported(format!("{method}: {e}"))),
        Err(Stop::Refused(msg)) => Err(AgentFailure::Reported(msg)),
    }
}

/// The stderr tail as one string within [`crate::limits::ACP_STDERR_TAIL_BYTES`] (newest kept).
fn trimmed(lines: &VecDeque<String>) -> String {
    let all = lines.iter().map(String::as_str).collect::<Vec<_>>().join("\n");
    let max = crate::limits::ACP_STDERR_TAIL_BYTES;
    if all.len() <= max {
        return all;
    }
    let mut start = all.len() - max;
    while !all.is_char_boundary(start) {
        start += 1;
    }
    all[start..].to_string()
}
