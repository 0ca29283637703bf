//! `od mcp` over stdio: raw JSON-RPC (every stdout line is JSON-RPC; initialize, list, describe,
//! call, approval, unknown tool, ping, a flat model-facing cost as the catalog grows), the per-run
//! variant reaching a run's browser tools, and the real clients — the official TypeScript SDK
//! client and the MCP Inspector CLI (`tests/mcp_js/`, installed by `.ci/run` with npm).

use crate::common;

use common::harness::{Engine, OD};
use common::mcp::Mcp;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Command;

const NOW: i64 = 1_800_000_000_000;
/// The project's own 89-tool catalog (tests/fixtures/tools/README.md); the 443-tool real-world one
/// is exercised by `conformance_mcp.rs`.
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tools/catalog.json");

fn catalog() -> Value {
    serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap()
}

fn import_fixture(e: &Engine) {
    assert_eq!(e.post("/api/tools/import", json!({ "tools": catalog(), "namespace": "fx" })).0, 200);
}

#[test]
fn disclosed_session_lists_describes_once_calls_refuses_and_stays_flat() {
    common::mcp::disclosed_session_stays_flat(&catalog(), "fx");
}

#[test]
fn the_flat_catalog_pages_every_tool_and_calls_them_directly() {
    common::mcp::flat_catalog_pages_every_tool(&catalog(), "fx");
}

#[test]
fn the_per_run_variant_reaches_the_runs_browser_tools() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    let run = e.start_run(json!({ "dryRun": { "waitForCancel": "discovery" } }));
    let nav = json!({ "name": "ui.navigate", "description": "Go to a page of the app.", "surface": "browser", "viewStateOnly": true,
                      "inputSchema": { "type": "object", "properties": { "to": { "type": "string" } }, "required": ["to"] } });
    assert_eq!(e.post("/api/browser-sessions/tab", json!({ "runId": run, "tools": [nav] })).0, 200);
    // The browser: answers the first request on the run's stream, refuses the second.
    let (url, rid) = (e.url.clone(), run.clone());
    let browser = std::thread::spawn(move || {
        let r = ureq::get(&format!("{url}/api/runs/{rid}/watch")).call().unwrap();
        let mut answered = 0;
        for line in BufReader::new(r.into_reader()).lines() {
            let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
            if v["event"] != "browser_action_request" {
                continue;
            }
            let inv = v["data"]["invocationId"].as_str().unwrap();
            let body = match answered {
                0 => json!({ "ok": true, "result": { "at": v["data"]["input"]["to"] } }),
                _ => json!({ "ok": false, "error": { "code": "USER_DENIED", "message": "not now" } }),
            };
            ureq::post(&format!("{url}/api/runs/{rid}/actions/{inv}/result")).send_json(body).unwrap();
            answered += 1;
            if answered == 2 {
                return;
            }
        }
    });
    let mut m = Mcp::start(tmp.path(), &["--run", &run]);
    let (_, page) = m.call("od_list", json!({ "query": "navigate page" }));
    assert_eq!(
        (page["tools"][0]["name"].clone(), page["tools"][0]["surface"].clone()),
        (json!("ui.navigate"), json!("browser"))
    );
    let (_, d) = m.call("od_call", json!({ "name": "ui.navigate", "describe": true }));
    assert_eq!(d["readOnly"], true);
    let (err, r) = m.call("od_call", json!({ "name": "ui.navigate", "args": { "to": "/media" } }));
    assert!(!err, "{r}");
    assert_eq!((r["ok"].clone(), r["result"].clone()), (json!(true), json!({ "at": "/media" })));
    let (err, r) = m.call("od_call", json!({ "name": "ui.navigate", "args": { "to": "/settings" } }));
    assert!(err && r["error"]["code"] == "USER_DENIED", "{r}");
    browser.join().unwrap();
    let (_, acts) = e.get(&format!("/api/runs/{run}/actions"));
    let codes: Vec<&Value> = acts["actions"].as_array().unwrap().iter().map(|a| &a["status"]).collect();
    assert_eq!(codes, [&json!("ok"), &json!("error")]);
    let mut plain = Mcp::start(tmp.path(), &[]);
    let (err, r) = plain.call("od_call", json!({ "name": "ui.navigate", "args": { "to": "/" } }));
    assert!(err && r["error"]["code"] == "tool-not-found", "without --run no browser tool is reachable: {r}");
}

fn mcp_js() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_js");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir()
            && dir.join("node_modules/@modelcontextprotocol/inspector-cli").is_dir(),
        "tests/mcp_js/node_modules is missing: run `npm ci --prefix tests/mcp_js` (CI's .ci/run does)"
    );
    dir
}

#[test]
fn the_official_typescript_sdk_client_drives_od_mcp() {
    let js = mcp_js();
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    import_fixture(&e);
    let out = Command::new("node")
        .arg(js.join("sdk-check.mjs"))
        .arg(OD)
        .arg(tmp.path())
        .arg("fx.country_info.capital")
        .current_dir(&js)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("MCP CHECK PASSED"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn inspector(js: &Path, data: &Path, args: &[&str]) -> std::process::Output {
    // inspector-cli 1.0.3 looks for ../package.json relative to its cwd: run it from node_modules.
    Command::new("node")
        .arg("@modelcontextprotocol/inspector-cli/build/index.js")
        .arg(OD)
        .args(["mcp", "--data-dir"])
        .arg(data)
        .args(args)
        .current_dir(js.join("node_modules"))
        .output()
        .unwrap()
}

#[test]
fn the_mcp_inspector_cli_lists_describes_calls_and_reports_an_unknown_tool() {
    let js = mcp_js();
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    import_fixture(&e);
    let out = inspector(&js, tmp.path(), &["--method", "tools/list"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tools"].as_array().unwrap().len(), 2);
    let out = inspector(
        &js,
        tmp.path(),
        &["--method", "tools/call", "--tool-name", "od_call", "--tool-arg", "name=runs.get", "describe=true"],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d: Value = serde_json::from_str(v["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!((v["isError"].clone(), d["inputSchema"]["required"].clone()), (json!(false), json!(["runId"])));
    let out = inspector(
        &js,
        tmp.path(),
        &["--method", "tools/call", "--tool-name", "od_list", "--tool-arg", "query=compound interest"],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let page: Value = serde_json::from_str(v["content"][0]["text"].as_str().unwrap()).unwrap();
    assert!(page["tools"][0]["name"].as_str().unwrap().to_lowercase().contains("interest"), "{page}");
    let out = inspector(
        &js,
        tmp.path(),
        &["--method", "tools/call", "--tool-name", "od_call", "--tool-arg", "name=projects.list", "args={}"],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["isError"], false, "{v}");
    let out = inspector(&js, tmp.path(), &["--method", "tools/call", "--tool-name", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-32602"), "{}", String::from_utf8_lossy(&out.stderr));
}
