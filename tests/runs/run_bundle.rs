//! Run bundles and blob collection (issue 16): an exported run (a fork, with the run it came from)
//! imports into an empty data dir and verifies; a bundle with one flipped byte is refused with
//! nothing written; blob garbage collection removes only unreferenced blobs, after the TTL.

use crate::common;

use common::harness::{od_cli, of, Engine};
use serde_json::{json, Value};
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;
const DAY: i64 = 86_400_000;

fn inputs() -> Value {
    json!({ "topic": "tea shop", "audience": "tea lovers", "artifactKind": "landing-page" })
}

fn import(e: &Engine, bytes: &[u8]) -> (u16, Value) {
    let r = ureq::post(&format!("{}/api/runs/import", e.url))
        .set("Authorization", &format!("Bearer {}", e.token))
        .set("Content-Type", "application/octet-stream")
        .send_bytes(bytes);
    match r {
        Ok(r) => (r.status(), r.into_json().unwrap()),
        Err(ureq::Error::Status(c, r)) => (c, r.into_json().unwrap_or(Value::Null)),
        Err(err) => panic!("{err}"),
    }
}

fn blob_files(data: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for d in std::fs::read_dir(data.join("blobs")).into_iter().flatten().flatten() {
        if d.path().is_dir() {
            for f in std::fs::read_dir(d.path()).unwrap().flatten() {
                out.push(format!("{}{}", d.file_name().to_string_lossy(), f.file_name().to_string_lossy()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn an_exported_fork_imports_into_an_empty_data_dir_and_verifies_and_a_flipped_byte_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("a"), NOW);
    let (parent, _) = e.run(json!({ "pluginId": "od-new-generation", "pluginInputs": inputs() }));
    let (code, f) = e.post(&format!("/api/runs/{parent}/fork"), json!({ "at": "end" }));
    assert_eq!(code, 202, "{f}");
    let fork = f["runId"].as_str().unwrap().to_string();
    assert_eq!(e.watch(&fork).last().unwrap()["data"]["status"], "succeeded");
    let bundle = tmp.path().join("fork.tar");
    let out = od_cli(&e.data, &["run", "export", &fork, "--out", bundle.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&bundle).unwrap();
    let (_, original) = e.post(&format!("/api/runs/{fork}/replay/verify"), json!({}));
    let art = e.get(&format!("/api/runs/{parent}/artifacts")).1["artifacts"][0].clone();
    let path = art["path"].as_str().unwrap().to_string();
    let recorded = od_cli(&e.data, &["files", "read", &path, "--run", &fork]).stdout;
    assert!(!recorded.is_empty());
    e.stop();

    let b = Engine::start(&tmp.path().join("b"), NOW);
    // Flipped bytes anywhere — in a frame, a blob, the manifest — are refused, and nothing lands.
    let frames_at = find(&bytes, b"frames.bin").unwrap() + 512 + 100;
    let blob_at = bytes.len() - 1024 - 10;
    let manifest_at = find(&bytes, b"framesDigest").unwrap() + 20;
    for at in [frames_at, blob_at, manifest_at, bytes.len() / 2] {
        let mut bad = bytes.clone();
        bad[at] ^= 0x01;
        let (code, v) = import(&b, &bad);
        assert_eq!(code, 400, "byte {at}: {v}");
        assert!(v.to_string().contains("bundle"), "{v}");
        assert_eq!(b.get(&format!("/api/runs/{fork}")).0, 404, "nothing was written");
    }
    assert!(blob_files(&b.data).is_empty(), "no blob was stored by a refused bundle");

    let out = od_cli(&b.data, &["run", "import", bundle.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["runId"], fork.as_str());
    assert_eq!(v["runs"], json!([parent, fork]));
    // It replays verified here exactly as it did there, and its files read back.
    let (_, again) = b.post(&format!("/api/runs/{fork}/replay/verify"), json!({}));
    assert_eq!(again["ok"], true, "{again}");
    assert_eq!(again["prompts"], original["prompts"]);
    assert_eq!(again["inherited"], original["inherited"]);
    assert_eq!(od_cli(&b.data, &["files", "read", &path, "--run", &fork]).stdout, recorded);
    let (_, log) = b.get("/api/log/verify");
    assert!(log["firstBad"].is_null() && log["verified"].as_u64() > Some(0), "{log}");
    // A second import of the same run is a conflict, and writes nothing.
    let (code, v) = import(&b, &bytes);
    assert_eq!(code, 409, "{v}");
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn blob_collection_removes_only_unreferenced_blobs_after_the_ttl() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("d"), NOW);
    let (kept_run, ev) = e.run(json!({ "pluginId": "od-new-generation", "pluginInputs": inputs() }));
    let kept: Vec<String> = of(&ev, "artifact").iter().map(|a| a["digest"].as_str().unwrap().to_string()).collect();
    // A second run in its own project, deleted afterwards, with one file no other run has.
    let (_, p) = e.post("/api/projects", json!({ "id": "gone", "name": "Gone" }));
    assert!(p["project"].is_object() || p["projectId"].is_string(), "{p}");
    let (gone_run, ev2) = e.run(json!({ "projectId": "gone", "pluginId": "od-new-generation",
        "pluginInputs": { "topic": "coffee", "audience": "night owls", "artifactKind": "landing-page" } }));
    let gone: Vec<String> = of(&ev2, "artifact").iter().map(|a| a["digest"].as_str().unwrap().to_string()).collect();
    let only_gone: Vec<&String> = gone.iter().filter(|d| !kept.contains(d)).collect();
    assert!(!only_gone.is_empty(), "the second run wrote a file of its own");
    // An orphan: bytes stored whose event never landed (a crash between the two).
    let orphan = blake3::hash(b"orphan").to_hex().to_string();
    let dir = e.data.join("blobs").join(&orphan[..2]);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(&orphan[2..]), b"orphan").unwrap();
    let (code, v) = e.delete("/api/projects/gone");
    assert_eq!(code, 200, "{v}");

    let gc = |e: &Engine| {
        let (code, v) = e.post("/api/blobs/gc", json!({}));
        assert_eq!(code, 200, "{v}");
        v
    };
    let digests = |v: &Value, k: &str| -> Vec<String> {
        v[k].as_array().unwrap().iter().map(|b| b["digest"].as_str().unwrap().to_string()).collect()
    };
    // The orphan is marked by the first pass (the deleted project's blobs were marked by its
    // deletion; blobs stored since the last pass are left alone for one pass anyway).
    let first = gc(&e);
    assert_eq!(digests(&first, "unreferenced"), vec![orphan.clone()], "{first}");
    assert!(digests(&first, "expired").is_empty());
    assert!(digests(&gc(&e), "unreferenced").is_empty(), "marked once");
    // Before the TTL nothing goes; after it, exactly the unreferenced blobs (the daemon's own
    // periodic pass, woken by the clock, may take some of them first).
    e.clock.advance(29 * DAY);
    assert!(digests(&gc(&e), "expired").is_empty());
    let mut want: Vec<String> = only_gone.iter().map(|d| d.to_string()).chain([orphan.clone()]).collect();
    want.sort();
    want.dedup();
    assert!(want.iter().all(|d| blob_files(&e.data).contains(d)), "nothing went before the TTL");
    e.clock.advance(2 * DAY);
    gc(&e);
    let left = blob_files(&e.data);
    for d in &kept {
        assert!(left.contains(d), "a referenced blob stays: {d}");
    }
    for d in &want {
        assert!(!left.contains(d), "an unreferenced blob is gone: {d}");
    }
    assert_eq!(left.len(), kept.iter().collect::<std::collections::BTreeSet<_>>().len(), "{left:?}");
    // Each removal is an event.
    let tail = ureq::get(&format!("{}/api/log/tail", e.url)).call().unwrap().into_string().unwrap();
    let mut expired: Vec<String> = tail
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "blob_expired")
        .map(|v| v["data"]["payload"]["digest"].as_str().unwrap().to_string())
        .collect();
    expired.sort();
    assert_eq!(expired, want);
    // Nothing is left to do; the kept run still reads its files.
    let out = od_cli(&e.data, &["files", "gc", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["expired"], json!([]), "{v}");
    let art = e.get(&format!("/api/runs/{kept_run}/artifacts")).1["artifacts"][0].clone();
    let read = od_cli(&e.data, &["files", "read", art["path"].as_str().unwrap(), "--run", &kept_run]);
    assert!(read.status.success());
    let _ = gone_run;
}
