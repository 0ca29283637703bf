//! Snapshot bodies are stored once: every run still records its own `snapshot_recorded` (its id,
//! plugin, digests, time, project and run), but the body — identical for the same plugin and
//! inputs — is one `snapshot_body_recorded` in `snapshot-body:<digest>`. Reading a snapshot
//! resolves it; a snapshot recorded before (its body inline) still reads, runs and replays.

use crate::common;
use common::harness::Engine;
use od::store::{Append, EventLog, Expected, SledLog, StoreConfig};
use od_events::snapshots::{SnapshotBody, SnapshotRecorded};
use od_events::{Event, EventKind, FrameRef, StreamId};
use serde_json::{json, Value};
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;

fn body(topic: &str) -> Value {
    json!({ "pluginId": "od-new-generation", "agent": "dry-run",
            "pluginInputs": { "topic": topic, "audience": "tea lovers", "artifactKind": "landing-page" } })
}

/// What the log holds about snapshots: `snapshot_recorded` events, body streams and their bytes.
struct Census {
    recorded: Vec<SnapshotRecorded>,
    bodies: Vec<String>,
    body_bytes: usize,
    recorded_bytes: usize,
}

fn census(data: &Path) -> Census {
    let mut cfg = StoreConfig::new(data);
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    let s = SledLog::open(cfg).unwrap();
    let mut c = Census { recorded: vec![], bodies: vec![], body_bytes: 0, recorded_bytes: 0 };
    let mut from = 1;
    loop {
        let frames = s.read_from(from, 10_000).unwrap();
        let Some(last) = frames.last() else { break };
        from = last.seq() + 1;
        for f in &frames {
            let kind = FrameRef::parse(f.bytes()).unwrap().kind();
            if kind == EventKind::SnapshotBodyRecorded.code() {
                let st = f.decode().unwrap();
                assert!(st.envelope.stream.starts_with("snapshot-body:"), "{}", st.envelope.stream);
                c.bodies.push(st.envelope.stream);
                c.body_bytes += f.bytes().len();
            } else if kind == EventKind::SnapshotRecorded.code() {
                let Event::SnapshotRecorded(e) = f.decode().unwrap().event else { unreachable!() };
                c.recorded.push(e);
                c.recorded_bytes += f.bytes().len();
            }
        }
    }
    s.close();
    c
}

fn run_ok(e: &Engine, b: Value) -> String {
    let (id, ev) = e.run(b);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{:?}", ev.last());
    id
}

fn verify(e: &Engine, run: &str) {
    let (code, v) = e.post(&format!("/api/runs/{run}/replay/verify"), json!({}));
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["ok"], true, "{v}");
    assert!(!v["prompts"].as_array().unwrap().is_empty());
}

#[test]
fn a_hundred_runs_of_one_plugin_store_one_body() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = Engine::start(&data, NOW);
    let runs: Vec<String> = (0..100).map(|_| run_ok(&e, body("tea"))).collect();
    verify(&e, &runs[0]);
    verify(&e, &runs[99]);
    e.stop();
    let one = census(&data);
    assert_eq!(one.recorded.len(), 100, "every run records its own snapshot");
    assert_eq!(one.bodies.len(), 1, "one body for identical snapshots: {:?}", one.bodies);
    let digest = one.bodies[0].trim_start_matches("snapshot-body:").to_string();
    assert!(one.recorded.iter().all(|r| r.body == SnapshotBody::Stored { digest: digest.clone() }));
    // The per-run fact is small; the body is written once.
    let per_run = one.recorded_bytes / one.recorded.len();
    assert!(per_run * 4 < one.body_bytes, "snapshot_recorded {per_run} B each, body {} B", one.body_bytes);

    // Other inputs: another body; the same inputs again: none.
    let e = Engine::start(&data, NOW);
    let other = run_ok(&e, body("coffee"));
    run_ok(&e, body("tea"));
    verify(&e, &other);
    let (_, snaps) = e.get("/api/applied-plugins");
    e.stop();
    let two = census(&data);
    assert_eq!(two.bodies.len(), 2, "{:?}", two.bodies);
    assert_eq!(two.recorded.len(), 102);
    assert!(snaps.to_string().contains("od-new-generation"));
}

