//! The plugin lifecycle (issue 17, spec §8.2.1, §14, §17, §18): `od plugin scaffold` writes a
//! plugin that passes doctor and installs; a linked folder is reloaded when it changes (a
//! `plugin_reloaded` event; a run in flight keeps its snapshot; a broken edit is reported and the
//! installed version stays); `od plugin export` of a snapshot installs elsewhere and applies to the
//! same digest, byte for byte reproducibly; `od plugin publish` writes an archive and an entry that
//! a marketplace install uses.

use crate::common;

use base64::Engine as _;
use common::harness::{od_cli, Engine, OD};
use serde_json::{json, Value};
use sha2::Digest;
use std::io::{BufRead, BufReader};
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;
const BRANCHER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/brancher");

fn od(e: &Engine, args: &[&str]) -> std::process::Output {
    std::process::Command::new(OD).args(args).arg("--daemon-url").arg(&e.url).arg("--json").output().unwrap()
}

fn ok_json(out: std::process::Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Follows the log from `after` until a `plugin_reloaded` event of `id`.
fn next_reload(e: &Engine, id: &str, after: u64) -> Value {
    let r = ureq::get(&format!("{}/api/log/tail?follow=true&after={after}", e.url)).call().unwrap();
    for line in BufReader::new(r.into_reader()).lines() {
        let line = line.unwrap();
        if line.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["event"] == "plugin_reloaded" && v["data"]["payload"]["id"] == id {
            return v;
        }
    }
    panic!("the log ended");
}

fn head_seq(e: &Engine) -> u64 {
    let (_, v) = e.get("/api/log/stats");
    v["lastSeq"].as_u64().or(v["headSeq"].as_u64()).or(v["seq"].as_u64()).unwrap_or(0)
}

#[test]
fn scaffold_passes_doctor_and_publish_feeds_a_marketplace_install() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let dir = tmp.path().join("moodboard-maker");
    let v = ok_json(od_cli(&data, &["plugin", "scaffold", dir.to_str().unwrap(), "--json"]));
    assert_eq!(v["name"], "moodboard-maker");
    assert_eq!(v["doctor"]["ok"], true, "{v}");
    // Not over an existing plugin.
    let out = od_cli(&data, &["plugin", "scaffold", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(76));

    let market = tmp.path().join("market");
    let v = ok_json(od_cli(
        &data,
        &["plugin", "publish", dir.to_str().unwrap(), "--to", market.to_str().unwrap(), "--json"],
    ));
    let archive = std::fs::read(market.join("moodboard-maker-0.1.0.tgz")).unwrap();
    let sri = format!("sha256-{}", base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(&archive)));
    assert_eq!(v["entry"]["integrity"], sri.as_str());
    // Reproducible: publishing again writes the same bytes and one entry.
    ok_json(od_cli(&data, &["plugin", "publish", dir.to_str().unwrap(), "--to", market.to_str().unwrap(), "--json"]));
    assert_eq!(std::fs::read(market.join("moodboard-maker-0.1.0.tgz")).unwrap(), archive);
    let index: Value =
        serde_json::from_slice(&std::fs::read(market.join("open-design-marketplace.json")).unwrap()).unwrap();
    assert_eq!(index["plugins"].as_array().unwrap().len(), 1, "{index}");

    let index_path = market.join("open-design-marketplace.json");
    ok_json(od_cli(&data, &["marketplace", "add", index_path.to_str().unwrap(), "--json"]));
    let out = od_cli(&data, &["plugin", "install", "moodboard-maker"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = ok_json(od_cli(
        &data,
        &[
            "plugin",
            "apply",
            "moodboard-maker",
            "--input",
            "topic=autumn",
            "--grant-caps",
            "fs:write,pipeline:*",
            "--json",
        ],
    ));
    assert!(v["query"].as_str().unwrap().contains("autumn"), "{v}");

    // An archive that is not the one the entry's integrity names is refused before it is unpacked.
    let mut tampered = archive.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    std::fs::write(market.join("moodboard-maker-0.1.0.tgz"), &tampered).unwrap();
    let other = tmp.path().join("other");
    ok_json(od_cli(&other, &["marketplace", "add", index_path.to_str().unwrap(), "--json"]));
    let out = od_cli(&other, &["plugin", "install", "moodboard-maker"]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("integrity mismatch"), "{text}");
}

#[test]
fn a_linked_plugin_reloads_while_a_run_keeps_its_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let folder = tmp.path().join("brancher");
    copy_dir(Path::new(BRANCHER), &folder);
    let r = ureq::post(&format!("{}/api/plugins/install", e.url))
        .send_json(json!({ "source": folder.to_str().unwrap(), "link": true }))
        .unwrap()
        .into_string()
        .unwrap();
    assert!(r.lines().last().unwrap().contains("\"success\""), "{r}");
    let (_, p) = e.get("/api/plugins/brancher");
    let p = if p["plugin"].is_object() { p["plugin"].clone() } else { p };
    assert_eq!(p["sourceKind"], "linked", "{p}");

    // A run waits on `style` with the 1.0.0 snapshot.
    let run = e.start_run(json!({ "pluginId": "brancher" }));
    let w = ureq::get(&format!("{}/api/runs/{run}/watch", e.url)).call().unwrap();
    for line in BufReader::new(w.into_reader()).lines() {
        let line = line.unwrap();
        if line.contains("genui_surface_request") {
            break;
        }
    }
    let (_, info) = e.get(&format!("/api/runs/{run}"));
    let snap1 = info["appliedPluginSnapshotId"]
        .as_str()
        .or(info["run"]["appliedPluginSnapshotId"].as_str())
        .unwrap()
        .to_string();

    // Edit the folder: a new version and body.
    let after = head_seq(&e);
    let m = std::fs::read_to_string(folder.join("open-design.json")).unwrap().replace("\"1.0.0\"", "\"1.1.0\"");
    std::fs::write(folder.join("open-design.json"), m).unwrap();
    let skill = std::fs::read_to_string(folder.join("SKILL.md")).unwrap() + "\nRELOADED-MARKER\n";
    std::fs::write(folder.join("SKILL.md"), skill).unwrap();
    let ev = next_reload(&e, "brancher", after);
    let d = &ev["data"]["payload"];
    assert_eq!((d["ok"].clone(), d["version"].clone()), (json!(true), json!("1.1.0")), "{ev}");
    assert_ne!(d["fromDigest"], d["toDigest"]);
    let (_, p) = e.get("/api/plugins/brancher");
    let p = if p["plugin"].is_object() { p["plugin"].clone() } else { p };
    assert_eq!(p["version"], "1.1.0");

    // The run in flight keeps its snapshot and ends on it.
    let (code, v) = e.post(&format!("/api/runs/{run}/genui/style/respond"), json!({ "value": "calm" }));
    assert_eq!(code, 200, "{v}");
    let evs = e.watch(&run);
    assert_eq!(evs.last().unwrap()["data"]["status"], "succeeded", "{evs:?}");
    let (_, s1) = e.get(&format!("/api/applied-plugins/{snap1}"));
    assert_eq!(s1["snapshot"]["pluginVersion"], "1.0.0");
    assert!(!s1["snapshot"]["skillBody"].as_str().unwrap().contains("RELOADED-MARKER"));
    // The next apply takes the new version.
    let (_, a) = e.post("/api/plugins/brancher/apply", json!({}));
    assert_eq!(a["appliedPlugin"]["pluginVersion"], "1.1.0", "{a}");

    // A broken edit is reported; the installed version stays.
    let after = head_seq(&e);
    std::fs::write(folder.join("open-design.json"), "{ not json").unwrap();
    let ev = next_reload(&e, "brancher", after);
    assert_eq!(ev["data"]["payload"]["ok"], false, "{ev}");
    assert!(ev["data"]["payload"]["diagnosticsJson"].as_str().unwrap().contains("open-design.json"), "{ev}");
    let (_, p) = e.get("/api/plugins/brancher");
    let p = if p["plugin"].is_object() { p["plugin"].clone() } else { p };
    assert_eq!(p["version"], "1.1.0");
}

#[test]
fn a_snapshot_exports_and_installs_elsewhere_to_the_same_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    e.install(Path::new(BRANCHER));
    let (code, rec) = e.post("/api/applied-plugins", json!({ "pluginId": "brancher", "inputs": { "topic": "kites" } }));
    assert_eq!(code, 200, "{rec}");
    let snap = rec["snapshotId"].as_str().unwrap().to_string();
    let digest = rec["snapshot"]["manifestSourceDigest"].as_str().unwrap().to_string();

    let out_dir = tmp.path().join("export");
    let v = ok_json(od(
        &e,
        &["plugin", "export", "--snapshot-id", &snap, "--as", "od", "--out", out_dir.to_str().unwrap()],
    ));
    assert_eq!(v["files"].as_array().unwrap().len(), 3, "{v}");
    let tar1 = tmp.path().join("a.tar");
    let tar2 = tmp.path().join("b.tar");
    ok_json(od(&e, &["plugin", "export", "--snapshot-id", &snap, "--out", tar1.to_str().unwrap()]));
    ok_json(od(&e, &["plugin", "export", "--snapshot-id", &snap, "--out", tar2.to_str().unwrap()]));
    assert_eq!(std::fs::read(&tar1).unwrap(), std::fs::read(&tar2).unwrap());
    // A .tgz is the same tar gzipped, not a folder of that name; other archive names are refused.
    let tgz = tmp.path().join("c.tgz");
    ok_json(od(&e, &["plugin", "export", "--snapshot-id", &snap, "--out", tgz.to_str().unwrap()]));
    assert!(tgz.is_file(), "{} is not a file", tgz.display());
    let mut unzipped = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(std::fs::File::open(&tgz).unwrap()), &mut unzipped)
        .unwrap();
    assert_eq!(unzipped, std::fs::read(&tar1).unwrap());
    let zip = tmp.path().join("d.zip");
    let out = od(&e, &["plugin", "export", "--snapshot-id", &snap, "--out", zip.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--out"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!zip.exists());
    let v = ok_json(od(
        &e,
        &[
            "plugin",
            "export",
            "--snapshot-id",
            &snap,
            "--as",
            "skill",
            "--out",
            tmp.path().join("skill").to_str().unwrap(),
        ],
    ));
    assert_eq!(v["files"], json!(["brancher/SKILL.md"]));
    let out = od(
        &e,
        &["plugin", "export", "--snapshot-id", &snap, "--as", "zip", "--out", tmp.path().join("z").to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    e.stop();

    // Elsewhere: install the exported folder and apply it with the recorded inputs.
    let other = tmp.path().join("other");
    let folder = out_dir.join("brancher");
    let prov: Value = serde_json::from_slice(&std::fs::read(folder.join(".od-snapshot.json")).unwrap()).unwrap();
    assert_eq!(prov["inputs"]["topic"], "kites");
    let out = od_cli(&other, &["plugin", "install", folder.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = ok_json(od_cli(&other, &["plugin", "apply", "brancher", "--input", "topic=kites", "--json"]));
    assert_eq!(v["manifestSourceDigest"], digest.as_str(), "{v}");
}
