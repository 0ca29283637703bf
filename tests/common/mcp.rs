//! `od mcp` over stdio for tests: a child process speaking raw JSON-RPC, every stdout line checked
//! to be JSON-RPC (used by `mcp.rs` and `conformance_mcp.rs`).

use super::harness::{Engine, OD};
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

/// `od mcp`'s disclosed session over a catalog imported into namespace `ns` (which the catalog's
/// `weather.get_by_coordinates_date` ranks first for its query): lists two tools, describes once,
/// calls, refuses, and what the model is given stays flat as the catalog grows (`mcp.rs` on the
/// project's catalog, `conformance_mcp.rs` on the real-world one).
pub fn disclosed_session_stays_flat(catalog: &Value, ns: &str) {
    let import = |e: &Engine| {
        assert_eq!(e.post("/api/tools/import", json!({ "tools": catalog, "namespace": ns })).0, 200);
    };
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), 1_800_000_000_000);
    let mut m = Mcp::start(tmp.path(), &[]);
    let small = m.request("tools/list", json!({}));
    let names: Vec<&str> =
        small["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["od_list", "od_call"]);
    import(&e);
    let big = m.request("tools/list", json!({}));
    assert_eq!(big["result"], small["result"], "what the model is given does not grow with the catalog");

    let (err, page) = m.call("od_list", json!({ "query": "historical weather at coordinates on a date" }));
    assert!(!err);
    assert_eq!(page["tools"][0]["name"], format!("{ns}.weather.get_by_coordinates_date"), "{page}");
    assert!(page["tools"].as_array().unwrap().len() <= od::limits::DISCLOSURE_LIST_PAGE);
    assert!(page["tools"].as_array().unwrap().iter().all(|t| t.get("inputSchema").is_none()));
    let (_, all) = m.call("od_list", json!({ "limit": 1000 }));
    assert_eq!(all["tools"].as_array().unwrap().len(), od::limits::DISCLOSURE_LIST_MAX_PAGE, "pages are bounded");
    let (_, next) = m.call("od_list", json!({ "cursor": all["nextCursor"] }));
    assert_ne!(next["tools"][0], all["tools"][0]);

    let (_, d1) = m.call("od_call", json!({ "name": "files.write", "describe": true }));
    assert_eq!(d1["inputSchema"]["required"], json!(["projectId", "path", "content"]));
    let (_, d2) = m.call("od_call", json!({ "name": "files.write", "describe": true }));
    assert_eq!((d2.get("inputSchema"), &d2["digest"]), (None, &d1["digest"]), "a schema is sent once per conversation");
    let (err, refused) =
        m.call("od_call", json!({ "name": "files.write", "args": { "projectId": "p", "path": "a", "content": "x" } }));
    assert!(err && refused["error"]["code"] == "approval-required", "approval keys on the target tool: {refused}");
    let (err, bad) = m.call("od_call", json!({ "name": "runs.get", "args": {} }));
    assert!(err && bad["error"]["code"] == "invalid-input");
    let (err, failed) = m.call("od_call", json!({ "name": "runs.get", "args": { "runId": "nope" } }));
    assert!(err && failed["error"]["message"].as_str().unwrap().contains("run-not-found"), "{failed}");
    let (err, nope) = m.call("od_call", json!({ "name": "no.such" }));
    assert!(err && nope["error"]["code"] == "tool-not-found", "an unknown target fails closed");
    let unknown = m.request("tools/call", json!({ "name": "no_such_tool", "arguments": {} }));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert_eq!(m.request("ping", json!({}))["result"], json!({}));
    let meta = json!({ "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } });
    let discover = m.request("server/discover", meta);
    let supported = discover["error"]["data"]["supported"].as_array().cloned().unwrap_or_default();
    assert!(
        supported.contains(&json!("2025-11-25")) && !supported.contains(&json!("2026-07-28")),
        "only initialize-era revisions: {discover}"
    );

    let mut allowed = Mcp::start(tmp.path(), &["--allow", "projects.*"]);
    let (err, created) = allowed.call("od_call", json!({ "name": "projects.create", "args": { "name": "via mcp" } }));
    assert!(!err, "{created}");
    let (_, projects) = e.get("/api/projects");
    assert_eq!(projects["projects"][0]["name"], "via mcp");
}

/// `od mcp --flat` over `catalog`: pages every tool (the catalog's and od's own) and calls them.
pub fn flat_catalog_pages_every_tool(catalog: &Value, ns: &str) {
    let import = |e: &Engine| {
        assert_eq!(e.post("/api/tools/import", json!({ "tools": catalog, "namespace": ns })).0, 200);
    };
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), 1_800_000_000_000);
    import(&e);
    let mut m = Mcp::start(tmp.path(), &["--flat"]);
    let mut n = 0;
    let mut cursor: Option<Value> = None;
    loop {
        let params = cursor.as_ref().map_or(json!({}), |c| json!({ "cursor": c }));
        let page = m.request("tools/list", params);
        n += page["result"]["tools"].as_array().unwrap().len();
        match page["result"].get("nextCursor") {
            Some(c) => cursor = Some(c.clone()),
            None => break,
        }
    }
    assert_eq!(n, catalog.as_array().unwrap().len() + od::tools::builtin::descriptors().len());
    let (err, v) = m.call("projects.list", json!({}));
    assert!(!err && v["projects"].is_array());
    assert_eq!(m.request("tools/call", json!({ "name": "no.such", "arguments": {} }))["error"]["code"], -32602);
}
