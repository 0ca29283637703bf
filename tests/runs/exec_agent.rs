//! The exec agent against scripted fake agents (small `sh` scripts): protocols, failures,
//! timeouts, cancellation and the environment the agent sees.

use od::runner::agent::{AgentEvent, AgentFailure, ArtifactDraft, Invocation};
use od::runner::exec::invoke;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("project")).expect("project dir");
        Fixture { dir }
    }

    fn project(&self) -> std::path::PathBuf {
        self.dir.path().join("project")
    }

    /// An invocation running `script` with `sh`, plus extra options merged into the config.
    fn invocation(&self, script: &str, extra: Value) -> Invocation {
        let path = self.dir.path().join("agent.sh");
        std::fs::write(&path, script).expect("write script");
        // As a run records it: its creator held the exec right (`engine/gate.rs`).
        let mut config = json!({"command": ["sh", path.to_string_lossy()], "mayExec": true});
        if let (Some(cfg), Value::Object(extra)) = (config.as_object_mut(), extra) {
            cfg.extend(extra);
        }
        Invocation {
            run_id: "run_1".into(),
            project_id: "proj_1".into(),
            project_dir: self.project(),
            snapshot_id: "snap_1".into(),
            task_kind: "prototype".into(),
            stage_id: "design".into(),
            iteration: 0,
            attempt: 1,
            atoms: vec!["build".into()],
            prompt: "Make a landing page. MARKER-7f3a\n".into(),
            config,
            daemon_url: "http://127.0.0.1:1".into(),
            data_dir: self.dir.path().join("data"),
            tool_token: "odtt.test".into(),
        }
    }
}

async fn run(inv: &Invocation) -> (Result<(), AgentFailure>, Vec<AgentEvent>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (_cancel_tx, cancel_rx) = watch::channel(false);
    let result = invoke(inv, &tx, cancel_rx).await;
    drop(tx);
    let mut events = Vec::new();
    while let Some(ev) = rx.recv().await {
        events.push(ev);
    }
    (result, events)
}

fn agent(payload: Value) -> AgentEvent {
    AgentEvent::Output { channel: "agent".into(), payload }
}

fn without_stderr(events: Vec<AgentEvent>) -> Vec<AgentEvent> {
    events.into_iter().filter(|e| !matches!(e, AgentEvent::Output { channel, .. } if channel == "stderr")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn od_protocol_agent_reads_the_prompt_and_reports_in_order() {
    let fx = Fixture::new();
    let inv = fx.invocation(
        r#"prompt=$(cat)
case "$prompt" in
  *MARKER-7f3a*) echo '{"type":"text","text":"got MARKER-7f3a"}' ;;
  *) echo '{"type":"text","text":"no prompt"}' ;;
esac
cmp -s "$OD_PROMPT_FILE" - <<EOF && echo '{"type":"status","label":"prompt file ok"}'
$prompt
EOF
echo "working on it" >&2
echo 'not json at all'
echo '{"type":"signal","name":"critique.score","value":4}'
echo '{"type":"artifact","path":"index.html","title":"Landing"}'
echo '{"type":"done"}'
"#,
        json!({"protocol": "od"}),
    );
    let (result, events) = run(&inv).await;
    assert_eq!(result, Ok(()));
    assert!(
        events.contains(&AgentEvent::Output { channel: "stderr".into(), payload: json!({"chunk": "working on it"}) })
    );
    assert_eq!(
        without_stderr(events),
        vec![
            agent(json!({"type": "text_delta", "delta": "got MARKER-7f3a"})),
            agent(json!({"type": "status", "label": "prompt file ok"})),
            agent(json!({"type": "raw", "line": "not json at all"})),
            AgentEvent::Signal { name: "critique.score".into(), value: json!(4) },
            AgentEvent::Artifact(ArtifactDraft {
                path: "index.html".into(),
                title: "Landing".into(),
                artifact_kind: "html".into(),
                render_kind: "html".into(),
                ..Default::default()
            }),
        ]
    );
    let prompt_file = fx.project().join(".od/prompts/design-0-1.md");
    assert_eq!(std::fs::read_to_string(prompt_file).expect("prompt file"), inv.prompt);
}

