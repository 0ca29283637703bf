//! Runs through the HTTP API with the dry-run agent: the first event, stage order, devloops that
//! converge and that hit the ceiling, each `onFailure`, break-loop, cancel, idempotent starts,
//! the `build-test` worker, and run/project errors.

use crate::common;

use common::harness::{names, of, write_plugin, Engine};
use serde_json::{json, Value};

const NOW: i64 = 1_800_000_000_000;

fn new_gen_inputs() -> Value {
    json!({ "topic": "tea shop", "audience": "tea lovers", "artifactKind": "landing-page" })
}

#[test]
fn a_pipelined_run_starts_with_its_first_stage_and_walks_the_stages_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    let (id, ev) = e.run(json!({ "pluginId": "od-new-generation", "pluginInputs": new_gen_inputs() }));
    assert_eq!(ev[0]["event"], "pipeline_stage_started", "first event: {}", ev[0]);
    assert_eq!(ev[0]["data"]["stageId"], "discovery");
    assert_eq!(ev[0]["data"]["iteration"], 0);
    let stages: Vec<(String, u64)> = of(&ev, "pipeline_stage_started")
        .iter()
        .map(|d| (d["stageId"].as_str().unwrap().to_string(), d["iteration"].as_u64().unwrap()))
        .collect();
    let expect: Vec<(String, u64)> =
        [("discovery", 0), ("plan", 0), ("generate", 0), ("critique", 0), ("critique", 1), ("critique", 2)]
            .iter()
            .map(|(s, i)| (s.to_string(), *i))
            .collect();
    assert_eq!(stages, expect);
    // Every stage iteration composes its prompt before the agent starts, and completes after.
    let n = names(&ev);
    for (i, name) in n.iter().enumerate() {
        if name == "pipeline_stage_started" {
            assert_eq!(n[i + 1], "prompt_composed");
            assert_eq!(n[i + 2], "start");
        }
    }
    let end = ev.last().unwrap();
    assert_eq!(end["event"], "end");
    assert_eq!(end["data"]["status"], "succeeded");
    assert_eq!(end["data"]["code"], 0);
    // The critique devloop converged at iteration 3 (dry-run scores 2, 3, 4; until score >= 4).
    let (_, rows) = e.get(&format!("/api/runs/{id}/devloop-iterations"));
    let crit: Vec<&Value> =
        rows["iterations"].as_array().unwrap().iter().filter(|r| r["stageId"] == "critique").collect();
    assert_eq!(crit.len(), 3);
    assert_eq!(crit.iter().map(|r| r["iteration"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(crit[2]["termination"], "until-satisfied");
    assert_eq!(crit[2]["matched"], "critique.score>=4");
    assert_eq!(crit[0]["critiqueSummary"], "critique.score=2");
    // Asked for, the reference's derived lines follow their events: each critique round, and the
    // agent's text; by default there are none.
    assert!(of(&ev, "message_chunk").is_empty() && of(&ev, "critique.round_end").is_empty());
    let ev = e.watch_query(&id, "?derived=true");
    let rounds: Vec<(u64, String, f64)> = of(&ev, "critique.round_end")
        .iter()
        .map(|r| {
            (
                r["round"].as_u64().unwrap(),
                r["decision"].as_str().unwrap().to_string(),
                r["composite"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(rounds, vec![(1, "continue".into(), 2.0), (2, "continue".into(), 3.0), (3, "ship".into(), 4.0)]);
    let chunks = of(&ev, "message_chunk");
    let agent_text: Vec<&Value> = of(&ev, "agent").into_iter().filter(|a| a["type"] == "text_delta").collect();
    assert_eq!(chunks.len(), agent_text.len());
    assert!(
        !chunks.is_empty()
            && chunks.iter().zip(&agent_text).all(|(c, a)| c["text"] == a["delta"] && c["kind"] == "message_chunk")
    );
    // Over SSE the derived frames carry no id: an id still names one log event.
    let sse = ureq::get(&format!("{}/api/runs/{id}/events?derived=true", e.url)).call().unwrap().into_string().unwrap();
    let frames: Vec<&str> = sse.split("\n\n").filter(|f| f.contains("event: ")).collect();
    let derived: Vec<&&str> = frames.iter().filter(|f| f.contains("event: critique.round_end")).collect();
    assert_eq!(derived.len(), 3, "{sse}");
    assert!(derived.iter().all(|f| !f.contains("id: ")), "{derived:?}");
    assert_eq!(frames.iter().filter(|f| f.starts_with("id: ")).count(), n.len(), "one id per event");
    let completed = of(&ev, "pipeline_stage_completed");
    assert_eq!(completed.last().unwrap()["converged"], true);
    assert_eq!(completed[3]["converged"], false);
    // The run's status and its artifacts with provenance.
    let (_, run) = e.get(&format!("/api/runs/{id}"));
    assert_eq!(run["run"]["status"], "succeeded");
    let arts = of(&ev, "artifact");
    assert!(arts.iter().any(|a| a["path"] == "index.html" && a["artifactKind"] == "html"));
    for a in &arts {
        assert_eq!(a["sourcePluginSnapshotId"], run["run"]["appliedPluginSnapshotId"]);
        assert_eq!(a["sourceTaskKind"], "new-generation");
    }
    let project = run["run"]["projectId"].as_str().unwrap();
    let (_, files) = e.get(&format!("/api/projects/{project}/files"));
    assert!(files["files"].as_array().unwrap().iter().any(|f| f["path"] == "index.html"));
}

fn local(e: &Engine, tmp: &std::path::Path, name: &str, stages: Value) {
    let dir = tmp.join(name);
    write_plugin(&dir, name, "1.0.0", stages, "Do the work.");
    e.install(&dir);
}

#[test]
fn a_devloop_that_never_converges_stops_at_the_ceiling() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    local(
        &e,
        tmp.path(),
        "loop",
        json!([ { "id": "critique", "atoms": ["critique-theater"], "repeat": true, "until": "critique.score>=5" } ]),
    );
    let (id, ev) = e.run(json!({ "pluginId": "loop", "dryRun": { "critiqueScores": [1] } }));
    assert_eq!(of(&ev, "pipeline_stage_started").len(), 10, "OD_MAX_DEVLOOP_ITERATIONS defaults to 10");
    let (_, rows) = e.get(&format!("/api/runs/{id}/devloop-iterations"));
    let rows = rows["iterations"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 10);
    assert_eq!(rows[9]["termination"], "iteration-cap");
    assert!(rows[..9].iter().all(|r| r["termination"] == ""));
    assert_eq!(rows[9]["signals"]["iterations"], 10);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "reaching the cap does not fail the run");
}

fn failing(on_failure: &str) -> Value {
    json!([
        { "id": "first", "atoms": ["todo-write"], "onFailure": on_failure },
        { "id": "second", "atoms": ["todo-write"] }
    ])
}

#[test]
fn on_failure_abort_skip_and_retry() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    for mode in ["abort", "skip", "retry"] {
        local(&e, tmp.path(), &format!("fail-{mode}"), failing(mode));
    }
    // abort: the run fails at the first stage; the second never starts.
    let (_, ev) = e.run(json!({ "pluginId": "fail-abort", "dryRun": { "fail": { "first": 99 } } }));
    let failed = of(&ev, "pipeline_stage_failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["action"], "abort");
    assert!(!of(&ev, "pipeline_stage_started").iter().any(|s| s["stageId"] == "second"));
    let end = &ev.last().unwrap()["data"];
    assert_eq!(end["status"], "failed");
    assert_eq!(end["failureCategory"], "agent-error");
    assert!(end["failureDetail"].as_str().unwrap().contains("scripted failure"));

    // skip: the stage is recorded as failed and skipped; the run goes on and succeeds.
    let (_, ev) = e.run(json!({ "pluginId": "fail-skip", "dryRun": { "fail": { "first": 99 } } }));
    assert_eq!(of(&ev, "pipeline_stage_failed")[0]["action"], "skip");
    let done = of(&ev, "pipeline_stage_completed");
    assert_eq!(done[0]["stageId"], "first");
    assert_eq!(done[0]["converged"], false);
    assert_eq!(done[1]["stageId"], "second");
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");

    // retry: two failures, then the third attempt works.
    let (_, ev) = e.run(json!({ "pluginId": "fail-retry", "dryRun": { "fail": { "first": 2 } } }));
    let failed = of(&ev, "pipeline_stage_failed");
    assert_eq!(failed.iter().map(|f| f["action"].as_str().unwrap()).collect::<Vec<_>>(), ["retry", "retry"]);
    assert_eq!(failed.iter().map(|f| f["attempt"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(of(&ev, "start").iter().filter(|s| s["stageId"] == "first").count(), 3);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");

    // retry that keeps failing gives up after 3 attempts and aborts.
    let (_, ev) = e.run(json!({ "pluginId": "fail-retry", "dryRun": { "fail": { "first": 99 } } }));
    let actions: Vec<&str> = of(&ev, "pipeline_stage_failed").iter().map(|f| f["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["retry", "retry", "abort"]);
    assert_eq!(ev.last().unwrap()["data"]["status"], "failed");

    // A crash is a failure too, with its own category.
    let (_, ev) = e.run(json!({ "pluginId": "fail-abort", "dryRun": { "crash": "first" } }));
    assert_eq!(ev.last().unwrap()["data"]["failureCategory"], "agent-crashed");
}

#[test]
fn cancel_stops_a_running_run_and_a_repeated_client_request_id_returns_the_same_run() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    local(
        &e,
        tmp.path(),
        "two",
        json!([ { "id": "a", "atoms": ["todo-write"] }, { "id": "b", "atoms": ["todo-write"] } ]),
    );
    let body = json!({ "pluginId": "two", "clientRequestId": "req-1", "dryRun": { "waitForCancel": "b" } });
    let (code, first) = e.post("/api/runs", body.clone());
    assert_eq!(code, 202);
    assert_eq!(first["reused"], false);
    let (code, again) = e.post("/api/runs", body);
    assert_eq!(code, 202);
    assert_eq!(again["reused"], true);
    assert_eq!(again["runId"], first["runId"]);
    let id = first["runId"].as_str().unwrap();
    // Wait (on the event stream, not a clock) until stage b's agent started, then cancel.
    let r = ureq::get(&format!("{}/api/runs/{id}/watch", e.url)).call().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(r.into_reader()));
    loop {
        let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        if v["event"] == "start" && v["data"]["stageId"] == "b" {
            break;
        }
    }
    let (code, c) = e.post(&format!("/api/runs/{id}/cancel"), json!({}));
    assert_eq!(code, 200);
    assert_eq!(c["run"]["status"], "canceled");
    let ev = e.watch(id);
    let end = &ev.last().unwrap()["data"];
    assert_eq!(end["status"], "canceled");
    let (_, runs) = e.get("/api/runs?status=active");
    assert!(runs["runs"].as_array().unwrap().is_empty());
    // Responding to an ended run is refused.
    let (code, err) = e.post(&format!("/api/runs/{id}/respond"), json!({ "action": "break-loop" }));
    assert_eq!(code, 409);
    assert_eq!(err["error"]["code"], "run-state");
}

#[test]
fn build_test_runs_the_project_commands_and_records_their_signals() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    local(
        &e,
        tmp.path(),
        "bt",
        json!([ { "id": "verify", "atoms": ["patch-edit", "build-test"], "repeat": true,
                  "until": "(build.passing && tests.passing) || iterations>=5" } ]),
    );
    // The tests pass from the second try on: the first run leaves the marker they look for.
    let meta = json!({ "buildCommand": "true", "testCommand": "test -f marker || { touch marker; exit 1; }" });
    let (code, p) = e.post("/api/projects", json!({ "name": "bt", "metadata": meta }));
    assert_eq!(code, 200, "{p}");
    let project = p["project"]["id"].as_str().unwrap();
    let (id, ev) = e.run(json!({ "projectId": project, "pluginId": "bt" }));
    let sig: Vec<(String, Value, String)> = of(&ev, "signal")
        .iter()
        .map(|s| (s["name"].as_str().unwrap().into(), s["value"].clone(), s["source"].as_str().unwrap().into()))
        .collect();
    assert_eq!(
        sig,
        [
            ("build.passing".into(), json!(true), "worker:build-test".into()),
            ("tests.passing".into(), json!(false), "worker:build-test".into()),
            ("build.passing".into(), json!(true), "worker:build-test".into()),
            ("tests.passing".into(), json!(true), "worker:build-test".into()),
        ]
    );
    let (_, rows) = e.get(&format!("/api/runs/{id}/devloop-iterations"));
    let rows = rows["iterations"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["matched"], "build.passing==true && tests.passing==true");
    assert!(tmp.path().join("data/projects").join(project).join("marker").exists());
}

#[test]
fn build_test_commands_leave_nothing_running() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    local(&e, tmp.path(), "bt", json!([ { "id": "verify", "atoms": ["build-test"] } ]));
    let pids = tmp.path().join("pids");
    let meta = json!({
        "buildCommand": format!("sleep 1007 >/dev/null 2>&1 & echo $! >> {0}; setsid sleep 1008 >/dev/null 2>&1 & echo $! >> {0}", pids.display()),
        "testCommand": "true",
    });
    let (code, p) = e.post("/api/projects", json!({ "name": "bt", "metadata": meta }));
    assert_eq!(code, 200, "{p}");
    let (_, ev) = e.run(json!({ "projectId": p["project"]["id"], "pluginId": "bt" }));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
    let started: Vec<u32> = std::fs::read_to_string(&pids).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(started.len(), 2);
    let running = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while started.iter().any(|p| running(*p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let left: Vec<u32> = started.into_iter().filter(|p| running(*p)).collect();
    for p in &left {
        let _ = std::process::Command::new("kill").args(["-9", &p.to_string()]).status();
    }
    assert!(left.is_empty(), "build-test helpers outlived the run: {left:?}");
}

#[test]
fn a_refused_run_writes_nothing_not_even_its_project() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = Engine::start(&data, NOW);
    let (_, before) = e.get("/api/log/stats");
    let projects = || std::fs::read_dir(data.join("projects")).map_or(0, |d| d.count());
    let folders = projects();
    // A 70 KB input makes the run's snapshot larger than an event may be: 413, and no project,
    // conversation or folder is left behind.
    let inputs = json!({ "topic": "t".repeat(70_000), "audience": "a", "artifactKind": "b" });
    let (code, v) = e.post("/api/runs", json!({ "pluginId": "od-new-generation", "pluginInputs": inputs }));
    assert_eq!(code, 413, "{v}");
    let (_, after) = e.get("/api/log/stats");
    assert_eq!(before["lastSeq"], after["lastSeq"], "nothing written");
    assert_eq!(projects(), folders, "no project folder made");
    assert!(e.get("/api/projects").1["projects"].as_array().unwrap().is_empty());
    // The same for a project created with a plugin.
    let (code, v) =
        e.post("/api/projects", json!({ "name": "big", "pluginId": "od-new-generation", "pluginInputs": inputs }));
    assert_eq!(code, 413, "{v}");
    assert_eq!(e.get("/api/log/stats").1["lastSeq"], before["lastSeq"], "nothing written");
    assert_eq!(projects(), folders, "no project folder made");
}

#[test]
fn bad_requests_name_the_field_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let (_, before) = e.get("/api/log/stats");
    let cases = [
        (json!({ "projectId": "nope" }), 404, "project-not-found"),
        (json!({ "pluginId": "no-such-plugin" }), 404, "plugin-not-found"),
        (json!({ "pluginId": "od-new-generation" }), 422, "missing-input"),
        (json!({ "agent": "robot" }), 400, "invalid-input"),
        (json!({ "agent": "exec" }), 400, "invalid-input"),
        (json!({ "appliedPluginSnapshotId": "missing" }), 404, "snapshot-not-found"),
        (json!({ "bogus": 1 }), 400, "invalid-input"),
    ];
    for (body, code, err) in cases {
        let (c, v) = e.post("/api/runs", body.clone());
        assert_eq!((c, v["error"]["code"].as_str().unwrap()), (code, err), "{body} → {v}");
    }
    // Timeouts past what an Instant can hold are refused up front, naming the field.
    for field in ["agentTimeoutMs", "agentIdleTimeoutMs"] {
        let body = json!({ "agent": "exec", "agentCommand": ["true"], field: u64::MAX });
        let (c, v) = e.post("/api/runs", body);
        assert_eq!((c, v["error"]["code"].as_str().unwrap()), (400, "invalid-input"), "{field}: {v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(field), "{field}: {v}");
    }
    let (_, after) = e.get("/api/log/stats");
    assert_eq!(before["lastSeq"], after["lastSeq"], "nothing written");
    assert_eq!(e.get("/api/runs/nope").0, 404);
    assert_eq!(e.get("/api/runs/nope/watch").0, 404);
}

#[test]
fn a_run_without_a_plugin_uses_the_projects_pinned_snapshot_or_od_default() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let (_, ev) = e.run(json!({ "message": "a poster" }));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
    let (_, runs) = e.get("/api/runs");
    assert_eq!(runs["runs"][0]["pluginId"], "od-default");
    // A project created with a plugin pins its snapshot; a bare run there reuses it.
    let (code, p) = e.post(
        "/api/projects",
        json!({ "id": "shop", "name": "Shop", "pluginId": "od-new-generation", "inputs": new_gen_inputs() }),
    );
    assert_eq!(code, 200, "{p}");
    let pinned = p["appliedPluginSnapshotId"].as_str().unwrap().to_string();
    assert_eq!(p["project"]["appliedPluginSnapshotId"], pinned.as_str());
    let (id, ev) = e.run(json!({ "projectId": "shop" }));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
    let (_, run) = e.get(&format!("/api/runs/{id}"));
    assert_eq!(run["run"]["appliedPluginSnapshotId"], pinned.as_str());
    assert_eq!(of(&ev, "pipeline_stage_started")[0]["snapshotId"], pinned.as_str());
    // The same id again is a conflict, with nothing written.
    let (code, v) = e.post("/api/projects", json!({ "id": "shop" }));
    assert_eq!((code, v["error"]["code"].as_str().unwrap()), (409, "already-exists"));
}

#[test]
fn a_burst_of_runs_all_end_and_every_watcher_sees_its_end() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let url = e.url.clone();
    let threads: Vec<_> = (0..50)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let body = json!({ "pluginId": "od-new-generation", "pluginInputs": new_gen_inputs() });
                let r = ureq::post(&format!("{url}/api/runs")).send_json(body).unwrap();
                let id = r.into_json::<Value>().unwrap()["runId"].as_str().unwrap().to_string();
                let agent = ureq::AgentBuilder::new().timeout_read(std::time::Duration::from_secs(60)).build();
                let r = agent.get(&format!("{url}/api/runs/{id}/watch")).call().unwrap();
                let mut last = Value::Null;
                let mut n = 0;
                for line in std::io::BufRead::lines(std::io::BufReader::new(r.into_reader())) {
                    last = serde_json::from_str(&line.expect("the watch stream delivers until end")).unwrap();
                    n += 1;
                }
                (last, n)
            })
        })
        .collect();
    for t in threads {
        let (last, n) = t.join().unwrap();
        assert_eq!(last["event"], "end");
        assert_eq!(last["data"]["status"], "succeeded");
        assert!(n > 40);
    }
}

