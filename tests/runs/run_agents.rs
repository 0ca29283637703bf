//! Runs driven by the exec agent through the whole pipeline, with scripted fake agents: od's own
//! ND-JSON protocol (with callbacks through the `od` CLI: a signal and a break-loop), Claude Code's
//! stream-json, a crash and a hang; and runs caught in flight by a daemon stop or a kill.

use crate::common;

use common::harness::{of, write_plugin, Engine, OD};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

const NOW: i64 = 1_800_000_000_000;

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&p).status().unwrap();
    p
}

fn setup(tmp: &Path, stages: Value) -> Engine {
    let e = Engine::start(&tmp.join("data"), NOW);
    let dir = tmp.join("agentic");
    write_plugin(&dir, "agentic", "1.0.0", stages, "Use the tools.");
    e.install(&dir);
    e
}

fn exec_run(e: &Engine, agent: &Path, extra: Value) -> (String, Vec<Value>) {
    let mut body = json!({ "pluginId": "agentic", "agent": "exec", "agentCommand": [agent.to_str().unwrap()],
                           "agentEnv": { "OD_BIN": OD } });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    e.run(body)
}

const OD_AGENT: &str = r###"
grep -q "## Active stage: $OD_STAGE_ID" || { echo "prompt missing" >&2; exit 9; }
echo '{"type":"status","label":"thinking"}'
echo "{\"type\":\"text\",\"text\":\"stage $OD_STAGE_ID iteration $OD_ITERATION\"}"
printf '<h1>hello</h1>' > "page-$OD_STAGE_ID.html"
echo "{\"type\":\"artifact\",\"path\":\"page-$OD_STAGE_ID.html\",\"title\":\"Page\"}"
if [ "$OD_STAGE_ID" = critique ]; then
  "$OD_BIN" run signal "$OD_RUN_ID" critique.score $((OD_ITERATION + 3)) >/dev/null || exit 7
fi
echo '{"type":"usage","inputTokens":100,"outputTokens":20}'
echo '{"type":"done"}'
"###;

#[test]
fn od_protocol_agent_with_a_signal_callback_through_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(
        tmp.path(),
        json!([ { "id": "draft", "atoms": ["file-write"] },
                { "id": "critique", "atoms": ["critique-theater"], "repeat": true, "until": "critique.score>=4" } ]),
    );
    let agent = script(tmp.path(), "od-agent.sh", OD_AGENT);
    let (id, ev) = exec_run(&e, &agent, json!({}));
    let end = &ev.last().unwrap()["data"];
    assert_eq!(end["status"], "succeeded", "{ev:#?}");
    let texts: Vec<&str> =
        of(&ev, "agent").iter().filter(|a| a["type"] == "text_delta").map(|a| a["delta"].as_str().unwrap()).collect();
    assert_eq!(texts, ["stage draft iteration 0", "stage critique iteration 0", "stage critique iteration 1"]);
    let sig: Vec<(Value, &str)> =
        of(&ev, "signal").iter().map(|s| (s["value"].clone(), s["source"].as_str().unwrap())).collect();
    assert_eq!(sig, [(json!(3), "cli"), (json!(4), "cli")]);
    assert_eq!(of(&ev, "artifact").len(), 3);
    assert_eq!(of(&ev, "start")[0]["bin"], agent.to_str().unwrap());
    let (_, rows) = e.get(&format!("/api/runs/{id}/devloop-iterations"));
    let rows = rows["iterations"].as_array().unwrap();
    assert_eq!(rows.last().unwrap()["termination"], "until-satisfied");
    assert_eq!(rows.last().unwrap()["tokensUsed"], 120);
    let (_, verify) = e.post(&format!("/api/runs/{id}/replay/verify"), json!({}));
    assert_eq!(verify["ok"], true);
}

#[test]
fn break_loop_from_inside_the_run_leaves_the_devloop_and_the_run_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(
        tmp.path(),
        json!([ { "id": "critique", "atoms": ["critique-theater"], "repeat": true, "until": "critique.score>=9" },
                { "id": "handoff", "atoms": ["handoff"] } ]),
    );
    let agent = script(
        tmp.path(),
        "breaker.sh",
        r#"cat >/dev/null
echo '{"type":"text","text":"round"}'
if [ "$OD_STAGE_ID" = critique ] && [ "$OD_ITERATION" = 1 ]; then
  "$OD_BIN" run respond "$OD_RUN_ID" --json '{"action":"break-loop"}' >/dev/null || exit 7
fi"#,
    );
    let (id, ev) = exec_run(&e, &agent, json!({}));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
    assert_eq!(of(&ev, "run_responded").len(), 1);
    let broken = of(&ev, "devloop_broken");
    assert_eq!(broken.len(), 1);
    assert_eq!(broken[0]["iteration"], 1);
    let (_, rows) = e.get(&format!("/api/runs/{id}/devloop-iterations"));
    let rows = rows["iterations"].as_array().unwrap();
    let crit: Vec<&Value> = rows.iter().filter(|r| r["stageId"] == "critique").collect();
    assert_eq!(crit.len(), 2, "left after the round in which the user asked");
    assert_eq!(crit[1]["termination"], "loop-broken");
    assert!(of(&ev, "pipeline_stage_started").iter().any(|s| s["stageId"] == "handoff"));
}

