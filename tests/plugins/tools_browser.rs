//! Browser-action round trips over HTTP: a session advertises its tools into a live run, a call
//! dispatches `browser_action_request` on the run's stream and waits; the browser posts the result
//! (`POST /api/runs/:runId/actions/:invocationId/result`). Timeouts on the hand-driven clock,
//! concurrent invocations, supersede, consent refusal, refused results, and restart recovery.

use crate::common;

use common::harness::{of, Engine};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Lines};
use std::thread::JoinHandle;

const NOW: i64 = 1_800_000_000_000;

fn tool(name: &str, view: &str) -> Value {
    json!({ "name": name, "description": format!("Move the {view} view."), "surface": "browser", "viewStateOnly": true,
            "view": view, "inputSchema": { "type": "object", "properties": { "to": { "type": "string" } }, "required": ["to"] } })
}

/// A live run with a session advertising `ui.navigate` (view main), `ui.scroll` (view main) and
/// `ui.panel` (view panel).
fn live_run(e: &Engine) -> String {
    let id = e.start_run(json!({ "dryRun": { "waitForCancel": "discovery" } }));
    let tools = json!([tool("ui.navigate", "main"), tool("ui.scroll", "main"), tool("ui.panel", "panel")]);
    let (code, v) = e.post("/api/browser-sessions/tab-1", json!({ "runId": id, "tools": tools }));
    assert_eq!(code, 200, "{v}");
    id
}

/// The run's ND-JSON event stream, read as the browser would.
struct Tail(Lines<BufReader<Box<dyn std::io::Read + Send + Sync>>>);

impl Tail {
    fn open(e: &Engine, run: &str) -> Self {
        let r = ureq::get(&format!("{}/api/runs/{run}/watch", e.url)).call().unwrap();
        Tail(BufReader::new(r.into_reader()).lines())
    }
    /// The data of the next event named `name`.
    fn next(&mut self, name: &str) -> Value {
        for line in self.0.by_ref() {
            let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
            if v["event"] == name {
                return v["data"].clone();
            }
        }
        panic!("the stream ended before {name}");
    }
}

fn call_async(e: &Engine, run: &str, name: &str, input: Value, timeout_ms: Option<i64>) -> JoinHandle<(u16, Value)> {
    let url = format!("{}/api/tools/call", e.url);
    let body = json!({ "name": name, "input": input, "runId": run, "timeoutMs": timeout_ms });
    std::thread::spawn(move || match ureq::post(&url).send_json(body) {
        Ok(r) => (r.status(), r.into_json().unwrap()),
        Err(ureq::Error::Status(c, r)) => (c, r.into_json().unwrap()),
        Err(e) => panic!("{e}"),
    })
}

fn result_path(run: &str, inv: &Value) -> String {
    format!("/api/runs/{run}/actions/{}/result", inv.as_str().unwrap())
}

#[test]
fn a_call_round_trips_through_the_run_stream_and_a_second_result_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    let run = live_run(&e);
    let mut tail = Tail::open(&e, &run);
    let caller = call_async(&e, &run, "ui.navigate", json!({ "to": "/media" }), None);
    let req = tail.next("browser_action_request");
    assert_eq!(
        (req["tool"].clone(), req["input"].clone(), req["protocolVersion"].clone()),
        (json!("ui.navigate"), json!({ "to": "/media" }), json!(1))
    );
    assert_eq!(req["timeoutAt"], NOW + 30_000, "the default timeout, on the engine's clock");
    let (code, v) =
        e.post(&result_path(&run, &req["invocationId"]), json!({ "ok": true, "result": { "at": "/media" } }));
    assert_eq!(code, 200, "{v}");
    let (code, got) = caller.join().unwrap();
    assert_eq!(code, 200);
    assert_eq!(
        (got["ok"].clone(), got["result"].clone(), got["invocationId"].clone()),
        (json!(true), json!({ "at": "/media" }), req["invocationId"].clone())
    );
    let res = tail.next("browser_action_result");
    assert_eq!((res["resolvedBy"].clone(), res["ok"].clone()), (json!("browser"), json!(true)));

    let (code, dup) = e.post(&result_path(&run, &req["invocationId"]), json!({ "ok": true, "result": 1 }));
    assert_eq!((code, dup["error"]["code"].clone()), (409, json!("invocation-resolved")));
    let (code, unknown) = e.post(&format!("/api/runs/{run}/actions/inv_nope/result"), json!({ "ok": true }));
    assert_eq!((code, unknown["error"]["code"].clone()), (404, json!("invocation-not-found")));
    let (_, actions) = e.get(&format!("/api/runs/{run}/actions"));
    assert_eq!(actions["actions"].as_array().unwrap().len(), 1, "refused results recorded nothing");
    assert_eq!(actions["actions"][0]["status"], "ok");
}

