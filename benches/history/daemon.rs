//! The release daemon as a separate process for `benches/history`: spawn on a data dir and time
//! spawn → healthy, stop cleanly or `kill -9`, read its memory from `/proc`, and drive runs over
//! loopback HTTP (`POST /api/runs` + `/watch`), as `benches/runs.rs` does.

use crate::common::Mem;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The body of every `POST /api/runs` (the same as `benches/runs`).
pub const START_BODY: &str = r#"{"pluginId":"od-new-generation","pluginInputs":{"topic":"tea","audience":"tea lovers","artifactKind":"landing-page"},"agent":"dry-run"}"#;

/// The `od` binary: the one Cargo built for this bench, else the one next to the bench executable.
pub fn od_binary() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_od"));
    if built.is_file() {
        return built;
    }
    let exe = std::env::current_exe().expect("bench executable");
    let beside = exe.parent().and_then(Path::parent).map(|p| p.join("od")).expect("target dir");
    assert!(beside.is_file(), "no od binary at {} nor {}", built.display(), beside.display());
    beside
}

/// A spawned daemon; killed on drop if still running.
pub struct Daemon {
    child: Child,
    pub pid: u32,
    pub url: String,
    /// Spawn → `GET /api/health` answered 200 (ms).
    pub ready_ms: f64,
    /// Spawn → the first `GET /api/runs?limit=1` answered 200 (ms), right after health.
    pub list_ready_ms: f64,
    pub last_seq: u64,
}

impl Daemon {
    /// Spawns `od --data-dir <data> daemon start --foreground --port 0` and polls until healthy
    /// (`deadline` allows for a long first fold).
    pub fn spawn(data: &Path, deadline: Duration) -> Daemon {
        let exe = od_binary();
        let discovery = data.join("daemon.json");
        let _ = std::fs::remove_file(&discovery);
        let probe = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_millis(5))
            .timeout(Duration::from_secs(600))
            .build();
        let t0 = Instant::now();
        let mut child = Command::new(&exe)
            .arg("--data-dir")
            .arg(data)
            .args(["daemon", "start", "--foreground", "--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", exe.display()));
        let pid = child.id();
        let mut url: Option<String> = None;
        loop {
            if url.is_none() {
                // Written with a plain write, so a read can see it half done: retry until it parses.
                if let Some(v) =
                    std::fs::read_to_string(&discovery).ok().and_then(|t| serde_json::from_str::<Value>(&t).ok())
                {
                    if v["pid"].as_u64() == Some(u64::from(pid)) {
                        url = v["url"].as_str().map(str::to_string);
                    }
                }
            }
            if let Some(u) = &url {
                if let Ok(r) = probe.get(&format!("{u}/api/health")).call() {
                    let ready_ms = t0.elapsed().as_secs_f64() * 1e3;
                    let v: Value = r.into_json().expect("health json");
                    let last_seq = v["lastSeq"].as_u64().expect("lastSeq");
                    probe.get(&format!("{u}/api/runs?limit=1")).call().expect("first runs list");
                    let list_ready_ms = t0.elapsed().as_secs_f64() * 1e3;
                    return Daemon { child, pid, url: u.clone(), ready_ms, list_ready_ms, last_seq };
                }
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the daemon exited before answering: {status}");
            }
            assert!(t0.elapsed() < deadline, "the daemon did not answer within {deadline:?}");
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    pub fn mem(&self) -> Mem {
        Mem::of(self.pid)
    }

    /// `POST /api/daemon/stop`, then waits for the exit; ms from the request to the exit.
    pub fn stop(mut self) -> f64 {
        let t0 = Instant::now();
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(600)).build();
        agent.post(&format!("{}/api/daemon/stop", self.url)).call().expect("daemon stop");
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the daemon") {
                assert!(status.success(), "the daemon exited with {status}");
                return t0.elapsed().as_secs_f64() * 1e3;
            }
            assert!(t0.elapsed() < Duration::from_secs(600), "the daemon did not exit within 600 s of the stop");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// SIGKILL, and reap.
    pub fn kill9(mut self) {
        self.child.kill().expect("kill -9 the daemon");
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn client() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout_connect(Duration::from_secs(5)).timeout_read(Duration::from_secs(120)).build()
}

/// `GET path`, as JSON (must answer 200).
pub fn get_json(agent: &ureq::Agent, url: &str, path: &str) -> Value {
    agent
        .get(&format!("{url}{path}"))
        .call()
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
        .into_json()
        .expect("json body")
}

/// `POST /api/runs` (must answer 202); the answer.
pub fn start_run(agent: &ureq::Agent, url: &str) -> Value {
    let r = agent
        .post(&format!("{url}/api/runs"))
        .set("Content-Type", "application/json")
        .send_string(START_BODY)
        .unwrap_or_else(|e| panic!("POST /api/runs: {e}"));
    assert_eq!(r.status(), 202, "POST /api/runs status");
    r.into_json().expect("start json")
}

/// One run: POST → first watch line (ms), then read to `end`; (first ms, end status).
pub fn one_run(agent: &ureq::Agent, url: &str) -> (f64, String) {
    let t0 = Instant::now();
    let v = start_run(agent, url);
    let id = v["runId"].as_str().expect("runId").to_string();
    let r = agent.get(&format!("{url}/api/runs/{id}/watch")).call().unwrap_or_else(|e| panic!("watch {id}: {e}"));
    let mut reader: BufReader<Box<dyn Read + Send + Sync>> = BufReader::new(r.into_reader());
    let mut line = String::new();
    reader.read_line(&mut line).expect("first watch line");
    let first_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut last = line.clone();
    loop {
        line.clear();
        if reader.read_line(&mut line).expect("watch line") == 0 {
            break;
        }
        if !line.trim().is_empty() {
            last = line.clone();
        }
    }
    let v: Value = serde_json::from_str(last.trim()).unwrap_or_else(|e| panic!("run {id}: last line {last:?}: {e}"));
    assert_eq!(v["event"], "end", "run {id}: the watch ended without `end`");
    (first_ms, v["data"]["status"].as_str().unwrap_or("?").to_string())
}