#[test]
fn claude_stream_json_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path(), json!([ { "id": "generate", "atoms": ["file-write"] } ]));
    let agent = script(
        tmp.path(),
        "claude.sh",
        r#"cat >/dev/null
printf '<h1>hi</h1>' > index.html
cat <<'JSON'
{"type":"system","subtype":"init","model":"claude-test","session_id":"s1","tools":[]}
{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Writing the page."},{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"index.html"}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok","is_error":false}]}}
{"type":"result","subtype":"success","is_error":false,"result":"done","duration_ms":12,"total_cost_usd":0.01,"usage":{"input_tokens":40,"output_tokens":8}}
JSON"#,
    );
    let (id, ev) = exec_run(&e, &agent, json!({ "agentProtocol": "claude-stream-json" }));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:#?}");
    // (A writing `generate` stage of a new-generation plugin gets the core plan and critique stages.)
    let stages: Vec<&str> = of(&ev, "pipeline_stage_started").iter().map(|s| s["stageId"].as_str().unwrap()).collect();
    assert_eq!(stages, ["plan", "generate", "critique", "critique", "critique"]);
    let agent_ev: Vec<&Value> = of(&ev, "agent").into_iter().filter(|a| a["stageId"] == "generate").collect();
    let types: Vec<&str> = agent_ev.iter().map(|a| a["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["status", "text_delta", "tool_use", "tool_result", "usage"]);
    assert_eq!(agent_ev[2]["name"], "Write");
    assert_eq!(agent_ev[3]["toolUseId"], "t1");
    let (_, rows) = e.get(&format!("/api/runs/{id}/devloop-iterations"));
    assert_eq!(rows["iterations"][1]["stageId"], "generate");
    assert_eq!(rows["iterations"][1]["tokensUsed"], 48);
    // Auto-detection picks the same protocol.
    let (_, ev) = exec_run(&e, &agent, json!({}));
    assert_eq!(of(&ev, "agent").iter().filter(|a| a["type"] == "tool_use").count(), 5, "one per invocation");
}

/// Claude Code names absolute paths; one Write then an Edit of the same file, a failed Write, and a
/// Write outside the project.
const CLAUDE_WRITER: &str = r#"cat >/dev/null
printf '{"type":"system","subtype":"init","cwd":"%s","session_id":"s1","tools":["Write","Edit"],"model":"claude-test","permissionMode":"acceptEdits"}\n' "$PWD"
printf '{"type":"assistant","message":{"id":"m1","type":"message","role":"assistant","content":[{"type":"text","text":"Writing the page."},{"type":"tool_use","id":"toolu_1","name":"Write","input":{"file_path":"%s/index.html","content":"<h1>v1</h1>"}}]},"session_id":"s1"}\n' "$OD_PROJECT_DIR"
printf '<h1>v1</h1>' > "$OD_PROJECT_DIR/index.html"
printf '{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"File created successfully at: %s/index.html"}]},"session_id":"s1"}\n' "$OD_PROJECT_DIR"
printf '{"type":"assistant","message":{"id":"m2","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"Edit","input":{"file_path":"%s/index.html","old_string":"v1","new_string":"v2"}},{"type":"tool_use","id":"toolu_3","name":"Write","input":{"file_path":"%s/nope.css","content":"x"}},{"type":"tool_use","id":"toolu_4","name":"Write","input":{"file_path":"%s/outside.html","content":"x"}}]},"session_id":"s1"}\n' "$OD_PROJECT_DIR" "$OD_PROJECT_DIR" "$OD_OUTSIDE"
printf '<h1>v2</h1>' > "$OD_PROJECT_DIR/index.html"
printf 'x' > "$OD_OUTSIDE/outside.html"
printf '{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_2","type":"tool_result","content":"The file has been updated."},{"tool_use_id":"toolu_3","type":"tool_result","content":"denied","is_error":true},{"tool_use_id":"toolu_4","type":"tool_result","content":"File created"}]},"session_id":"s1"}\n'
printf '{"type":"result","subtype":"success","is_error":false,"duration_ms":12,"num_turns":3,"result":"Done.","session_id":"s1","total_cost_usd":0.01,"usage":{"input_tokens":40,"output_tokens":8}}\n'
"#;

#[test]
fn files_written_by_claude_file_tools_are_recorded_as_artifacts() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path(), json!([ { "id": "generate", "atoms": ["file-write"] } ]));
    let outside = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    let agent = script(tmp.path(), "claude-writer.sh", CLAUDE_WRITER);
    let (id, ev) = exec_run(
        &e,
        &agent,
        json!({ "agentProtocol": "claude-stream-json", "agentEnv": { "OD_OUTSIDE": outside.to_str().unwrap() } }),
    );
    let end = &ev.last().unwrap()["data"];
    assert_eq!(end["status"], "succeeded", "{ev:#?}");
    let arts = of(&ev, "artifact");
    let in_generate: Vec<&Value> = arts.iter().copied().filter(|a| a["stageId"] == "generate").collect();
    assert_eq!(in_generate.len(), 1, "one artifact per path per iteration: {arts:#?}");
    let a = in_generate[0];
    assert_eq!((a["path"].as_str(), a["artifactKind"].as_str()), (Some("index.html"), Some("html")));
    assert_eq!(a["bytes"], 11);
    assert_eq!(
        a["digest"].as_str().unwrap(),
        blake3::hash(b"<h1>v2</h1>").to_hex().as_str(),
        "as on disk after the Edit"
    );
    assert!(end["artifactCount"].as_u64().unwrap() >= 1, "{end}");
    assert_eq!(end["artifactCount"].as_u64().unwrap() as usize, arts.len());
    assert!(arts.iter().all(|a| a["path"] == "index.html"), "neither the failed Write nor the outside one: {arts:#?}");
    let noted = of(&ev, "agent").into_iter().any(|o| {
        o["label"] == "artifact-rejected" && o["detail"].as_str().unwrap_or("").contains("outside the project")
    });
    assert!(noted, "the write outside the project is noted");
    let (_, listed) = e.get(&format!("/api/runs/{id}"));
    assert!(listed["run"]["artifactCount"].as_u64().unwrap() >= 1, "{listed}");
}