#[test]
fn no_result_before_the_deadline_is_a_timeout_and_a_late_result_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    let run = live_run(&e);
    let mut tail = Tail::open(&e, &run);
    let caller = call_async(&e, &run, "ui.panel", json!({ "to": "layers" }), Some(5_000));
    let req = tail.next("browser_action_request");
    e.clock.advance(4_999);
    let (_, pending) = e.get(&format!("/api/runs/{run}/actions"));
    assert_eq!(pending["actions"][0]["status"], "pending", "not before the deadline");
    e.clock.advance(1);
    let (code, got) = caller.join().unwrap();
    assert_eq!((code, got["ok"].clone(), got["error"]["code"].clone()), (200, json!(false), json!("TIMEOUT")));
    assert_eq!(tail.next("browser_action_result")["resolvedBy"], "timeout");
    let (code, late) = e.post(&result_path(&run, &req["invocationId"]), json!({ "ok": true, "result": null }));
    assert_eq!((code, late["error"]["code"].clone()), (409, json!("invocation-resolved")));
}

#[test]
fn independent_invocations_are_in_flight_at_once_and_each_gets_its_own_result() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    let run = live_run(&e);
    // A second session in the same run mounts another view.
    let (code, _) =
        e.post("/api/browser-sessions/tab-2", json!({ "runId": run, "tools": [tool("ui.inspect", "inspector")] }));
    assert_eq!(code, 200);
    let mut tail = Tail::open(&e, &run);
    let a = call_async(&e, &run, "ui.navigate", json!({ "to": "a" }), None);
    let ra = tail.next("browser_action_request");
    let b = call_async(&e, &run, "ui.panel", json!({ "to": "b" }), None);
    let rb = tail.next("browser_action_request");
    let c = call_async(&e, &run, "ui.inspect", json!({ "to": "c" }), None);
    let rc = tail.next("browser_action_request");
    assert_eq!(rc["sessionId"], "tab-2");
    let (_, acts) = e.get(&format!("/api/runs/{run}/actions"));
    assert_eq!(of_status(&acts, "pending"), 3, "three waiting at once");
    for (r, n) in [(&rc, 3), (&ra, 1), (&rb, 2)] {
        let (code, v) = e.post(&result_path(&run, &r["invocationId"]), json!({ "ok": true, "result": n }));
        assert_eq!(code, 200, "{v}");
    }
    for (h, n, r) in [(a, 1, &ra), (b, 2, &rb), (c, 3, &rc)] {
        let (_, got) = h.join().unwrap();
        assert_eq!((got["result"].clone(), got["invocationId"].clone()), (json!(n), r["invocationId"].clone()));
    }
}

fn of_status(acts: &Value, status: &str) -> usize {
    acts["actions"].as_array().unwrap().iter().filter(|a| a["status"] == status).count()
}

#[test]
fn a_newer_request_for_the_same_view_supersedes_the_pending_one() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    let run = live_run(&e);
    let mut tail = Tail::open(&e, &run);
    let first = call_async(&e, &run, "ui.navigate", json!({ "to": "/one" }), None);
    let r1 = tail.next("browser_action_request");
    let other_view = call_async(&e, &run, "ui.panel", json!({ "to": "x" }), None);
    let rp = tail.next("browser_action_request");
    let second = call_async(&e, &run, "ui.scroll", json!({ "to": "top" }), None);
    let sup = tail.next("browser_action_result");
    assert_eq!(
        (sup["invocationId"].clone(), sup["error"]["code"].clone()),
        (r1["invocationId"].clone(), json!("SUPERSEDED"))
    );
    let r2 = tail.next("browser_action_request");
    assert_eq!(sup["supersededBy"], r2["invocationId"]);
    let (_, got1) = first.join().unwrap();
    assert_eq!(got1["error"]["code"], "SUPERSEDED");
    for r in [&r2, &rp] {
        assert_eq!(e.post(&result_path(&run, &r["invocationId"]), json!({ "ok": true, "result": "done" })).0, 200);
    }
    assert_eq!(second.join().unwrap().1["ok"], true);
    assert_eq!(other_view.join().unwrap().1["ok"], true, "another view is not superseded");
}

