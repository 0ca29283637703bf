//! Atom workers: daemon-side steps that run after the agent finished a stage iteration and report
//! signals of their own. `build-test` runs the project's `buildCommand` and `testCommand` (project
//! metadata) as subprocesses in the project directory — only when the snapshot was granted
//! `subprocess` or `bash` — and records `build.passing` / `tests.passing` from their exit status
//! (with the tail of their output; what they print is read, not kept).

use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

use super::agent::AgentEvent;
use crate::engine::gate::{self, Capability, ExecRight, Reach};
use crate::engine::WorkError;
use crate::limits::BUILD_TEST_TIMEOUT_MS;

/// Bytes of a command's output kept in the recorded tail.
const TAIL_BYTES: usize = 2048;

fn status(detail: String) -> AgentEvent {
    AgentEvent::Output {
        channel: "agent".into(),
        payload: json!({ "type": "status", "label": "build-test", "detail": detail }),
    }
}

fn tail(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let start = s.len().saturating_sub(TAIL_BYTES);
    let start = (start..s.len()).find(|i| s.is_char_boundary(*i)).unwrap_or(s.len());
    s[start..].to_string()
}

/// Reads `r` to its end keeping only the last [`TAIL_BYTES`] (a test suite may print gigabytes).
async fn read_tail<R: tokio::io::AsyncRead + Unpin>(r: Option<R>) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let Some(mut r) = r else { return Vec::new() };
    let (mut kept, mut buf) = (Vec::new(), vec![0u8; 8192]);
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > 2 * TAIL_BYTES {
            kept.drain(..kept.len() - TAIL_BYTES);
        }
    }
    kept
}

/// Runs `cmd` with `sh -c` in `dir`; Ok(passed, output tail). Like an agent, it leads its own
/// process group, and what it started is ended with it (see [`super::reap`]).
async fn run_command(cmd: &str, dir: &Path) -> (bool, String) {
    let token = crate::engine::safe_fs::temp_tag();
    let spawned = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .env(super::reap::TOKEN_VAR, &token)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return (false, format!("could not run: {e}")),
    };
    let pid = child.id();
    let since = pid.map_or(0, super::reap::start_time);
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let (out, err) = (tokio::spawn(read_tail(out)), tokio::spawn(read_tail(err)));
    let waited = tokio::time::timeout(Duration::from_millis(BUILD_TEST_TIMEOUT_MS), child.wait()).await;
    if let Some(pid) = pid {
        let _ = tokio::task::spawn_blocking(move || super::reap::sweep(pid, &token, since)).await;
    }
    let _ = child.start_kill();
    let _ = child.wait().await;
    let mut all = out.await.unwrap_or_default();
    all.extend_from_slice(&err.await.unwrap_or_default());
    match waited {
        Ok(Ok(status)) => (status.success(), format!("{status}\n{}", tail(&all))),
        Ok(Err(e)) => (false, format!("could not run: {e}")),
        Err(_) => (false, format!("timed out after {BUILD_TEST_TIMEOUT_MS} ms")),
    }
}

/// The `build-test` worker; returns what to record (statuses, output tails, signals). Each command
/// passes the one gate first (`engine/gate.rs`): the run's creator's exec right, and the plugin's
/// `subprocess` (or `bash`) grant.
pub async fn build_test(metadata: &Value, plugin: &Capability, right: ExecRight, dir: &Path) -> Vec<AgentEvent> {
    let mut out = Vec::new();
    let mut cap = plugin.clone();
    if cap.granted.contains("bash") {
        cap.granted.insert("subprocess".into());
    }
    cap.required = ["subprocess".to_string()].into();
    for (key, signal) in [("buildCommand", "build.passing"), ("testCommand", "tests.passing")] {
        let Some(cmd) = metadata[key].as_str().filter(|c| !c.trim().is_empty()) else {
            out.push(status(format!("no {key} configured for the project; {signal} not reported")));
            continue;
        };
        let field = format!("metadata.{key}");
        if let Err(e) = gate::pass(right, Reach::WorkerCommand { field: &field }, Some(&cap)) {
            let why = match &e {
                WorkError::Apply(_) => "the plugin was not granted `subprocess`".to_string(),
                other => other.to_string(),
            };
            out.push(status(format!("not run: {why}")));
            out.push(AgentEvent::Signal { name: signal.into(), value: json!(false) });
            continue;
        }
        let (passed, detail) = run_command(cmd, dir).await;
        out.push(AgentEvent::Output {
            channel: "stdout".into(),
            payload: json!({ "chunk": format!("$ {cmd}\n{detail}") }),
        });
        out.push(AgentEvent::Signal { name: signal.into(), value: json!(passed) });
    }
    out
}

/// The `diff-review` atom's worker: the decision answered on its automatic surface
/// (`__auto_diff_review_<stage>`) becomes the `user.confirmed` signal — true for `accept`, false
/// for `reject`, `partial`, or no answer (timed out, skipped).
pub fn diff_review(engine: &crate::engine::Engine, run_id: &str, stage_id: &str) -> Vec<AgentEvent> {
    let surface = format!("__auto_diff_review_{stage_id}");
    let row = engine.latest_run_surface(run_id, &surface).ok().flatten();
    let decision = row
        .as_ref()
        .and_then(|r| r.value_json.as_deref())
        .and_then(|v| serde_json::from_str::<Value>(v).ok())
        .and_then(|v| v["decision"].as_str().map(str::to_string));
    let detail = match &decision {
        Some(d) => format!("review decision: {d}"),
        None => "no review decision (not answered)".into(),
    };
    vec![
        AgentEvent::Output {
            channel: "agent".into(),
            payload: json!({ "type": "status", "label": "diff-review", "detail": detail }),
        },
        AgentEvent::Signal { name: "user.confirmed".into(), value: json!(decision.as_deref() == Some("accept")) },
    ]
}
