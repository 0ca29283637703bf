//! The daemon and CLI skeleton end to end: the real `od` binary on port 0 with a temp data dir.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

const OD: &str = env!("CARGO_BIN_EXE_od");

struct Daemon {
    child: Child,
    url: String,
}

impl Daemon {
    fn start(dir: &Path, token: Option<&str>) -> Daemon {
        let mut cmd = Command::new(OD);
        cmd.args(["daemon", "start", "--foreground", "--port", "0", "--json", "--data-dir"])
            .arg(dir)
            .env_remove("OD_DAEMON_URL")
            .env_remove("OD_API_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(t) = token {
            cmd.env("OD_API_TOKEN", t);
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("first line is JSON: {line:?}"));
        Daemon { child, url: v["url"].as_str().unwrap().to_string() }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn od(dir: &Path, args: &[&str]) -> Output {
    Command::new(OD)
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .env_remove("OD_DAEMON_URL")
        .env_remove("OD_API_TOKEN")
        .output()
        .unwrap()
}

fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn get(url: &str) -> (u16, Value) {
    match ureq::get(url).call() {
        Ok(r) => (r.status(), r.into_json().unwrap()),
        Err(ureq::Error::Status(c, r)) => (c, r.into_json().unwrap()),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn health_version_and_one_error_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), None);
    let (code, health) = get(&format!("{}/api/health", d.url));
    assert_eq!((code, health["ok"].as_bool()), (200, Some(true)));
    let (_, version) = get(&format!("{}/api/version", d.url));
    assert_eq!(version["version"], env!("CARGO_PKG_VERSION"));
    let (code, err) = get(&format!("{}/api/no-such-route", d.url));
    assert_eq!(code, 404);
    assert_eq!(err["error"]["code"], "not-found");
    let (code, err) = get(&format!("{}/api/log/events?limit=0", d.url));
    assert_eq!(code, 400);
    assert_eq!(err["error"]["data"]["field"], "limit");
    let bad =
        ureq::post(&format!("{}/api/log/notes", d.url)).send_json(serde_json::json!({"stream": "bad id", "text": "x"}));
    let Err(ureq::Error::Status(400, r)) = bad else { panic!("expected 400") };
    let v: Value = r.into_json().unwrap();
    assert_eq!(v["error"]["data"]["field"], "stream");
    assert!(v["error"]["message"].as_str().unwrap().contains("stream"));
    // The start event commits in the background; following the log waits for it (no sleeping).
    let tail = ureq::get(&format!("{}/api/log/tail?follow=true", d.url)).call().unwrap();
    let mut first = String::new();
    BufReader::new(tail.into_reader()).read_line(&mut first).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&first).unwrap()["event"], "daemon_started");
    let (_, page) = get(&format!("{}/api/log/events", d.url));
    assert_eq!(page["events"].as_array().unwrap().len(), 1, "only daemon_started: the bad note wrote nothing");
}

#[test]
fn cli_uses_the_running_daemon_and_stop_is_graceful() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path(), None);
    // With the daemon holding the data dir, an embedded open would fail; the CLI must go through it.
    let out = od(dir.path(), &["log", "append", "--stream", "note:a", "--text", "via daemon", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["firstSeq"], 2);
    let out = od(dir.path(), &["daemon", "status", "--json"]);
    let st: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((st["lastSeq"].as_u64(), st["embedded"].as_bool()), (Some(2), Some(false)));
    let out = od(dir.path(), &["daemon", "stop", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(d.child.wait().unwrap().success());
    assert!(!dir.path().join("daemon.json").exists());
    // Now embedded: the log shows start, note, stop.
    let out = od(dir.path(), &["log", "tail"]);
    let kinds: Vec<_> = json_lines(&out.stdout).iter().map(|l| l["event"].as_str().unwrap().to_string()).collect();
    assert_eq!(kinds, ["daemon_started", "note_recorded", "daemon_stopped"]);
    let out = od(dir.path(), &["daemon", "status"]);
    assert_eq!(out.status.code(), Some(64));
}

#[test]
fn sigterm_stops_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path(), None);
    unsafe { libc::kill(d.child.id() as i32, libc::SIGTERM) };
    assert!(d.child.wait().unwrap().success());
    let out = od(dir.path(), &["log", "tail", "--from", "2"]);
    assert_eq!(json_lines(&out.stdout)[0]["event"], "daemon_stopped");
}

#[test]
fn follow_streams_live_events_and_ends_at_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path(), None);
    let mut tail = Command::new(OD)
        .args(["log", "tail", "--follow", "--from", "2", "--data-dir"])
        .arg(dir.path())
        .env_remove("OD_DAEMON_URL")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(tail.stdout.take().unwrap()).lines();
    ureq::post(&format!("{}/api/log/notes", d.url))
        .send_json(serde_json::json!({"stream": "note:live", "text": "hello"}))
        .unwrap();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["event"], "note_recorded");
    assert_eq!(first["data"]["payload"]["text"], "hello");
    assert_eq!(first["data"]["seq"], 2);
    ureq::post(&format!("{}/api/daemon/stop", d.url)).call().unwrap();
    assert!(d.child.wait().unwrap().success());
    // The follower sees the stop event, then its stream ends cleanly.
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert!(rest.iter().any(|l| l.contains("daemon_stopped")) || rest.is_empty());
    assert!(tail.wait().unwrap().success());
}

#[test]
fn non_loopback_bind_needs_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = od(&data, &["daemon", "start", "--foreground", "--host", "0.0.0.0", "--port", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "token-required");
    assert!(!data.exists(), "nothing is written when the bind is refused");
}

#[test]
fn token_guards_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), Some("s3cret"));
    let (code, err) = get(&format!("{}/api/health", d.url));
    assert_eq!(code, 401);
    assert_eq!(err["error"]["code"], "unauthorized");
    let ok = ureq::get(&format!("{}/api/health", d.url)).set("Authorization", "Bearer s3cret").call().unwrap();
    assert_eq!(ok.status(), 200);
    let wrong = ureq::get(&format!("{}/api/health", d.url)).set("Authorization", "Bearer nope").call();
    assert!(matches!(wrong, Err(ureq::Error::Status(401, _))));
    let out = Command::new(OD)
        .args(["log", "stats", "--json", "--data-dir"])
        .arg(dir.path())
        .env("OD_API_TOKEN", "s3cret")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn embedded_mode_runs_without_a_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let out = od(dir.path(), &["log", "append", "--stream", "note:x", "--text", "one", "--op-id", "k1", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let again = od(dir.path(), &["log", "append", "--stream", "note:x", "--text", "one", "--op-id", "k1", "--json"]);
    let r: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!((r["firstSeq"].as_u64(), r["deduplicated"].as_bool()), (Some(1), Some(true)));
    let conflict =
        od(dir.path(), &["log", "append", "--stream", "note:x", "--text", "two", "--expected-version", "none"]);
    assert_eq!(conflict.status.code(), Some(76));
    let err: Value = serde_json::from_slice(&conflict.stderr).unwrap();
    assert_eq!(err["error"]["data"]["actual"], 0);
    let out = od(dir.path(), &["log", "stats", "--json"]);
    let st: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["stats"]["events"], 1);
    let out = od(dir.path(), &["log", "verify", "--json"]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verified"], 1);
    let usage = od(dir.path(), &["log", "tail", "--from", "0"]);
    assert_eq!(usage.status.code(), Some(2));
}
