//! GenUI surfaces: asked at their trigger with the run held `awaiting-input`, answered once and
//! reused per tier (`cache`), asked again per run, revoked, invalidated by schema drift, timed out
//! on the injected clock (abort / default / skip, also across a restart), requests the snapshot
//! does not allow refused and recorded, invalid answers refused, bulk prefill, and exit 73.

use crate::common;

use common::harness::{of, Engine};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;

fn brief_schema(extra: bool) -> Value {
    let mut props = json!({ "audience": { "type": "string", "minLength": 1 } });
    if extra {
        props["tone"] = json!({ "type": "string" });
    }
    json!({ "type": "object", "properties": props, "required": ["audience"] })
}

/// A plugin with stages `ask` and `make`; `brief` (project tier) asked at `ask`, `style` (run
/// tier) at `make`, `confirm` (conversation tier) by the `todo-write` atom.
fn write_genui_plugin(dir: &Path, version: &str, extra_field: bool, timeouts: Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), "---\nname: asker\ndescription: Asks before it designs.\n---\nAsk first.\n")
        .unwrap();
    let mut surfaces = json!([
        { "id": "brief", "kind": "form", "persist": "project", "trigger": { "stageId": "ask" },
          "prompt": "Who is it for?", "schema": brief_schema(extra_field) },
        { "id": "style", "kind": "choice", "persist": "run", "trigger": { "stageId": "make" },
          "schema": { "type": "string", "enum": ["bold", "calm"] }, "default": "calm" },
        { "id": "confirm", "kind": "confirmation", "persist": "conversation", "trigger": { "atom": "todo-write" } }
    ]);
    for s in surfaces.as_array_mut().unwrap() {
        if let Some(t) = timeouts.get(s["id"].as_str().unwrap()) {
            s["timeout"] = t["timeout"].clone();
            s["onTimeout"] = t["onTimeout"].clone();
        }
    }
    let manifest = json!({
        "specVersion": "1.0.0", "name": "asker", "version": version, "title": "Asker",
        "od": { "kind": "scenario", "taskKind": "new-generation",
                "pipeline": { "stages": [ { "id": "ask", "atoms": ["todo-write"] }, { "id": "make", "atoms": ["file-write"] } ] },
                "genui": { "surfaces": surfaces } }
    });
    std::fs::write(dir.join("open-design.json"), manifest.to_string()).unwrap();
}

fn setup(tmp: &Path, timeouts: Value) -> Engine {
    let e = Engine::start(&tmp.join("data"), NOW);
    let src = tmp.join("asker");
    write_genui_plugin(&src, "1.0.0", false, timeouts);
    e.install(&src);
    let (code, v) = e.post("/api/projects", json!({ "id": "p", "name": "P" }));
    assert_eq!(code, 200, "{v}");
    e
}

/// Reads the run's events from the start until one named `name` (for `surface`, if given).
fn wait_for(e: &Engine, run: &str, name: &str, surface: Option<&str>) -> Value {
    let r = ureq::get(&format!("{}/api/runs/{run}/watch", e.url)).call().unwrap();
    for line in BufReader::new(r.into_reader()).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["event"] == name && surface.is_none_or(|s| v["data"]["surfaceId"] == s) {
            return v["data"].clone();
        }
        assert_ne!(v["event"], "end", "the run ended before {name}: {v}");
    }
    panic!("stream ended before {name}");
}

fn respond(e: &Engine, run: &str, surface: &str, value: Value) -> (u16, Value) {
    e.post(&format!("/api/runs/{run}/genui/{surface}/respond"), json!({ "value": value }))
}

fn status(e: &Engine, run: &str) -> String {
    e.get(&format!("/api/runs/{run}")).1["run"]["status"].as_str().unwrap().to_string()
}

/// Starts a run of `asker` in project p and answers whatever it asks with these answers.
fn run_answering(e: &Engine, conversation: Option<&str>, answers: &[(&str, Value)]) -> (String, Vec<Value>) {
    let mut body = json!({ "projectId": "p", "pluginId": "asker" });
    if let Some(c) = conversation {
        body["conversationId"] = json!(c);
    }
    let id = e.start_run(body);
    for (surface, value) in answers {
        wait_for(e, &id, "genui_surface_request", Some(surface));
        assert_eq!(status(e, &id), "awaiting-input");
        let (code, v) = respond(e, &id, surface, value.clone());
        assert_eq!(code, 200, "{v}");
    }
    let ev = e.watch(&id);
    (id, ev)
}

