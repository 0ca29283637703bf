//! Read models on disk: `rebuild(log) == live` after random command sequences through a real
//! engine, with clean restarts and kills (an engine dropped without its clean-stop checkpoint) in
//! between — comparing the on-disk records with a fold of the log into memory; a restart after a
//! kill during a fold resumes from the checkpoint (not seq 0) and equals a rebuild; a VERSION
//! change rebuilds; `od projections rebuild` changes nothing observable.

use crate::common;

use common::harness::{write_plugin, Engine};
use od::projector::{fold_records_until, fold_until, Projector, ReadModels, RecordProjector, READ_MODELS_FILE};
use od::store::{SledLog, Store, StoreConfig};
use od_projections::{Browser, MemRecords, PluginRegistry, RecordFold, Records, Workspace};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;

/// A plugin whose first stage asks a project-tier surface (`brief`), remembered per project.
fn write_asker(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), "---\nname: asker\ndescription: Asks first.\n---\nAsk.\n").unwrap();
    let schema =
        json!({ "type": "object", "properties": { "audience": { "type": "string" } }, "required": ["audience"] });
    let manifest = json!({
        "specVersion": "1.0.0", "name": "asker", "version": "1.0.0", "title": "Asker",
        "od": { "kind": "scenario", "taskKind": "new-generation",
                "pipeline": { "stages": [ { "id": "ask", "atoms": ["todo-write"] }, { "id": "make", "atoms": ["file-write"] } ] },
                "genui": { "surfaces": [ { "id": "brief", "kind": "form", "persist": "project",
                    "trigger": { "stageId": "ask" }, "schema": schema } ] } }
    });
    std::fs::write(dir.join("open-design.json"), manifest.to_string()).unwrap();
}

fn setup(tmp: &Path) -> Engine {
    let e = Engine::start(&tmp.join("data"), NOW);
    let asker = tmp.join("asker");
    write_asker(&asker);
    e.install(&asker);
    let plain = tmp.join("plain");
    write_plugin(&plain, "plain", "1.0.0", json!([ { "id": "make", "atoms": ["file-write"] } ]), "x");
    e.install(&plain);
    e
}

/// Runs `body` to its end, answering the `brief` surface when it waits.
fn run_answering(e: &Engine, body: Value) {
    let id = e.start_run(body);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, v) = e.get(&format!("/api/runs/{id}"));
        match v["run"]["status"].as_str().unwrap() {
            "awaiting-input" => {
                let (code, r) =
                    e.post(&format!("/api/runs/{id}/genui/brief/respond"), json!({ "value": { "audience": "all" } }));
                assert_eq!(code, 200, "{r}");
            }
            "succeeded" | "failed" | "canceled" => return,
            _ => {}
        }
        assert!(std::time::Instant::now() < deadline, "run {id} did not end");
        std::thread::yield_now();
    }
}

#[derive(Debug, Clone)]
enum Op {
    Project(u8),
    Run { project: u8, asker: bool },
    Conversation(u8),
    Delete(u8),
    Revoke(u8),
    Snapshot,
    Prune,
    Restart,
    Kill,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0u8..3).prop_map(Op::Project),
        4 => (0u8..3, any::<bool>()).prop_map(|(project, asker)| Op::Run { project, asker }),
        1 => (0u8..3).prop_map(Op::Conversation),
        1 => (0u8..3).prop_map(Op::Delete),
        1 => (0u8..3).prop_map(Op::Revoke),
        1 => Just(Op::Snapshot),
        1 => Just(Op::Prune),
        1 => Just(Op::Restart),
        2 => Just(Op::Kill),
    ]
}

fn apply(e: &Engine, op: &Op) {
    match op {
        Op::Project(p) => {
            e.post("/api/projects", json!({ "id": format!("p{p}"), "pluginId": "plain" }));
        }
        Op::Run { project, asker } => {
            let plugin = if *asker { "asker" } else { "plain" };
            let (code, _) = e.get(&format!("/api/projects/p{project}"));
            let body = if code == 200 {
                json!({ "projectId": format!("p{project}"), "pluginId": plugin })
            } else {
                json!({ "pluginId": plugin })
            };
            run_answering(e, body);
        }
        Op::Conversation(p) => {
            e.post(&format!("/api/projects/p{p}/conversations"), json!({ "title": "more" }));
        }
        Op::Delete(p) => {
            e.delete(&format!("/api/projects/p{p}"));
        }
        Op::Revoke(p) => {
            e.post(&format!("/api/projects/p{p}/genui/brief/revoke"), json!({}));
        }
        Op::Snapshot => {
            e.post("/api/applied-plugins", json!({ "pluginId": "plain" }));
        }
        Op::Prune => {
            e.clock.advance(40 * 86_400_000);
            e.post("/api/applied-plugins/prune", json!({}));
        }
        Op::Restart | Op::Kill => unreachable!(),
    }
}

