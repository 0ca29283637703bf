//! Regenerates the binary seeds of the checked-in corpus (`cargo test --test fuzz -- --ignored
//! regenerate`): one real frame of every event kind a dry-run run, a note and a plugin install
//! write, and the segment of [`super::log::SegmentBase`]. Text seeds are written by hand.

use super::harness::corpus_dir;
use od::store::{EventLog, SledLog, StoreConfig};
use od_events::{EventKind, FrameRef};
use serde_json::json;
use std::collections::BTreeMap;

/// A log with many event kinds: a finished dry-run run of a bundled scenario, a plugin with GenUI
/// surfaces installed and run (its questions answered), the tool catalog, a note.
pub fn busy_log(data: &std::path::Path) {
    let e = crate::common::harness::Engine::start(data, 1_800_000_000_000);
    let (_, events) = e.run(json!({ "pluginId": "od-new-generation",
        "inputs": { "topic": "tea", "audience": "x", "artifactKind": "landing page" } }));
    assert!(!events.is_empty());
    e.install(&corpus_dir("plugin").join("genui-asker"));
    let (code, v) = e.post("/api/projects", json!({ "id": "p", "name": "P" }));
    assert_eq!(code, 200, "{v}");
    let run = e.start_run(json!({ "projectId": "p", "pluginId": "asker" }));
    let answers =
        [("brief", json!({ "audience": "tea drinkers" })), ("style", json!("bold")), ("confirm", json!(true))];
    let watch = ureq::get(&format!("{}/api/runs/{run}/watch", e.url)).call().unwrap();
    for line in std::io::BufRead::lines(std::io::BufReader::new(watch.into_reader())) {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["event"] == "genui_surface_request" {
            let id = v["data"]["surfaceId"].as_str().unwrap();
            let answer = answers.iter().find(|(s, _)| *s == id).map(|(_, a)| a.clone()).unwrap();
            let (code, r) = e.post(&format!("/api/runs/{run}/genui/{id}/respond"), json!({ "value": answer }));
            assert_eq!(code, 200, "{r}");
        }
        if v["event"] == "end" {
            break;
        }
    }
    let (code, _) = e.get("/api/tools/search?query=project");
    assert_eq!(code, 200);
    let (status, _) = e.post("/api/log/notes", json!({ "stream": "note:fuzz", "text": "a note", "tags": ["t"] }));
    assert!(status < 300);
    e.stop();
}

pub fn regenerate() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    busy_log(&data);
    let mut cfg = StoreConfig::new(&data);
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    let s = SledLog::open(cfg).unwrap();
    let mut by_kind = BTreeMap::new();
    for f in s.read_from(1, 100_000).unwrap() {
        let kind = FrameRef::parse(f.bytes()).unwrap().kind();
        let name = EventKind::from_code(kind).map_or_else(|| format!("kind{kind}"), |k| k.name().to_string());
        by_kind.entry(name).or_insert_with(|| f.bytes().to_vec());
    }
    let dir = corpus_dir("frame");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in by_kind {
        std::fs::write(dir.join(format!("{name}.frame")), bytes).unwrap();
    }
    let golden = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/fixtures/note_recorded_schema1.frame");
    std::fs::copy(golden, dir.join("note_recorded_schema1.frame")).unwrap();
    let seg = corpus_dir("segment");
    std::fs::create_dir_all(&seg).unwrap();
    std::fs::write(seg.join("notes.seg"), super::log::SegmentBase::build().segment).unwrap();
    let write = |target: &str, name: &str, bytes: &[u8]| {
        let dir = corpus_dir(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    };
    use super::archive::{hostile, hostile_zips, long_name_bomb};
    for (name, bytes) in hostile() {
        write("archive-tar", name, &bytes);
        write("archive-tgz", &format!("{name}.gz"), &gz(&bytes));
    }
    for (name, bytes) in hostile_zips() {
        write("archive-zip", name, &bytes);
    }
    write("archive-tgz", "long-name-bomb.tar.gz", &long_name_bomb(64 << 20));
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}
