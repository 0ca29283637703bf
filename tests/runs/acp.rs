//! The ACP agent (issue 31 item 4) against a fake ACP agent (`tests/fixtures/agents/fake-acp.mjs`,
//! Node without npm packages), through whole runs on an in-process daemon: text, thinking, tool
//! calls, plan and usage become agent events (a tool call named only in a permission request or
//! an update, as Qwen and Gemini do, too); files the agent writes through `fs/write_text_file`
//! become artifacts with their digests; a path outside the project is refused with a JSON-RPC
//! error; a permission request is asked through the GenUI surface `agent-permission-<kind>` (run
//! `awaiting-input` meanwhile) and the answer — allow or reject — goes back to the agent, unless
//! `permissionMode` allows it (`bypass`; `accept-edits` for an edit inside the project); a project
//! tier remembers the answer for the next run; od's cancel sends `session/cancel` and the run ends
//! `canceled` (an agent ignoring it is killed); a crash fails the run `agent-crashed` with stderr.

use crate::common;

use common::harness::{of, write_plugin, Engine};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const NOW: i64 = 1_800_000_000_000;
const FAKE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/agents/fake-acp.mjs");

struct Setup {
    e: Engine,
    tmp: tempfile::TempDir,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let plugin = tmp.path().join("acp-plugin");
    write_plugin(
        &plugin,
        "acp-plugin",
        "1.0.0",
        json!([ { "id": "draft", "atoms": ["file-write"] } ]),
        "Write a page.",
    );
    // A craft file, so the run stages its substrate (and with it the .mcp.json naming od's server).
    std::fs::write(plugin.join("craft.md"), "# Craft\n").unwrap();
    let mpath = plugin.join("open-design.json");
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    manifest["od"]["context"] = json!({ "craft": ["craft.md"] });
    std::fs::write(&mpath, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    e.install(&plugin);
    Setup { e, tmp }
}

impl Setup {
    fn log(&self) -> PathBuf {
        self.tmp.path().join("acp.log")
    }

    /// A run body driving the fake agent with `scenario`, plus `extra` fields.
    fn body(&self, scenario: &str, extra: Value) -> Value {
        let mut b = json!({ "pluginId": "acp-plugin", "agent": "acp", "agentCommand": ["node", FAKE, scenario],
            "agentEnv": { "FAKE_ACP_LOG": self.log().to_str().unwrap() } });
        for (k, v) in extra.as_object().unwrap() {
            if k == "agentEnv" {
                for (ek, ev) in v.as_object().unwrap() {
                    b["agentEnv"][ek] = ev.clone();
                }
            } else {
                b[k] = v.clone();
            }
        }
        b
    }

