//! The tool catalog: od's own `api` tools (registered once, each with a real route and a real `od`
//! subcommand), imports and keyword search (ranking, cursor paging, totals), removal, browser
//! sessions' advertisements and a run's manifest, the tools of a plugin's MCP server (indexed and
//! called through the capability gate), and the CLI.

use crate::common;

use clap::Parser;
use common::harness::{write_plugin, Engine, OD};
use serde_json::{json, Value};
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;
/// The project's own catalog: 89 tools in the BFCL shape (name, description, inputSchema), written
/// for these tests; see tests/fixtures/tools/README.md for the queries and the tools they must find.
/// The 443-tool real-world catalog is exercised by `conformance_tools.rs`.
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tools/catalog.json");

fn catalog() -> Value {
    serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap()
}

fn registered_events(e: &Engine) -> usize {
    let (_, v) = e.get("/api/log/events?stream=tools&limit=10000");
    v["events"].as_array().unwrap().iter().filter(|x| x["event"] == "tool_registered").count()
}

fn import_fixture(e: &Engine) -> Value {
    let (code, v) = e.post("/api/tools/import", json!({ "tools": catalog(), "namespace": "fx", "source": "fixture" }));
    assert_eq!(code, 200, "{v}");
    v
}

#[test]
fn od_registers_its_own_tools_once_each_with_a_real_route_and_subcommand() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = Engine::start(&data, NOW);
    assert_eq!(registered_events(&e), 0, "a start that does not consult the catalog appends nothing");
    let (_, all) = e.get("/api/tools?limit=100");
    let tools = all["tools"].as_array().unwrap().clone();
    assert!(tools.len() >= 13, "od's capabilities: {}", tools.len());
    assert_eq!(registered_events(&e), tools.len());
    for t in &tools {
        let name = t["name"].as_str().unwrap();
        assert!(od::tools::descriptor::strict_name(name), "{name} follows the contract's name pattern");
        let sub: Vec<&str> = t["cli"]["subcommand"].as_str().unwrap().split_whitespace().collect();
        let parsed = od::cli::Cli::try_parse_from(["od"].into_iter().chain(sub.clone()).chain(["--help"]));
        let kind = parsed.err().map(|e| e.kind());
        assert_eq!(
            kind,
            Some(clap::error::ErrorKind::DisplayHelp),
            "{name}: `od {}` is a real subcommand",
            sub.join(" ")
        );
        let route = t["api"]["route"].as_str().unwrap().replace("{projectId}", "p-none").replace("{runId}", "r-none");
        let route = route.replace("{pluginId}", "nope").replace("{surfaceId}", "s").replace("{path}", "f.txt");
        let method = t["api"]["method"].as_str().unwrap();
        let res = ureq::request(method, &format!("{}{route}", e.url)).send_json(json!({ "__probe": true }));
        let (code, body) = match res {
            Ok(r) => (r.status(), r.into_string().unwrap()),
            Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap()),
            Err(err) => panic!("{err}"),
        };
        assert!(
            code != 405 && !(code == 404 && body.contains("\"not-found\"")),
            "{name}: {method} {route} is served ({code} {body})"
        );
    }
    e.stop();
    let e = Engine::start(&data, NOW);
    let (_, again) = e.get("/api/tools?limit=100");
    assert_eq!(again["tools"], json!(tools), "the catalog survives a restart");
    assert_eq!(registered_events(&e), tools.len(), "an unchanged definition is not registered again");
}

#[test]
fn imports_are_searched_by_keyword_and_paged_with_a_cursor() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    let n = catalog().as_array().unwrap().len();
    assert_eq!(n, 89, "the fixture's size (tests/fixtures/tools/README.md)");
    let v = import_fixture(&e);
    assert_eq!(v["added"].as_array().unwrap().len(), n);
    let again = import_fixture(&e);
    assert_eq!((again["unchanged"].clone(), again["registered"].clone()), (json!(n), json!(0)));

    let (_, r) = e.get("/api/tools/search?query=What%20is%20the%20capital%20of%20Brazil%3F&limit=3");
    assert_eq!(r["tools"][0]["name"], "fx.country_info.capital");
    assert_eq!(r["tools"][0]["api"]["route"], "/api/tools/fx.country_info.capital/call");
    assert_eq!(r["tools"][0]["cli"]["subcommand"], "tools call fx.country_info.capital");

    let (_, p1) = e.get("/api/tools/search?query=triangle%20area&limit=5");
    let total = p1["total"].as_u64().unwrap();
    let best = p1["tools"][0]["name"].as_str().unwrap();
    assert!(best.starts_with("fx.geometry.triangle_area"), "a tool with both words ranks first: {p1}");
    assert!(total > 5, "more than one page of 5 (9 fixture tools hold 'triangle' or 'area'): {p1}");
    assert_eq!(p1["truncated"], json!(true));
    assert!(p1["nextCursor"].is_string(), "{p1}");
    let mut seen: Vec<String> = Vec::new();
    let mut cursor = Some(String::new());
    while let Some(c) = cursor {
        let (_, p) = e.get(&format!("/api/tools/search?query=triangle%20area&limit=5&cursor={c}"));
        assert_eq!(p["total"], total);
        seen.extend(p["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()));
        cursor = p["nextCursor"].as_str().map(str::to_string);
        assert_eq!(p["truncated"], json!(cursor.is_some()));
    }
    assert_eq!(seen.len() as u64, total);
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len() as u64, total, "pages do not overlap");
    let (_, post) = e.post("/api/tools/search", json!({ "query": "triangle area", "limit": 5 }));
    assert_eq!(post["tools"], p1["tools"]);
    let (code, bad) = e.get("/api/tools/search?query=x&cursor=zz");
    assert_eq!((code, bad["error"]["data"]["field"].clone()), (400, json!("cursor")));
    let (_, none) = e.get("/api/tools/search?query=xylophone%20zebra");
    assert_eq!((none["total"].clone(), none["truncated"].clone()), (json!(0), json!(false)));
}

