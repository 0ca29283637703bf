//! `OD_SNAPSHOT_RETENTION_DAYS` (issue 17 parity, spec §16 PB2): off by default, referenced
//! snapshots stay pinned forever; set, a snapshot applied longer ago than the window and
//! referenced only by runs that have ended is retired (`snapshot_expired`, reason `retention`),
//! while one a project still pins, or one applied inside the window, is kept. The knob is read
//! once at start ([`EngineConfig`](od::engine::EngineConfig)).

use crate::common;

use common::harness::{write_plugin, Engine};
use serde_json::{json, Value};

const NOW: i64 = 1_800_000_000_000;
const DAY: i64 = 86_400_000;

fn status(e: &Engine, snap: &str) -> Value {
    let (code, v) = e.get(&format!("/api/applied-plugins/{snap}"));
    assert_eq!(code, 200, "{v}");
    let s = if v["snapshot"].is_object() { v["snapshot"].clone() } else { v };
    s["status"].clone()
}

fn snapshot_of_run(e: &Engine, run: &str) -> String {
    let (_, r) = e.get(&format!("/api/runs/{run}"));
    r["run"]["appliedPluginSnapshotId"].as_str().or(r["appliedPluginSnapshotId"].as_str()).unwrap().to_string()
}

#[test]
fn retention_retires_snapshots_only_ended_runs_reference() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let dir = tmp.path().join("p");
    write_plugin(&dir, "keep", "1.0.0", json!([ { "id": "generate", "atoms": ["file-write"] } ]), "Go.");
    e.install(&dir);

    // A: referenced only by a run that ended.
    let (_, p) = e.post("/api/projects", json!({ "name": "plain" }));
    let plain = p["project"]["id"].as_str().unwrap().to_string();
    let (run_a, ev) = e.run(json!({ "projectId": plain, "pluginId": "keep", "inputs": { "topic": "a" } }));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
    let a = snapshot_of_run(&e, &run_a);
    // B: pinned by a project that still exists.
    let (_, p) = e.post("/api/projects", json!({ "name": "pinned", "pluginId": "keep", "inputs": { "topic": "b" } }));
    let b = p["project"]["appliedPluginSnapshotId"]
        .as_str()
        .or(p["project"]["pinnedSnapshotId"].as_str())
        .or(p["project"]["snapshotId"].as_str())
        .unwrap_or_else(|| panic!("{p}"))
        .to_string();

    e.clock.advance(31 * DAY);
    // C: a run that ended inside the window.
    let (run_c, _) = e.run(json!({ "projectId": plain, "pluginId": "keep", "inputs": { "topic": "c" } }));
    let c = snapshot_of_run(&e, &run_c);
    assert!(a != b && b != c && a != c);

    // Off by default: referenced snapshots are pinned.
    let (_, pruned) = e.post("/api/applied-plugins/prune", json!({}));
    assert_eq!(pruned["expired"], json!([]), "{pruned}");

    // The knob is read once, at start: the daemon starts again with it set.
    let now = e.clock_now();
    e.stop();
    let e = Engine::start_with(&tmp.path().join("data"), now, |c| c.engine.snapshot_retention_days = Some(30));
    let (_, pruned) = e.post("/api/applied-plugins/prune", json!({}));
    // The daemon's own pass (once at start, on its clock) may have retired it first.
    let expired = pruned["expired"].as_array().unwrap();
    assert!(expired.is_empty() || *expired == [json!(a)], "{pruned}");
    wait_expired(&e, &a);
    assert_eq!(status(&e, &a), "expired");
    assert_ne!(status(&e, &b), "expired");
    assert_ne!(status(&e, &c), "expired");
    let (_, log) = e.get(&format!("/api/log/events?stream=snapshot:{a}"));
    assert!(log.to_string().contains("retention"), "{log}");
}

/// Reads the log (following it) until `snapshot_expired` of `id` appears.
fn wait_expired(e: &Engine, id: &str) {
    use std::io::BufRead;
    let r = ureq::get(&format!("{}/api/log/tail?follow=true", e.url))
        .set("Authorization", &format!("Bearer {}", e.token))
        .call()
        .unwrap();
    for line in std::io::BufReader::new(r.into_reader()).lines() {
        let line = line.unwrap();
        if line.is_empty() {
            continue; // a keep-alive after a silence
        }
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["event"] == "snapshot_expired" && v["data"]["payload"]["snapshotId"] == id {
            return;
        }
    }
    panic!("the log ended before {id} expired");
}