#[test]
fn a_snapshot_with_its_body_inline_still_reads_runs_and_replays_and_gc_still_expires() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = Engine::start(&data, NOW);
    let first = run_ok(&e, body("tea"));
    let (_, run) = e.get(&format!("/api/runs/{first}"));
    let sid = run["run"]["appliedPluginSnapshotId"].as_str().unwrap().to_string();
    let (code, got) = e.get(&format!("/api/applied-plugins/{sid}"));
    assert_eq!(code, 200, "{got}");
    let mut whole = got["snapshot"].clone();
    for k in ["status", "referencedBy", "unreferencedSince"] {
        whole.as_object_mut().unwrap().remove(k);
    }
    assert_eq!(whole["snapshotId"], sid.as_str());
    assert!(whole["skillBody"].is_string() && whole["pipeline"]["stages"].is_array(), "resolved body: {whole}");
    // An unreferenced snapshot (recorded on its own), for the GC below.
    let (code, loose) = e.post(
        "/api/applied-plugins",
        json!({ "pluginId": "od-new-generation", "inputs": { "topic": "tea", "audience": "tea lovers", "artifactKind": "landing-page" } }),
    );
    assert_eq!(code, 200, "{loose}");
    let loose = loose["snapshotId"].as_str().unwrap().to_string();
    e.stop();

    // What a build before schema 2 recorded: the whole snapshot inline.
    let old_id = "snap-inline-old";
    whole["snapshotId"] = json!(old_id);
    {
        let mut cfg = StoreConfig::new(&data);
        cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
        let s = SledLog::open(cfg).unwrap();
        let e = SnapshotRecorded {
            snapshot_id: old_id.into(),
            plugin_id: "od-new-generation".into(),
            plugin_version: whole["pluginVersion"].as_str().unwrap_or("").into(),
            manifest_source_digest: whole["manifestSourceDigest"].as_str().unwrap_or("").into(),
            plugin_source_digest: whole["pluginSourceDigest"].as_str().unwrap_or("").into(),
            project_id: String::new(),
            run_id: String::new(),
            body: SnapshotBody::Inline { json: whole.to_string() },
            applied_at: whole["appliedAt"].as_i64().unwrap(),
        };
        let stream = StreamId::typed("snapshot", old_id).unwrap();
        s.append(Append::new(stream, vec![Event::SnapshotRecorded(e)]).expect(Expected::NoStream)).unwrap();
        s.close();
    }
    let e = Engine::start(&data, NOW);
    let (code, old) = e.get(&format!("/api/applied-plugins/{old_id}"));
    assert_eq!(code, 200, "{old}");
    assert_eq!(old["snapshot"]["skillBody"], whole["skillBody"]);
    let old_run = run_ok(&e, json!({ "appliedPluginSnapshotId": old_id, "agent": "dry-run" }));
    verify(&e, &old_run);
    verify(&e, &first);
    let (code, bundle) = e.post(&format!("/api/runs/{old_run}/replay"), json!({ "snapshotId": old_id }));
    assert_eq!(code, 200, "{bundle}");
    assert_eq!(bundle["snapshot"]["pipeline"], whole["pipeline"]);

    // GC: the unreferenced snapshot expires; the body it shares still serves the others.
    let (code, pruned) = e.post("/api/applied-plugins/prune", json!({ "before": i64::MAX }));
    assert_eq!(code, 200, "{pruned}");
    let expired: Vec<&str> = pruned["expired"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(expired.contains(&loose.as_str()), "{pruned}");
    assert!(!expired.contains(&sid.as_str()), "a referenced snapshot is kept: {pruned}");
    let (code, still) = e.get(&format!("/api/applied-plugins/{sid}"));
    assert_eq!((code, &still["snapshot"]["skillBody"]), (200, &whole["skillBody"]));
    verify(&e, &run_ok(&e, body("tea")));
    e.stop();
}