fn requested(ev: &[Value]) -> Vec<String> {
    of(ev, "genui_surface_request").iter().map(|d| d["surfaceId"].as_str().unwrap().to_string()).collect()
}

fn responded(ev: &[Value]) -> Vec<(String, String)> {
    of(ev, "genui_surface_response")
        .iter()
        .map(|d| (d["surfaceId"].as_str().unwrap().to_string(), d["respondedBy"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn answered_once_then_reused_per_tier_asked_again_per_run_and_after_revoke() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path(), json!({}));
    let answers = [("brief", json!({ "audience": "kids" })), ("confirm", json!(true)), ("style", json!("bold"))];
    let (id, ev) = run_answering(&e, None, &answers);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
    assert_eq!(requested(&ev), ["brief", "confirm", "style"]);
    // The stage waited: the agent of `ask` started only after both of its surfaces were answered.
    let names: Vec<&str> = ev.iter().map(|v| v["event"].as_str().unwrap()).collect();
    let first_start = names.iter().position(|n| *n == "start").unwrap();
    let last_answer_before = names[..first_start].iter().filter(|n| **n == "genui_surface_response").count();
    assert_eq!(last_answer_before, 2);
    // Answers reach the prompt and replay recomposes them.
    let (_, verify) = e.post(&format!("/api/runs/{id}/replay/verify"), json!({}));
    assert_eq!(verify["ok"], true, "{verify}");

    // Second conversation, same project: brief (project tier) from the cache, confirm
    // (conversation tier) and style (run tier) asked again.
    let (_, c) = e.post("/api/projects/p/conversations", json!({ "title": "second" }));
    let c2 = c["conversationId"].as_str().unwrap();
    let (_, ev) = run_answering(&e, Some(c2), &[("confirm", json!(true)), ("style", json!("calm"))]);
    assert_eq!(requested(&ev), ["confirm", "style"], "brief was not asked again");
    assert!(responded(&ev).contains(&("brief".into(), "cache".into())));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");

    // Same conversation again: confirm comes from the cache too; style (run tier) is asked.
    let (_, ev) = run_answering(&e, Some(c2), &[("style", json!("calm"))]);
    assert_eq!(requested(&ev), ["style"]);

    // Everything the project remembers can be seen and revoked.
    let (_, list) = e.get("/api/projects/p/genui");
    assert!(list["surfaces"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["surfaceId"] == "brief" && r["status"] == "resolved"));
    let (code, r) = e.post("/api/projects/p/genui/brief/revoke", json!({}));
    assert_eq!(code, 200);
    assert!(r["invalidated"].as_u64().unwrap() >= 1);
    let (_, list) = e.get("/api/projects/p/genui");
    assert!(list["surfaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["surfaceId"] == "brief")
        .all(|r| r["status"] != "resolved"));
    let (_, ev) = run_answering(&e, Some(c2), &[("brief", json!({ "audience": "adults" })), ("style", json!("calm"))]);
    assert_eq!(requested(&ev), ["brief", "style"], "asked again after the revoke");
}

#[test]
fn a_schema_change_invalidates_the_remembered_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path(), json!({}));
    run_answering(
        &e,
        None,
        &[("brief", json!({ "audience": "kids" })), ("confirm", json!(true)), ("style", json!("bold"))],
    );
    write_genui_plugin(&tmp.path().join("asker"), "1.1.0", true, json!({}));
    let (code, _) = e.post("/api/plugins/asker/upgrade", json!({}));
    assert_eq!(code, 200);
    let (_, ev) =
        run_answering(&e, None, &[("brief", json!({ "audience": "kids", "tone": "warm" })), ("style", json!("bold"))]);
    let inv = of(&ev, "genui_surface_invalidated");
    assert_eq!(inv.len(), 1);
    assert_eq!(inv[0]["surfaceId"], "brief");
    assert_eq!(inv[0]["reason"], "schema-drift");
    assert_eq!(requested(&ev), ["brief", "style"]);
}

#[test]
fn requests_the_snapshot_does_not_allow_are_refused_and_recorded_and_bad_answers_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path(), json!({}));
    let id = e.start_run(json!({ "projectId": "p", "pluginId": "asker" }));
    wait_for(&e, &id, "genui_surface_request", Some("brief"));
    let req = |s: &str, body: Value| e.post(&format!("/api/runs/{id}/genui/{s}/request"), body);
    let (code, v) = req("nope", json!({}));
    assert_eq!((code, v["error"]["code"].as_str().unwrap()), (403, "genui-surface-refused"));
    let (code, v) = req("style", json!({}));
    assert_eq!(code, 403, "style is triggered by stage make; the run is at ask: {v}");
    let (code, _) = req("brief", json!({ "kind": "choice" }));
    assert_eq!(code, 403, "brief is a form");
    let (code, _) = req("confirm", json!({ "atom": "file-write" }));
    assert_eq!(code, 403, "confirm is triggered by the todo-write atom");
    let (_, logs) = e.get(&format!("/api/log/events?stream=run:{id}"));
    let refused = logs["events"].as_array().unwrap().iter().filter(|x| x["event"] == "surface_refused").count();
    assert_eq!(refused, 4);

    let (_, before) = e.get("/api/log/stats");
    for bad in [json!({ "audience": 5 }), json!({}), json!("kids"), json!({ "audience": "" })] {
        let (code, v) = respond(&e, &id, "brief", bad.clone());
        assert_eq!((code, v["error"]["code"].as_str().unwrap()), (422, "invalid-answer"), "{bad}");
        assert!(!v["error"]["data"]["violations"].as_array().unwrap().is_empty());
    }
    let (code, v) = respond(&e, &id, "style", json!("bold"));
    assert_eq!((code, v["error"]["code"].as_str().unwrap()), (404, "genui-surface-not-pending"));
    let (_, after) = e.get("/api/log/stats");
    assert_eq!(before["lastSeq"], after["lastSeq"], "refused answers record nothing");
    assert_eq!(status(&e, &id), "awaiting-input");
    let (code, _) = e.post(&format!("/api/runs/{id}/cancel"), json!({}));
    assert_eq!(code, 200);
    assert_eq!(status(&e, &id), "canceled");
}