#[test]
fn descriptors_are_validated_changes_are_events_and_od_own_tools_are_protected() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    let t = json!({ "name": "paint", "description": "Paint a wall.", "inputSchema": { "type": "object" } });
    let (code, v) = e.post("/api/tools/import", json!({ "tools": [t], "namespace": "deco" }));
    assert_eq!((code, v["added"].clone()), (200, json!(["deco.paint"])));
    let changed =
        json!({ "name": "paint", "description": "Paint a wall in two coats.", "inputSchema": { "type": "object" } });
    let (_, v) = e.post("/api/tools/import", json!({ "tools": [changed], "namespace": "deco" }));
    assert_eq!(v["changed"], json!(["deco.paint"]));
    let (_, shown) = e.get("/api/tools/deco.paint");
    assert_eq!(
        (shown["tool"]["description"].clone(), shown["source"].clone()),
        (json!("Paint a wall in two coats."), json!("import:file"))
    );
    let bad = json!({ "name": "x", "description": "X.", "inputSchema": { "type": "array" } });
    let (code, v) = e.post("/api/tools/import", json!({ "tools": [bad], "namespace": "deco" }));
    assert_eq!((code, v["error"]["data"]["field"].clone()), (400, json!("tools[0].inputSchema")));
    let (code, _) = e.post("/api/tools/import", json!({ "tools": [{ "name": "solo", "description": "d" }] }));
    assert_eq!(code, 400, "a name without a namespace is refused");
    let (code, v) = e.post(
        "/api/tools/import",
        json!({ "tools": [{ "name": "list", "description": "d" }], "namespace": "projects" }),
    );
    assert_eq!((code, v["error"]["message"].as_str().unwrap().contains("od's own")), (400, true));
    let (code, _) = e.delete("/api/tools/projects.list");
    assert_eq!(code, 400);
    assert_eq!(e.delete("/api/tools/deco.paint").0, 200);
    let (code, v) = e.get("/api/tools/deco.paint");
    assert_eq!((code, v["error"]["code"].clone()), (404, json!("tool-not-found")));
    let (code, v) = e.post("/api/tools/call", json!({ "name": "projects.list", "input": {} }));
    assert_eq!((code, v["ok"].clone(), v["result"]["projects"].clone()), (200, json!(true), json!([])));
    import_fixture(&e);
    let (code, v) = e.post("/api/tools/fx.country_info.capital/call", json!({ "country": "Brazil" }));
    assert_eq!((code, v["error"]["code"].clone()), (422, json!("tool-not-executable")));
}

#[test]
fn a_run_manifest_reflects_what_its_sessions_have_mounted_now() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    let run = e.start_run(json!({ "dryRun": { "waitForCancel": "discovery" } }));
    let go = json!({ "name": "ui.navigate", "description": "Go to a page.", "surface": "browser", "viewStateOnly": true, "inputSchema": { "type": "object" } });
    let zoom = json!({ "name": "canvas.zoom", "description": "Zoom the canvas.", "surface": "browser", "viewStateOnly": true, "inputSchema": { "type": "object" } });
    let browser_names = |e: &Engine| -> Vec<String> {
        let (_, m) = e.get(&format!("/api/runs/{run}/tools/manifest"));
        assert_eq!((m["protocolVersion"].clone(), m["runId"].clone()), (json!(1), json!(run)));
        assert!(m["tools"].as_array().unwrap().iter().any(|t| t["name"] == "runs.get"), "od's own tools are in it");
        m["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["surface"] == "browser")
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(browser_names(&e).is_empty());
    let mut no_flag = go.clone();
    no_flag.as_object_mut().unwrap().remove("viewStateOnly");
    let (code, v) = e.post("/api/browser-sessions/s1", json!({ "runId": run, "tools": [no_flag] }));
    assert_eq!((code, v["error"]["data"]["field"].clone()), (400, json!("tools[0].viewStateOnly")));
    assert_eq!(e.post("/api/browser-sessions/s1", json!({ "runId": run, "tools": [go, zoom] })).0, 200);
    assert_eq!(browser_names(&e), ["ui.navigate", "canvas.zoom"]);
    let (_, found) = e.get(&format!("/api/tools/search?query=zoom&surface=all&runId={run}"));
    assert_eq!(found["tools"][0]["name"], "canvas.zoom");
    assert_eq!(e.post("/api/browser-sessions/s1", json!({ "runId": run, "tools": [zoom] })).0, 200);
    assert_eq!(browser_names(&e), ["canvas.zoom"], "an unmounted tool is no longer live");
    assert_eq!(e.delete("/api/browser-sessions/s1").0, 200);
    assert!(browser_names(&e).is_empty());
    let (code, _) = e.get("/api/runs/nope/tools/manifest");
    assert_eq!(code, 404);
}

/// A plugin declaring an MCP server: od itself (`od mcp --flat`) on another data dir.
fn mcp_plugin(dir: &Path, other: &Path) {
    write_plugin(dir, "mcpdemo", "1.0.0", json!([{ "id": "a", "atoms": ["file-write"] }]), "Body.");
    let path = dir.join("open-design.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["od"]["context"] = json!({ "mcp": [{ "name": "self", "command": OD,
        "args": ["mcp", "--flat", "--allow", "*", "--data-dir", other.to_str().unwrap()] }] });
    std::fs::write(&path, m.to_string()).unwrap();
}

