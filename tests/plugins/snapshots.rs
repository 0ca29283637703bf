//! Applied-plugin snapshots: recorded when a project or run is created with a plugin, immutable
//! (replay returns the identical snapshot and rerun bundle after the plugin was upgraded, and every
//! stage prompt recomposes byte-identical), marked stale by doctor without being rewritten, and
//! expired as an event once unreferenced for `OD_SNAPSHOT_UNREFERENCED_TTL_DAYS` (default 30).

use crate::common;

use common::harness::{of, write_plugin, Engine};
use serde_json::{json, Value};

const NOW: i64 = 1_800_000_000_000;
const DAY: i64 = 86_400_000;

fn stages_v1() -> Value {
    json!([ { "id": "draft", "atoms": ["todo-write"] },
            { "id": "critique", "atoms": ["critique-theater"], "repeat": true, "until": "critique.score>=4 || iterations>=3" } ])
}

#[test]
fn replay_after_an_upgrade_returns_the_identical_snapshot_and_prompts() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("brochure");
    write_plugin(&src, "brochure", "1.0.0", stages_v1(), "Write a brochure about {{topic}}. Version one.");
    let e = Engine::start(&tmp.path().join("data"), NOW);
    e.install(&src);
    let (code, p) = e.post(
        "/api/projects",
        json!({ "id": "p1", "name": "P1", "pluginId": "brochure", "pluginInputs": { "topic": "kites" } }),
    );
    assert_eq!(code, 200, "{p}");
    let pinned = p["appliedPluginSnapshotId"].as_str().unwrap().to_string();
    let (id, ev) = e.run(json!({ "projectId": "p1", "message": "spring edition" }));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
    assert!(of(&ev, "pipeline_stage_started").iter().all(|s| s["snapshotId"] == pinned.as_str()));

    let (code, before) = e.post(&format!("/api/runs/{id}/replay"), json!({ "snapshotId": pinned }));
    assert_eq!(code, 200, "{before}");
    assert_eq!(before["rerun"]["pluginVersion"], "1.0.0");
    assert_eq!(before["rerun"]["inputs"]["topic"], "kites");
    assert!(before["snapshot"]["skillBody"].as_str().unwrap().contains("Version one"));
    let (_, verify) = e.post(&format!("/api/runs/{id}/replay/verify"), json!({}));
    assert_eq!(verify["ok"], true, "{verify}");
    let prompts_before = verify["prompts"].as_array().unwrap().len();
    assert_eq!(prompts_before, 4, "draft + three critique rounds");

    // Upgrade: a new version with another body and pipeline.
    write_plugin(
        &src,
        "brochure",
        "2.0.0",
        json!([ { "id": "only", "atoms": ["file-write"] } ]),
        "Write a leaflet instead. Version two.",
    );
    let (code, up) = e.post("/api/plugins/brochure/upgrade", json!({}));
    assert_eq!(code, 200, "{up}");
    assert_eq!(up["plugin"]["version"], "2.0.0");

    let (_, after) = e.post(&format!("/api/runs/{id}/replay"), json!({ "snapshotId": pinned }));
    let strip = |mut v: Value| {
        v["snapshot"].as_object_mut().unwrap().remove("status");
        v
    };
    assert_eq!(strip(after.clone()), strip(before.clone()), "the snapshot and rerun bundle are unchanged");
    let (_, verify) = e.post(&format!("/api/runs/{id}/replay/verify"), json!({}));
    assert_eq!(verify["ok"], true, "recomposed byte-identical after the upgrade: {verify}");
    assert!(verify["prompts"].as_array().unwrap().iter().all(|p| p["identical"] == true));

    // Doctor marks the old snapshot stale — its body stays the same.
    let (_, doc) = e.get("/api/plugins/brochure/doctor");
    assert_eq!(doc["staleSnapshotsMarked"], json!([pinned]));
    let (_, snap) = e.get(&format!("/api/applied-plugins/{pinned}"));
    assert_eq!(snap["snapshot"]["status"], "stale");
    assert_eq!(snap["snapshot"]["pluginVersion"], "1.0.0");
    assert_eq!(snap["snapshot"]["manifestSourceDigest"], before["snapshot"]["manifestSourceDigest"]);
    let (_, doc) = e.get("/api/plugins/brochure/doctor");
    assert_eq!(doc["staleSnapshotsMarked"], json!([]), "marking is once");

    // Starting a new run on the stale snapshot explicitly is refused (409 snapshot-stale) …
    let (code, err) = e.post("/api/runs", json!({ "appliedPluginSnapshotId": pinned }));
    assert_eq!((code, err["error"]["code"].as_str().unwrap()), (409, "snapshot-stale"));
    assert_eq!(err["error"]["data"]["snapshotVersion"], "1.0.0");
    // … while the project keeps running what it pinned, and a fresh apply gets the new version.
    let (_, ev) = e.run(json!({ "projectId": "p1" }));
    assert_eq!(of(&ev, "pipeline_stage_started")[0]["stageId"], "draft");
    let (_, ev) = e.run(json!({ "projectId": "p1", "pluginId": "brochure" }));
    assert_eq!(of(&ev, "pipeline_stage_started")[0]["stageId"], "only");

    // Replay of a snapshot the run did not use is refused.
    let (code, _) = e.post(&format!("/api/runs/{id}/replay"), json!({ "snapshotId": "other" }));
    assert_eq!(code, 400);
    let (_, list) = e.get("/api/projects/p1/applied-plugins");
    assert_eq!(list["snapshots"].as_array().unwrap().len(), 2);
}

