//! Issue 38: every acknowledged write survives a power cut, not only the log's.
//!
//! `every_acknowledged_file_survives_a_power_cut_at_each_step`: od's file-system seam is replaced by
//! a power-cut double (`common/power.rs`; LazyFS needs FUSE, which this suite does not assume),
//! the daemon starts fresh (bundled copies, its identity), project files are written, a plugin is
//! installed, a plugin runs — and power is cut after each step in turn (what was not fsynced is
//! dropped), then the daemon restarts on the real disk: every acknowledged file reads back with its
//! bytes, the bundled plugins load, a run of `od-new-generation` succeeds, the daemon keeps its
//! identity.
//!
//! `damaged_copies_are_rebuilt_at_start_with_a_log_line_and_in_doctor`: a bundled copy and an
//! installed plugin's file truncated by hand are rebuilt on the next start (digest mismatch), with
//! a line in the daemon log and in `od doctor --json`.

use crate::common;
use common::power;

use common::harness::{of, write_plugin, Engine, OD};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const NOW: i64 = 1_800_000_000_000;

/// The steps, in order; power is cut after the one named.
const STEPS: [&str; 4] = ["fresh start", "project files", "plugin install", "plugin run"];

fn put(e: &Engine, project: &str, path: &str, bytes: &[u8]) {
    let r = ureq::put(&format!("{}/api/projects/{project}/files/{}", e.url, path.replace('/', "%2F")))
        .set("Authorization", &format!("Bearer {}", e.token))
        .set("Content-Type", "application/octet-stream")
        .send_bytes(bytes);
    assert_eq!(r.map(|r| r.status()).unwrap_or(0), 200, "PUT {path}");
}

fn get_bytes(e: &Engine, url: &str) -> Vec<u8> {
    let r = ureq::get(&format!("{}{url}", e.url)).set("Authorization", &format!("Bearer {}", e.token)).call();
    let mut b = Vec::new();
    std::io::Read::read_to_end(&mut r.unwrap_or_else(|err| panic!("{url}: {err}")).into_reader(), &mut b).unwrap();
    b
}

fn run_new_generation(e: &Engine, project: Option<&str>) -> Vec<Value> {
    let inputs = json!({ "topic": "tea shop", "audience": "tea lovers", "artifactKind": "landing-page" });
    let mut body = json!({ "pluginId": "od-new-generation", "pluginInputs": inputs });
    if let Some(p) = project {
        body["projectId"] = json!(p);
    }
    let (_, ev) = e.run(body);
    let end = ev.last().unwrap();
    assert_eq!(end["data"]["status"], "succeeded", "{end}");
    ev
}

/// What a scenario had acknowledged before the cut, checked after the restart.
#[derive(Default)]
struct Acked {
    daemon_id: String,
    /// (project, path, bytes) read back through the API.
    files: Vec<(String, String, Vec<u8>)>,
    plugin: Option<(String, String)>,
}

