//! Real third-party clients against a live daemon (Node 20, packages pinned in tests/js/package.json
//! and installed by `.ci/run` with `npm ci`): the stock `@ag-ui/client` `HttpAgent` driving a run
//! with a stage loop, a tool call and a GenUI interrupt through `POST /api/runs/:id/agui`, every event
//! checked with `@ag-ui/core`'s schemas and `verifyEvents`; npm `eventsource` reconnecting to
//! `GET /api/runs/:id/events` mid-run with `Last-Event-ID`. Any client warning fails. Also an
//! interrupt answered through the GenUI route and continued by the next request, determinism, and
//! the AG-UI route's refusals (unknown run, bad body, unknown interrupt).

use crate::common;

use common::harness::{names, Engine};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Far in the future, so interrupts' `expiresAt` (the injected clock + timeout) are never in the
/// past for the client, which compares them with the real time.
const NOW: i64 = 4_000_000_000_000;

fn js_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js")
}

/// Runs a Node script from tests/js; returns its JSON summary. Fails on a non-zero exit, on any
/// stderr output (client warnings) and on `ok: false`.
fn node(script: &str, args: &[&str]) -> Value {
    let dir = js_dir();
    assert!(
        dir.join("node_modules/@ag-ui/client").is_dir() && dir.join("node_modules/eventsource").is_dir(),
        "tests/js/node_modules is missing: install the pinned clients with `npm ci --prefix tests/js` (.ci/run does)"
    );
    let child = Command::new("node")
        .arg(dir.join(script))
        .args(args)
        .current_dir(&dir)
        .env_remove("SUPPRESS_TRANSFORMATION_WARNINGS")
        .env_remove("NODE_OPTIONS")
        .env_remove("NODE_ENV")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node (v20) on PATH");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(out) => out.expect("node ran"),
        Err(_) => {
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("{script} did not finish within 120 s");
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary: Value = stdout.lines().last().and_then(|l| serde_json::from_str(l).ok()).unwrap_or(Value::Null);
    assert!(out.status.success() && summary["ok"] == true, "{script} failed ({}):\n{stdout}\n{stderr}", out.status);
    assert!(stderr.trim().is_empty(), "{script} wrote to stderr (a client warning):\n{stderr}");
    summary
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    Command::new("chmod").arg("+x").arg(&p).status().unwrap();
    p
}

/// The GenUI surface `pick`, raised at the entry of stage `ask`.
fn pick() -> Value {
    json!([{ "id": "pick", "kind": "choice", "persist": "run", "trigger": { "stageId": "ask" },
             "prompt": "Pick a style", "schema": { "type": "string", "enum": ["bold", "calm"] } }])
}

fn install_plugin(e: &Engine, dir: &Path, stages: Value, surfaces: Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), "---\nname: agui\ndescription: An AG-UI test plugin.\n---\nWork.\n").unwrap();
    let manifest = json!({
        "specVersion": "1.0.0", "name": "agui", "version": "1.0.0", "title": "AG-UI", "description": "AG-UI test.",
        "od": { "kind": "scenario", "taskKind": "new-generation", "pipeline": { "stages": stages },
                "genui": { "surfaces": surfaces } }
    });
    std::fs::write(dir.join("open-design.json"), manifest.to_string()).unwrap();
    e.install(dir);
}

/// Text, thinking, a tool call in `make`, a critique score rising by iteration, usage.
const AGENT: &str = r#"cat >/dev/null
echo '{"type":"thinking","text":"planning"}'
echo "{\"type\":\"text\",\"text\":\"stage $OD_STAGE_ID \"}"
echo "{\"type\":\"text\",\"text\":\"iteration $OD_ITERATION\"}"
if [ "$OD_STAGE_ID" = make ]; then
  echo '{"type":"tool_use","id":"t1","name":"write_file","input":{"path":"index.html"}}'
  printf '<h1>hi</h1>' > index.html
  echo '{"type":"tool_result","toolUseId":"t1","content":"ok"}'
  echo '{"type":"artifact","path":"index.html","title":"Page"}'
  echo '{"type":"text","text":"wrote the page"}'
fi
if [ "$OD_STAGE_ID" = critique ]; then
  echo "{\"type\":\"signal\",\"name\":\"critique.score\",\"value\":$((OD_ITERATION + 3))}"
fi
echo '{"type":"usage","inputTokens":10,"outputTokens":5}'"#;