#[test]
fn each_on_timeout_on_the_injected_clock() {
    let tmp = tempfile::tempdir().unwrap();
    let t = |on: &str| json!({ "timeout": 60_000, "onTimeout": on });
    let e = setup(tmp.path(), json!({ "brief": t("abort") }));
    // abort: nobody answers the brief; a minute later the run fails.
    let id = e.start_run(json!({ "projectId": "p", "pluginId": "asker" }));
    let req = wait_for(&e, &id, "genui_surface_request", Some("brief"));
    assert_eq!(req["timeoutAt"], NOW + 60_000);
    e.clock.advance(59_999);
    assert_eq!(status(&e, &id), "awaiting-input");
    e.clock.advance(1);
    let ev = e.watch(&id);
    let to = of(&ev, "genui_surface_timeout");
    assert_eq!(to.len(), 1);
    assert_eq!(to[0]["resolution"], "abort");
    let end = &ev.last().unwrap()["data"];
    assert_eq!(
        (end["status"].as_str().unwrap(), end["failureCategory"].as_str().unwrap()),
        ("failed", "genui-timeout")
    );

    // default and skip (a second plugin version, with the clock driven the same way).
    write_genui_plugin(
        &tmp.path().join("asker"),
        "2.0.0",
        false,
        json!({ "brief": t("skip"), "confirm": t("skip"), "style": t("default") }),
    );
    assert_eq!(e.post("/api/plugins/asker/upgrade", json!({})).0, 200);
    let id = e.start_run(json!({ "projectId": "p", "pluginId": "asker" }));
    wait_for(&e, &id, "genui_surface_request", Some("confirm"));
    e.clock.advance(60_000);
    wait_for(&e, &id, "genui_surface_request", Some("style"));
    e.clock.advance(60_000);
    let ev = e.watch(&id);
    let res: Vec<(&str, &str)> = of(&ev, "genui_surface_timeout")
        .iter()
        .map(|d| (d["surfaceId"].as_str().unwrap(), d["resolution"].as_str().unwrap()))
        .collect();
    assert_eq!(res, [("brief", "skip"), ("confirm", "skip"), ("style", "default")]);
    let style = of(&ev, "genui_surface_response").into_iter().find(|d| d["surfaceId"] == "style").unwrap().clone();
    assert_eq!((style["value"].as_str().unwrap(), style["respondedBy"].as_str().unwrap()), ("calm", "timeout"));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
}