fn scenario(tmp: &Path, cut_after: usize) {
    let data = tmp.join(format!("data-{cut_after}"));
    std::fs::create_dir_all(&data).unwrap();
    let power = power::PowerCut::new(&data);
    let real = od::durable::set_disk(power.clone());
    let mut acked = Acked::default();
    let e = Engine::start(&data, NOW);
    acked.daemon_id = std::fs::read_to_string(data.join("daemon-id")).unwrap();
    if cut_after >= 1 {
        let (_, p) = e.post("/api/projects", json!({ "name": "p" }));
        let project = p["project"]["id"].as_str().unwrap().to_string();
        for (path, bytes) in [("a.txt", &b"alpha"[..]), ("deep/er/b.html", b"<p>beta</p>"), ("a.txt", b"alpha, again")]
        {
            put(&e, &project, path, bytes);
            acked.files.retain(|(_, p, _)| p != path);
            acked.files.push((project.clone(), path.to_string(), bytes.to_vec()));
        }
    }
    if cut_after >= 2 {
        let src = tmp.join(format!("src-{cut_after}"));
        write_plugin(
            &src,
            "durable-plugin",
            "1.0.0",
            json!([{ "id": "generate", "atoms": ["file-write"] }]),
            "Be durable.",
        );
        std::fs::write(src.join("extra.txt"), "an extra file").unwrap();
        let p = e.install(&src);
        acked.plugin = Some(("durable-plugin".into(), p["fs_path"].as_str().or(p["fsPath"].as_str()).unwrap().into()));
    }
    if cut_after >= 3 {
        let ev = run_new_generation(&e, None);
        for a in of(&ev, "artifact") {
            let a = if a["artifact"].is_object() { &a["artifact"] } else { a };
            let (project, path) = (a["projectId"].as_str().unwrap(), a["path"].as_str().unwrap());
            let bytes = get_bytes(&e, &format!("/api/projects/{project}/files/{}", path.replace('/', "%2F")));
            acked.files.retain(|(pr, p, _)| !(pr == project && p == path));
            acked.files.push((project.into(), path.into(), bytes));
        }
    }
    let dropped = power.cut();
    let dropped = format!("{} dropped, first: {:?}", dropped.len(), dropped.iter().take(3).collect::<Vec<_>>());
    drop(e);
    od::durable::set_disk(real);
    let step = STEPS[cut_after];
    let e = Engine::start(&data, NOW + 60_000);
    let id = std::fs::read_to_string(data.join("daemon-id")).unwrap();
    assert_eq!(id, acked.daemon_id, "cut after {step}: the daemon kept its identity (dropped: {dropped:?})");
    for (project, path, bytes) in &acked.files {
        let back = get_bytes(&e, &format!("/api/projects/{project}/files/{}", path.replace('/', "%2F")));
        assert_eq!(&back, bytes, "cut after {step}: {path} reads back with its bytes (dropped: {dropped:?})");
    }
    if let Some((id, fs_path)) = &acked.plugin {
        let (code, v) = e.get(&format!("/api/plugins/{id}/doctor"));
        assert_eq!(code, 200, "{v}");
        assert!(
            v["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .all(|d| d["severity"] != "error" && d["code"] != "digest.drift"),
            "cut after {step}: the installed plugin is whole: {v} (dropped: {dropped:?})"
        );
        let extra = std::fs::read_to_string(data.join(fs_path).join("extra.txt")).unwrap();
        assert_eq!(extra, "an extra file");
    }
    let (_, list) = e.get("/api/plugins");
    let bundled = list["plugins"].as_array().unwrap().iter().filter(|p| p["trust"] == "bundled").count();
    assert_eq!(bundled, 20, "cut after {step}: every bundled plugin loads");
    run_new_generation(&e, None);
    let (_, doctor) = e.post("/api/doctor", json!({}));
    assert_eq!(doctor["ok"], true, "{doctor}");
    assert_eq!(doctor["rebuiltSinceStart"], json!([]), "cut after {step}: nothing needed rebuilding: {doctor}");
}

#[test]
fn every_acknowledged_file_survives_a_power_cut_at_each_step() {
    let tmp = tempfile::tempdir().unwrap();
    for cut_after in 0..STEPS.len() {
        scenario(tmp.path(), cut_after);
    }
}

/// Issue 33: a run's blobs are staged and made durable as one batch (temp files fsynced together,
/// renamed, their folders fsynced together) before the append naming them is sent. Power cut right
/// after the run's `end` was acknowledged: every blob its events name is there, whole.
#[test]
fn every_blob_an_acknowledged_event_names_survives_a_power_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let power = power::PowerCut::new(&data);
    let real = od::durable::set_disk(power.clone());
    let e = Engine::start(&data, NOW);
    let ev = run_new_generation(&e, None);
    let digests: Vec<String> = of(&ev, "artifact")
        .iter()
        .map(|a| if a["artifact"].is_object() { &a["artifact"] } else { *a })
        .map(|a| a["digest"].as_str().unwrap().to_string())
        .collect();
    assert!(digests.len() >= 4, "the dry run records its stage drafts: {digests:?}");
    let dropped = power.cut();
    drop(e);
    od::durable::set_disk(real);
    for d in &digests {
        let p = data.join("blobs").join(&d[..2]).join(&d[2..]);
        let bytes = std::fs::read(&p).unwrap_or_else(|err| panic!("blob {d}: {err} (dropped: {dropped:?})"));
        assert_eq!(blake3::hash(&bytes).to_hex().as_str(), d, "blob {d} is whole (dropped: {dropped:?})");
    }
    assert!(!dropped.iter().any(|x| x.contains("/blobs/")), "no blob was still owed an fsync: {dropped:?}");
}

/// The double drops what the primitive does not sync: a write that skips the fsyncs is lost.
#[test]
fn the_double_drops_what_was_not_synced() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    std::fs::create_dir_all(&dir).unwrap();
    let power = power::PowerCut::new(&dir);
    // Through the seam but without the fsyncs (what write_atomic did before issue 38).
    let fd = od::durable::open_at(None, dir.to_str().unwrap(), libc::O_RDONLY | libc::O_DIRECTORY, 0).unwrap();
    let mut f = std::fs::File::create(dir.join(".tmp")).unwrap();
    od::durable::Disk::write(&*power, &mut f, b"lost").unwrap();
    od::durable::Disk::rename_at(&*power, std::os::fd::AsFd::as_fd(&fd), ".tmp", "unsynced").unwrap();
    // And one through the primitive's steps.
    let mut g = std::fs::File::create(dir.join(".tmp2")).unwrap();
    od::durable::Disk::write(&*power, &mut g, b"kept").unwrap();
    od::durable::Disk::sync_file(&*power, &g).unwrap();
    od::durable::Disk::rename_at(&*power, std::os::fd::AsFd::as_fd(&fd), ".tmp2", "synced").unwrap();
    od::durable::Disk::sync_dir(&*power, std::os::fd::AsFd::as_fd(&fd)).unwrap();
    // The folder fsync made both entries durable; only the synced file kept its data.
    power.cut();
    assert_eq!(std::fs::read(dir.join("unsynced")).unwrap(), b"");
    assert_eq!(std::fs::read(dir.join("synced")).unwrap(), b"kept");
}