#[test]
fn tools_of_a_plugin_mcp_server_are_indexed_and_called_behind_the_capability_gate() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let other = tmp.path().join("other");
    mcp_plugin(&tmp.path().join("plug"), &other);
    let r = ureq::post(&format!("{}/api/plugins/install", e.url))
        .send_json(json!({ "source": tmp.path().join("plug").to_str().unwrap(), "trust": "restricted" }))
        .unwrap()
        .into_string()
        .unwrap();
    assert!(r.contains("\"success\""), "{r}");
    let (code, v) = e.post("/api/tools/index", json!({ "pluginId": "mcpdemo" }));
    assert_eq!((code, v["error"]["code"].clone()), (409, json!("capabilities-required")), "{v}");
    assert!(v["error"]["data"]["missing"].as_array().unwrap().contains(&json!("mcp:self")));
    let (code, _) = e.post("/api/plugins/mcpdemo/trust", json!({ "capabilities": ["mcp:self", "subprocess"] }));
    assert!(code < 300);
    let (code, v) = e.post("/api/tools/index", json!({ "pluginId": "mcpdemo" }));
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["servers"][0]["status"], "indexed", "{v}");
    let (_, found) = e.get("/api/tools/search?query=projects%20conversations%20run%20counts&limit=3");
    let names: Vec<&str> = found["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"mcpdemo.self.projects-list"), "{names:?}");
    let (_, shown) = e.get("/api/tools/mcpdemo.self.projects-list");
    assert_eq!(
        (shown["source"].clone(), shown["tool"]["origin"]["tool"].clone()),
        (json!("plugin:mcpdemo/self"), json!("projects.list"))
    );
    let (code, v) = e.post("/api/tools/mcpdemo.self.projects-list/call", json!({}));
    assert_eq!(code, 200, "{v}");
    let text = v["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), json!({ "projects": [], "nextCursor": null }));
    let (code, _) = e.post("/api/plugins/mcpdemo/trust", json!({ "capabilities": ["mcp:self"], "action": "revoke" }));
    assert!(code < 300);
    let (code, v) = e.post("/api/tools/mcpdemo.self.projects-list/call", json!({}));
    assert_eq!(
        (code, v["error"]["code"].clone()),
        (409, json!("capabilities-required")),
        "the gate keys on the target tool's plugin"
    );
    assert_eq!(e.post("/api/plugins/mcpdemo/uninstall", json!({})).0, 200);
    let (code, _) = e.get("/api/tools/mcpdemo.self.projects-list");
    assert_eq!(code, 404, "an uninstalled plugin's tools leave the catalog");
}

fn od(data: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(OD).args(args).arg("--data-dir").arg(data).env_remove("OD_DAEMON_URL").output().unwrap()
}

#[test]
fn the_cli_searches_shows_imports_and_calls_with_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let out = od(&data, &["tools", "import", FIXTURE, "--namespace", "fx", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["added"].as_array().unwrap().len(), catalog().as_array().unwrap().len());
    let out = od(&data, &["tools", "search", "euclidean distance between two points", "--limit", "2", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tools"][0]["name"], "fx.EuclideanDistance.calculate");
    let out = od(&data, &["tools", "show", "runs.get", "--schema", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["required"], json!(["runId"]));
    let out = od(&data, &["tools", "show", "no.such", "--json"]);
    assert_eq!(out.status.code(), Some(65));
    let out = od(&data, &["tools", "call", "projects.list", "--json"]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["projects"], json!([]));
    let out = od(&data, &["tools", "call", "runs.get", "--input", "{\"runId\":\"nope\"}", "--json"]);
    assert_eq!(out.status.code(), Some(1), "a failing tool: {}", String::from_utf8_lossy(&out.stderr));
    let out = od(&data, &["tools", "result", "r1", "inv_1", "--json"]);
    assert_eq!(out.status.code(), Some(65), "an unknown invocation");
}
