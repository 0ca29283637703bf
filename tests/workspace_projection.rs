//! The `workspace` projection (projects, conversations, snapshots, runs, artifacts, GenUI rows):
//! after a mix of real commands across two engine lifetimes, the state the engine keeps (checkpoint
//! plus catch-up) equals a fold of the whole log from scratch; a fold up to an earlier seq is the
//! state as of then.

mod common;

use common::harness::{write_plugin, Engine};
use od::projector::{fold_until, Projector};
use od::store::{EventLog, SledLog, StoreConfig};
use od_projections::Workspace;
use serde_json::json;

const NOW: i64 = 1_800_000_000_000;

fn ops(e: &Engine, tmp: &std::path::Path, round: u32) {
    let dir = tmp.join(format!("plug{round}"));
    write_plugin(
        &dir,
        &format!("plug{round}"),
        "1.0.0",
        json!([ { "id": "critique", "atoms": ["critique-theater"], "repeat": true, "until": "critique.score>=4" } ]),
        "x",
    );
    e.install(&dir);
    let pid = format!("p{round}");
    let (code, _) = e.post("/api/projects", json!({ "id": pid, "pluginId": format!("plug{round}") }));
    assert_eq!(code, 200);
    for _ in 0..3 {
        let (_, ev) = e.run(json!({ "projectId": pid }));
        assert_eq!(ev.last().unwrap()["event"], "end");
    }
    e.run(json!({ "dryRun": { "crash": "discovery" } }));
    let (_, rec) = e.post("/api/applied-plugins", json!({ "pluginId": format!("plug{round}") }));
    assert!(rec["snapshotId"].is_string());
    e.post("/api/projects", json!({ "id": format!("gone{round}") }));
    e.delete(&format!("/api/projects/gone{round}"));
    e.clock.advance(40 * 86_400_000);
    e.post("/api/applied-plugins/prune", json!({}));
}

#[test]
fn live_state_equals_a_fold_of_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = Engine::start(&data, NOW);
    ops(&e, tmp.path(), 1);
    e.stop();
    let e = Engine::start(&data, NOW + 50 * 86_400_000);
    ops(&e, tmp.path(), 2);
    e.stop();

    let store = SledLog::open(StoreConfig::new(&data)).unwrap();
    let last = store.last_seq();
    let live = Projector::<Workspace>::load(&store).unwrap().get().unwrap().0;
    let rebuilt: Workspace = fold_until(&*store, last).unwrap();
    assert_eq!(live, rebuilt);
    assert_eq!(live.runs.len(), 8);
    assert!(live.runs.values().all(|r| r.is_terminal()));
    assert!(live.snapshots.values().any(|s| s.status == "expired"));
    // The state as of an earlier seq is an earlier state.
    let half: Workspace = fold_until(&*store, last / 2).unwrap();
    assert!(half.runs.len() < live.runs.len());
}
