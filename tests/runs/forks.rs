//! Forking runs (issue 16): a fork starts from its parent's recorded state at any kind of point —
//! a stage's start, mid-devloop, while a surface waits, after the end — runs to its end and replays
//! verified; another answer diverges exactly from the answered surface on (`od run diff` shows it);
//! the parent is untouched; bad fork requests are refused naming the field, with nothing written.

use crate::common;

use common::harness::{od_cli, of, watch_url, Engine};
use serde_json::{json, Value};
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;

/// `examples/brancher`: stages `plan`, `generate` (asks `style` at its entry) and a `critique`
/// devloop that ends at the dry-run's third score (2, 3, 4).
const BRANCHER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/brancher");

/// `od <args>` printing for people (as on a terminal).
fn human(data: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(common::harness::OD)
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env_remove("OD_DAEMON_URL")
        .env("OD_OUTPUT", "human")
        .output()
        .unwrap()
}

fn setup(tmp: &Path) -> Engine {
    let e = Engine::start(&tmp.join("data"), NOW);
    e.install(Path::new(BRANCHER));
    e
}

/// The run's `{"id","event","data"}` lines until `stop` says so (or `end`).
fn events_until(e: &Engine, run: &str, stop: impl Fn(&Value) -> bool) -> Vec<Value> {
    watch_url(&e.url, run, "?ids=true", stop)
}

fn all_events(e: &Engine, run: &str) -> Vec<Value> {
    events_until(e, run, |_| false)
}

fn waits_for_style(e: &Engine, run: &str) -> Value {
    let ev = events_until(e, run, |v| v["event"] == "genui_surface_request");
    let last = ev.last().unwrap().clone();
    assert_eq!(last["event"], "genui_surface_request", "{ev:?}");
    last
}

fn answer(e: &Engine, run: &str, value: &str) {
    let (code, v) = e.post(&format!("/api/runs/{run}/genui/style/respond"), json!({ "value": value }));
    assert_eq!(code, 200, "{v}");
}

/// Runs brancher to its end answering `style` with `value`.
fn parent_run(e: &Engine, value: &str) -> (String, Vec<Value>) {
    let id = e.start_run(json!({ "pluginId": "brancher" }));
    waits_for_style(e, &id);
    answer(e, &id, value);
    let ev = all_events(e, &id);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:?}");
    (id, ev)
}

fn fork(e: &Engine, run: &str, body: Value) -> (u16, Value) {
    e.post(&format!("/api/runs/{run}/fork"), body)
}

fn fork_ok(e: &Engine, run: &str, body: Value) -> String {
    let (code, v) = fork(e, run, body);
    assert_eq!(code, 202, "{v}");
    assert_eq!(v["parentRunId"], run);
    v["runId"].as_str().unwrap().to_string()
}

fn verify(e: &Engine, run: &str) -> Value {
    let (code, v) = e.post(&format!("/api/runs/{run}/replay/verify"), json!({}));
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["ok"], true, "{v}");
    v
}

fn devloop(e: &Engine, run: &str) -> Vec<Value> {
    let (code, v) = e.get(&format!("/api/runs/{run}/devloop-iterations"));
    assert_eq!(code, 200, "{v}");
    let mut rows = v["inherited"].as_array().cloned().unwrap_or_default();
    rows.extend(v["iterations"].as_array().unwrap().iter().cloned());
    rows
}

fn id_of(ev: &[Value], name: &str, pick: impl Fn(&Value) -> bool) -> u64 {
    ev.iter().find(|v| v["event"] == name && pick(&v["data"])).unwrap_or_else(|| panic!("no {name}"))["id"]
        .as_u64()
        .unwrap()
}