#[test]
fn a_waiting_run_survives_a_restart_and_its_timeout_still_fires() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = setup(tmp.path(), json!({ "brief": { "timeout": 60_000, "onTimeout": "skip" } }));
    let id = e.start_run(json!({ "projectId": "p", "pluginId": "asker" }));
    wait_for(&e, &id, "genui_surface_request", Some("brief"));
    e.stop();
    // Restarted 2 minutes later: the run resumes and the timeout is applied at once.
    let e = Engine::start(&data, NOW + 120_000);
    let ev_until = wait_for(&e, &id, "genui_surface_timeout", Some("brief"));
    assert_eq!(ev_until["resolution"], "skip");
    wait_for(&e, &id, "genui_surface_request", Some("confirm"));
    respond(&e, &id, "confirm", json!(true));
    wait_for(&e, &id, "genui_surface_request", Some("style"));
    e.stop();
    // Restarted before that timeout: the run keeps waiting and takes the answer.
    let e = Engine::start(&data, NOW + 130_000);
    assert_eq!(status(&e, &id), "awaiting-input");
    let (code, v) = respond(&e, &id, "style", json!("bold"));
    assert_eq!(code, 200, "{v}");
    let ev = e.watch(&id);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
    assert_eq!(
        of(&ev, "genui_surface_request").iter().filter(|d| d["surfaceId"] == "brief").count(),
        1,
        "not asked twice"
    );
}

#[test]
fn bulk_prefill_answers_ahead_all_or_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path(), json!({}));
    let (_, p) = e.get("/api/projects/p");
    let conv = p["project"]["conversations"][0]["id"].as_str().unwrap().to_string();
    let (_, before) = e.get("/api/log/stats");
    let bad = json!({ "pluginId": "asker", "conversationId": conv, "values": { "brief": { "audience": "kids" }, "confirm": "yes" } });
    let (code, v) = e.post("/api/projects/p/genui/prefill", bad);
    assert_eq!((code, v["error"]["code"].as_str().unwrap()), (422, "invalid-answer"));
    let (code, _) =
        e.post("/api/projects/p/genui/prefill", json!({ "pluginId": "asker", "values": { "style": "bold" } }));
    assert_eq!(code, 400, "run-tier surfaces are asked per run");
    let (_, after) = e.get("/api/log/stats");
    assert_eq!(before["lastSeq"], after["lastSeq"], "nothing written");
    let good = json!({ "pluginId": "asker", "conversationId": conv, "values": { "brief": { "audience": "kids" }, "confirm": true } });
    let (code, v) = e.post("/api/projects/p/genui/prefill", good);
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["surfaces"].as_array().unwrap().len(), 2);
    assert!(v["surfaces"].as_array().unwrap().iter().all(|r| r["respondedBy"] == "auto"));
    let (_, ev) = run_answering(&e, None, &[("style", json!("calm"))]);
    assert_eq!(requested(&ev), ["style"]);
    let cached: Vec<(String, String)> = responded(&ev).into_iter().filter(|(_, by)| by == "cache").collect();
    assert_eq!(cached, [("brief".to_string(), "cache".to_string()), ("confirm".to_string(), "cache".to_string())]);
}

#[test]
fn no_answer_is_refused_at_the_surface_and_a_skip_is_said_as_one() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path(), json!({}));
    let id = e.start_run(json!({ "projectId": "p", "pluginId": "asker" }));
    wait_for(&e, &id, "genui_surface_request", Some("confirm"));
    let path = format!("/api/runs/{id}/genui/confirm/respond");
    for body in [json!({ "value": null }), json!({})] {
        let (code, v) = e.post(&path, body.clone());
        assert_eq!((code, v["error"]["code"].as_str()), (422, Some("invalid-answer")), "{body}: {v}");
        assert!(v.to_string().contains("no answer was given"), "{v}");
    }
    let (code, v) = e.post(&path, json!({ "skip": true, "value": true }));
    assert_eq!((code, &v["error"]["data"]["field"]), (400, &json!("skip")), "{v}");
    assert_eq!(status(&e, &id), "awaiting-input", "nothing was recorded");
    let (code, v) = e.post(&path, json!({ "skip": true }));
    assert_eq!(code, 200, "{v}");
    assert_eq!((&v["surface"]["status"], &v["surface"]["value"]), (&json!("resolved"), &Value::Null), "{v}");
    e.stop();
}

