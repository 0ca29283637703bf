//! A minimal blocking MCP client over stdio for plugin-declared MCP servers: start the process,
//! `initialize`, then `tools/list` (following cursors) or `tools/call`, each answer awaited with a
//! deadline; the process is killed when the client is dropped. Newline-delimited JSON-RPC, as the
//! MCP stdio transport specifies.

use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::limits::MAX_MCP_LIST_PAGES;

/// The protocol version od asks for.
pub const CLIENT_PROTOCOL_VERSION: &str = "2025-11-25";

/// A running MCP server.
pub struct McpChild {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next_id: u64,
    deadline: Instant,
}

impl McpChild {
    /// Starts `command args` in `cwd` with `env` added, and initializes the session; everything
    /// must finish within `timeout`.
    pub fn start(
        command: &str,
        args: &[String],
        env: &[(String, String)],
        cwd: &std::path::Path,
        timeout: Duration,
    ) -> Result<Self, String> {
        let mut child = Command::new(command)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {command}: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut c = Self { child, stdin, lines, next_id: 1, deadline: Instant::now() + timeout };
        let init = json!({ "protocolVersion": CLIENT_PROTOCOL_VERSION, "capabilities": {},
                           "clientInfo": { "name": "od", "version": env!("CARGO_PKG_VERSION") } });
        c.request("initialize", init)?;
        c.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))?;
        Ok(c)
    }

    fn send(&mut self, v: &Value) -> Result<(), String> {
        writeln!(self.stdin, "{v}").and_then(|_| self.stdin.flush()).map_err(|e| format!("writing to the server: {e}"))
    }

    /// Sends a request and waits for its response (skipping the server's notifications; its own
    /// requests are answered "method not found").
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))?;
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(l) => l,
                Err(RecvTimeoutError::Timeout) => return Err(format!("no answer to {method} in time")),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("the server exited before answering {method}"))
                }
            };
            let Ok(msg) = serde_json::from_str::<Value>(&line) else { continue };
            if msg.get("method").is_some() {
                if let Some(rid) = msg.get("id") {
                    self.send(&json!({ "jsonrpc": "2.0", "id": rid, "error": { "code": -32601, "message": "not supported" } }))?;
                }
                continue;
            }
            if msg["id"] != id {
                continue;
            }
            if let Some(e) = msg.get("error") {
                return Err(format!("{method}: {} ({})", e["message"].as_str().unwrap_or("error"), e["code"]));
            }
            return Ok(msg["result"].clone());
        }
    }
}

/// One MCP session, whatever its transport: a request and its answer.
pub trait McpSession {
    /// Sends a request and waits for its result.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, String>;

    /// Every tool the server lists.
    fn list_tools(&mut self) -> Result<Vec<Value>, String> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_MCP_LIST_PAGES {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let r = self.request("tools/list", params)?;
            out.extend(r["tools"].as_array().cloned().unwrap_or_default());
            match r["nextCursor"].as_str() {
                Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
                _ => return Ok(out),
            }
        }
        Err(format!("more than {MAX_MCP_LIST_PAGES} pages of tools"))
    }

    /// Calls a tool; the MCP `CallToolResult`.
    fn call_tool(&mut self, name: &str, arguments: &Value) -> Result<Value, String> {
        self.request("tools/call", json!({ "name": name, "arguments": arguments }))
    }
}

impl McpSession for McpChild {
    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        McpChild::request(self, method, params)
    }
}

impl Drop for McpChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The deadline for a plugin server's whole exchange.
pub fn timeout() -> Duration {
    Duration::from_millis(crate::limits::MCP_SERVER_TIMEOUT_MS)
}
