//! What a run costs the log: a dry-run run that waits on nothing is recorded in as few commits as
//! its contract allows — its creation (run, snapshot, project: one atomic append), its opening (the
//! first stage start, sent at once so watchers see it), and everything else the executor recorded,
//! with its `end`, in one more. Counted as fdatasyncs of the log's files through
//! the injectable file layer (one per group commit), not timed.

use crate::common;
use common::faults::{FaultFiles, Layer, Op};
use common::harness::{names, Engine};
use serde_json::{json, Value};
use std::sync::Arc;

const NOW: i64 = 1_800_000_000_000;

fn body() -> Value {
    json!({ "pluginId": "od-new-generation", "agent": "dry-run",
            "pluginInputs": { "topic": "tea", "audience": "tea lovers", "artifactKind": "landing-page" } })
}

#[test]
fn a_dry_run_run_costs_three_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let faults = FaultFiles::new();
    let layer = faults.clone();
    let e = Engine::start_with(&tmp.path().join("data"), NOW, move |cfg| cfg.files = Arc::new(Layer(layer)));
    // A first run installs nothing more, but warms what a first run may record once.
    let (_, first) = e.run(body());
    assert_eq!(first.last().unwrap()["data"]["status"], "succeeded");
    let mut per_run = Vec::new();
    for _ in 0..3 {
        let before = faults.calls(Op::Sync);
        let (_, ev) = e.run(body());
        per_run.push(faults.calls(Op::Sync) - before);
        assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
        // Every stage iteration of the pipeline is there, in order, whatever the batching.
        let stages: Vec<String> = ev
            .iter()
            .filter(|v| v["event"] == "pipeline_stage_started")
            .map(|v| format!("{}#{}", v["data"]["stageId"].as_str().unwrap(), v["data"]["iteration"]))
            .collect();
        assert!(stages.len() >= 4, "{stages:?}");
        let n = names(&ev);
        assert_eq!(n.iter().filter(|x| *x == "end").count(), 1);
    }
    // One commit for the creation, one for the opening, one for the rest and the end (before the
    // executor buffered what it records: 10 to 15). The executor also sends what it buffered when
    // the agent's future is pending and nothing else is ready — which depends on scheduling, so a
    // loaded machine sees an extra commit now and then: the fewest is the run's own cost, and no
    // run may come near the unbuffered count.
    let fewest = *per_run.iter().min().unwrap();
    assert!(fewest <= 3, "fdatasyncs per run: {per_run:?}");
    assert!(per_run.iter().all(|n| *n <= 5), "fdatasyncs per run: {per_run:?}");
    e.stop();
}