fn stages() -> Value {
    json!([ { "id": "ask", "atoms": [] }, { "id": "make", "atoms": ["file-write"] },
            { "id": "critique", "atoms": ["critique-theater"], "repeat": true, "until": "critique.score>=4" } ])
}

fn start(e: &Engine, agent: &Path, env: Value) -> String {
    e.start_run(json!({ "pluginId": "agui", "agent": "exec", "agentCommand": [agent.to_str().unwrap()],
                        "agentProtocol": "od", "agentEnv": env }))
}

#[test]
fn stock_http_agent_runs_a_live_run_with_a_stage_loop_a_tool_call_and_a_genui_interrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    install_plugin(&e, &tmp.path().join("plugin"), stages(), pick());
    let agent = script(tmp.path(), "agent.sh", AGENT);
    let id = start(&e, &agent, json!({}));
    // The run waits for `pick` at `ask`; the client answers it through AG-UI's resume.
    let s = node("agui-check.cjs", &[&e.url, &id, "\"bold\""]);

    assert_eq!(s["rounds"], 2, "{s}");
    let interrupt = &s["interrupts"][0];
    assert!(interrupt["id"].as_str().unwrap().starts_with("pick@"), "{s}");
    assert_eq!(
        (interrupt["reason"].as_str(), interrupt["message"].as_str()),
        (Some("genui:choice"), Some("Pick a style"))
    );
    let types: Vec<&str> = s["types"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    for t in [
        "RUN_STARTED",
        "RUN_FINISHED",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "STEP_STARTED",
        "STEP_FINISHED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "REASONING_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_END",
        "CUSTOM",
    ] {
        assert!(types.contains(&t), "{t} missing from {types:?}");
    }
    let steps: Vec<&str> = s["steps"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(steps.iter().filter(|s| **s == "critique").count(), 2, "the devloop ran twice: {steps:?}");
    assert_eq!(steps.iter().filter(|s| **s == "ask").count(), 2, "`ask` re-opened after the interrupt: {steps:?}");
    assert_eq!(s["toolCalls"], json!([{ "id": "t1", "name": "write_file", "arguments": "{\"path\":\"index.html\"}" }]));
    assert_eq!(s["toolResults"], json!([{ "toolCallId": "t1", "content": "ok" }]));
    assert!(s["assistantTexts"].as_array().unwrap().iter().any(|t| t == "stage make iteration 0"), "{s}");
    let state = &s["state"];
    assert_eq!(state["status"], "succeeded");
    assert_eq!(
        (state["genui"]["pick"]["status"].as_str(), state["genui"]["pick"]["value"].as_str()),
        (Some("resolved"), Some("bold"))
    );
    assert_eq!(state["genui"]["pick"]["respondedBy"], "user");
    assert_eq!(state["signals"]["critique.score"], 4);
    assert_eq!(state["pipeline"]["stages"]["critique"]["termination"], "until-satisfied");
    assert_eq!(s["result"]["status"], "succeeded");
    // Usage per AG-UI run: nothing before the interrupt, every invocation's after it.
    assert_eq!(s["usage"], json!([null, [{ "inputTokens": 40, "outputTokens": 20, "totalTokens": 60 }]]));
    let (_, rows) = e.get(&format!("/api/runs/{id}/genui"));
    assert_eq!(rows["surfaces"][0]["respondedBy"], "user", "{rows}");
}

#[test]
fn eventsource_reconnects_mid_run_with_last_event_id_and_misses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    install_plugin(&e, &tmp.path().join("plugin"), json!([ { "id": "make", "atoms": [] } ]), json!([]));
    let agent = script(
        tmp.path(),
        "gated.sh",
        r#"cat >/dev/null
echo '{"type":"text","text":"before the drop"}'
while [ ! -e "$G1" ]; do sleep 0.02; done
i=0; while [ $i -lt 20 ]; do echo "{\"type\":\"text\",\"text\":\"while away $i\"}"; i=$((i+1)); done
while [ ! -e "$G2" ]; do sleep 0.02; done
i=0; while [ $i -lt 20 ]; do echo "{\"type\":\"text\",\"text\":\"after $i\"}"; i=$((i+1)); done"#,
    );
    let (g1, g2) = (tmp.path().join("gate1"), tmp.path().join("gate2"));
    let id = start(&e, &agent, json!({ "G1": g1.to_str().unwrap(), "G2": g2.to_str().unwrap() }));
    let s = node("sse-resume.cjs", &[&e.url, &id, g1.to_str().unwrap(), g2.to_str().unwrap(), "3"]);
    assert!(s["opens"].as_u64().unwrap() >= 2, "{s}");
    let watched = e.watch(&id);
    let sse_names: Vec<String> =
        s["names"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect();
    assert_eq!(sse_names, names(&watched), "SSE and ND-JSON watch print the same events");
}

/// The AG-UI events of one GET (or POST) response body.
fn agui_events(body: &str) -> Vec<Value> {
    assert!(!body.contains('\r'), "LF framing only");
    body.split("\n\n").filter_map(|f| f.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect()
}

fn get_body(url: &str) -> String {
    ureq::get(url).call().unwrap().into_string().unwrap()
}

#[test]
fn an_interrupt_answered_through_genui_continues_in_the_next_request_and_replays_identically() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    install_plugin(&e, &tmp.path().join("plugin"), stages(), pick());
    let agent = script(tmp.path(), "agent.sh", AGENT);
    let id = start(&e, &agent, json!({}));
    let url = format!("{}/api/runs/{id}/agui", e.url);
    // The first request ends at the interrupt while the run waits.
    let first = agui_events(&get_body(&url));
    let last = first.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED");
    let interrupt = &last["outcome"]["interrupts"][0];
    assert_eq!(last["outcome"]["interrupts"].as_array().unwrap().len(), 1);
    assert_eq!(interrupt["responseSchema"], json!({ "type": "string", "enum": ["bold", "calm"] }));
    assert_eq!(interrupt["metadata"]["od"]["surfaceId"], "pick");
    let iid = interrupt["id"].as_str().unwrap().to_string();
    assert_eq!(e.get(&format!("/api/runs/{id}")).1["run"]["status"], "awaiting-input");
    // Answered outside AG-UI; the next request continues after the interrupt.
    let (code, v) = e.post(&format!("/api/runs/{id}/genui/pick/respond"), json!({ "value": "calm" }));
    assert_eq!(code, 200, "{v}");
    let second = agui_events(&get_body(&format!("{url}?resume={iid}")));
    let types: Vec<&str> = second.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types[..3], ["RUN_STARTED", "STATE_SNAPSHOT", "STEP_STARTED"], "re-opens the step left open");
    assert_eq!(second[1]["snapshot"]["genui"]["pick"]["status"], "pending");
    assert_eq!(second[2]["stepName"], "ask");
    assert_eq!(second.last().unwrap()["type"], "RUN_FINISHED");
    assert_eq!(second.last().unwrap()["outcome"]["type"], "success");
    let delta_ops: Vec<&Value> =
        second.iter().filter(|e| e["type"] == "STATE_DELTA").flat_map(|e| e["delta"].as_array().unwrap()).collect();
    assert!(delta_ops.iter().any(|op| op["path"] == "/genui/pick/value" && op["value"] == "calm"));
    // Deterministic: the same run projects to the same events, request after request.
    assert_eq!(agui_events(&get_body(&url)), first);
    assert_eq!(agui_events(&get_body(&format!("{url}?resume={iid}"))), second);
}

