//! `od agents test <id>`: one tiny real invocation of a catalog agent — the prompt "say ok", in a
//! fresh empty folder, with its command line built from the template as a run would (permission
//! mode `accept-edits`) — bounded in time, its whole process group killed when it overruns. The
//! report says what was run and what came back: the exit, the text it said (read with its stream
//! protocol's parser), what the parser made of the rest, and stderr's tail.

use serde_json::{json, Value};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use crate::agents::catalog::{AgentDef, PromptVia, DEFAULT_PERMISSION_MODE};
use crate::agents::detect::{resolve, ProbeEnv, Resolved};
use crate::agents::template::{build, Slots};
use crate::runner::agent::AgentEvent;
use crate::runner::dialects::{LineParser, Parsed, Protocol};

/// The prompt of a test.
pub const TEST_PROMPT: &str = "say ok";

/// Runs the test; the report is JSON (`ok` true when the agent exited 0 and said something).
pub fn trial(def: &AgentDef, env: &ProbeEnv, timeout: Duration) -> Value {
    let fail = |why: String| json!({ "id": def.id, "ok": false, "error": why });
    if def.command_from_request {
        return fail(format!("{} takes its command line from a run (agentCommand); start a run to test it", def.id));
    }
    let path = match resolve(def, env) {
        Resolved::Found(p) => p,
        other => return fail(format!("no usable binary: {other:?} (see `od agents info {}`)", def.id)),
    };
    let dir = std::env::temp_dir().join(format!("od-agent-test-{}", crate::engine::safe_fs::temp_tag()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return fail(format!("could not make a folder to test in: {e}"));
    }
    let prompt_file = dir.join("prompt.md");
    let _ = std::fs::write(&prompt_file, TEST_PROMPT);
    let slots = Slots {
        cwd: dir.to_string_lossy().into(),
        prompt: TEST_PROMPT.into(),
        prompt_file: prompt_file.to_string_lossy().into(),
        permission_mode: DEFAULT_PERMISSION_MODE.into(),
        argv_budget: crate::limits::MAX_PROMPT_ARGV_BYTES,
        ..Slots::default()
    };
    let report = match build(def, &slots) {
        Ok(built) => run(def, &path, built.args, built.via, &dir, env, timeout),
        Err(e) => fail(e),
    };
    let _ = std::fs::remove_dir_all(&dir);
    report
}

fn run(
    def: &AgentDef,
    path: &std::path::Path,
    args: Vec<String>,
    via: PromptVia,
    dir: &std::path::Path,
    env: &ProbeEnv,
    timeout: Duration,
) -> Value {
    let started = Instant::now();
    let mut argv = vec![path.to_string_lossy().to_string()];
    argv.extend(args.iter().cloned());
    let spawned = std::process::Command::new(path)
        .args(&args)
        .current_dir(dir)
        .env_clear()
        .envs(&env.vars)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return json!({ "id": def.id, "ok": false, "argv": argv, "error": format!("could not start: {e}") }),
    };
    let pid = child.id() as i32;
    if let Some(mut stdin) = child.stdin.take() {
        if via == PromptVia::Stdin {
            let _ = stdin.write_all(TEST_PROMPT.as_bytes());
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let (code, stdout, stderr, timed_out) = match rx.recv_timeout(timeout) {
        Ok(Ok(out)) => (out.status.code(), out.stdout, out.stderr, false),
        Ok(Err(e)) => return json!({ "id": def.id, "ok": false, "argv": argv, "error": e.to_string() }),
        Err(_) => {
            // SAFETY: kill(2) on the test's own process group; no memory is touched.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            match rx.recv_timeout(Duration::from_secs(2)) {
                Ok(Ok(out)) => (None, out.stdout, out.stderr, true),
                _ => (None, Vec::new(), Vec::new(), true),
            }
        }
    };
    let stdout =
        String::from_utf8_lossy(&stdout[..stdout.len().min(crate::limits::AGENT_PROBE_OUTPUT_BYTES)]).into_owned();
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    let (text, events, reported) = read(&def.protocol, &stdout);
    let tail: String = stderr.chars().rev().take(600).collect::<Vec<_>>().into_iter().rev().collect();
    let ok = !timed_out && code == Some(0) && reported.is_none() && !text.trim().is_empty();
    json!({
        "id": def.id, "ok": ok, "argv": argv, "promptVia": format!("{via:?}").to_lowercase(),
        "protocol": def.protocol, "exitCode": code, "timedOut": timed_out,
        "elapsedMs": started.elapsed().as_millis() as u64, "text": text, "events": events,
        "reportedError": reported, "stderrTail": tail,
    })
}

/// What the protocol's parser made of stdout: the text said, how many events, a reported error.
fn read(protocol: &str, stdout: &str) -> (String, usize, Option<String>) {
    let Some(p) = Protocol::parse(protocol) else {
        return (stdout.chars().take(2000).collect(), 0, None);
    };
    let mut parser = LineParser::new(p);
    let (mut text, mut events, mut reported) = (String::new(), 0, None);
    let mut take = |items: Vec<Parsed>| {
        for item in items {
            match item {
                Parsed::Event(AgentEvent::Output { payload, .. }) if payload["type"] == "text_delta" => {
                    text.push_str(payload["delta"].as_str().unwrap_or(""));
                    events += 1;
                }
                Parsed::Event(_) => events += 1,
                Parsed::Error(e) => reported = Some(e),
                Parsed::Done => {}
            }
        }
    };
    for line in stdout.lines() {
        take(parser.feed(line));
    }
    take(parser.finish());
    (text, events, reported)
}