#[test]
fn the_cli_exits_73_when_an_answer_is_needed_and_the_run_goes_on_once_answered() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let src = tmp.path().join("asker");
    write_genui_plugin(&src, "1.0.0", false, json!({}));
    let od = |args: &[&str]| common::harness::od_cli(&data, args);
    assert!(od(&["plugin", "install", src.to_str().unwrap()]).status.success());
    let out = od(&["run", "start", "--plugin", "asker", "--follow", "--no-wait"]);
    assert_eq!(out.status.code(), Some(73), "{}", String::from_utf8_lossy(&out.stderr));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    let d = &err["error"]["data"];
    assert_eq!(err["error"]["code"], "genui-surface-awaiting");
    assert_eq!(d["surfaceId"], "brief");
    assert_eq!(d["kind"], "form");
    assert_eq!(d["persist"], "project");
    assert_eq!(d["prompt"], "Who is it for?");
    assert_eq!(d["schema"]["required"], json!(["audience"]));
    assert!(d["timeoutAt"].as_i64().unwrap() > 0);
    let run = d["runId"].as_str().unwrap();
    let ok = od(&["ui", "respond", "brief", "--run", run, "--value-json", r#"{"audience":"kids"}"#, "--json"]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let bad = od(&["ui", "respond", "confirm", "--run", run, "--value-json", "42"]);
    // confirm was raised with brief (same stage); a wrong answer is refused with exit 2.
    assert_eq!(bad.status.code(), Some(2), "{}", String::from_utf8_lossy(&bad.stderr));
    let wrong = od(&["ui", "respond", "style", "--run", run, "--value", "bold"]);
    assert_eq!(wrong.status.code(), Some(1), "style is not waiting yet");
    // Watching hosts the run again: it goes on to the next question.
    let out = od(&["run", "watch", run, "--no-wait"]);
    assert_eq!(out.status.code(), Some(73));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["data"]["surfaceId"], "confirm");
    // `--value` is typed by the surface: a confirmation takes true/false (as the exit-73 hint says).
    let typo = od(&["ui", "respond", "confirm", "--run", run, "--value", "maybe"]);
    assert_eq!(typo.status.code(), Some(2), "{}", String::from_utf8_lossy(&typo.stderr));
    assert!(String::from_utf8_lossy(&typo.stderr).contains("--value"), "the error names the flag");
    // No answer is not an answer: `null` is refused as "banana" is; passing on it is --skip.
    let empty = od(&["ui", "respond", "confirm", "--run", run, "--value-json", "null"]);
    assert_eq!(empty.status.code(), Some(2), "{}", String::from_utf8_lossy(&empty.stderr));
    assert!(
        String::from_utf8_lossy(&empty.stderr).contains("no answer was given"),
        "{}",
        String::from_utf8_lossy(&empty.stderr)
    );
    let yes = od(&["ui", "respond", "confirm", "--run", run, "--value", "true"]);
    assert!(yes.status.success(), "{}", String::from_utf8_lossy(&yes.stderr));
    let list = od(&[
        "ui",
        "list",
        "--project",
        &{
            let info: Value = serde_json::from_slice(&od(&["run", "info", run, "--json"]).stdout).unwrap();
            info["run"]["projectId"].as_str().unwrap().to_string()
        },
        "--json",
    ]);
    let rows: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert!(rows["surfaces"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["surfaceId"] == "brief" && r["status"] == "resolved"));
    let out = od(&["run", "watch", run, "--no-wait"]);
    assert_eq!(out.status.code(), Some(73), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(od(&["ui", "respond", "style", "--run", run, "--value", "bold"]).status.success());
    let out = od(&["run", "watch", run]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let last: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(last["data"]["status"], "succeeded");
}

#[test]
fn a_plugins_timeout_past_any_clock_is_capped_not_wrapped() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path(), json!({ "brief": { "timeout": i64::MAX, "onTimeout": "skip" } }));
    let id = e.start_run(json!({ "projectId": "p", "pluginId": "asker" }));
    let req = wait_for(&e, &id, "genui_surface_request", Some("brief"));
    assert_eq!(req["timeoutAt"], NOW + od::limits::MAX_TIMEOUT_MS as i64);
    assert_eq!(status(&e, &id), "awaiting-input");
}
