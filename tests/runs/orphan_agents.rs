//! An exec agent left running by a daemon killed with SIGKILL is ended by the next daemon start,
//! and its run's end reason says so (`agentProcessGroupEnded: <pgid>`).

use crate::common;

use common::harness::{write_plugin, OD};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A daemon child, killed should an assertion fail while it runs.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn start_daemon(data: &Path) -> (Daemon, String) {
    let mut child = Command::new(OD)
        .args(["daemon", "start", "--foreground", "--port", "0", "--json", "--data-dir"])
        .arg(data)
        .env_remove("OD_DAEMON_URL")
        .env("OD_ALLOW_HTTP_EXEC", "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let url = serde_json::from_str::<Value>(&line).unwrap()["url"].as_str().unwrap().to_string();
    (Daemon(child), url)
}

/// Whether `pid` still runs (a zombie does not).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')))
}

/// Whether any live process is in group `pgid`.
fn group_alive(pgid: i32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { return false };
        let Some((_, rest)) = stat.rsplit_once(") ") else { return false };
        let f: Vec<&str> = rest.split_whitespace().collect();
        !matches!(f.first(), Some(&"Z") | Some(&"X")) && f.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid)
    })
}

fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Kills the agent's group should an assertion fail before the daemon did.
struct KillGroup(i32);

impl Drop for KillGroup {
    fn drop(&mut self) {
        if self.0 > 1 {
            // SAFETY: only sends a signal to the test's own agent group.
            unsafe { libc::killpg(self.0, libc::SIGKILL) };
        }
    }
}

#[test]
fn the_next_start_ends_an_agent_a_killed_daemon_left_running() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let plugin = tmp.path().join("agentic");
    write_plugin(&plugin, "agentic", "1.0.0", json!([ { "id": "draft", "atoms": ["file-write"] } ]), "Go.");
    let pid_file = tmp.path().join("agent.pid");
    let agent = tmp.path().join("agent.sh");
    // The agent (its group's leader) writes its pid, starts a helper, and waits for good.
    std::fs::write(
        &agent,
        "#!/bin/sh\necho $$ > \"$PID_FILE.tmp\"\nmv \"$PID_FILE.tmp\" \"$PID_FILE\"\nsleep 1000 &\nwait\n",
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&agent).status().unwrap();

    let (mut daemon, url) = start_daemon(&data);
    let r = ureq::post(&format!("{url}/api/plugins/install")).send_json(json!({ "source": plugin })).unwrap();
    assert!(r.into_string().unwrap().contains("\"success\""));
    let body = json!({ "pluginId": "agentic", "agent": "exec", "agentCommand": [agent.to_str().unwrap()],
                       "agentEnv": { "PID_FILE": pid_file.to_str().unwrap() } });
    let started: Value = ureq::post(&format!("{url}/api/runs")).send_json(body).unwrap().into_json().unwrap();
    let run = started["runId"].as_str().unwrap().to_string();
    let pid: i32 =
        poll("the agent's pid", || std::fs::read_to_string(&pid_file).ok().and_then(|s| s.trim().parse().ok()));
    let _cleanup = KillGroup(pid);
    assert!(alive(pid));

    daemon.0.kill().unwrap(); // SIGKILL: nothing of the daemon runs its shutdown
    daemon.0.wait().unwrap();
    assert!(alive(pid) && group_alive(pid), "the agent outlives a killed daemon, unsupervised");

    let (_daemon, url) = start_daemon(&data);
    poll("the orphaned group to end", || (!group_alive(pid)).then_some(()));
    let info: Value = ureq::get(&format!("{url}/api/runs/{run}")).call().unwrap().into_json().unwrap();
    assert_eq!(info["run"]["status"], "failed", "{info}");
    assert_eq!(info["run"]["failureCategory"], "daemon-restart");
    let reason = info["run"]["reason"].as_str().unwrap();
    assert!(reason.contains(&format!("agentProcessGroupEnded: {pid}")), "{reason}");
    assert!(!data.join("agents/running").join(format!("{run}.json")).exists(), "the record is gone");

    // `od run info` shows it too.
    let out = Command::new(OD).args(["run", "info", &run, "--json", "--daemon-url", &url]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("agentProcessGroupEnded"), "{out:?}");
}
