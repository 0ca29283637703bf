//! Issue 13 "HTTP API documented": the OpenAPI 3.1 document (`/api/openapi.json`) covers exactly
//! the routes the router serves, is structurally sound (3.1, every `$ref` resolves, every path
//! parameter declared), and is served under the same rules as the other read routes.

use crate::common;

use common::harness::Engine;
use common::raw::request;
use serde_json::Value;
use std::collections::BTreeSet;

const NOW: i64 = 1_700_000_000_000;

fn document() -> Value {
    serde_json::to_value(od::http::openapi::document()).unwrap()
}

/// The route table's (method, path) pairs, in OpenAPI's spelling (`{*tail}` → `{tail}`).
fn served() -> BTreeSet<(String, String)> {
    od::http::route_table().into_iter().map(|(m, p)| (m.as_str().to_ascii_lowercase(), p.replace("{*", "{"))).collect()
}

fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, _) in item.as_object().unwrap() {
            if ["get", "put", "post", "delete", "patch", "head", "options", "trace"].contains(&method.as_str()) {
                out.insert((method.clone(), path.clone()));
            }
        }
    }
    out
}

#[test]
fn every_served_route_is_documented_and_every_documented_route_is_served() {
    let served = served();
    let documented = documented(&document());
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(undocumented.is_empty(), "served but not in /api/openapi.json: {undocumented:?}");
    assert!(unserved.is_empty(), "in /api/openapi.json but not served: {unserved:?}");
    // The table is the router's only source of routes: no area registers one behind its back.
    for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/src/http")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("table.rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(!text.contains(".route("), "{}: routes are registered through table.rs", path.display());
        }
    }
    assert!(served.len() > 80, "the table lists every route ({} found)", served.len());
    // The table is the JSON API: the web UI's routes (`/`, `/login`, `/ui/…`, `src/http/ui/`) are served
    // beside it, so they are in neither list.
    assert!(served.iter().all(|(_, p)| p.starts_with("/api/")), "only /api/* routes in the table");
}

/// Every `$ref` in `v`.
fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                out.push(r);
            }
            m.values().for_each(|x| refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

#[test]
fn the_document_is_openapi_3_1_whose_refs_resolve_and_whose_path_parameters_are_declared() {
    let doc = document();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1."), "openapi: {}", doc["openapi"]);
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer");
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(all.len() > 50, "the document refers to its schemas ({} refs)", all.len());
    for r in all {
        let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("{r}: not a local ref"));
        assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
    }
    let envelope = &doc["components"]["schemas"]["ErrorBody"];
    assert_eq!(envelope["required"], serde_json::json!(["error"]));
    let detail = &doc["components"]["schemas"]["ErrorDetail"]["properties"];
    for f in ["code", "message", "data"] {
        assert!(detail.get(f).is_some(), "the error envelope has {f}");
    }
    for (path, item) in doc["paths"].as_object().unwrap() {
        let in_path: BTreeSet<&str> =
            path.split('{').skip(1).map(|s| s.split_once('}').expect("closed parameter").0).collect();
        for (method, op) in item.as_object().unwrap() {
            let declared: BTreeSet<&str> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "path")
                .map(|p| p["name"].as_str().unwrap())
                .collect();
            assert_eq!(declared, in_path, "{method} {path}: path parameters");
            let responses = op["responses"].as_object().unwrap();
            assert!(responses.keys().any(|k| k.starts_with('2')), "{method} {path}: a success response");
            assert_eq!(
                responses["default"]["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ErrorBody",
                "{method} {path}: errors are the envelope"
            );
        }
    }
    // Streams say what they stream.
    let ct = |p: &str, m: &str| {
        doc["paths"][p][m]["responses"]["200"]["content"].as_object().unwrap().keys().cloned().collect::<Vec<_>>()
    };
    assert_eq!(ct("/api/runs/{id}/events", "get"), ["text/event-stream"]);
    assert_eq!(ct("/api/runs/{id}/agui", "post"), ["text/event-stream"]);
    assert_eq!(ct("/api/runs/{id}/watch", "get"), ["application/x-ndjson"]);
    assert_eq!(ct("/api/log/tail", "get"), ["application/x-ndjson"]);
    assert_eq!(ct("/api/plugins/install", "post"), ["application/x-ndjson"]);
}

#[test]
fn the_document_is_served_at_api_openapi_json_under_the_read_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let (status, served) = e.get("/api/openapi.json");
    assert_eq!(status, 200);
    assert_eq!(served, document());
    // A cross-site read is refused like any other `/api/*` read.
    let r = request(&e.url, "GET", "/api/openapi.json", &[("Sec-Fetch-Site", "cross-site")], b"");
    assert_eq!(r.status, 403, "{}", r.code());
    e.stop();

    // With OD_API_TOKEN, the document wants the token like every `/api/*` route.
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut cfg = od::daemon::DaemonConfig::new(tmp.path().join("data"));
    cfg.token = Some("s3cret".into());
    let running = rt.block_on(od::daemon::start(cfg)).unwrap();
    let url = running.url();
    let r = request(&url, "GET", "/api/openapi.json", &[], b"");
    assert_eq!((r.status, r.code().as_str()), (401, "unauthorized"));
    let r = request(&url, "GET", "/api/openapi.json", &[("Authorization", "Bearer s3cret")], b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), document());
    rt.block_on(running.stop());
}