/// Stops the engine without its clean-stop checkpoint: the runtime is torn down under it.
fn kill(mut e: Engine) {
    let running = e.running.take();
    let rt = std::mem::replace(&mut e.rt, tokio::runtime::Builder::new_current_thread().build().unwrap());
    rt.shutdown_timeout(std::time::Duration::from_secs(10));
    drop(running);
    drop(e);
}

fn open(data: &Path) -> Store {
    SledLog::open(StoreConfig::new(data)).unwrap()
}

/// The records of `F` on disk, as the projector resumes them, equal a fold of the whole log.
fn check_records<F: RecordFold>(store: &Store) -> RecordProjector<F> {
    let live = RecordProjector::<F>::load(store).unwrap();
    let rebuilt: MemRecords = fold_records_until::<F>(&**store, u64::MAX).unwrap();
    assert_eq!(live.dump().unwrap(), rebuilt, "{} records differ from a fold of the log", F::NAME);
    live
}

fn check_all(data: &Path) {
    let store = open(data);
    let ws = check_records::<Workspace>(&store);
    assert!(ws.resumed_from() > 0, "the workspace folded from seq 0 instead of its checkpoint");
    check_records::<Browser>(&store);
    let reg = Projector::<PluginRegistry>::load(&store).unwrap();
    assert_eq!(reg.get().unwrap().0, fold_until::<PluginRegistry>(&*store, u64::MAX).unwrap());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]
    #[test]
    fn records_on_disk_equal_a_rebuild_across_restarts_and_kills(ops in proptest::collection::vec(op(), 4..14)) {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let mut e = setup(tmp.path());
        for op in &ops {
            match op {
                Op::Restart => {
                    e.stop();
                    check_all(&data);
                    e = Engine::start(&data, NOW);
                }
                Op::Kill => {
                    kill(e);
                    check_all(&data);
                    e = Engine::start(&data, NOW);
                }
                other => apply(&e, other),
            }
        }
        kill(e);
        check_all(&data);
    }
}

/// Runs a few commands and stops; returns the data dir.
fn seeded(tmp: &Path) -> std::path::PathBuf {
    let e = setup(tmp);
    for op in
        [Op::Project(0), Op::Run { project: 0, asker: true }, Op::Run { project: 0, asker: true }, Op::Conversation(0)]
    {
        apply(&e, &op);
    }
    for _ in 0..3 {
        apply(&e, &Op::Run { project: 1, asker: false });
    }
    e.stop();
    tmp.join("data")
}

#[test]
fn a_kill_during_a_fold_resumes_from_the_checkpoint_and_equals_a_rebuild() {
    let tmp = tempfile::tempdir().unwrap();
    let data = seeded(tmp.path());
    let store = open(&data);
    let last = store.last_seq();
    // Throw the records away, fold part of the log, and stop there as a kill would.
    RecordProjector::<Workspace>::load(&store).unwrap().rebuild().unwrap();
    ReadModels::for_store(&store).unwrap().clear(Workspace::NAME).unwrap();
    let mid = last / 2;
    {
        let p = RecordProjector::<Workspace>::load_at_most(&store, mid).unwrap();
        assert_eq!(p.seq(), mid);
    }
    let p = RecordProjector::<Workspace>::load(&store).unwrap();
    assert_eq!(p.resumed_from(), mid, "the fold resumed from its checkpoint, not from seq 0");
    assert_eq!(p.seq(), last);
    assert_eq!(p.dump().unwrap(), fold_records_until::<Workspace>(&*store, u64::MAX).unwrap());
}

#[test]
fn folded_records_wait_in_memory_until_a_checkpoint_is_due_and_a_kill_loses_only_them() {
    let tmp = tempfile::tempdir().unwrap();
    let data = seeded(tmp.path());
    let store = open(&data);
    let last = store.last_seq();
    let db = ReadModels::for_store(&store).unwrap();
    db.clear(Workspace::NAME).unwrap();
    let mid = last / 2;
    assert!(
        last - mid < od::limits::PROJECTION_CHECKPOINT_EVENTS,
        "the test needs fewer events than a checkpoint's worth after mid"
    );
    let cp = |db: &ReadModels| db.checkpoint(Workspace::NAME).unwrap().map(|c| c.seq);
    {
        let p = RecordProjector::<Workspace>::load_at_most(&store, mid).unwrap();
        assert_eq!(cp(&db), Some(mid), "the first checkpoint is always written");
        p.catch_up_to(last).unwrap();
        assert_eq!(p.seq(), last);
        assert_eq!(cp(&db), Some(mid), "the records folded since wait in memory");
        let want = fold_records_until::<Workspace>(&*store, last).unwrap();
        assert_ne!(want, fold_records_until::<Workspace>(&*store, mid).unwrap(), "the events after mid write records");
        assert_eq!(p.dump().unwrap(), want, "what waits in memory is read over the table");
        // Dropped without a checkpoint: as a kill leaves it.
    }
    let p = RecordProjector::<Workspace>::load(&store).unwrap();
    assert_eq!(p.resumed_from(), mid, "only what waited in memory was lost, and folded again");
    assert_eq!(p.dump().unwrap(), fold_records_until::<Workspace>(&*store, u64::MAX).unwrap());
    p.checkpoint_if_moved().unwrap();
    assert_eq!(cp(&db), Some(last), "the idle checkpoint writes what waited");
    drop(p);
    let again = RecordProjector::<Workspace>::load(&store).unwrap();
    assert_eq!(again.resumed_from(), last);
    assert_eq!(again.dump().unwrap(), fold_records_until::<Workspace>(&*store, u64::MAX).unwrap());
}