    /// What od sent the agent (each line the fake agent logged).
    fn sent(&self) -> Vec<Value> {
        std::fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn end(ev: &[Value]) -> &Value {
    let last = ev.last().unwrap();
    assert_eq!(last["event"], "end", "{last}");
    &last["data"]
}

/// The agent output of a run: `(type, payload)` of each `agent` event.
fn agent_out(ev: &[Value]) -> Vec<&Value> {
    of(ev, "agent")
}

fn text(ev: &[Value]) -> String {
    agent_out(ev).iter().filter(|a| a["type"] == "text_delta").map(|a| a["delta"].as_str().unwrap()).collect()
}

fn cwd(ev: &[Value]) -> PathBuf {
    PathBuf::from(of(ev, "start")[0]["cwd"].as_str().unwrap())
}

/// Whether `pid` still runs (a zombie waiting for its reaper does not).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn text_thinking_tools_plan_and_usage_become_agent_events() {
    let s = setup();
    let (_, ev) = s.e.run(s.body("text", json!({ "agentEnv": { "OPENAI_API_KEY": "sk-test" } })));
    assert_eq!(end(&ev)["status"], "succeeded", "{ev:?}");
    assert_eq!(of(&ev, "start")[0]["agentId"], "acp");
    assert!(text(&ev).starts_with("hello from fake acp ("), "{:?}", agent_out(&ev));
    let out = agent_out(&ev);
    assert!(out.iter().any(|a| a["type"] == "thinking_delta" && a["delta"] == "planning"));
    assert!(out.iter().any(|a| a["type"] == "status" && a["label"] == "plan"));
    let tool = out.iter().find(|a| a["type"] == "tool_use").expect("tool_use");
    assert_eq!(
        (tool["id"].as_str(), tool["name"].as_str(), tool["kind"].as_str()),
        (Some("t1"), Some("Search docs"), Some("search"))
    );
    let result = out.iter().find(|a| a["type"] == "tool_result").expect("tool_result");
    assert_eq!((result["toolUseId"].as_str(), result["content"].as_str()), (Some("t1"), Some("found 2")));
    assert!(out.iter().any(|a| a["type"] == "usage" && a["costUsd"] == 0.25 && a["contextUsed"] == 1200));
    assert!(out.iter().any(|a| a["type"] == "usage" && a["usage"]["output_tokens"] == 22));
    // The handshake: v1, od's file system offered, no terminal; cwd the project; the prompt sent.
    let sent = s.sent();
    let init = sent.iter().find(|m| m["method"] == "initialize").unwrap();
    assert_eq!(init["params"]["protocolVersion"], 1);
    assert_eq!(init["params"]["clientCapabilities"]["fs"], json!({ "readTextFile": true, "writeTextFile": true }));
    assert_eq!(init["params"]["clientCapabilities"]["terminal"], false);
    let new = sent.iter().find(|m| m["method"] == "session/new").unwrap();
    assert_eq!(Path::new(new["params"]["cwd"].as_str().unwrap()), cwd(&ev));
    let prompt = sent.iter().find(|m| m["method"] == "session/prompt").unwrap();
    assert!(prompt["params"]["prompt"][0]["text"].as_str().unwrap().contains("Write a page."));
    // od's own MCP server, as the run's staged .mcp.json names it, in ACP's stdio shape.
    let staged: Value = serde_json::from_slice(&std::fs::read(cwd(&ev).join(".mcp.json")).unwrap()).unwrap();
    let od = &new["params"]["mcpServers"][0];
    assert_eq!((od["name"].as_str(), &od["command"]), (Some("od"), &staged["mcpServers"]["od"]["command"]));
    assert_eq!(od["args"], staged["mcpServers"]["od"]["args"]);
    assert!(od["env"].is_array());
    // No auth method listed: none used.
    assert!(!sent.iter().any(|m| m["method"] == "authenticate"));
}

#[test]
fn an_auth_method_the_environment_can_satisfy_is_used() {
    let s = setup();
    let env = json!({ "agentEnv": { "FAKE_ACP_AUTH": "openai", "OPENAI_API_KEY": "sk-test" } });
    let (_, ev) = s.e.run(s.body("text", env));
    assert_eq!(end(&ev)["status"], "succeeded", "{ev:?}");
    let auth: Vec<Value> = s.sent().into_iter().filter(|m| m["method"] == "authenticate").collect();
    assert_eq!(auth.len(), 1);
    assert_eq!(auth[0]["params"]["methodId"], "openai");
}

#[test]
fn files_written_through_the_client_become_artifacts_with_their_digests() {
    let s = setup();
    let (_, ev) = s.e.run(s.body("write", json!({})));
    assert_eq!(end(&ev)["status"], "succeeded", "{ev:?}");
    // The missing file read as empty content (else the fake agent fails), then read back.
    assert!(text(&ev).contains("read back: <h1>written over ACP</h1>"), "{}", text(&ev));
    let dir = cwd(&ev);
    let arts = of(&ev, "artifact");
    let paths: Vec<&str> = arts.iter().map(|a| a["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["index.html", "css/site.css"]);
    for a in &arts {
        let on_disk = std::fs::read(dir.join(a["path"].as_str().unwrap())).unwrap();
        assert_eq!(a["digest"], blake3::hash(&on_disk).to_hex().to_string(), "{a}");
    }
    assert_eq!(std::fs::read_to_string(dir.join("index.html")).unwrap(), "<h1>written over ACP</h1>\n");
    assert_eq!(end(&ev)["artifactCount"], 2);
}

#[test]
fn a_path_outside_the_project_is_refused_with_a_json_rpc_error() {
    let s = setup();
    let (_, ev) = s.e.run(s.body("outside", json!({})));
    assert_eq!(end(&ev)["status"], "succeeded", "{ev:?}");
    assert!(text(&ev).contains("write refused: -32602; read refused: -32602"), "{}", text(&ev));
    assert!(of(&ev, "artifact").is_empty());
    assert!(!cwd(&ev).parent().unwrap().join("escaped.txt").exists());
    let refused = agent_out(&ev).into_iter().find(|a| a["label"] == "acp-fs-refused").expect("refusal shown");
    assert!(refused["detail"]["error"].as_str().unwrap().contains("outside the project"), "{refused}");
}

/// Runs `scenario` until its permission surface is asked; returns the run id and the request.
fn asked(s: &Setup, scenario: &str, extra: Value) -> (String, Value) {
    let run = s.e.start_run(s.body(scenario, extra));
    let ev = s.e.watch_to(&run, |v| v["event"] == "genui_surface_request");
    let req = ev.last().unwrap();
    assert_eq!(req["event"], "genui_surface_request", "{ev:?}");
    (run, req["data"].clone())
}

#[test]
fn a_permission_request_is_asked_through_genui_and_an_allow_goes_back() {
    let s = setup();
    let (run, req) = asked(&s, "permission", json!({}));
    assert_eq!(req["surfaceId"], "agent-permission-execute");
    assert_eq!(req["kind"], "choice");
    assert_eq!(req["payload"]["schema"]["enum"], json!(["allow", "always", "reject"]));
    assert_eq!(req["payload"]["toolCall"]["title"], "Run rm -rf build");
    // The run waits like for any surface.
    wait_for("awaiting-input", || s.e.get(&format!("/api/runs/{run}")).1["run"]["status"] == "awaiting-input");
    // Answered with the CLI, as a person at a terminal would.
    let (code, v) = s.e.od_json(&["ui", "respond", "agent-permission-execute", "--run", &run, "--value", "allow"]);
    assert_eq!(code, 0, "{v}");
    let ev = s.e.watch(&run);
    assert_eq!(end(&ev)["status"], "succeeded", "{ev:?}");
    assert!(text(&ev).contains("permission granted: allow"), "{}", text(&ev));
    let resp = of(&ev, "genui_surface_response");
    assert_eq!((resp[0]["respondedBy"].as_str(), &resp[0]["value"]), (Some("user"), &json!("allow")), "{resp:?}");
    assert_eq!(of(&ev, "artifact").iter().map(|a| a["path"].as_str().unwrap()).collect::<Vec<_>>(), ["allowed.txt"]);
    let answer = s.sent().into_iter().find(|m| m["id"] == 1000 && m.get("result").is_some()).unwrap();
    assert_eq!(answer["result"]["outcome"], json!({ "outcome": "selected", "optionId": "allow" }));
}

#[test]
fn a_rejected_permission_goes_back_as_the_agents_reject_option() {
    let s = setup();
    let (run, _) = asked(&s, "permission", json!({ "permissionMode": "ask" }));
    // An answer outside the agent's options is refused by the surface's schema; it still waits.
    let (code, v) =
        s.e.post(&format!("/api/runs/{run}/genui/agent-permission-execute/respond"), json!({ "value": "sure" }));
    assert!((400..500).contains(&code), "{code} {v}");
    let (code, v) =
        s.e.post(&format!("/api/runs/{run}/genui/agent-permission-execute/respond"), json!({ "value": "reject" }));
    assert_eq!(code, 200, "{v}");
    let ev = s.e.watch(&run);
    assert_eq!(end(&ev)["status"], "succeeded", "{ev:?}");
    assert!(text(&ev).contains(r#"permission denied: {"outcome":"selected","optionId":"reject"}"#), "{}", text(&ev));
    assert!(of(&ev, "artifact").is_empty());
}

#[test]
fn bypass_does_not_ask_and_accept_edits_allows_only_edits_inside_the_project() {
    let s = setup();
    let (_, ev) = s.e.run(s.body("permission", json!({ "permissionMode": "bypass" })));
    assert_eq!(end(&ev)["status"], "succeeded", "{ev:?}");
    assert!(of(&ev, "genui_surface_request").is_empty());
    let by = agent_out(&ev).into_iter().find(|a| a["label"] == "acp-permission").expect("decision shown");
    assert_eq!(by["detail"]["by"], "permissionMode bypass");
    assert!(text(&ev).contains("permission granted: allow"));
    // accept-edits (the default): an edit inside the project is allowed without asking …
    let (_, ev) = s.e.run(s.body("edit", json!({})));
    assert_eq!(end(&ev)["status"], "succeeded", "{ev:?}");
    assert!(of(&ev, "genui_surface_request").is_empty());
    assert!(text(&ev).contains("permission granted: allow"));
    // … and `ask` asks even for that.
    let (run, req) = asked(&s, "edit", json!({ "permissionMode": "ask" }));
    assert_eq!(req["surfaceId"], "agent-permission-edit");
    s.e.post(&format!("/api/runs/{run}/cancel"), json!({}));
    // A mode od does not know is refused by name before anything runs.
    let (code, v) = s.e.post("/api/runs", s.body("edit", json!({ "permissionMode": "yolo" })));
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["error"]["data"]["field"], "permissionMode", "{v}");
}

#[test]
fn a_project_tier_remembers_the_answer_for_the_next_run() {
    let s = setup();
    let tier = json!({ "permissionTier": "project" });
    let (run, _) = asked(&s, "permission", tier.clone());
    s.e.post(&format!("/api/runs/{run}/genui/agent-permission-execute/respond"), json!({ "value": "always" }));
    let ev = s.e.watch(&run);
    assert_eq!(end(&ev)["status"], "succeeded", "{ev:?}");
    let project = s.e.get(&format!("/api/runs/{run}")).1["run"]["projectId"].as_str().unwrap().to_string();
    let mut body = s.body("permission", tier);
    body["projectId"] = json!(project);
    let (_, ev) = s.e.run(body);
    assert_eq!(end(&ev)["status"], "succeeded", "{ev:?}");
    assert!(of(&ev, "genui_surface_request").is_empty(), "asked again: {ev:?}");
    let resp = of(&ev, "genui_surface_response");
    assert_eq!(resp.len(), 1, "{ev:?}");
    assert_eq!(resp[0]["respondedBy"], "cache");
    assert!(text(&ev).contains("permission granted: always"), "{}", text(&ev));
}

#[test]
fn cancel_sends_session_cancel_and_the_run_ends_canceled() {
    for scenario in ["cancel", "hang"] {
        let s = setup();
        let pid_file = s.tmp.path().join("agent.pid");
        let run =
            s.e.start_run(s.body(scenario, json!({ "agentEnv": { "FAKE_ACP_PID": pid_file.to_str().unwrap() } })));
        s.e.watch_to(&run, |v| v["event"] == "agent" && v["data"]["delta"] == "working on it");
        let (code, c) = s.e.post(&format!("/api/runs/{run}/cancel"), json!({}));
        assert_eq!(code, 200, "{c}");
        let ev = s.e.watch(&run);
        assert_eq!(end(&ev)["status"], "canceled", "{scenario}: {ev:?}");
        wait_for("session/cancel", || s.sent().iter().any(|m| m["method"] == "session/cancel"));
        let cancel = s.sent().into_iter().find(|m| m["method"] == "session/cancel").unwrap();
        assert_eq!(cancel["params"]["sessionId"], "sess-1");
        assert!(cancel.get("id").is_none(), "a notification");
        // Whether it stopped by itself or ignored the cancel, the agent is gone afterwards.
        let pid: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        wait_for("the agent to end", || !alive(pid));
    }
}

#[test]
fn a_crash_mid_session_fails_the_run_agent_crashed_with_its_stderr() {
    let s = setup();
    let (_, ev) = s.e.run(s.body("crash", json!({})));
    let end = end(&ev);
    assert_eq!(end["status"], "failed", "{ev:?}");
    assert_eq!(end["failureCategory"], "agent-crashed", "{end}");
    let detail = end["failureDetail"].as_str().unwrap();
    assert!(detail.contains("exit code 3"), "{detail}");
    assert!(detail.contains("fake acp agent: something broke"), "{detail}");
    assert!(text(&ev).contains("about to fall over"));
}

#[test]
fn an_acp_command_needs_the_exec_right_like_execs() {
    let s = setup();
    // No token: the request may not name a command for od to run.
    let r = ureq::post(&format!("{}/api/runs", s.e.url)).send_json(s.body("text", json!({})));
    let Err(ureq::Error::Status(code, resp)) = r else { panic!("an acp command without the right was accepted") };
    let v: Value = resp.into_json().unwrap();
    assert_eq!(code, 403, "{v}");
    assert_eq!(v["error"]["code"], "exec-forbidden", "{v}");
    // And an acp run without a command line is refused by name.
    let (code, v) = s.e.post("/api/runs", json!({ "pluginId": "acp-plugin", "agent": "acp" }));
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["error"]["data"]["field"], "agentCommand", "{v}");
    assert!(!s.log().exists(), "nothing ran");
}

#[test]
fn a_command_line_string_runs_through_sh_like_execs() {
    let s = setup();
    let mut body = s.body("write", json!({}));
    body["agentCommand"] = json!(format!("exec node '{FAKE}' write"));
    let (_, ev) = s.e.run(body);
    assert_eq!(end(&ev)["status"], "succeeded", "{ev:?}");
    assert_eq!(of(&ev, "artifact").len(), 2);
}

#[test]
fn a_cancel_while_a_permission_waits_answers_it_cancelled() {
    let s = setup();
    let (run, _) = asked(&s, "permission", json!({}));
    let (code, c) = s.e.post(&format!("/api/runs/{run}/cancel"), json!({}));
    assert_eq!(code, 200, "{c}");
    assert_eq!(end(&s.e.watch(&run))["status"], "canceled");
    let answered = |s: &Setup| s.sent().into_iter().find(|m| m["id"] == 1000 && m.get("result").is_some());
    wait_for("the permission answer", || answered(&s).is_some());
    assert_eq!(answered(&s).unwrap()["result"]["outcome"], json!({ "outcome": "cancelled" }));
    assert!(s.sent().iter().any(|m| m["method"] == "session/cancel"));
}

#[test]
fn two_asks_of_one_kind_at_once_wait_on_one_request_and_share_its_answer() {
    let s = setup();
    let (run, _) = asked(&s, "twice", json!({}));
    // Both requests reached od before it is answered.
    let asks = std::cell::Cell::new(0);
    s.e.watch_to(&run, |v| {
        if v["event"] == "agent" && v["data"]["label"] == "acp-permission-asked" {
            asks.set(asks.get() + 1);
        }
        asks.get() == 2
    });
    assert_eq!(asks.get(), 2);
    let (code, v) =
        s.e.post(&format!("/api/runs/{run}/genui/agent-permission-execute/respond"), json!({ "value": "allow" }));
    assert_eq!(code, 200, "{v}");
    let ev = s.e.watch(&run);
    assert_eq!(end(&ev)["status"], "succeeded", "{ev:?}");
    assert!(text(&ev).contains("both: allow allow"), "{}", text(&ev));
    assert_eq!(of(&ev, "genui_surface_request").len(), 1, "one request: {ev:?}");
}

#[test]
fn a_tool_call_named_only_in_a_permission_request_or_an_update_is_recorded_as_a_tool_use() {
    let s = setup();
    let (_, ev) = s.e.run(s.body("inline", json!({})));
    assert_eq!(end(&ev)["status"], "succeeded", "{ev:?}");
    assert!(text(&ev).contains("inline: proceed_once"), "{}", text(&ev));
    let out = agent_out(&ev);
    let uses: Vec<&&Value> = out.iter().filter(|a| a["type"] == "tool_use").collect();
    // Once per id, before its result, with what the request said of it.
    assert_eq!(uses.iter().map(|u| u["id"].as_str().unwrap()).collect::<Vec<_>>(), ["i1", "u1"], "{out:#?}");
    assert_eq!((uses[0]["name"].as_str(), uses[0]["kind"].as_str()), (Some("Writing to inline.html"), Some("edit")));
    assert!(uses[0]["locations"][0]["path"].as_str().unwrap().ends_with("/inline.html"));
    let pos = |t: &str, id: &str| out.iter().position(|a| a["type"] == t && (a["id"] == id || a["toolUseId"] == id));
    assert!(pos("tool_use", "i1") < pos("tool_result", "i1"), "{out:#?}");
    assert!(pos("tool_use", "u1") < pos("tool_result", "u1"), "{out:#?}");
}
