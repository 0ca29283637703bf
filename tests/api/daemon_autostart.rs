//! A daemon started on demand (issue 13 items 4–5): a run belongs to a daemon of its own, never to
//! the command that started it or to another command's process; parallel first commands share one
//! daemon; a data dir that stays locked is exit 80 with what to do; an idle on-demand daemon, or
//! one whose data dir is removed, stops by itself.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const OD: &str = env!("CARGO_BIN_EXE_od");

fn od_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(OD);
    c.args(args).arg("--data-dir").arg(dir).env_remove("OD_DAEMON_URL").env_remove("OD_PROJECT_ID");
    c
}

fn od(dir: &Path, args: &[&str]) -> Output {
    od_cmd(dir, args).output().unwrap()
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn err(out: &Output) -> (i32, Value) {
    let line = String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("").to_string();
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("stderr: {line}"));
    (out.status.code().unwrap(), v["error"].clone())
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|st| st.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn daemon_pid(dir: &Path) -> u64 {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("daemon.json")).unwrap()).unwrap();
    v["pid"].as_u64().unwrap()
}

fn status(dir: &Path, run: &str) -> String {
    json(&od(dir, &["run", "info", run, "--json"]))["run"]["status"].as_str().unwrap().to_string()
}

#[test]
fn a_commands_exit_ends_no_run_another_command_started() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    // A: follows a run that waits in its first stage until canceled.
    let mut a = od_cmd(data, &["run", "start", "--follow", "--dry-run", r#"{"waitForCancel":"discovery"}"#])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(a.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let run_a = first["data"]["runId"].as_str().unwrap().to_string();
    // B: starts its own run while A is there, and returns.
    let b = json(&od(data, &["run", "start", "--json", "--dry-run", r#"{"waitForCancel":"discovery"}"#]));
    let run_b = b["runId"].as_str().unwrap().to_string();
    wait_until("B's run is running", || status(data, &run_b) == "running");
    let daemon = daemon_pid(data);
    assert_ne!(daemon, u64::from(a.id()), "the run lives in a daemon, not in A");
    // A ends abruptly: nothing of B's run (or A's) goes with it.
    a.kill().unwrap();
    a.wait().unwrap();
    assert!(alive(daemon));
    assert_eq!(status(data, &run_b), "running");
    assert_eq!(status(data, &run_a), "running");
    for run in [&run_a, &run_b] {
        json(&od(data, &["run", "cancel", run, "--json"]));
        let out = od(data, &["run", "watch", run]);
        let end: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
        assert_eq!(end["event"], "end");
        assert_eq!(end["data"]["status"], "canceled", "{end}");
    }
    json(&od(data, &["daemon", "stop", "--json"]));
}

#[test]
fn parallel_first_commands_share_one_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let children: Vec<_> = (0..3)
        .map(|_| {
            od_cmd(data, &["run", "start", "--json"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    let runs: Vec<String> = children
        .into_iter()
        .map(|c| json(&c.wait_with_output().unwrap())["runId"].as_str().unwrap().to_string())
        .collect();
    let daemon = daemon_pid(data);
    for run in &runs {
        let out = od(data, &["run", "watch", run]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let list = json(&od(data, &["run", "list", "--json"]));
    assert_eq!(list["runs"].as_array().unwrap().len(), 3);
    assert_eq!(daemon_pid(data), daemon, "one daemon served them all");
    json(&od(data, &["daemon", "stop", "--json"]));
}

#[test]
fn a_data_dir_that_stays_locked_is_exit_80_with_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    // This test process holds the data dir's log (as another od process would). A daemon gives
    // up on a held lock after ~2.1 s (SLED_OPEN_RETRIES), so the wait is longer than that.
    let held = od::store::SledLog::open(od::store::StoreConfig::new(data)).unwrap();
    let out = od_cmd(data, &["run", "list", "--json"]).env("OD_DAEMON_START_TIMEOUT_MS", "3000").output().unwrap();
    let (code, e) = err(&out);
    assert_eq!((code, e["code"].as_str().unwrap()), (80, "data-dir-locked"), "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("od daemon start") && msg.contains("retry"), "{msg}");
    assert_eq!(e["data"]["dataDir"], data.to_str().unwrap());
    drop(held);
    // Once it lets go, the same command works.
    json(&od_cmd(data, &["run", "list", "--json"]).output().unwrap());
}

#[test]
fn an_idle_daemon_started_on_demand_stops_by_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let out = od_cmd(data, &["run", "start", "--json"]).env("OD_DAEMON_IDLE_EXIT_MS", "300").output().unwrap();
    let run = json(&out)["runId"].as_str().unwrap().to_string();
    let daemon = daemon_pid(data);
    wait_until("the idle daemon stops", || !alive(daemon));
    assert!(!data.join("daemon.json").exists());
    // Its run finished first (a run in flight keeps it), and the stop says why.
    assert_eq!(status(data, &run), "succeeded");
    let tail = od(data, &["log", "tail", "--json"]);
    let stopped = String::from_utf8_lossy(&tail.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|v| v.to_string().contains("daemon_stopped"))
        .expect("a daemon_stopped event");
    assert!(stopped.to_string().contains("\"idle\""), "{stopped}");
}

#[test]
fn a_daemon_started_on_demand_stops_when_its_data_dir_is_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("od");
    let out = od(&data, &["run", "start", "--json"]);
    json(&out);
    let daemon = daemon_pid(&data);
    assert!(alive(daemon));
    // Removed while the daemon may still be writing (the run, a checkpoint): until it is gone.
    wait_until("the data dir is removed", || std::fs::remove_dir_all(&data).is_ok() || !data.exists());
    wait_until("the daemon of a removed data dir stops", || !alive(daemon));
}

#[test]
fn the_daemon_logs_to_its_file_and_od_daemon_logs_prints_the_end() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let (code, e) = err(&od(data, &["daemon", "logs"]));
    assert_eq!((code, e["code"].as_str().unwrap()), (1, "not-found"), "no log before any daemon: {e}");
    let run = json(&od(data, &["run", "start", "--json"]))["runId"].as_str().unwrap().to_string();
    assert!(od(data, &["run", "watch", &run]).status.success());
    json(&od(data, &["daemon", "stop", "--json"]));
    let out = od(data, &["daemon", "logs", "--json", "-n", "1000"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["line"].as_str().unwrap().to_string())
        .collect();
    let has = |needle: &str| lines.iter().any(|l| l.contains(needle));
    assert!(has("listening on"), "{lines:?}");
    assert!(has(&format!("run {run} executing")), "{lines:?}");
    let two = od(data, &["daemon", "logs", "-n", "2"]);
    assert_eq!(String::from_utf8_lossy(&two.stdout).lines().count(), 2);
}

#[test]
fn starting_a_daemon_on_another_port_while_one_runs_is_refused_not_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let first = json(&od(data, &["daemon", "start", "--port", "0", "--json"]));
    assert_eq!(first["alreadyRunning"], false, "{first}");
    let url = first["url"].as_str().unwrap().to_string();
    let port: u16 = url.rsplit(':').next().unwrap().trim_end_matches('/').parse().unwrap();
    let other = if port == 65_535 { port - 1 } else { port + 1 };
    let (code, e) = err(&od(data, &["daemon", "start", "--port", &other.to_string(), "--json"]));
    assert_eq!((code, e["code"].as_str()), (76, Some("daemon-running")), "{e}");
    assert_eq!(e["data"]["url"], url.as_str(), "{e}");
    // The same port, or none named: the running daemon, as before.
    for args in [vec!["daemon", "start", "--json"], vec!["daemon", "start", "--port", &port.to_string(), "--json"]] {
        let again = json(&od_cmd(data, &args).env_remove("OD_PORT").output().unwrap());
        assert_eq!((&again["alreadyRunning"], &again["url"]), (&Value::Bool(true), &first["url"]), "{again}");
    }
    json(&od(data, &["daemon", "stop", "--json"]));
}