#[test]
fn consent_refusal_bad_results_unavailable_tools_bad_input_and_ended_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    let run = live_run(&e);
    let mut tail = Tail::open(&e, &run);
    let c = call_async(&e, &run, "ui.navigate", json!({ "to": "/settings" }), None);
    let req = tail.next("browser_action_request");
    let path = result_path(&run, &req["invocationId"]);
    let (code, v) = e.post(&path, json!({ "ok": false, "error": { "code": "NOPE", "message": "x" } }));
    assert_eq!((code, v["error"]["data"]["field"].clone()), (400, json!("error.code")));
    let (code, _) = e.post(&path, json!({ "ok": true, "error": { "code": "TIMEOUT", "message": "x" } }));
    assert_eq!(code, 400);
    let (code, _) = e.post(&path, json!({ "ok": true, "tool": "ui.scroll" }));
    assert_eq!(code, 400, "the tool must match the invocation");
    let denied = json!({ "ok": false, "error": { "code": "USER_DENIED", "message": "the user said no", "details": { "why": "busy" } } });
    assert_eq!(e.post(&path, denied).0, 200);
    let (_, got) = c.join().unwrap();
    assert_eq!(
        (got["error"]["code"].clone(), got["error"]["details"].clone()),
        (json!("USER_DENIED"), json!({ "why": "busy" }))
    );

    let (code, na) = e.post("/api/tools/call", json!({ "name": "ui.gone", "runId": run, "input": {} }));
    assert_eq!(code, 404, "not live anywhere and not in the catalog: {na}");
    let (_, closed) = e.post("/api/browser-sessions/tab-9", json!({ "runId": run, "tools": [tool("ui.other", "o")] }));
    assert_eq!(closed["tools"], json!(["ui.other"]));
    assert_eq!(e.delete("/api/browser-sessions/tab-9").0, 200);
    let (code, v) = e.post("/api/tools/call", json!({ "name": "ui.navigate", "runId": run, "input": { "to": 5 } }));
    assert_eq!((code, v["ok"].clone(), v["error"]["code"].clone()), (200, json!(false), json!("INVALID_INPUT")));
    let (_, acts) = e.get(&format!("/api/runs/{run}/actions"));
    assert_eq!(acts["actions"].as_array().unwrap().len(), 1, "refusals before dispatch are not recorded");

    assert_eq!(e.post(&format!("/api/runs/{run}/cancel"), json!({})).0, 200);
    let (code, v) = e.post("/api/tools/call", json!({ "name": "ui.navigate", "runId": run, "input": { "to": "/" } }));
    assert_eq!((code, v["error"]["code"].clone()), (409, json!("run-state")));
    let ev = e.watch(&run);
    assert_eq!(of(&ev, "browser_action_request").len(), 1);
    assert_eq!(of(&ev, "browser_action_result")[0]["error"]["code"], "USER_DENIED");
}

#[test]
/// The stop ended the run; nothing may follow a run's end, so its end resolves the waiting action
/// (a start after a kill, with the run not ended, resolves it as `daemon-restart`).
fn an_action_left_waiting_by_a_stopped_daemon_is_resolved_at_the_next_start() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = Engine::start(&data, NOW);
    let run = live_run(&e);
    let mut tail = Tail::open(&e, &run);
    let caller = call_async(&e, &run, "ui.navigate", json!({ "to": "/x" }), None);
    let req = tail.next("browser_action_request");
    drop(tail);
    e.stop();
    let (code, v) = caller.join().unwrap();
    assert_eq!((code, v["error"]["code"].clone()), (503, json!("store-closed")), "{v}");
    let e = Engine::start(&data, NOW);
    let (_, acts) = e.get(&format!("/api/runs/{run}/actions"));
    let a = &acts["actions"][0];
    assert_eq!(
        (a["invocationId"].clone(), a["status"].clone(), a["errorCode"].clone(), a["resolvedBy"].clone()),
        (req["invocationId"].clone(), json!("error"), json!("EXECUTION_FAILED"), json!("run-ended"))
    );
}
