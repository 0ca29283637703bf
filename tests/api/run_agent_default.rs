//! The agent of a run that names none (issue 30 item 4): `OD_AGENT`, else `exec` when
//! `OD_AGENT_CMD` is set, else `dry-run` — said in the start answer and the run (`agentSource`,
//! `agentNote`); upstream's `agentId` alias (an agent od cannot run is a 422 naming it); and
//! `GET /api/agents`. Each daemon is a process with its own environment (the rule reads it).

use crate::common::daemon_proc::{self, get, poll, post, start_run};
use serde_json::{json, Value};
use std::path::PathBuf;

fn agent_script() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents/write-page.sh");
    p.to_str().unwrap().to_string()
}

/// A daemon whose `OD_AGENT` / `OD_AGENT_CMD` are exactly these (blank: unset).
fn daemon(tmp: &tempfile::TempDir, od_agent: &str, od_agent_cmd: &str) -> daemon_proc::Daemon {
    let env = [("OD_AGENT", od_agent.to_string()), ("OD_AGENT_CMD", od_agent_cmd.to_string())];
    daemon_proc::start(&tmp.path().join("data"), &[], &env)
}

/// The run once it ended.
fn ended(url: &str, run_id: &str) -> Value {
    poll("the run to end", 120, || {
        let run = get(url, &format!("/api/runs/{run_id}"))["run"].clone();
        ["succeeded", "failed", "canceled"].contains(&run["status"].as_str().unwrap()).then_some(run)
    })
}

#[test]
fn od_agent_cmd_makes_exec_the_default_and_the_run_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&tmp, "", &agent_script());
    let (code, started) = post(&d.url, "/api/runs", json!({ "message": "a page" }));
    assert_eq!(code, 202, "{started}");
    assert_eq!(started["agent"], "exec", "{started}");
    assert_eq!(started["agentSource"], "OD_AGENT_CMD", "{started}");
    assert!(started["agentNote"].is_null(), "{started}");
    let run = ended(&d.url, started["runId"].as_str().unwrap());
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["agentSource"], "OD_AGENT_CMD", "{run}");
    // The exec agent ran: its artifact is recorded and its file is in the project.
    assert!(run["artifactCount"].as_u64().unwrap() >= 1, "{run}");
    let arts = get(&d.url, &format!("/api/runs/{}/artifacts", run["runId"].as_str().unwrap()));
    assert!(arts.to_string().contains("index.html"), "{arts}");
    let project = get(&d.url, &format!("/api/projects/{}", run["projectId"].as_str().unwrap()));
    let dir = project["project"]["dir"].as_str().or(project["dir"].as_str()).unwrap().to_string();
    let html = std::fs::read_to_string(PathBuf::from(dir).join("index.html")).unwrap();
    assert!(html.contains("written by the exec agent"), "{html}");

    // The list of agents marks exec the default and shows its command.
    let agents = get(&d.url, "/api/agents");
    assert_eq!(agents["default"], "exec", "{agents}");
    assert_eq!(agents["defaultSource"], "OD_AGENT_CMD", "{agents}");
    let exec = agents["agents"].as_array().unwrap().iter().find(|a| a["id"] == "exec").unwrap();
    assert_eq!(exec["available"], true, "{agents}");
    assert_eq!(exec["default"], true, "{agents}");
    assert_eq!(exec["command"], agent_script().as_str(), "{agents}");

    // upstream's agentId selects an agent od runs; the request's choice says `request`.
    let (code, v) = post(&d.url, "/api/runs", json!({ "agentId": "dry-run" }));
    assert_eq!((code, v["agent"].as_str(), v["agentSource"].as_str()), (202, Some("dry-run"), Some("request")), "{v}");
    // An agent od does not know is refused, naming agentId and what this od runs; nothing started.
    let before = get(&d.url, "/api/runs")["runs"].as_array().unwrap().len();
    let (code, v) = post(&d.url, "/api/runs", json!({ "agentId": "no-such-agent" }));
    assert_eq!(code, 422, "{v}");
    assert_eq!(v["error"]["code"], "unknown-agent", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("agentId") && msg.contains("no-such-agent") && msg.contains("exec, dry-run, claude"), "{msg}");
    // (A catalog agent this machine cannot run now is refused too: tests/api/agents_catalog.rs.)
    assert_eq!(get(&d.url, "/api/runs")["runs"].as_array().unwrap().len(), before);
    // agentId and agent must agree.
    let (code, v) = post(&d.url, "/api/runs", json!({ "agentId": "exec", "agent": "dry-run" }));
    assert_eq!(code, 400, "{v}");
}

