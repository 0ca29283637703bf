//! Atom workers: daemon-side steps that run after the agent finished a stage iteration and report
//! signals of their own. `build-test` runs the project's `buildCommand` and `testCommand` (project
//! metadata) as subprocesses in the project directory — only when the snapshot was granted
//! `subprocess` or `bash` — and records `build.passing` / `tests.passing` from their exit status.

use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

use super::agent::AgentEvent;
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

/// Runs `cmd` with `sh -c` in `dir`; Ok(passed, output tail).
async fn run_command(cmd: &str, dir: &Path) -> (bool, String) {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_millis(BUILD_TEST_TIMEOUT_MS), child).await {
        Ok(Ok(out)) => {
            let mut all = out.stdout;
            all.extend_from_slice(&out.stderr);
            (out.status.success(), format!("{}\n{}", out.status, tail(&all)))
        }
        Ok(Err(e)) => (false, format!("could not run: {e}")),
        Err(_) => (false, format!("timed out after {BUILD_TEST_TIMEOUT_MS} ms")),
    }
}

/// The `build-test` worker; returns what to record (statuses, output tails, signals).
pub async fn build_test(metadata: &Value, granted: &[String], dir: &Path) -> Vec<AgentEvent> {
    let mut out = Vec::new();
    if !granted.iter().any(|c| c == "subprocess" || c == "bash") {
        out.push(status("not run: the plugin was not granted `subprocess`".into()));
        for name in ["build.passing", "tests.passing"] {
            out.push(AgentEvent::Signal { name: name.into(), value: json!(false) });
        }
        return out;
    }
    for (key, signal) in [("buildCommand", "build.passing"), ("testCommand", "tests.passing")] {
        let Some(cmd) = metadata[key].as_str().filter(|c| !c.trim().is_empty()) else {
            out.push(status(format!("no {key} configured for the project; {signal} not reported")));
            continue;
        };
        let (passed, detail) = run_command(cmd, dir).await;
        out.push(AgentEvent::Output {
            channel: "stdout".into(),
            payload: json!({ "chunk": format!("$ {cmd}\n{detail}") }),
        });
        out.push(AgentEvent::Signal { name: signal.into(), value: json!(passed) });
    }
    out
}