const CLAUDE_SUCCESS: &str = r#"cat > /dev/null
cat <<'EOF'
{"type":"system","subtype":"init","model":"claude-test","session_id":"s1","tools":["Write"]}
{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Writing the page."},{"type":"tool_use","id":"tu1","name":"Write","input":{"file_path":"index.html"}}]},"session_id":"s1"}
{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":"File created","is_error":false}]},"session_id":"s1"}
{"type":"result","subtype":"success","is_error":false,"result":"Done.","duration_ms":4200,"total_cost_usd":0.031,"usage":{"input_tokens":1200,"output_tokens":340}}
EOF
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_stream_json_agent_is_mapped() {
    let fx = Fixture::new();
    let (result, events) = run(&fx.invocation(CLAUDE_SUCCESS, json!({}))).await; // auto-detected
    assert_eq!(result, Ok(()));
    assert_eq!(
        events,
        vec![
            // The session id, for a native resume.
            agent(json!({"type": "status", "label": "initialized", "model": "claude-test", "sessionId": "s1"})),
            agent(json!({"type": "text_delta", "delta": "Writing the page."})),
            agent(json!({"type": "tool_use", "id": "tu1", "name": "Write", "input": {"file_path": "index.html"}})),
            agent(json!({"type": "tool_result", "toolUseId": "tu1", "content": "File created", "isError": false})),
            agent(json!({"type": "usage", "usage": {"input_tokens": 1200, "output_tokens": 340},
                "costUsd": 0.031, "durationMs": 4200})),
            // The Write's file, reported at the iteration's end.
            AgentEvent::Artifact(ArtifactDraft {
                path: "index.html".into(),
                artifact_kind: "html".into(),
                render_kind: "html".into(),
                ..ArtifactDraft::default()
            }),
        ]
    );
    let (result, _) = run(&fx.invocation(CLAUDE_SUCCESS, json!({"protocol": "claude-stream-json"}))).await;
    assert_eq!(result, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashing_agent_reports_exit_code_and_stderr_tail() {
    let fx = Fixture::new();
    let script = "for i in $(seq 1 50); do echo \"noise $i\" >&2; done\necho 'boom: out of ideas' >&2\nexit 3\n";
    let (result, events) = run(&fx.invocation(script, json!({}))).await;
    let Err(AgentFailure::Crashed { status, stderr_tail }) = result else { panic!("{result:?}") };
    assert_eq!(status, "exit code 3");
    assert!(stderr_tail.ends_with("boom: out of ideas"), "{stderr_tail}");
    assert!(!stderr_tail.contains("noise 1\n") && stderr_tail.lines().count() <= 20, "{stderr_tail}");
    assert_eq!(events.len(), 51, "every stderr line is forwarded");

    let (result, _) = run(&fx.invocation("kill -9 $$\n", json!({}))).await;
    assert_eq!(result, Err(AgentFailure::Crashed { status: "signal 9".into(), stderr_tail: String::new() }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_agent_hits_the_idle_timeout() {
    let fx = Fixture::new();
    let started = Instant::now();
    let (result, _) = run(&fx.invocation("sleep 30\n", json!({"idleTimeoutMs": 300}))).await;
    assert_eq!(result, Err(AgentFailure::TimedOut { after_ms: 300 }));
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chatty_agent_hits_the_total_timeout() {
    let fx = Fixture::new();
    let started = Instant::now();
    let script = "while :; do echo tick; sleep 0.05; done\n";
    let (result, events) = run(&fx.invocation(script, json!({"timeoutMs": 600, "idleTimeoutMs": 5000}))).await;
    assert_eq!(result, Err(AgentFailure::TimedOut { after_ms: 600 }));
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(!events.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_kills_a_running_agent() {
    let fx = Fixture::new();
    let inv = fx.invocation("echo '{\"type\":\"status\",\"label\":\"working\"}'\nsleep 30\n", json!({}));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let started = Instant::now();
    let task = tokio::spawn(async move { invoke(&inv, &tx, cancel_rx).await });
    let first = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("agent started");
    assert_eq!(first, Some(agent(json!({"type": "status", "label": "working"}))));
    cancel_tx.send(true).expect("cancel");
    let result = tokio::time::timeout(Duration::from_secs(5), task).await.expect("returns promptly").expect("join");
    assert_eq!(result, Err(AgentFailure::Canceled));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_line_is_reported() {
    let fx = Fixture::new();
    let script = "echo '{\"type\":\"text\",\"text\":\"trying\"}'\necho '{\"type\":\"error\",\"message\":\"cannot reach the design system\"}'\necho '{\"type\":\"error\",\"message\":\"second\"}'\nexit 1\n";
    let (result, events) = run(&fx.invocation(script, json!({"protocol": "od"}))).await;
    assert_eq!(result, Err(AgentFailure::Reported("cannot reach the design system".into())));
    assert_eq!(events, vec![agent(json!({"type": "text_delta", "delta": "trying"}))]);

    // A protocol violation fails the invocation even when the agent exits 0.
    let script = "echo '{\"type\":\"signal\",\"name\":\"critique.score\",\"value\":\"high\"}'\n";
    let (result, _) = run(&fx.invocation(script, json!({"protocol": "od"}))).await;
    let Err(AgentFailure::Reported(msg)) = result else { panic!("{result:?}") };
    assert!(msg.contains("critique.score"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_error_result_is_reported() {
    let fx = Fixture::new();
    let script = r#"cat <<'EOF'
{"type":"system","subtype":"init","model":"claude-test"}
{"type":"result","subtype":"success","is_error":true,"result":"Credit balance is too low","duration_ms":10,"total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}
EOF
exit 1
"#;
    let (result, events) = run(&fx.invocation(script, json!({}))).await;
    assert_eq!(result, Err(AgentFailure::Reported("Credit balance is too low".into())));
    assert_eq!(events.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_sees_its_environment_and_working_dir() {
    let fx = Fixture::new();
    let script = r#"echo "{\"type\":\"text\",\"text\":\"$OD_STAGE_ID|$OD_ITERATION|$OD_ATTEMPT|$OD_RUN_ID|$OD_PROJECT_ID|$OD_SNAPSHOT_ID|$OD_DAEMON_URL|$EXTRA_VAR\"}"
[ "$(pwd -P)" = "$(cd "$OD_PROJECT_DIR" && pwd -P)" ] && echo '{"type":"text","text":"in project dir"}'
[ -f "$OD_PROMPT_FILE" ] && [ -d "$(dirname "$OD_DATA_DIR")" ] && echo '{"type":"text","text":"files ok"}'
"#;
    let (result, events) = run(&fx.invocation(script, json!({"env": {"EXTRA_VAR": "extra"}}))).await;
    assert_eq!(result, Ok(()));
    assert_eq!(
        events,
        vec![
            agent(json!({"type": "text_delta", "delta": "design|0|1|run_1|proj_1|snap_1|http://127.0.0.1:1|extra"})),
            agent(json!({"type": "text_delta", "delta": "in project dir"})),
            agent(json!({"type": "text_delta", "delta": "files ok"})),
        ]
    );
}

/// A program that reads `$PWD` rather than asking for its working directory (as OpenCode does)
/// must find the project there too, not the daemon's `$PWD` (a shell would have fixed it itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pwd_names_the_project_dir() {
    let fx = Fixture::new();
    let mut inv = fx.invocation("", json!({}));
    inv.config = json!({"command": ["printenv", "PWD"], "protocol": "od", "mayExec": true});
    let (result, events) = run(&inv).await;
    assert_eq!(result, Ok(()));
    let line = fx.project().to_string_lossy().into_owned();
    assert_eq!(events, vec![agent(json!({"type": "raw", "line": line}))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_command_runs_through_sh() {
    let fx = Fixture::new();
    let mut inv = fx.invocation("", json!({}));
    inv.config =
        json!({"command": "cat >/dev/null; echo '{\"type\":\"text\",\"text\":\"via sh\"}' | cat", "mayExec": true});
    let (result, events) = run(&inv).await;
    assert_eq!(result, Ok(()));
    assert_eq!(events, vec![agent(json!({"type": "text_delta", "delta": "via sh"}))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_failures() {
    let fx = Fixture::new();
    let mut inv = fx.invocation("", json!({}));
    inv.config = json!({});
    let (result, _) = run(&inv).await;
    assert_eq!(
        result,
        Err(AgentFailure::Spawn("no agent command configured (set agentCommand or OD_AGENT_CMD)".into()))
    );
    inv.config = json!({"command": ["/definitely/not/an/agent"], "mayExec": true});
    let (result, _) = run(&inv).await;
    assert!(matches!(result, Err(AgentFailure::Spawn(ref m)) if m.contains("/definitely/not/an/agent")), "{result:?}");
    inv.config = json!({"command": ["sh"], "protocol": "xml", "mayExec": true});
    assert!(matches!(run(&inv).await.0, Err(AgentFailure::Spawn(_))));
}

/// The one gate at the executor: a run whose creator lacked the exec right (or a record that does
/// not say it had it, like a bundle's) runs no supplied command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supplied_command_runs_only_for_a_run_whose_creator_held_the_exec_right() {
    let fx = Fixture::new();
    let marker = fx.dir.path().join("ran");
    let mut inv = fx.invocation(&format!("touch {}\n", marker.display()), json!({}));
    inv.config.as_object_mut().unwrap().remove("mayExec");
    let (result, _) = run(&inv).await;
    assert!(matches!(result, Err(AgentFailure::Spawn(ref m)) if m.contains("exec right")), "{result:?}");
    assert!(!marker.exists());
    inv.config["mayExec"] = json!(true);
    assert_eq!(run(&inv).await.0, Ok(()));
    assert!(marker.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_that_ignores_a_large_prompt_does_not_deadlock() {
    let fx = Fixture::new();
    let mut inv = fx.invocation("echo '{\"type\":\"done\"}'\n", json!({"timeoutMs": 20000}));
    inv.prompt = "p".repeat(4 << 20);
    let (result, _) = run(&inv).await;
    assert_eq!(result, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_lines_are_truncated_and_recorded_in_storable_pieces() {
    let fx = Fixture::new();
    let script = "cat >/dev/null\nhead -c 3000000 /dev/zero | tr '\\0' a\necho\necho '{\"type\":\"done\"}'\n";
    let (result, events) = run(&fx.invocation(script, json!({}))).await;
    assert_eq!(result, Ok(()));
    let payloads: Vec<&Value> = events
        .iter()
        .map(|e| match e {
            AgentEvent::Output { payload, .. } => payload,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(payloads[0]["label"], "line-truncated");
    assert_eq!(payloads[0]["detail"]["droppedBytes"], 3_000_000 - od::runner::exec::MAX_LINE_BYTES as u64);
    let raw: String = payloads[1..].iter().map(|p| p["line"].as_str().expect("raw piece")).collect();
    assert_eq!(raw, "a".repeat(od::runner::exec::MAX_LINE_BYTES));
    assert!(payloads.iter().all(|p| p.to_string().len() <= od::limits::AGENT_EVENT_PAYLOAD_BYTES));
    assert!(Path::new(&fx.project()).join(".od/prompts").is_dir());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_is_cut_at_the_invocation_bound_with_a_marker() {
    let fx = Fixture::new();
    let script = "cat >/dev/null\nyes '{\"type\":\"text\",\"text\":\"flood\"}' | head -n 20000\n\
                  echo '{\"type\":\"error\",\"message\":\"still heard past the bound\"}'\n";
    let (result, events) = run(&fx.invocation(script, json!({"outputMaxEvents": 50}))).await;
    assert_eq!(result, Err(AgentFailure::Reported("still heard past the bound".into())));
    assert_eq!(events.len(), 52, "50 events, the limit marker and the closing marker");
    let labels: Vec<&Value> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Output { payload, .. } if payload["type"] == "status" => Some(&payload["label"]),
            _ => None,
        })
        .collect();
    assert_eq!(labels, [&json!("output-limit-reached"), &json!("output-truncated")]);
    let AgentEvent::Output { payload, .. } = events.last().unwrap() else { panic!() };
    assert_eq!(payload["detail"]["droppedEvents"], 20_000 - 50);
    assert_eq!(payload["detail"]["limitEvents"], 50);
}

/// Whether `pid` still runs (a zombie waiting for its reaper does not).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_in_every_form_end_with_the_invocation() {
    let fx = Fixture::new();
    let pids = fx.dir.path().join("pids");
    let script = format!(
        "cat >/dev/null\nsleep 1001 & echo $! >> {p}\n(sleep 1002 & echo $! >> {p})\n\
         setsid sleep 1003 & echo $! >> {p}\nsetsid sh -c 'env -i sleep 1005 & echo $! >> {p}; wait' &\n\
         while [ $(wc -l < {p}) -lt 4 ]; do sleep 0.01; done\necho '{{\"type\":\"done\"}}'\n",
        p = pids.display()
    );
    let (result, _) = run(&fx.invocation(&script, json!({}))).await;
    assert_eq!(result, Ok(()));
    let started: Vec<u32> =
        std::fs::read_to_string(&pids).unwrap().lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(started.len(), 4);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut left: Vec<u32> = started.clone();
    while !left.is_empty() && Instant::now() < deadline {
        left.retain(|p| alive(*p));
        std::thread::sleep(Duration::from_millis(50));
    }
    for p in &left {
        let _ = std::process::Command::new("kill").args(["-9", &p.to_string()]).status();
    }
    assert!(left.is_empty(), "children outlived the invocation: {left:?}");
}