/// The same NAME with another VERSION: its records must not be trusted.
struct WorkspaceV99;
impl RecordFold for WorkspaceV99 {
    const NAME: &'static str = Workspace::NAME;
    const VERSION: u32 = 99;
    fn apply(rec: &mut dyn Records, env: &od_events::Envelope, event: &od_events::Event) {
        <Workspace as RecordFold>::apply(rec, env, event);
        rec.put_raw(b"zz\0marker".to_vec(), env.seq.to_be_bytes().to_vec());
    }
}

#[test]
fn a_version_change_rebuilds_the_records() {
    let tmp = tempfile::tempdir().unwrap();
    let data = seeded(tmp.path());
    let store = open(&data);
    let v99 = RecordProjector::<WorkspaceV99>::load(&store).unwrap();
    assert_eq!(v99.resumed_from(), 0, "another VERSION's records were trusted");
    assert!(v99.dump().unwrap().map.contains_key(b"zz\0marker".as_slice()));
    drop(v99);
    let back = RecordProjector::<Workspace>::load(&store).unwrap();
    assert_eq!(back.resumed_from(), 0);
    assert_eq!(back.dump().unwrap(), fold_records_until::<Workspace>(&*store, u64::MAX).unwrap());
}

#[test]
fn projections_rebuild_changes_nothing_observable() {
    let tmp = tempfile::tempdir().unwrap();
    let data = seeded(tmp.path());
    let e = Engine::start(&data, NOW);
    let lists = [
        "/api/runs?limit=1000",
        "/api/projects",
        "/api/projects/p0/conversations",
        "/api/applied-plugins",
        "/api/projects/p0/genui",
        "/api/projects/p0/artifacts",
    ];
    let before: Vec<Value> = lists.iter().map(|p| e.get(p).1).collect();
    let (code, listed) = e.get("/api/projections");
    assert_eq!(code, 200);
    let names: Vec<&str> =
        listed["projections"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    for n in ["workspace", "browser", "plugin_registry", "tools"] {
        assert!(names.contains(&n), "{n} missing from {listed}");
    }
    let ws = listed["projections"].as_array().unwrap().iter().find(|p| p["name"] == "workspace").unwrap();
    assert_eq!(ws["kind"], "records");
    assert!(ws["seq"].as_u64().unwrap() > 0);
    let (code, r) = e.post("/api/projections/rebuild", json!({ "name": "workspace" }));
    assert_eq!(code, 200, "{r}");
    let (code, r) = e.post("/api/projections/rebuild", json!({}));
    assert_eq!(code, 200, "{r}");
    let after: Vec<Value> = lists.iter().map(|p| e.get(p).1).collect();
    assert_eq!(before, after);
    let (code, r) = e.post("/api/projections/rebuild", json!({ "name": "nope" }));
    assert_eq!(code, 400);
    assert_eq!(r["error"]["data"]["field"], "name", "{r}");
    // The CLI speaks the same routes.
    let out = std::process::Command::new(common::harness::OD)
        .args(["--json", "projections", "list"])
        .env("OD_DAEMON_URL", &e.url)
        .env("OD_API_TOKEN", &e.token)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["projections"].as_array().unwrap().iter().any(|p| p["name"] == "workspace"));
}

/// Every `artifact_recorded` of project `p0` in the log, as the API lists artifacts, oldest first.
fn logged_artifacts(data: &Path) -> Vec<Value> {
    let store = open(data);
    let frames = store.read_from(1, usize::MAX).unwrap();
    let mut out = Vec::new();
    for f in &frames {
        if let od_events::Event::ArtifactRecorded(a) = od::store::decode_frame(f.view()).unwrap().event {
            if a.project_id == "p0" {
                out.push(serde_json::to_value(od_projections::ArtifactInfo::from_event(&a)).unwrap());
            }
        }
    }
    out
}