#[test]
fn done_is_the_spec_s_word_for_succeeded_in_run_lists() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let inputs = json!({ "topic": "tea", "audience": "tea lovers", "artifactKind": "landing-page" });
    let (id, ev) = e.run(json!({ "pluginId": "od-new-generation", "pluginInputs": inputs }));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
    let ids = |q: &str| -> Vec<String> {
        let (code, v) = e.get(&format!("/api/runs?status={q}"));
        assert_eq!(code, 200, "{v}");
        v["runs"].as_array().unwrap().iter().map(|r| r["runId"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(ids("done"), vec![id.clone()]);
    assert_eq!(ids("done"), ids("succeeded"));
    assert!(ids("failed").is_empty());
    let (code, v) = e.get("/api/runs?status=finished");
    assert_eq!(code, 400, "{v}");
}

#[test]
fn canceling_a_run_that_already_ended_says_so_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let (id, ev) = e.run(json!({}));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
    let (code, r) = e.post(&format!("/api/runs/{id}/cancel"), json!({}));
    assert_eq!((code, &r["alreadyEnded"], &r["run"]["status"]), (200, &json!(true), &json!("succeeded")), "{r}");
    let (code, v) = e.od_json(&["run", "cancel", &id]);
    assert_eq!(code, 76, "{v}");
    assert_eq!(v["error"]["code"], "run-ended", "{v}");
    assert_eq!(v["error"]["data"]["status"], "succeeded", "{v}");
    let (_, r) = e.get(&format!("/api/runs/{id}"));
    assert_eq!(r["run"]["status"], "succeeded", "{r}");
    e.stop();
}