#[test]
fn nothing_configured_is_a_dry_run_that_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&tmp, "", "");
    let (code, started) = post(&d.url, "/api/runs", json!({}));
    assert_eq!(code, 202, "{started}");
    assert_eq!((started["agent"].as_str(), started["agentSource"].as_str()), (Some("dry-run"), Some("default")));
    assert!(started["agentNote"].as_str().unwrap().contains("no agent configured"), "{started}");
    let run = ended(&d.url, started["runId"].as_str().unwrap());
    assert_eq!(run["status"], "succeeded", "{run}");
    assert!(run["agentNote"].as_str().unwrap().contains("OD_AGENT_CMD"), "{run}");
    let agents = get(&d.url, "/api/agents");
    assert_eq!((agents["default"].as_str(), agents["defaultSource"].as_str()), (Some("dry-run"), Some("default")));
    let exec = agents["agents"].as_array().unwrap().iter().find(|a| a["id"] == "exec").unwrap();
    assert_eq!(exec["available"], false, "{agents}");
    // A run naming exec without any command is refused as before (naming agentCommand).
    let (code, v) = post(&d.url, "/api/runs", json!({ "agent": "exec" }));
    assert_eq!(code, 400, "{v}");
    assert!(v.to_string().contains("agentCommand"), "{v}");
}

#[test]
fn od_agent_wins_over_od_agent_cmd_and_a_bad_one_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    // A key given inline in OD_AGENT_CMD is not shown by GET /api/agents.
    let d = daemon(&tmp, "dry-run", &format!("SECRET_KEY=hunter2 {}", agent_script()));
    let run_id = start_run(&d.url, json!({}));
    let run = ended(&d.url, &run_id);
    assert_eq!((run["agent"].as_str(), run["agentSource"].as_str()), (Some("dry-run"), Some("OD_AGENT")), "{run}");
    assert!(run["agentNote"].is_null(), "{run}");
    let agents = get(&d.url, "/api/agents");
    assert_eq!((agents["default"].as_str(), agents["defaultSource"].as_str()), (Some("dry-run"), Some("OD_AGENT")));
    let exec = agents["agents"].as_array().unwrap().iter().find(|a| a["id"] == "exec").unwrap();
    assert_eq!(exec["command"], format!("SECRET_KEY=… {}", agent_script()).as_str(), "{agents}");
    assert!(!agents.to_string().contains("hunter2"), "{agents}");
    drop(d);

    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&tmp, "claude", &agent_script());
    let (code, v) = post(&d.url, "/api/runs", json!({}));
    assert_eq!(code, 400, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("OD_AGENT"), "{v}");
    assert!(get(&d.url, "/api/runs")["runs"].as_array().unwrap().is_empty());
    // A request naming its agent does not depend on the bad default.
    let (code, v) = post(&d.url, "/api/runs", json!({ "agent": "dry-run" }));
    assert_eq!(code, 202, "{v}");
}

/// `od run start` names no agent unless told, so the daemon's rule applies to the CLI too (it used
/// to send `dry-run` always).
#[test]
fn od_run_start_uses_the_daemons_default() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let start = |cmd: &str, extra: &[&str]| {
        let out = std::process::Command::new(crate::common::harness::OD)
            .args(["run", "start", "--json"])
            .args(extra)
            .arg("--data-dir")
            .arg(&data)
            .env_remove("OD_DAEMON_URL")
            .env_remove("OD_AGENT")
            .env("OD_AGENT_CMD", cmd)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let v = start(&agent_script(), &[]);
    assert_eq!((v["agent"].as_str(), v["agentSource"].as_str()), (Some("exec"), Some("OD_AGENT_CMD")), "{v}");
    let v = start(&agent_script(), &["--agent", "dry-run"]);
    assert_eq!((v["agent"].as_str(), v["agentSource"].as_str()), (Some("dry-run"), Some("request")), "{v}");
    // The CLI started a daemon for the data dir (with its environment): stop it.
    let out = crate::common::harness::od_cli(&data, &["daemon", "stop", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