fn files_below(dir: &Path) -> Vec<PathBuf> {
    common::harness::files_below(dir)
}

#[test]
fn damaged_copies_are_rebuilt_at_start_with_a_log_line_and_in_doctor() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let src = tmp.path().join("src");
    write_plugin(&src, "healing-plugin", "1.0.0", json!([{ "id": "generate", "atoms": ["file-write"] }]), "Heal.");
    // A foreground daemon's log is its stderr (`daemon_proc` keeps it beside the data dir).
    let log = data.with_extension("stderr");
    let od = |args: &[&str]| {
        std::process::Command::new(OD)
            .args(args)
            .arg("--data-dir")
            .arg(&data)
            .env_remove("OD_DAEMON_URL")
            .env("RUST_LOG", "od=info")
            .output()
            .unwrap()
    };
    let out = od(&["plugin", "install", src.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Truncate a bundled copy's manifest and the installed plugin's SKILL.md by hand.
    let bundled = files_below(&data.join("plugins/_bundled/od-new-generation"));
    let bundled_manifest = bundled.iter().find(|p| p.ends_with("open-design.json")).unwrap().clone();
    let installed = files_below(&data.join("plugins/healing-plugin"));
    let skill = installed.iter().find(|p| p.ends_with("SKILL.md")).unwrap().clone();
    let (want_bundled, want_skill) = (std::fs::read(&bundled_manifest).unwrap(), std::fs::read(&skill).unwrap());
    std::fs::write(&bundled_manifest, "").unwrap();
    std::fs::write(&skill, &want_skill[..want_skill.len() / 2]).unwrap();
    // The next start (a daemon with its log file) rebuilds both.
    let mut d = common::daemon_proc::start(&data, &[], &[("RUST_LOG", "od=info".into())]);
    assert_eq!(std::fs::read(&bundled_manifest).unwrap(), want_bundled);
    assert_eq!(std::fs::read(&skill).unwrap(), want_skill);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(text.contains("rebuilt bundled-plugin od-new-generation"), "{text}");
    assert!(text.contains("rebuilt installed-plugin healing-plugin"), "{text}");
    let out = std::process::Command::new(OD).args(["doctor", "--json", "--daemon-url", &d.url]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let since: Vec<(String, String)> = v["rebuiltSinceStart"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["kind"].as_str().unwrap().to_string(), r["id"].as_str().unwrap().to_string()))
        .collect();
    assert!(since.contains(&("bundled-plugin".into(), "od-new-generation".into())), "{v}");
    assert!(since.contains(&("installed-plugin".into(), "healing-plugin".into())), "{v}");
    assert_eq!(v["found"], json!([]), "everything matches again: {v}");
    // Damage found while the daemon runs: `od doctor` finds and rebuilds it.
    std::fs::write(&skill, "").unwrap();
    let out = std::process::Command::new(OD).args(["doctor", "--json", "--daemon-url", &d.url]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["found"][0]["id"], "healing-plugin", "{v}");
    assert_eq!(v["found"][0]["rebuilt"], true, "{v}");
    assert_eq!(std::fs::read(&skill).unwrap(), want_skill);
    // A project's copy of a run's artifact that a cut left empty is rebuilt from its blob; one a
    // person changed is theirs and stays.
    let body = json!({ "pluginId": "od-new-generation", "agent": "dry-run",
        "pluginInputs": { "topic": "tea", "audience": "tea lovers", "artifactKind": "landing-page" } });
    let started: Value = ureq::post(&format!("{}/api/runs", d.url)).send_json(body).unwrap().into_json().unwrap();
    let run = started["runId"].as_str().unwrap();
    let _ = ureq::get(&format!("{}/api/runs/{run}/watch", d.url)).call().unwrap().into_string().unwrap();
    let (_, info) = (0, ureq::get(&format!("{}/api/runs/{run}", d.url)).call().unwrap().into_json::<Value>().unwrap());
    let project = info["projectId"].as_str().or(info["run"]["projectId"].as_str()).unwrap().to_string();
    let (_, p) =
        (0, ureq::get(&format!("{}/api/projects/{project}", d.url)).call().unwrap().into_json::<Value>().unwrap());
    let dir = p["project"]["dir"].as_str().or(p["dir"].as_str()).unwrap().to_string();
    let dir = if Path::new(&dir).is_absolute() { PathBuf::from(dir) } else { data.join(dir) };
    let index = dir.join("index.html");
    let want_index = std::fs::read(&index).unwrap();
    std::fs::write(&index, "").unwrap();
    let plan = dir.join("dry-run/plan-1.md");
    std::fs::write(&plan, "my own plan").unwrap();
    let out = std::process::Command::new(OD).args(["doctor", "--json", "--daemon-url", &d.url]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let found = v["found"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{v}");
    assert_eq!((found[0]["kind"].as_str(), found[0]["path"].as_str()), (Some("project-file"), Some("index.html")));
    assert_eq!(std::fs::read(&index).unwrap(), want_index);
    assert_eq!(std::fs::read_to_string(&plan).unwrap(), "my own plan");
    let _ = d.child.kill();
    let _ = d.child.wait();
}
