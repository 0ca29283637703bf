//! `od mcp` over stdio for tests: a child process speaking raw JSON-RPC, every stdout line checked
//! to be JSON-RPC (used by `mcp.rs` and `conformance_mcp.rs`).

use super::harness::OD;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Lines, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

pub struct Mcp {
    child: Child,
    stdin: ChildStdin,
    out: Lines<BufReader<ChildStdout>>,
    next: u64,
}

impl Mcp {
    pub fn start(data: &Path, extra: &[&str]) -> Self {
        let mut child = Command::new(OD)
            .args(["mcp", "--data-dir"])
            .arg(data)
            .args(extra)
            .env_remove("OD_DAEMON_URL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut m = Mcp { child, stdin, out, next: 1 };
        let init = m.request("initialize", json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } }));
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
        m.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        m
    }

    pub fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request; every line read until its answer must be JSON-RPC.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        loop {
            let line = self.out.next().expect("the server answers").unwrap();
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC, got {line:?}: {e}"));
            assert_eq!(v["jsonrpc"], "2.0", "{line}");
            if v["id"] == id {
                return v;
            }
        }
    }

    /// `tools/call`: (isError, the JSON the text content carries).
    pub fn call(&mut self, name: &str, args: Value) -> (bool, Value) {
        let r = self.request("tools/call", json!({ "name": name, "arguments": args }));
        let res = &r["result"];
        assert!(res.is_object(), "{r}");
        (res["isError"] == true, serde_json::from_str(res["content"][0]["text"].as_str().unwrap()).unwrap())
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
