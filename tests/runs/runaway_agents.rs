//! Agents that misbehave, through the whole pipeline: output floods and endless lines (bounded per
//! invocation, marked, the run still succeeds), children left behind (the process group and what
//! escaped it end with the invocation, and nothing survives `od daemon stop`), and links planted in
//! the project to lead the daemon's own reads and writes outside it.

use crate::common;

use common::harness::{of, write_plugin, Engine, OD};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NOW: i64 = 1_800_000_000_000;

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    Command::new("chmod").arg("+x").arg(&p).status().unwrap();
    p
}

fn plugin(dir: &Path, stages: Value) -> PathBuf {
    let p = dir.join("agentic");
    write_plugin(&p, "agentic", "1.0.0", stages, "Use the tools.");
    p
}

fn exec_body(agent: &Path) -> Value {
    json!({ "pluginId": "agentic", "agent": "exec", "agentCommand": [agent.to_str().unwrap()] })
}

/// Whether `pid` still runs (a zombie waiting for its reaper does not).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

/// Polls (generous deadline) until none of `pids` runs; returns the ones still running.
fn survivors(pids: &[u32]) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn pids_in(file: &Path, want: usize) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let pids: Vec<u32> =
            std::fs::read_to_string(file).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect();
        if pids.len() >= want || Instant::now() > deadline {
            return pids;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills whatever a failed assertion would otherwise leave running.
struct KillOnDrop(Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

/// A sleeping child started in each way that outlived the agent before: in the background, double
/// forked out of a subshell, and in a session of its own. Their pids go to `$PIDS`.
const SPAWNER: &str = r#"cat >/dev/null
sleep 1001 & echo $! >> "$PIDS"
(sleep 1002 & echo $! >> "$PIDS")
setsid sleep 1003 & echo $! >> "$PIDS"
echo '{"type":"text","text":"children started"}'
"#;

#[test]
fn an_agents_children_end_with_its_invocation() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    e.install(&plugin(tmp.path(), json!([ { "id": "draft", "atoms": ["file-write"] } ])));
    let pids_file = tmp.path().join("pids");
    let agent = script(tmp.path(), "spawner.sh", SPAWNER);
    let mut body = exec_body(&agent);
    body["agentEnv"] = json!({ "PIDS": pids_file.to_str().unwrap() });
    let (_, ev) = e.run(body);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:#?}");
    let pids = pids_in(&pids_file, 3);
    let _cleanup = KillOnDrop(pids.clone());
    assert_eq!(pids.len(), 3, "the agent started three children");
    assert_eq!(survivors(&pids), Vec::<u32>::new(), "children outlived the run");
}

/// A daemon in its own process (`od daemon start --foreground`), stopped with `od daemon stop`.
struct Daemon {
    child: Child,
    url: String,
    data: PathBuf,
}

impl Daemon {
    fn start(data: &Path, env: &[(&str, &str)]) -> Daemon {
        let mut cmd = Command::new(OD);
        cmd.args(["daemon", "start", "--foreground", "--port", "0", "--json", "--data-dir"])
            .arg(data)
            .env_remove("OD_DAEMON_URL")
            // These tests post agent commands without the daemon's local token.
            .env("OD_ALLOW_HTTP_EXEC", "1")
            .stdout(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        let url = serde_json::from_str::<Value>(&line).unwrap()["url"].as_str().unwrap().to_string();
        Daemon { child, url, data: data.to_path_buf() }
    }

    fn post(&self, path: &str, body: Value) -> Value {
        ureq::post(&format!("{}{path}", self.url)).send_json(body).unwrap().into_json().unwrap()
    }

    fn install(&self, dir: &Path) {
        let r = ureq::post(&format!("{}/api/plugins/install", self.url))
            .send_json(json!({ "source": dir.to_str().unwrap() }))
            .unwrap();
        assert!(r.into_string().unwrap().contains("\"success\""));
    }

    /// The run's `{event, data}` lines up to `end`.
    fn watch(&self, id: &str) -> Vec<Value> {
        let r = ureq::get(&format!("{}/api/runs/{id}/watch", self.url)).call().unwrap();
        let mut out = Vec::new();
        for line in BufReader::new(r.into_reader()).lines() {
            let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
            let end = v["event"] == "end";
            out.push(v);
            if end {
                break;
            }
        }
        out
    }

    fn stop(mut self) {
        let out = Command::new(OD).args(["daemon", "stop", "--data-dir"]).arg(&self.data).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        self.child.wait().unwrap();
    }
}

impl Drop for Daemon {
    /// A failed assertion must not leave the daemon holding the test's output open.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn nothing_an_agent_started_survives_daemon_stop() {
    let tmp = tempfile::tempdir().unwrap();
    let d = Daemon::start(&tmp.path().join("data"), &[]);
    d.install(&plugin(tmp.path(), json!([ { "id": "draft", "atoms": ["file-write"] } ])));
    let pids_file = tmp.path().join("pids");
    let agent = script(tmp.path(), "spawner.sh", &format!("{SPAWNER}sleep 1004 & echo $! >> \"$PIDS\"\nwait\n"));
    let mut body = exec_body(&agent);
    body["agentEnv"] = json!({ "PIDS": pids_file.to_str().unwrap() });
    let started = d.post("/api/runs", body);
    assert!(started["runId"].is_string(), "{started}");
    let pids = pids_in(&pids_file, 4);
    let _cleanup = KillOnDrop(pids.clone());
    assert_eq!(pids.len(), 4, "the agent started four children");
    d.stop();
    assert_eq!(survivors(&pids), Vec::<u32>::new(), "children outlived daemon stop");
}

#[test]
fn a_flood_of_output_is_cut_at_the_invocation_bound_and_the_run_succeeds() {
    let tmp = tempfile::tempdir().unwrap();
    // The bound lowered through the environment so the flood stays small and fast.
    let d = Daemon::start(
        &tmp.path().join("data"),
        &[("OD_AGENT_OUTPUT_MAX_EVENTS", "300"), ("OD_AGENT_OUTPUT_MAX_BYTES", "1000000")],
    );
    d.install(&plugin(tmp.path(), json!([ { "id": "draft", "atoms": ["file-write"] } ])));
    let flood = "cat >/dev/null\nyes '{\"type\":\"text\",\"text\":\"flood flood flood\"}' | head -n 100000\n\
                 yes 'plain stderr noise' | head -n 20000 >&2\necho '{\"type\":\"done\"}'";
    let agent = script(tmp.path(), "flood.sh", flood);
    let id = d.post("/api/runs", exec_body(&agent))["runId"].as_str().unwrap().to_string();
    let ev = d.watch(&id);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{:?}", ev.last());
    let outputs = ev.iter().filter(|e| ["agent", "stdout", "stderr"].contains(&e["event"].as_str().unwrap())).count();
    assert!(outputs <= 302, "{outputs} output events for a bound of 300 (+ markers)");
    let agent_ev = of(&ev, "agent");
    let marker = agent_ev.iter().find(|a| a["type"] == "status" && a["label"] == "output-truncated").expect("marker");
    let dropped = marker["detail"]["droppedEvents"].as_u64().unwrap();
    assert!(dropped >= 100_000 + 20_000 - 300, "dropped {dropped}");
    d.stop();
}

#[test]
fn a_run_may_set_its_own_output_bound_over_http() {
    let tmp = tempfile::tempdir().unwrap();
    let d = Daemon::start(&tmp.path().join("data"), &[]);
    d.install(&plugin(tmp.path(), json!([ { "id": "draft", "atoms": ["file-write"] } ])));
    let flood =
        "cat >/dev/null\nyes '{\"type\":\"text\",\"text\":\"flood\"}' | head -n 5000\necho '{\"type\":\"done\"}'";
    let agent = script(tmp.path(), "flood.sh", flood);
    let mut body = exec_body(&agent);
    body["agentOutputMaxEvents"] = json!(100);
    let id = d.post("/api/runs", body)["runId"].as_str().unwrap().to_string();
    let ev = d.watch(&id);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{:?}", ev.last());
    let outputs = ev.iter().filter(|e| ["agent", "stdout", "stderr"].contains(&e["event"].as_str().unwrap())).count();
    assert!(outputs <= 102, "{outputs} output events for a run's bound of 100 (+ markers)");
    let agent_ev = of(&ev, "agent");
    assert!(agent_ev.iter().any(|a| a["type"] == "status" && a["label"] == "output-truncated"), "marker");
    d.stop();
}

#[test]
fn a_ten_megabyte_line_is_recorded_in_storable_pieces_and_the_run_succeeds() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    e.install(&plugin(tmp.path(), json!([ { "id": "draft", "atoms": ["file-write"] } ])));
    let long = "cat >/dev/null\nhead -c 10000000 /dev/zero | tr '\\0' a\necho\n\
                printf '{\"type\":\"text\",\"text\":\"'; head -c 200000 /dev/zero | tr '\\0' b; echo '\"}'\n\
                echo '{\"type\":\"done\"}'";
    let agent = script(tmp.path(), "long.sh", long);
    let (_, ev) = e.run(exec_body(&agent));
    let end = &ev.last().unwrap()["data"];
    assert_eq!(end["status"], "succeeded", "{end}");
    let agent_ev = of(&ev, "agent");
    let raw: usize = agent_ev.iter().filter(|a| a["type"] == "raw").map(|a| a["line"].as_str().unwrap().len()).sum();
    assert_eq!(raw, od::runner::exec::MAX_LINE_BYTES, "the kept head of the long line, in pieces");
    let cut = agent_ev.iter().find(|a| a["label"] == "line-truncated").expect("a line-truncated marker");
    assert_eq!(cut["detail"]["droppedBytes"], 10_000_000 - od::runner::exec::MAX_LINE_BYTES as u64);
    let text: String =
        agent_ev.iter().filter(|a| a["type"] == "text_delta").map(|a| a["delta"].as_str().unwrap()).collect();
    assert_eq!(text, "b".repeat(200_000), "a long text line is split, not dropped");
}

#[test]
fn links_in_the_project_do_not_lead_the_daemon_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    e.install(&plugin(
        tmp.path(),
        json!([ { "id": "draft", "atoms": ["file-write"] }, { "id": "polish", "atoms": ["file-write"] } ]),
    ));
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "top secret").unwrap();
    // Stage one links an artifact to a file outside and turns `.od` into a link out; stage two's
    // prompt file must not be written through it.
    let body = format!(
        "cat >/dev/null\nif [ \"$OD_STAGE_ID\" = draft ]; then\n  ln -s {o}/secret.txt leak.html\n  \
         rm -rf .od && ln -s {o} .od\n  echo '{{\"type\":\"artifact\",\"path\":\"leak.html\"}}'\nfi\n\
         echo '{{\"type\":\"done\"}}'",
        o = outside.display()
    );
    let agent = script(tmp.path(), "linker.sh", &body);
    let (_, ev) = e.run(exec_body(&agent));
    assert!(of(&ev, "artifact").is_empty(), "an artifact read through a link: {:?}", of(&ev, "artifact"));
    assert!(of(&ev, "agent").iter().any(|a| a["label"] == "artifact-rejected"));
    assert!(!outside.join("prompts").exists(), "the prompt file was written through the link");
    let end = &ev.last().unwrap()["data"];
    assert_eq!(end["status"], "failed", "{end}");
    assert_eq!(end["failureCategory"], "agent-spawn-failed", "{end}");
}