#[test]
fn unreferenced_snapshots_expire_after_the_ttl_and_referenced_ones_never_do() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let inputs = json!({ "topic": "tea", "audience": "all", "artifactKind": "poster" });
    let (code, rec) = e.post("/api/applied-plugins", json!({ "pluginId": "od-new-generation", "inputs": inputs }));
    assert_eq!(code, 200, "{rec}");
    let loose = rec["snapshotId"].as_str().unwrap().to_string();
    let (_, p) = e.post("/api/projects", json!({ "id": "keep", "pluginId": "od-new-generation", "inputs": inputs }));
    let kept = p["appliedPluginSnapshotId"].as_str().unwrap().to_string();
    let (_, p) = e.post("/api/projects", json!({ "id": "gone", "pluginId": "od-new-generation", "inputs": inputs }));
    let orphan = p["appliedPluginSnapshotId"].as_str().unwrap().to_string();

    let (_, pr) = e.post("/api/applied-plugins/prune", json!({}));
    assert_eq!(pr["expired"], json!([]), "nothing is old yet");
    e.clock.advance(10 * DAY);
    assert_eq!(e.delete("/api/projects/gone").0, 200);
    // The daemon's expiry pass runs on its clock (every 6 h): 21 more days expire the loose one.
    e.clock.advance(21 * DAY);
    wait_expired(&e, &loose);
    let (_, snap) = e.get(&format!("/api/applied-plugins/{orphan}"));
    assert_eq!(snap["snapshot"]["status"], "fresh", "unreferenced for only 21 days");
    e.clock.advance(10 * DAY);
    wait_expired(&e, &orphan);
    let (_, all) = e.get("/api/applied-plugins?pluginId=od-new-generation");
    let status = |id: &str| {
        all["snapshots"].as_array().unwrap().iter().find(|s| s["snapshotId"] == id).unwrap()["status"].clone()
    };
    assert_eq!(status(&loose), "expired");
    assert_eq!(status(&orphan), "expired");
    assert_eq!(status(&kept), "fresh", "a project's pinned snapshot is kept");
    // Expiry is an event in the snapshot's stream; an expired snapshot cannot seed a new run.
    let (_, log) = e.get(&format!("/api/log/events?stream=snapshot:{loose}"));
    let kinds: Vec<&str> = log["events"].as_array().unwrap().iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["snapshot_recorded", "snapshot_expired"]);
    let (code, _) = e.post("/api/runs", json!({ "appliedPluginSnapshotId": loose }));
    assert_eq!(code, 404);
    // Forced cleanup: `before` expires unreferenced ones regardless of age, never referenced ones.
    let (_, rec) = e.post("/api/applied-plugins", json!({ "pluginId": "od-new-generation", "inputs": inputs }));
    let young = rec["snapshotId"].as_str().unwrap().to_string();
    let (_, pr) = e.post("/api/applied-plugins/prune", json!({}));
    assert_eq!(pr["expired"], json!([]), "young");
    let (_, pr) = e.post("/api/applied-plugins/prune", json!({ "before": e.clock_now() + 1 }));
    assert_eq!(pr["expired"], json!([young]));
}

/// Reads the log (following it) until `snapshot_expired` of `id` appears.
fn wait_expired(e: &Engine, id: &str) {
    use std::io::BufRead;
    let r = ureq::get(&format!("{}/api/log/tail?follow=true", e.url)).call().unwrap();
    for line in std::io::BufReader::new(r.into_reader()).lines() {
        let line = line.unwrap();
        if line.is_empty() {
            continue; // a keep-alive after a silence
        }
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["event"] == "snapshot_expired" && v["data"]["payload"]["snapshotId"] == id {
            assert_eq!(v["data"]["payload"]["reason"], "ttl");
            return;
        }
    }
    panic!("the log ended before {id} expired");
}
