//! JSON-RPC for `od mcp`: one server process (an embedded engine on a temp data dir) fed every
//! input's lines on stdin after the handshake. After each input a `ping` must be answered — the
//! server neither died nor stalled — and every line it wrote must be a JSON-RPC 2.0 message.

use super::harness::{Bounds, Target};
use super::mutate::lines;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    stdin: ChildStdin,
    out: Receiver<String>,
    pings: u64,
    _tmp: tempfile::TempDir,
}

impl Server {
    /// `od mcp` with `extra` arguments (`--flat` pages the whole catalog through `tools/list`).
    pub fn start(extra: &[&str]) -> Mutex<Self> {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = Command::new(crate::common::harness::OD)
            .args(["mcp", "--data-dir"])
            .arg(tmp.path().join("data"))
            .args(extra)
            .env_remove("OD_DAEMON_URL")
            .env_remove("OD_MCP_ALLOW")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, out) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = Server { child, stdin, out, pings: 0, _tmp: tmp };
        let init = json!({ "jsonrpc": "2.0", "id": "fuzz-init", "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "fuzz", "version": "1" } } });
        s.send(init.to_string().as_bytes());
        s.wait_for("fuzz-init");
        s.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        Mutex::new(s)
    }

    fn send(&mut self, line: &[u8]) {
        let alive =
            self.stdin.write_all(line).and_then(|_| self.stdin.write_all(b"\n")).and_then(|_| self.stdin.flush());
        assert!(alive.is_ok(), "od mcp closed its stdin: {:?}", self.child.try_wait());
    }

    /// Reads lines until the answer to `id`; each must be JSON-RPC 2.0.
    fn wait_for(&mut self, id: &str) -> Value {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let line = match self.out.recv_timeout(left) {
                Ok(l) => l,
                Err(RecvTimeoutError::Timeout) => panic!("od mcp did not answer {id} in time"),
                Err(RecvTimeoutError::Disconnected) => panic!("od mcp died: {:?}", self.child.try_wait()),
            };
            let v: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            assert_eq!(v["jsonrpc"], "2.0", "not JSON-RPC 2.0: {line}");
            if v["id"] == id {
                return v;
            }
        }
    }

    /// Peak resident memory of the server process (VmHWM), in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Feeds the input's lines, then pings: the server is alive and answering.
pub fn check_lines(server: &Mutex<Server>, input: &[u8]) {
    let mut s = server.lock().unwrap_or_else(|e| e.into_inner());
    for line in input.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        s.send(line);
    }
    s.pings += 1;
    let id = format!("fuzz-ping-{}", s.pings);
    s.send(json!({ "jsonrpc": "2.0", "id": id, "method": "ping" }).to_string().as_bytes());
    let pong = s.wait_for(&id);
    assert!(pong["result"].is_object(), "ping: {pong}");
}

pub fn target() -> Target {
    Target {
        name: "mcp",
        iterations: 300,
        // The server's heap is in its own process (its peak RSS is checked after the run); this
        // process only writes lines and reads answers.
        bounds: Bounds { deadline: Duration::from_secs(30), memory: |n| (4 << 20) + 64 * n },
        seeds: Vec::new(),
        mutate: lines,
    }
}