#[test]
fn forks_at_every_kind_of_point_run_to_their_end_and_replay_verified() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path());
    let (a, parent_ev) = parent_run(&e, "bold");
    let parent_rows = devloop(&e, &a);
    assert_eq!(parent_rows.len(), 5, "plan, generate, three critique rounds: {parent_rows:?}");
    let head = parent_ev.last().unwrap()["id"].as_u64().unwrap();

    // At a stage's start: the fork redoes `generate`, raising `style` again, answered by the fork.
    let at_stage = fork_ok(&e, &a, json!({ "at": "generate", "answers": { "style": "bold" } }));
    // Mid-devloop: the second critique round and on.
    let mid_loop = fork_ok(&e, &a, json!({ "at": "critique:2" }));
    // While `style` waits: the fork waits too, until it is answered.
    let request = id_of(&parent_ev, "genui_surface_request", |_| true);
    let waiting = fork_ok(&e, &a, json!({ "at": request.to_string() }));
    // After the end: nothing is left to do.
    let after_end = fork_ok(&e, &a, json!({ "at": "end" }));

    waits_for_style(&e, &waiting);
    assert_eq!(e.get(&format!("/api/runs/{waiting}")).1["run"]["status"], "awaiting-input");
    answer(&e, &waiting, "bold");

    for (fork_id, own_rows) in [(&at_stage, 4), (&mid_loop, 2), (&waiting, 4), (&after_end, 0)] {
        let ev = all_events(&e, fork_id);
        assert_eq!(ev[0]["event"], "run_forked", "{ev:?}");
        assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{fork_id}: {ev:?}");
        assert_eq!(of(&ev, "devloop_iteration").len(), own_rows, "{fork_id}'s own rounds: {ev:?}");
        // Inherited rows and its own make the same five rows as the parent's.
        let rows = devloop(&e, fork_id);
        let shape =
            |r: &Vec<Value>| r.iter().map(|x| (x["stageId"].clone(), x["iteration"].clone())).collect::<Vec<_>>();
        assert_eq!(shape(&rows), shape(&parent_rows), "{fork_id}");
        let v = verify(&e, fork_id);
        assert_eq!(v["inherited"]["parentRunId"], a.as_str());
        assert_eq!(v["inherited"]["ok"], true);
        let (own, inherited) =
            (v["prompts"].as_array().unwrap().len(), v["inherited"]["prompts"].as_array().unwrap().len());
        assert_eq!(own + inherited, 5, "every stage iteration's prompt is checked once: {v}");
        // The same answer, the same state: the fork recomposes exactly the parent's prompts.
        let (_, d) = e.get(&format!("/api/runs/{a}/diff/{fork_id}"));
        assert!(d["prompts"].as_array().unwrap().iter().all(|p| p["same"] == true), "{d}");
        assert_eq!(d["files"], json!([]), "{d}");
        assert_eq!(d["same"], true, "{d}");
    }
    let mid = all_events(&e, &mid_loop);
    assert_eq!(of(&mid, "pipeline_stage_started")[0]["stageId"], "critique");
    assert_eq!(of(&mid, "pipeline_stage_started")[0]["iteration"], 1);
    let end_fork = all_events(&e, &after_end);
    assert!(of(&end_fork, "start").is_empty(), "after the end no agent runs: {end_fork:?}");

    // The parent did not change.
    let again = all_events(&e, &a);
    assert_eq!(again.last().unwrap()["id"].as_u64().unwrap(), head);
    assert_eq!(again, parent_ev);

    // The family.
    let (_, tree) = e.get(&format!("/api/runs/{a}/tree"));
    let kids: Vec<&str> = tree["forks"].as_array().unwrap().iter().map(|f| f["runId"].as_str().unwrap()).collect();
    assert_eq!(kids, [at_stage.as_str(), mid_loop.as_str(), waiting.as_str(), after_end.as_str()]);
    let grandchild = fork_ok(&e, &mid_loop, json!({ "at": "end" }));
    assert_eq!(all_events(&e, &grandchild).last().unwrap()["data"]["status"], "succeeded");
    verify(&e, &grandchild);
    let (_, tree) = e.get(&format!("/api/runs/{grandchild}/tree"));
    let up: Vec<&str> = tree["ancestors"].as_array().unwrap().iter().map(|f| f["runId"].as_str().unwrap()).collect();
    assert_eq!(up, [a.as_str(), mid_loop.as_str()]);
    let out = human(&e.data, &["run", "tree", &a]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&mid_loop) && text.contains(&grandchild), "{text}");

    // Deleting the project removes its forks' working folders too.
    let forks = [&at_stage, &mid_loop, &waiting, &after_end, &grandchild];
    assert!(forks.iter().any(|f| e.data.join("forks").join(f).is_dir()), "some fork worked in its folder");
    let (_, info) = e.get(&format!("/api/runs/{a}"));
    let project = info["run"]["projectId"].as_str().unwrap().to_string();
    let (code, v) = e.delete(&format!("/api/projects/{project}"));
    assert_eq!(code, 200, "{v}");
    for f in forks {
        assert!(!e.data.join("forks").join(f).exists(), "{f}'s folder is gone");
    }
}