#[test]
fn a_crashing_agent_and_a_hanging_agent_end_the_run_with_a_clear_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path(), json!([ { "id": "generate", "atoms": ["file-write"] } ]));
    let crash = script(tmp.path(), "crash.sh", "cat >/dev/null\necho 'boom: out of cheese' >&2\nexit 3");
    let (_, ev) = exec_run(&e, &crash, json!({}));
    let end = &ev.last().unwrap()["data"];
    assert_eq!(end["status"], "failed");
    assert_eq!(end["failureCategory"], "agent-crashed");
    assert!(end["failureDetail"].as_str().unwrap().contains("out of cheese"), "{end}");
    assert!(of(&ev, "stderr").iter().any(|s| s["chunk"].as_str().unwrap().contains("boom")));

    let hang = script(tmp.path(), "hang.sh", "echo '{\"type\":\"text\",\"text\":\"starting\"}'\nsleep 30");
    let t = std::time::Instant::now();
    let (_, ev) = exec_run(&e, &hang, json!({ "agentIdleTimeoutMs": 300 }));
    let end = &ev.last().unwrap()["data"];
    assert_eq!(end["status"], "failed");
    assert_eq!(end["failureCategory"], "agent-timeout");
    assert!(t.elapsed().as_secs() < 20, "the hang was cut short ({:?})", t.elapsed());
    let (_, runs) = e.get("/api/runs?status=active");
    assert!(runs["runs"].as_array().unwrap().is_empty(), "no run left stuck");
}

#[test]
fn a_graceful_stop_fails_runs_in_flight_and_the_next_start_reports_them() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = Engine::start(&data, NOW);
    let id = e.start_run(json!({ "dryRun": { "waitForCancel": "discovery" } }));
    wait_for_start(&e.url, &id);
    e.stop();
    let e = Engine::start(&data, NOW);
    let (_, run) = e.get(&format!("/api/runs/{id}"));
    assert_eq!(run["run"]["status"], "failed");
    assert_eq!(run["run"]["failureCategory"], "daemon-shutdown");
}

fn wait_for_start(url: &str, id: &str) {
    let r = ureq::get(&format!("{url}/api/runs/{id}/watch")).call().unwrap();
    for line in BufReader::new(r.into_reader()).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["event"] == "start" {
            return;
        }
    }
    panic!("the run never started its agent");
}

#[test]
fn a_killed_daemon_leaves_no_run_stuck_the_next_start_ends_it_as_failed() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut child = std::process::Command::new(OD)
        .args(["daemon", "start", "--foreground", "--port", "0", "--json", "--data-dir"])
        .arg(&data)
        .env_remove("OD_DAEMON_URL")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let url = serde_json::from_str::<Value>(&line).unwrap()["url"].as_str().unwrap().to_string();
    let r = ureq::post(&format!("{url}/api/runs")).send_json(json!({ "dryRun": { "waitForCancel": "plan" } })).unwrap();
    let id = r.into_json::<Value>().unwrap()["runId"].as_str().unwrap().to_string();
    wait_for_start(&url, &id);
    child.kill().unwrap();
    child.wait().unwrap();
    let e = Engine::start(&data, NOW);
    let (_, run) = e.get(&format!("/api/runs/{id}"));
    assert_eq!(run["run"]["status"], "failed");
    assert_eq!(run["run"]["failureCategory"], "daemon-restart");
    assert!(run["run"]["reason"].as_str().unwrap().contains("not resumed"));
    let ev = e.watch(&id);
    assert_eq!(ev.last().unwrap()["event"], "end");
}