#[test]
fn the_agui_route_refuses_what_it_cannot_serve() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let (code, v) = e.get("/api/runs/nope/agui");
    assert_eq!((code, v["error"]["code"].as_str()), (404, Some("run-not-found")));
    let (id, _) = e.run(json!({}));
    let post = |body: &str| {
        let r = ureq::post(&format!("{}/api/runs/{id}/agui", e.url))
            .set("content-type", "application/json")
            .send_string(body);
        match r {
            Ok(r) => (r.status(), r.into_string().unwrap()),
            Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap()),
            Err(err) => panic!("{err}"),
        }
    };
    assert_eq!(post("not json").0, 400);
    assert_eq!(post("[1,2]").0, 400);
    let (code, body) =
        post(r#"{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"pick@3","status":"resolved"}]}"#);
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("resume[0].interruptId"), "{body}");
    let (code, body) =
        post(r#"{"threadId":"t","runId":"r","messages":[],"tools":[],"context":[],"forwardedProps":{}}"#);
    assert_eq!(code, 200);
    let types: Vec<String> = body
        .split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .map(|d| serde_json::from_str::<Value>(d).unwrap()["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(types.first().map(String::as_str), Some("RUN_STARTED"));
    assert_eq!(types.last().map(String::as_str), Some("RUN_FINISHED"));
}