#[test]
fn artifacts_list_their_full_provenance_from_the_log_across_a_kill_and_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let data = seeded(tmp.path());
    let want = logged_artifacts(&data);
    assert!(!want.is_empty(), "the seeded runs recorded no artifacts");
    // The records keep only where each artifact's provenance is in the log, not the provenance.
    {
        let store = open(&data);
        let ws = RecordProjector::<Workspace>::load(&store).unwrap();
        let records = ws.dump().unwrap();
        let arts: Vec<&Vec<u8>> =
            records.map.iter().filter(|(k, _)| k.starts_with(b"artifact\0")).map(|(_, v)| v).collect();
        assert!(!arts.is_empty());
        for v in arts {
            let seq: u64 = serde_json::from_slice(v).unwrap();
            assert!(seq > 0);
        }
    }
    let e = Engine::start(&data, NOW);
    let listed = e.get("/api/projects/p0/artifacts?limit=1000").1;
    assert_eq!(listed["artifacts"].as_array().unwrap(), &want);
    kill(e);
    let e = Engine::start(&data, NOW);
    let (code, listed) = e.get("/api/projects/p0/artifacts?limit=1000");
    assert_eq!(code, 200, "{listed}");
    assert_eq!(listed["artifacts"].as_array().unwrap(), &want);
    for a in &want {
        for field in ["artifactId", "runId", "path", "digest", "sourcePluginSnapshotId", "stageId"] {
            assert!(a[field].as_str().is_some_and(|s| !s.is_empty()), "{field} missing in {a}");
        }
    }
    e.stop();
}

#[test]
fn read_models_an_older_od_kept_in_sled_are_dropped_and_rebuilt_into_sqlite() {
    let tmp = tempfile::tempdir().unwrap();
    let data = seeded(tmp.path());
    // What an older od leaves: no SQLite file; records with a current-VERSION checkpoint in a
    // `proj:workspace` tree, and in-memory checkpoints in the `projections` tree.
    for f in std::fs::read_dir(&data).unwrap().flatten() {
        if f.file_name().to_string_lossy().starts_with(READ_MODELS_FILE) {
            std::fs::remove_file(f.path()).unwrap();
        }
    }
    {
        let db = sled::Config::new().path(data.join("sled")).open().unwrap();
        let old = db.open_tree("proj:workspace").unwrap();
        old.insert(b"run\0stale", b"{}".as_slice()).unwrap();
        let meta = json!({ "version": <Workspace as RecordFold>::VERSION, "seq": 1 }).to_string();
        old.insert(b"\x00checkpoint", meta.as_bytes()).unwrap();
        db.open_tree("projections").unwrap().insert("plugin_registry", b"{}".as_slice()).unwrap();
        db.flush().unwrap();
    }
    let store = open(&data);
    let ws = RecordProjector::<Workspace>::load(&store).unwrap();
    assert_eq!(ws.resumed_from(), 0, "records left in sled were trusted");
    assert_eq!(ws.dump().unwrap(), fold_records_until::<Workspace>(&*store, u64::MAX).unwrap());
    let reg = Projector::<PluginRegistry>::load(&store).unwrap();
    assert_eq!(reg.resumed_from(), 0);
    assert_eq!(reg.get().unwrap().0, fold_until::<PluginRegistry>(&*store, u64::MAX).unwrap());
    drop((ws, reg));
    store.close();
    drop(store);
    assert!(data.join(READ_MODELS_FILE).exists());
    let db = sled::Config::new().path(data.join("sled")).open().unwrap();
    let names: Vec<String> = db.tree_names().iter().map(|n| String::from_utf8_lossy(n).to_string()).collect();
    assert!(!names.iter().any(|n| n.starts_with("proj:")), "old read-model trees left in sled: {names:?}");
    assert!(db.open_tree("projections").unwrap().is_empty(), "old checkpoints left in sled");
}

/// Events that write no record (most of the log, for the browser projection) skip their checkpoint
/// while folding; a clean stop still leaves every projection checkpointed at the log's head, so the
/// next start folds nothing.
#[test]
fn a_clean_stop_leaves_every_checkpoint_at_the_head_of_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let data = seeded(tmp.path());
    let store = open(&data);
    let last = store.last_seq();
    let ws = RecordProjector::<Workspace>::load(&store).unwrap();
    assert_eq!(ws.resumed_from(), last, "workspace");
    let br = RecordProjector::<Browser>::load(&store).unwrap();
    assert_eq!(br.resumed_from(), last, "browser");
    assert_eq!(br.dump().unwrap(), fold_records_until::<Browser>(&*store, u64::MAX).unwrap());
}