#[test]
fn another_answer_diverges_exactly_from_the_answered_surface_on() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path());
    let (a, parent_ev) = parent_run(&e, "bold");
    let request = id_of(&parent_ev, "genui_surface_request", |_| true);
    let out = od_cli(&e.data, &["run", "fork", &a, "--at", &request.to_string(), "--answer", "style=calm", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let b = v["runId"].as_str().unwrap().to_string();
    assert_eq!(v["forkEventId"], request);
    let ev = all_events(&e, &b);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:?}");
    assert!(of(&ev, "genui_surface_request").is_empty(), "the fork's answer was used: {ev:?}");
    verify(&e, &b);

    let (code, d) = e.get(&format!("/api/runs/{a}/diff/{b}"));
    assert_eq!(code, 200, "{d}");
    assert_eq!(d["sharedUntil"], json!({ "runId": a, "eventId": request }));
    assert_eq!(d["answers"], json!([{ "surfaceId": "style", "a": "bold", "b": "calm" }]));
    // Before the answer everything is the same; from the answered stage on, every prompt differs.
    let prompts: Vec<(String, bool)> = d["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (format!("{}#{}", p["stageId"].as_str().unwrap(), p["iteration"]), p["same"].as_bool().unwrap()))
        .collect();
    let mut expected = vec![("plan#1".to_string(), true), ("generate#1".into(), false)];
    expected.extend((1..=3).map(|i| (format!("critique#{i}"), false)));
    expected.sort();
    let mut got = prompts.clone();
    got.sort();
    assert_eq!(got, expected, "{d}");
    assert_eq!(d["firstDivergentPrompt"], json!({ "stageId": "generate", "iteration": 1 }));
    // The files written after the answer differ, with a unified diff; the plan's did not change.
    let files: Vec<&str> = d["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert!(files.contains(&"dry-run/critique-1.md"), "{d}");
    assert!(!files.contains(&"dry-run/plan-1.md"), "{d}");
    let critique = d["files"].as_array().unwrap().iter().find(|f| f["path"] == "dry-run/critique-1.md").unwrap();
    assert_eq!(critique["status"], "changed");
    let text = critique["diff"].as_str().unwrap();
    assert!(text.contains("--- a/dry-run/critique-1.md") && text.contains("\n-") && text.contains("\n+"), "{text}");

    let out = human(&e.data, &["run", "diff", &a, &b]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("answer style: bold → calm"), "{text}");
    assert!(text.contains("file dry-run/critique-1.md (changed)"), "{text}");

    // The fork works in its own folder, with the parent's files restored as they were recorded.
    let (_, plan) = e.get(&format!("/api/runs/{b}/artifacts"));
    assert!(plan["artifacts"].as_array().is_some());
    let fork_dir = e.data.join("forks").join(&b);
    let parent_plan = od_cli(&e.data, &["files", "read", "dry-run/plan-1.md", "--run", &a]);
    assert!(parent_plan.status.success(), "{}", String::from_utf8_lossy(&parent_plan.stderr));
    assert_eq!(std::fs::read(fork_dir.join("dry-run/plan-1.md")).unwrap(), parent_plan.stdout);
    // A fork reads its inherited files through its own id.
    let inherited = od_cli(&e.data, &["files", "read", "dry-run/plan-1.md", "--run", &b]);
    assert_eq!(inherited.stdout, parent_plan.stdout);
}

#[test]
fn bad_fork_requests_name_the_field_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path());
    let (a, parent_ev) = parent_run(&e, "bold");
    let head = parent_ev.last().unwrap()["id"].as_u64().unwrap();
    let runs_before = e.get("/api/runs").1["runs"].as_array().unwrap().len();
    let prompt = id_of(&parent_ev, "prompt_composed", |d| d["stageId"] == "plan");
    let cases = [
        (json!({ "at": (head + 1).to_string() }), 400, "at"),
        (json!({ "at": "nowhere" }), 400, "at"),
        (json!({ "at": "critique:9" }), 400, "at"),
        (json!({ "at": "critique:0" }), 400, "at"),
        (json!({ "at": (prompt + 1).to_string() }), 400, "at"),
        (json!({ "at": "generate", "answers": { "colour": "red" } }), 400, "answer"),
        (json!({ "at": "generate", "answers": { "style": "loud" } }), 422, "style"),
        (json!({ "at": "generate", "agent": "robot" }), 400, "agent"),
        (json!({ "at": "generate", "snapshotId": "nope" }), 404, ""),
        (json!({ "at": "generate", "pluginVersion": "9.9.9" }), 400, "pluginVersion"),
    ];
    for (body, code, field) in cases {
        let (got, v) = fork(&e, &a, body.clone());
        assert_eq!(got, code, "{body} → {v}");
        assert!(v.to_string().contains(field), "{body} → {v} names {field}");
    }
    let (got, _) = fork(&e, "no-such-run", json!({ "at": "end" }));
    assert_eq!(got, 404);
    assert_eq!(e.get("/api/runs").1["runs"].as_array().unwrap().len(), runs_before, "nothing was written");
    assert_eq!(e.get(&format!("/api/runs/{a}/tree")).1["forks"], json!([]));
    // Inside an invocation the error names where a fork may go instead.
    let (_, v) = fork(&e, &a, json!({ "at": (prompt + 1).to_string() }));
    assert!(v.to_string().contains("inside an agent invocation"), "{v}");
}

