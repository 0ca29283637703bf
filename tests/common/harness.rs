//! An in-process engine for integration tests: the daemon on loopback port 0 with a temp data dir,
//! a hand-driven clock, and a small blocking HTTP client (ureq) with ND-JSON watch. The client
//! sends the engine's local token, as the CLI does (so it may start exec runs).

use od::clock::ManualClock;
use od::daemon::{start, DaemonConfig, Running};
use serde_json::{json, Value};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const OD: &str = env!("CARGO_BIN_EXE_od");

/// `od <args> --data-dir <data>` run embedded (no `OD_DAEMON_URL` from the environment).
pub fn od_cli(data: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(OD).args(args).arg("--data-dir").arg(data).env_remove("OD_DAEMON_URL").output().unwrap()
}

pub struct Engine {
    pub rt: tokio::runtime::Runtime,
    pub running: Option<Running>,
    pub url: String,
    pub data: PathBuf,
    pub clock: ManualClock,
    /// The engine's local token (sent by `get`/`post`/`delete`).
    pub token: String,
}

impl Engine {
    /// Starts an engine on `data` with the clock at `now` ms.
    pub fn start(data: &Path, now: i64) -> Self {
        Self::start_with(data, now, |_| {})
    }

    /// Starts an engine, letting the test adjust its config first (HTTP timeouts, cap …).
    pub fn start_with(data: &Path, now: i64, adjust: impl FnOnce(&mut DaemonConfig)) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let clock = ManualClock::at(now);
        let mut cfg = DaemonConfig::new(data.to_path_buf());
        cfg.clock = Arc::new(clock.clone());
        cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
        adjust(&mut cfg);
        let running = rt.block_on(start(cfg)).expect("engine starts");
        let url = running.url();
        let token = running.local_token.clone();
        let e = Self { rt, running: Some(running), url, data: data.to_path_buf(), clock, token };
        e.wait_for_start_event();
        e
    }

    /// The daemon commits its `daemon_started` in the background; tests that count what they wrote
    /// start after it (read by following the log, no sleeping).
    fn wait_for_start_event(&self) {
        let listen = self.url.trim_start_matches("http://").to_string();
        let r = ureq::get(&format!("{}/api/log/tail?follow=true", self.url))
            .set("Authorization", &format!("Bearer {}", self.token))
            .call()
            .unwrap();
        for line in std::io::BufReader::new(r.into_reader()).lines() {
            let line = line.unwrap();
            if line.is_empty() {
                continue; // a keep-alive
            }
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["event"] == "daemon_started" && v["data"]["payload"]["listen"] == listen.as_str() {
                return;
            }
        }
        panic!("the log ended before this start's daemon_started");
    }

    /// The engine clock's current reading.
    pub fn clock_now(&self) -> i64 {
        od::clock::Clock::now_ms(&self.clock)
    }

    pub fn stop(mut self) {
        if let Some(r) = self.running.take() {
            self.rt.block_on(r.stop());
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let req = ureq::request(method, &format!("{}{path}", self.url))
            .set("Authorization", &format!("Bearer {}", self.token));
        let res = match body {
            Some(b) => req.send_json(b.clone()),
            None => req.call(),
        };
        match res {
            Ok(r) => (r.status(), r.into_json().unwrap_or(Value::Null)),
            Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap_or(Value::Null)),
            Err(e) => panic!("{method} {path}: {e}"),
        }
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None)
    }

    pub fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call("POST", path, Some(&body))
    }

    pub fn delete(&self, path: &str) -> (u16, Value) {
        self.call("DELETE", path, None)
    }

    /// Starts a run (asserting 202) and returns its id.
    pub fn start_run(&self, body: Value) -> String {
        let (code, v) = self.post("/api/runs", body);
        assert_eq!(code, 202, "{v}");
        v["runId"].as_str().unwrap().to_string()
    }

    /// Every `{"event","data"}` line of a run until `end`.
    pub fn watch(&self, run_id: &str) -> Vec<Value> {
        self.watch_query(run_id, "")
    }

    /// [`Engine::watch`] with a query string (`?derived=true`).
    pub fn watch_query(&self, run_id: &str, query: &str) -> Vec<Value> {
        self.read_watch(run_id, query, |_| false)
    }

    /// The run's `{"event","data"}` lines (keep-alives skipped) until `stop` says so or `end`.
    fn read_watch(&self, run_id: &str, query: &str, stop: impl Fn(&Value) -> bool) -> Vec<Value> {
        watch_url(&self.url, run_id, query, stop)
    }

    /// [`Engine::watch`] until `stop` says so (or `end`).
    pub fn watch_to(&self, run_id: &str, stop: impl Fn(&Value) -> bool) -> Vec<Value> {
        self.read_watch(run_id, "", stop)
    }

    /// Runs to the end and returns the events.
    pub fn run(&self, body: Value) -> (String, Vec<Value>) {
        let id = self.start_run(body);
        let ev = self.watch(&id);
        (id, ev)
    }

    /// `od <args> --daemon-url <this engine> --json`: the exit code and what it printed as JSON
    /// (stdout on success, stderr's error envelope otherwise; a string when it is not JSON).
    pub fn od_json(&self, args: &[&str]) -> (i32, Value) {
        let out =
            std::process::Command::new(OD).args(args).args(["--daemon-url", &self.url, "--json"]).output().unwrap();
        let text = if out.status.success() { out.stdout } else { out.stderr };
        let v = serde_json::from_slice(&text).unwrap_or_else(|_| json!(String::from_utf8_lossy(&text)));
        (out.status.code().unwrap_or(-1), v)
    }

    /// A run's events up to the first named `name` (or its `end`), read live.
    pub fn watch_until(&self, run_id: &str, name: &str) -> Vec<Value> {
        self.read_watch(run_id, "", |v| v["event"] == name)
    }

    /// Installs a local plugin folder (asserting success).
    pub fn install(&self, dir: &Path) -> Value {
        let r = ureq::post(&format!("{}/api/plugins/install", self.url))
            .send_json(json!({ "source": dir.to_str().unwrap() }))
            .unwrap();
        let last = r.into_string().unwrap().lines().last().unwrap().to_string();
        let v: Value = serde_json::from_str(&last).unwrap();
        assert_eq!(v["event"], "success", "{v}");
        v["data"]["plugin"].clone()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            self.rt.block_on(r.stop());
        }
    }
}

