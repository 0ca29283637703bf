//! Conformance (reads ../shared: the BFCL-derived tool-retrieval catalog, 443 real-world tools).
//! `od mcp` over stdio with the real catalog imported: the disclosed session ranks it, stays flat
//! (what the model is given does not grow with it) and pages it; the flat catalog lists every tool.
//! The same on the project's own catalog, and the real MCP clients, are in `mcp.rs`. Run with
//! `cargo test --test 'conformance_*'` (`.ci/run` does); a missing ../shared fails, never skips.

mod common;

use common::harness::Engine;
use common::mcp::Mcp;
use serde_json::{json, Value};
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/tool-retrieval/catalog.json");

fn import_fixture(e: &Engine) {
    assert!(
        Path::new(FIXTURE).is_file(),
        "the conformance corpus is missing: {FIXTURE} (the conformance suite needs ../shared/fixtures beside \
         the checkout; `cargo test --workspace` does not)"
    );
    let catalog: Value = serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    assert_eq!(e.post("/api/tools/import", json!({ "tools": catalog, "namespace": "bfcl" })).0, 200);
}

#[test]
fn disclosed_session_lists_describes_once_calls_refuses_and_stays_flat() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    let mut m = Mcp::start(tmp.path(), &[]);
    let small = m.request("tools/list", json!({}));
    let names: Vec<&str> =
        small["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["od_list", "od_call"]);
    import_fixture(&e);
    let big = m.request("tools/list", json!({}));
    assert_eq!(big["result"], small["result"], "what the model is given does not grow with the catalog");

    let (err, page) = m.call("od_list", json!({ "query": "historical weather at coordinates on a date" }));
    assert!(!err);
    assert_eq!(page["tools"][0]["name"], "bfcl.weather.get_by_coordinates_date", "{page}");
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

#[test]
fn the_flat_catalog_pages_every_tool_and_calls_them_directly() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    import_fixture(&e);
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
    assert_eq!(n, 443 + od::tools::builtin::descriptors().len());
    let (err, v) = m.call("projects.list", json!({}));
    assert!(!err && v["projects"].is_array());
    assert_eq!(m.request("tools/call", json!({ "name": "no.such", "arguments": {} }))["error"]["code"], -32602);
}