#[test]
fn changed_inputs_give_the_fork_its_own_snapshot_and_an_inherited_point_forks_the_ancestor() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path());
    let (a, _) = parent_run(&e, "bold");
    let b = fork_ok(&e, &a, json!({ "at": "plan", "inputs": { "topic": "coffee" }, "answers": { "style": "bold" } }));
    let ev = all_events(&e, &b);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:?}");
    verify(&e, &b);
    let (_, d) = e.get(&format!("/api/runs/{a}/diff/{b}"));
    assert_eq!(d["inputs"], json!([{ "key": "topic", "a": "tea", "b": "coffee" }]), "{d}");
    assert_ne!(d["a"]["snapshotId"], d["b"]["snapshotId"]);
    assert_eq!(d["answers"], json!([]), "the same answer, from the fork: {d}");
    assert_eq!(d["firstDivergentPrompt"], json!({ "stageId": "plan", "iteration": 1 }));
    // The parent's snapshot is untouched.
    let (_, ra) = e.get(&format!("/api/runs/{a}"));
    assert_eq!(ra["run"]["appliedPluginSnapshotId"], d["a"]["snapshotId"]);

    // Another agent from the devloop on: a script whose critic is satisfied at once.
    let quick = fork_ok(&e, &a, json!({ "at": "critique:1", "agent": "dry-run", "dryRun": { "critiqueScores": [5] } }));
    let ev = all_events(&e, &quick);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:?}");
    let rounds = of(&ev, "devloop_iteration");
    assert_eq!(rounds.len(), 1, "{ev:?}");
    assert_eq!(rounds[0]["termination"], "until-satisfied");
    let (_, d) = e.get(&format!("/api/runs/{a}/diff/{quick}"));
    let changed: Vec<(String, u64)> = d["devloop"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["stageId"].as_str().unwrap().to_string(), r["iteration"].as_u64().unwrap()))
        .collect();
    assert_eq!(changed, [("critique".to_string(), 1), ("critique".into(), 2), ("critique".into(), 3)], "{d}");
    verify(&e, &quick);

    // C forked A after its end, so `generate` is in A's part of C's history: a fork of C there is
    // a fork of A.
    let c = fork_ok(&e, &a, json!({ "at": "end" }));
    all_events(&e, &c);
    let (code, v) = fork(&e, &c, json!({ "at": "generate", "answers": { "style": "calm" } }));
    assert_eq!(code, 202, "{v}");
    assert_eq!(v["parentRunId"], a.as_str(), "the point is in A's part of C's history: {v}");
    let g = v["runId"].as_str().unwrap().to_string();
    assert_eq!(all_events(&e, &g).last().unwrap()["data"]["status"], "succeeded");
    verify(&e, &g);
}