/// Writes a plugin folder: SKILL.md (with `body`) and open-design.json with these pipeline stages.
pub fn write_plugin(dir: &Path, name: &str, version: &str, stages: Value, body: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), format!("---\nname: {name}\ndescription: Test plugin {name}.\n---\n{body}\n"))
        .unwrap();
    let manifest = json!({
        "specVersion": "1.0.0", "name": name, "version": version, "title": format!("Plugin {name}"),
        "description": format!("Test plugin {name}."),
        "od": { "kind": "scenario", "taskKind": "new-generation", "pipeline": { "stages": stages },
                "useCase": { "query": "Make {{topic}}" },
                "inputs": [ { "name": "topic", "label": "Topic", "type": "string", "default": "tea" } ] }
    });
    std::fs::write(dir.join("open-design.json"), serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
}

/// `(event name, data)` pairs.
pub fn names(ev: &[Value]) -> Vec<String> {
    ev.iter().map(|e| e["event"].as_str().unwrap().to_string()).collect()
}

/// Data of the events named `name`.
pub fn of<'a>(ev: &'a [Value], name: &str) -> Vec<&'a Value> {
    ev.iter().filter(|e| e["event"] == name).map(|e| &e["data"]).collect()
}

/// An executable shell script `dir/name` running `body`.
pub fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// Every file below `dir`, recursively.
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// `GET <url>/api/runs/<run>/watch<query>`: the `{"event","data"}` lines (keep-alives skipped)
/// until `stop` says so or `end` — for any daemon, not only an [`Engine`] of this harness.
pub fn watch_url(url: &str, run_id: &str, query: &str, stop: impl Fn(&Value) -> bool) -> Vec<Value> {
    let r = ureq::get(&format!("{url}/api/runs/{run_id}/watch{query}")).call().unwrap();
    let mut out = Vec::new();
    for line in std::io::BufReader::new(r.into_reader()).lines() {
        let line = line.unwrap();
        if line.is_empty() {
            continue; // a keep-alive
        }
        let v: Value = serde_json::from_str(&line).unwrap();
        let done = v["event"] == "end" || stop(&v);
        out.push(v);
        if done {
            break;
        }
    }
    out
}
