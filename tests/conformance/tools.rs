//! Conformance (reads ../shared: the BFCL-derived tool-retrieval catalog, 443 real-world tools).
//! Import, keyword search ranking, cursor paging and totals, and the CLI's import/search over the
//! real catalog. The same properties on the project's own catalog (`tests/fixtures/tools/`) are in
//! `tools.rs`. Run with `cargo test --test conformance` (`.ci/run` does); a missing ../shared
//! fails, never skips.

use crate::common;

use common::harness::{Engine, OD};
use serde_json::{json, Value};
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;
static FIXTURE: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| crate::shared_fixture("tool-retrieval/catalog.json"));

/// The catalog's path; a clone without ../shared fails here, loudly.
fn fixture() -> &'static str {
    assert!(
        Path::new(&*FIXTURE).is_file(),
        "the conformance corpus is missing: {} (the conformance suite needs ../shared/fixtures beside \
         the checkout; `cargo test --workspace` does not)",
        *FIXTURE
    );
    &FIXTURE
}

fn import_fixture(e: &Engine) -> Value {
    let catalog: Value = serde_json::from_str(&std::fs::read_to_string(fixture()).unwrap()).unwrap();
    let (code, v) = e.post("/api/tools/import", json!({ "tools": catalog, "namespace": "bfcl", "source": "bfcl" }));
    assert_eq!(code, 200, "{v}");
    v
}

#[test]
fn imports_are_searched_by_keyword_and_paged_with_a_cursor() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    let v = import_fixture(&e);
    assert_eq!(v["added"].as_array().unwrap().len(), 443);
    let again = import_fixture(&e);
    assert_eq!((again["unchanged"].clone(), again["registered"].clone()), (json!(443), json!(0)));

    let (_, r) = e.get("/api/tools/search?query=What%20is%20the%20capital%20of%20Brazil%3F&limit=3");
    assert_eq!(r["tools"][0]["name"], "bfcl.country_info.capital");
    assert_eq!(r["tools"][0]["api"]["route"], "/api/tools/bfcl.country_info.capital/call");
    assert_eq!(r["tools"][0]["cli"]["subcommand"], "tools call bfcl.country_info.capital");

    let (_, p1) = e.get("/api/tools/search?query=triangle%20area&limit=5");
    let total = p1["total"].as_u64().unwrap();
    assert!(total > 10, "{p1}");
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

fn od(data: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(OD).args(args).arg("--data-dir").arg(data).env_remove("OD_DAEMON_URL").output().unwrap()
}

#[test]
fn the_cli_searches_shows_imports_and_calls_with_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let out = od(&data, &["tools", "import", fixture(), "--namespace", "bfcl", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["added"].as_array().unwrap().len(), 443);
    let out = od(&data, &["tools", "search", "euclidean distance between two points", "--limit", "2", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tools"][0]["name"], "bfcl.EuclideanDistance.calculate");
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
