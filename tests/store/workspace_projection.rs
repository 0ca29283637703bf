//! The `workspace` projection (projects, conversations, snapshots, runs, artifacts, GenUI rows):
//! after a mix of real commands across two engine lifetimes, the records the engine keeps on disk
//! (resumed from their checkpoint plus catch-up) equal a fold of the whole log from scratch into
//! memory; a fold up to an earlier seq is the state as of then.

use crate::common;

use common::harness::{write_plugin, Engine};
use od::projector::{fold_records_until, RecordProjector};
use od::store::{EventLog, SledLog, StoreConfig};
use od_projections::workspace_read::{self as wr, RunFilter};
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
    let live = RecordProjector::<Workspace>::load(&(store.clone() as od::store::Store)).unwrap();
    assert!(live.resumed_from() > 0, "the records were folded again from seq 0");
    let rebuilt = fold_records_until::<Workspace>(&*store, last).unwrap();
    assert_eq!(live.dump().unwrap(), rebuilt);
    let runs = wr::runs(&rebuilt, &RunFilter::default(), None, 100, 1000).0;
    assert_eq!(runs.len(), 8);
    assert!(runs.iter().all(|(_, r)| r.is_terminal()));
    let snaps = wr::snapshots(&rebuilt, None, None, 100, 0);
    assert!(snaps.iter().any(|(_, s)| s.status == "expired"));
    // The state as of an earlier seq is an earlier state.
    let half = fold_records_until::<Workspace>(&*store, last / 2).unwrap();
    assert!(wr::runs(&half, &RunFilter::default(), None, 100, 1000).0.len() < runs.len());
}
