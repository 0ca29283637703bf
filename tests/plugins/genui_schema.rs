//! GenUI answers are checked by a full JSON Schema 2020-12 validator: `pattern`, `format`,
//! `oneOf` and `$ref` refuse a wrong answer over HTTP (422) and on the CLI (exit 2), naming the
//! field; `od plugin doctor` reports a surface schema that does not compile.

use crate::common;

use common::harness::Engine;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;

fn paint_schema() -> Value {
    json!({
        "type": "object",
        "$defs": { "hex": { "type": "string", "pattern": "^#[0-9a-f]{6}$" } },
        "properties": {
            "color": { "$ref": "#/$defs/hex" },
            "due": { "type": "string", "format": "date" },
            "size": { "oneOf": [ { "type": "integer", "multipleOf": 5 }, { "type": "integer", "maximum": 10 } ] }
        },
        "required": ["color"]
    })
}

/// A plugin whose one stage asks the `paint` form first.
fn write_plugin(dir: &Path, schema: Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), "---\nname: painter\ndescription: Paints.\n---\nPaint.\n").unwrap();
    let manifest = json!({
        "specVersion": "1.0.0", "name": "painter", "version": "1.0.0", "title": "Painter",
        "od": { "kind": "scenario", "taskKind": "new-generation",
                "pipeline": { "stages": [ { "id": "paint", "atoms": ["file-write"] } ] },
                "genui": { "surfaces": [ { "id": "paint", "kind": "form", "persist": "run",
                    "trigger": { "stageId": "paint" }, "prompt": "Which colour?", "schema": schema } ] } }
    });
    std::fs::write(dir.join("open-design.json"), manifest.to_string()).unwrap();
}

fn wait_for_request(e: &Engine, run: &str) {
    let r = ureq::get(&format!("{}/api/runs/{run}/watch", e.url)).call().unwrap();
    for line in BufReader::new(r.into_reader()).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["event"] == "genui_surface_request" {
            return;
        }
        assert_ne!(v["event"], "end", "the run ended before asking: {v}");
    }
    panic!("stream ended before the request");
}

#[test]
fn answers_breaking_pattern_format_one_of_or_ref_are_refused_over_http_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    write_plugin(&tmp.path().join("painter"), paint_schema());
    e.install(&tmp.path().join("painter"));
    assert_eq!(e.post("/api/projects", json!({ "id": "p", "name": "P" })).0, 200);
    let id = e.start_run(json!({ "projectId": "p", "pluginId": "painter" }));
    wait_for_request(&e, &id);
    let respond = |value: Value| e.post(&format!("/api/runs/{id}/genui/paint/respond"), json!({ "value": value }));
    let (_, before) = e.get("/api/log/stats");
    for (bad, field) in [
        (json!({ "color": "red" }), "/color"),                      // pattern, through $ref
        (json!({ "color": "#00ff00", "due": "tomorrow" }), "/due"), // format
        (json!({ "color": "#00ff00", "size": 5 }), "/size"),        // oneOf: both branches match
        (json!({ "due": "2026-12-01" }), "/color"),                 // required
    ] {
        let (code, v) = respond(bad.clone());
        assert_eq!((code, v["error"]["code"].as_str().unwrap()), (422, "invalid-answer"), "{bad}: {v}");
        let violations = v["error"]["data"]["violations"].as_array().unwrap();
        assert!(violations.iter().any(|m| m.as_str().unwrap().starts_with(&format!("{field}: "))), "{bad}: {v}");
    }
    let (_, after) = e.get("/api/log/stats");
    assert_eq!(before["lastSeq"], after["lastSeq"], "refused answers record nothing");
    let (code, v) = respond(json!({ "color": "#00ff00", "due": "2026-12-01", "size": 15 }));
    assert_eq!(code, 200, "{v}");
}

#[test]
fn the_cli_refuses_an_answer_breaking_the_pattern_with_exit_2_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let src = tmp.path().join("painter");
    write_plugin(&src, paint_schema());
    let od = |args: &[&str]| common::harness::od_cli(&data, args);
    assert!(od(&["plugin", "install", src.to_str().unwrap()]).status.success());
    let out = od(&["run", "start", "--plugin", "painter", "--follow", "--no-wait"]);
    assert_eq!(out.status.code(), Some(73), "{}", String::from_utf8_lossy(&out.stderr));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    let run = err["error"]["data"]["runId"].as_str().unwrap().to_string();
    let bad = od(&["ui", "respond", "paint", "--run", &run, "--value-json", r#"{"color":"red"}"#, "--json"]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("/color"), "{stderr}");
    let ok = od(&["ui", "respond", "paint", "--run", &run, "--value-json", r##"{"color":"#0a0b0c"}"##, "--json"]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
}

#[test]
fn doctor_reports_surface_schemas_that_do_not_compile() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let od = |args: &[&str]| common::harness::od_cli(&data, args);
    for (n, schema) in
        [json!({ "type": "strng" }), json!({ "type": "string", "pattern": "([a-z]" })].into_iter().enumerate()
    {
        let src = tmp.path().join(format!("bad{n}"));
        write_plugin(&src, schema.clone());
        let out = od(&["plugin", "doctor", src.to_str().unwrap(), "--json"]);
        assert_eq!(out.status.code(), Some(1), "{schema}: {}", String::from_utf8_lossy(&out.stdout));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["ok"], false, "{schema}: {report}");
        let d = report["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["code"] == "genui.schema-invalid")
            .unwrap_or_else(|| panic!("{schema}: {report}"))
            .clone();
        assert_eq!(
            (d["severity"].as_str(), d["pointer"].as_str()),
            (Some("error"), Some("/od/genui/surfaces/0/schema"))
        );
        assert!(d["message"].as_str().unwrap().contains("\"paint\""), "names the surface: {d}");
    }
    let good = tmp.path().join("good");
    write_plugin(&good, paint_schema());
    let out = od(&["plugin", "doctor", good.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}
