//! Several daemons on one PostgreSQL log (issue 15): two `od daemon` processes share a database and
//! a shared dir. Runs posted to either execute exactly once; both daemons see every event once, in
//! the same order; a GenUI answer posted to the daemon that does not execute a run resumes it; SSE
//! on one daemon follows a run executing on the other, resuming after `Last-Event-ID`; a cancel
//! posted to the other daemon stops the run; and when a daemon is killed, the other takes over its
//! runs: queued ones execute, one waiting for an answer resumes, one whose agent was working ends
//! `failed` (`daemon-lost`).

use crate::common;

use common::daemon_proc::{self, get, install, poll, post, start_run, Daemon};
use common::harness::write_plugin;
use common::pg;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The lease TTL the daemons run with (short, so a takeover is quick to observe).
const TTL_MS: u64 = 2_000;

fn start_daemon(data: &Path, shared: &Path, db: &str) -> Daemon {
    let shared = shared.to_str().unwrap();
    let env = [("OD_ALLOW_HTTP_EXEC", "1".to_string()), ("OD_LEASE_TTL_MS", TTL_MS.to_string())];
    daemon_proc::start(data, &["--shared-dir", shared, "--store", db], &env)
}

fn run_status(url: &str, id: &str) -> Value {
    get(url, &format!("/api/runs/{id}"))["run"].clone()
}

/// Every event of the log as one daemon reads it: (seq, stream, kind), page by page.
fn log_view(url: &str) -> Vec<(u64, String, String)> {
    let mut out = Vec::new();
    let mut after = 0u64;
    loop {
        let page = get(url, &format!("/api/log/events?after={after}&limit=1000"));
        let events = page["events"].as_array().unwrap();
        if events.is_empty() {
            return out;
        }
        for e in events {
            let seq = e["data"]["seq"].as_u64().unwrap_or_else(|| panic!("an event without seq: {e}"));
            let stream = e["data"]["stream"].as_str().unwrap_or("").to_string();
            out.push((seq, stream, e["event"].as_str().unwrap_or("").to_string()));
            after = seq;
        }
    }
}

/// Which daemon holds `run`'s lease (its daemon id), from the database.
fn lease_holder(server: &pg::PgServer, db: &str, run: &str) -> Option<String> {
    let out = server.psql(db, &format!("SELECT daemon_id FROM od_leases WHERE run_id = '{run}'"));
    Some(out.trim().to_string()).filter(|s| !s.is_empty())
}

fn daemon_id(d: &Daemon) -> String {
    get(&d.url, "/api/daemon/status")["daemonId"].as_str().unwrap().to_string()
}

fn db_name(db_url: &str) -> String {
    db_url.rsplit('/').next().unwrap().split('?').next().unwrap().to_string()
}

/// Reads a run's SSE from `url` with `Last-Event-ID: after` until `end`: the ids seen.
fn sse_ids(url: &str, run: &str, after: u64) -> Vec<u64> {
    let r = ureq::get(&format!("{url}/api/runs/{run}/events")).set("Last-Event-ID", &after.to_string()).call().unwrap();
    let mut ids = Vec::new();
    let mut event = String::new();
    for line in BufReader::new(r.into_reader()).lines() {
        let line = line.unwrap();
        if let Some(id) = line.strip_prefix("id: ").or_else(|| line.strip_prefix("id:")) {
            ids.push(id.trim().parse().unwrap());
        } else if let Some(e) = line.strip_prefix("event: ").or_else(|| line.strip_prefix("event:")) {
            event = e.trim().to_string();
        } else if line.is_empty() && event == "end" {
            break;
        }
    }
    ids
}

fn brief_plugin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ui/plugins/brief")
}

#[test]
fn two_daemons_share_one_log_runs_answers_and_streams() {
    let server = pg::server();
    let db = server.fresh_db();
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    let a = start_daemon(&tmp.path().join("a"), &shared, &db);
    let b = start_daemon(&tmp.path().join("b"), &shared, &db);
    assert_ne!(daemon_id(&a), daemon_id(&b));
    assert_eq!(get(&a.url, "/api/daemon/status")["log"]["backend"], "postgres");

    // A plugin installed on one daemon is seen by the other (its files are in the shared dir).
    let quick = tmp.path().join("quick");
    write_plugin(&quick, "quick", "1.0.0", json!([ { "id": "draft", "atoms": ["file-write"] } ]), "Go.");
    install(&a.url, &quick);
    install(&b.url, &brief_plugin());
    for d in [&a, &b] {
        poll("both plugins on both daemons", 30, || {
            let ids: BTreeSet<String> = get(&d.url, "/api/plugins")["plugins"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p["id"].as_str().map(String::from))
                .collect();
            (ids.contains("quick") && ids.contains("brief")).then_some(())
        });
    }

    // 200 runs, posted round-robin to both daemons.
    let daemons = [&a, &b];
    let runs: Vec<String> = (0..200).map(|i| start_run(&daemons[i % 2].url, json!({ "pluginId": "quick" }))).collect();
    for (i, id) in runs.iter().enumerate() {
        let d = daemons[(i + 1) % 2]; // asked on the other daemon than the one it was posted to
        let st = poll("every run to end", 240, || {
            // The other daemon may not have folded the run's creation yet: 404 is "not yet".
            let r = ureq::get(&format!("{}/api/runs/{id}", d.url)).call().ok()?.into_json::<Value>().ok()?;
            let r = r["run"].clone();
            (r["status"] != "queued" && r["status"] != "running").then_some(r)
        });
        assert_eq!(st["status"], "succeeded", "{st}");
    }

    // Each run executed exactly once: the same events, once each, on every run.
    let kinds_of = |id: &str| -> Vec<String> {
        let page = get(&a.url, &format!("/api/log/events?stream=run:{id}&limit=1000"));
        page["events"].as_array().unwrap().iter().map(|e| e["event"].as_str().unwrap().to_string()).collect()
    };
    let first = kinds_of(&runs[0]);
    assert_eq!(first.iter().filter(|k| *k == "run_ended").count(), 1, "{first:?}");
    assert!(first.iter().filter(|k| *k == "stage_started").count() >= 1, "{first:?}");
    for id in &runs {
        assert_eq!(kinds_of(id), first, "run {id} executed differently (twice, or in part)");
    }
    // Every lease was given back.
    let dbn = db_name(&db);
    assert_eq!(server.psql(&dbn, "SELECT count(*) FROM od_leases").trim(), "0");

    // Every event exactly once, in the same order, in both daemons' views.
    let head = get(&a.url, "/api/log/events?limit=1")["lastSeq"].as_u64().unwrap();
    for d in [&a, &b] {
        poll("the daemon to see the whole log", 30, || {
            (get(&d.url, "/api/health")["lastSeq"].as_u64()? >= head).then_some(())
        });
    }
    let (va, vb) = (log_view(&a.url), log_view(&b.url));
    assert_eq!(va, vb, "the two daemons see different logs");
    let seqs: Vec<u64> = va.iter().map(|e| e.0).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "gaps or duplicates");
    let per_run: BTreeMap<&str, usize> = va.iter().fold(BTreeMap::new(), |mut m, e| {
        *m.entry(e.1.as_str()).or_default() += 1;
        m
    });
    assert_eq!(per_run.get(format!("run:{}", runs[7]).as_str()).copied(), Some(first.len()));

    // A GenUI answer posted to the daemon that does not execute the run resumes it; SSE on that
    // daemon follows the run from after `Last-Event-ID`.
    let run = start_run(&a.url, json!({ "pluginId": "brief" }));
    poll("the run to wait for its brief", 60, || {
        (run_status(&b.url, &run)["status"] == "awaiting-input").then_some(())
    });
    let holder = poll("its lease", 10, || lease_holder(&server, &dbn, &run));
    let (exec, other) = if holder == daemon_id(&a) { (&a, &b) } else { (&b, &a) };
    assert_eq!(holder, daemon_id(exec));
    let other_url = other.url.clone();
    let rid = run.clone();
    let sse = std::thread::spawn(move || sse_ids(&other_url, &rid, 2));
    let (code, v) = post(
        &other.url,
        &format!("/api/runs/{run}/genui/project-brief/respond"),
        json!({ "value": { "audience": "tea lovers", "tone": "calm" } }),
    );
    assert_eq!(code, 200, "{v}");
    let end = poll("the answered run to end", 60, || {
        let r = run_status(&other.url, &run);
        (r["status"] == "succeeded" || r["status"] == "failed").then_some(r)
    });
    assert_eq!(end["status"], "succeeded", "{end}");
    let ids = sse.join().unwrap();
    let total = kinds_of(&run).len() as u64;
    // SSE ids are stream versions (from 0): after 2, each of 3..total exactly once.
    assert_eq!(ids, (3..total).collect::<Vec<_>>(), "SSE on the other daemon: each event after 2 exactly once");

    // A cancel posted to the daemon that does not execute the run stops it there.
    let run = start_run(&a.url, json!({ "pluginId": "brief" }));
    poll("the second brief run to wait", 60, || (run_status(&a.url, &run)["status"] == "awaiting-input").then_some(()));
    let holder = poll("its lease", 10, || lease_holder(&server, &dbn, &run));
    let other = if holder == daemon_id(&a) { &b } else { &a };
    let (code, v) = post(&other.url, &format!("/api/runs/{run}/cancel"), json!({}));
    assert_eq!(code, 200, "{v}");
    let end = poll("the canceled run to end", 30, || {
        let r = run_status(&other.url, &run);
        (r["status"] != "awaiting-input" && r["status"] != "running").then_some(r)
    });
    assert_eq!(end["status"], "canceled", "{end}");
    let kinds = kinds_of(&run);
    assert_eq!(kinds.iter().filter(|k| *k == "run_ended").count(), 1, "{kinds:?}");
    drop((a, b));
}

#[test]
fn a_killed_daemon_s_runs_are_taken_over_by_the_other() {
    let server = pg::server();
    let db = server.fresh_db();
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    let mut a = start_daemon(&tmp.path().join("a"), &shared, &db);
    install(&a.url, &brief_plugin());
    let agentic = tmp.path().join("agentic");
    write_plugin(&agentic, "agentic", "1.0.0", json!([ { "id": "draft", "atoms": ["file-write"] } ]), "Go.");
    install(&a.url, &agentic);
    // The agent writes its pid, then waits while the block file exists.
    let block = tmp.path().join("block");
    std::fs::write(&block, "").unwrap();
    let agent = tmp.path().join("agent.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\necho $$ > \"$PID_FILE.tmp\"\nmv \"$PID_FILE.tmp\" \"$PID_FILE\"\nwhile [ -e \"$BLOCK\" ]; do sleep 0.05; done\n",
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&agent).status().unwrap();
    let exec_run = |n: usize| {
        let pid_file = tmp.path().join(format!("agent-{n}.pid"));
        let body = json!({ "pluginId": "agentic", "agent": "exec", "agentCommand": [agent.to_str().unwrap()],
            "agentEnv": { "PID_FILE": pid_file.to_str().unwrap(), "BLOCK": block.to_str().unwrap() } });
        (start_run(&a.url, body), pid_file)
    };

    // On A alone: one run waiting for an answer, every permit busy with a working agent, and two
    // runs queued behind them.
    let waiting = start_run(&a.url, json!({ "pluginId": "brief" }));
    poll("the brief run to wait", 60, || (run_status(&a.url, &waiting)["status"] == "awaiting-input").then_some(()));
    let working: Vec<(String, PathBuf)> = (0..od::limits::MAX_CONCURRENT_RUNS - 1).map(exec_run).collect();
    let pids: Vec<i32> = working
        .iter()
        .map(|(_, f)| {
            poll("an agent's pid", 60, || std::fs::read_to_string(f).ok().and_then(|s| s.trim().parse().ok()))
        })
        .collect();
    let queued: Vec<String> = (100..102).map(|n| exec_run(n).0).collect();
    for q in &queued {
        assert_eq!(run_status(&a.url, q)["status"], "queued");
    }

    // A dies; B starts on the same database.
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let killed_at = Instant::now();
    for pid in &pids {
        // The killed daemon's agents are its data dir's business (its next start ends them);
        // here they are ended by hand so the machine is left clean.
        // SAFETY: signals only the test's own agent groups.
        unsafe { libc::killpg(*pid, libc::SIGKILL) };
    }
    std::fs::remove_file(&block).unwrap();
    let b = start_daemon(&tmp.path().join("b"), &shared, &db);

    // Working runs end failed (daemon-lost); the waiting one resumes on B; queued ones execute.
    for (id, _) in &working {
        let r = poll("a working run to be taken over", 60, || {
            let r = run_status(&b.url, id);
            (r["status"] == "failed").then_some(r)
        });
        assert_eq!(r["failureCategory"], "daemon-lost", "{r}");
    }
    let took = killed_at.elapsed();
    for q in &queued {
        let r = poll("a queued run to execute on B", 60, || {
            let r = run_status(&b.url, q);
            (r["status"] == "succeeded" || r["status"] == "failed").then_some(r)
        });
        assert_eq!(r["status"], "succeeded", "{r}");
    }
    let dbn = db_name(&db);
    poll("the waiting run's lease on B", 30, || {
        (lease_holder(&server, &dbn, &waiting).as_deref() == Some(daemon_id(&b).as_str())).then_some(())
    });
    assert_eq!(run_status(&b.url, &waiting)["status"], "awaiting-input");
    let (code, v) = post(
        &b.url,
        &format!("/api/runs/{waiting}/genui/project-brief/respond"),
        json!({ "value": { "audience": "tea lovers", "tone": "bold" } }),
    );
    assert_eq!(code, 200, "{v}");
    let r = poll("the resumed run to end", 60, || {
        let r = run_status(&b.url, &waiting);
        (r["status"] == "succeeded" || r["status"] == "failed").then_some(r)
    });
    assert_eq!(r["status"], "succeeded", "{r}");
    eprintln!(
        "takeover of {} working runs: {:.1} s after the kill (TTL {TTL_MS} ms)",
        working.len(),
        took.as_secs_f64()
    );
    drop(b);
    let _ = a.data;
}

/// POSTs `body`, in a thread: (status, body, when the answer came).
fn post_async(url: &str, path: &str, body: Value) -> std::thread::JoinHandle<(u16, Value, Instant)> {
    let (url, path) = (url.to_string(), path.to_string());
    std::thread::spawn(move || {
        let (code, v) = post(&url, &path, body);
        (code, v, Instant::now())
    })
}

/// Two daemons on one database, a run live on one of them (its agent waits while `block` exists),
/// and a browser session advertising `ui.navigate` connected to the other.
struct BrowserRun {
    daemons: [Daemon; 2],
    tmp: tempfile::TempDir,
    _server: std::sync::Arc<pg::PgServer>,
    /// Index of the daemon executing the run (the other holds the page).
    exec: usize,
    run: String,
    db: String,
}

impl BrowserRun {
    fn start() -> Self {
        let server = pg::server();
        let db = server.fresh_db();
        let tmp = tempfile::tempdir().unwrap();
        let shared = tmp.path().join("shared");
        let a = start_daemon(&tmp.path().join("a"), &shared, &db);
        let b = start_daemon(&tmp.path().join("b"), &shared, &db);
        let agentic = tmp.path().join("agentic");
        write_plugin(&agentic, "agentic", "1.0.0", json!([ { "id": "draft", "atoms": ["file-write"] } ]), "Go.");
        install(&a.url, &agentic);
        poll("the plugin on B", 30, || {
            get(&b.url, "/api/plugins")["plugins"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["id"] == "agentic")
                .then_some(())
        });
        // The agent keeps its run live while the block file exists.
        let block = tmp.path().join("block");
        std::fs::write(&block, "").unwrap();
        let agent = tmp.path().join("agent.sh");
        std::fs::write(&agent, "#!/bin/sh\nwhile [ -e \"$BLOCK\" ]; do sleep 0.05; done\n").unwrap();
        Command::new("chmod").arg("+x").arg(&agent).status().unwrap();
        let run = start_run(
            &a.url,
            json!({ "pluginId": "agentic", "agent": "exec", "agentCommand": [agent.to_str().unwrap()],
                    "agentEnv": { "BLOCK": block.to_str().unwrap() } }),
        );
        poll("the run to run", 60, || (run_status(&a.url, &run)["status"] == "running").then_some(()));
        let dbn = db_name(&db);
        let holder = poll("its lease", 10, || lease_holder(&server, &dbn, &run));
        let (exec, page) = if holder == daemon_id(&a) { (&a, &b) } else { (&b, &a) };

        // The page is connected to the daemon that does not execute the run.
        let tool = json!({ "name": "ui.navigate", "description": "Move the main view.", "surface": "browser",
            "viewStateOnly": true, "view": "main",
            "inputSchema": { "type": "object", "properties": { "to": { "type": "string" } }, "required": ["to"] } });
        let (code, v) = post(&page.url, "/api/browser-sessions/tab-1", json!({ "runId": run, "tools": [tool] }));
        assert_eq!(code, 200, "{v}");
        poll("the executing daemon to see the session", 30, || {
            ureq::get(&format!("{}/api/browser-sessions/tab-1", exec.url)).call().ok().map(|_| ())
        });
        let exec = usize::from(exec.url == b.url);
        Self { daemons: [a, b], tmp, _server: server, exec, run, db }
    }
    fn exec(&self) -> &Daemon {
        &self.daemons[self.exec]
    }
    fn page(&self) -> &Daemon {
        &self.daemons[1 - self.exec]
    }
    /// The run's recorded browser-action results, as `d` reads the log.
    fn results(&self, d: &Daemon) -> Vec<Value> {
        let page = get(&d.url, &format!("/api/log/events?stream=run:{}&limit=1000", self.run));
        page["events"].as_array().unwrap().iter().filter(|e| e["event"] == "browser_action_resulted").cloned().collect()
    }
    /// Lets the agent finish and waits for the run's end.
    fn finish(self) {
        std::fs::remove_file(self.tmp.path().join("block")).unwrap();
        poll("the run to end", 60, || {
            (run_status(&self.daemons[0].url, &self.run)["status"] != "running").then_some(())
        });
    }
}

#[test]
fn a_browser_result_posted_to_the_other_daemon_reaches_the_call_at_once_and_is_recorded_once() {
    let t = BrowserRun::start();
    let (exec, page, run) = (t.exec(), t.page(), t.run.clone());
    // The agent's call goes to the daemon executing its run (its OD_DAEMON_URL).
    const TIMEOUT_MS: u64 = 12_000;
    let call = post_async(
        &exec.url,
        "/api/tools/call",
        json!({ "name": "ui.navigate", "input": { "to": "/media" }, "runId": run, "timeoutMs": TIMEOUT_MS }),
    );
    let called_at = Instant::now();
    let inv = poll("the request on the page's daemon", 30, || {
        let v = get(&page.url, &format!("/api/runs/{run}/actions"));
        v["actions"].as_array().and_then(|a| a.first()).and_then(|a| a["invocationId"].as_str().map(String::from))
    });
    // A third daemon starting on the log meanwhile leaves the call alone (it is no orphan: the
    // daemon executing its run is alive).
    let third = start_daemon(&t.tmp.path().join("c"), &t.tmp.path().join("shared"), &t.db);
    let posted_at = Instant::now();
    let (code, v) = post(
        &page.url,
        &format!("/api/runs/{run}/actions/{inv}/result"),
        json!({ "ok": true, "result": { "at": "/media" } }),
    );
    assert_eq!(code, 200, "{v}");
    let (code, got, answered_at) = call.join().unwrap();
    let took = answered_at.duration_since(posted_at);
    assert_eq!(code, 200, "{got}");
    assert_eq!((got["ok"].clone(), got["result"].clone()), (json!(true), json!({ "at": "/media" })), "{got}");
    assert_eq!(got["invocationId"], inv.as_str());
    assert!(took < Duration::from_millis(TIMEOUT_MS / 2), "the result took {took:?} to reach the call");

    // Past the call's deadline the log still holds exactly one result (no TIMEOUT recorded after it).
    while called_at.elapsed() < Duration::from_millis(TIMEOUT_MS + 1_500) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let results = |d: &Daemon| t.results(d);
    let on_exec = results(exec);
    assert_eq!(on_exec.len(), 1, "{on_exec:?}");
    assert_eq!(on_exec[0]["data"]["payload"]["resolvedBy"], "browser", "{on_exec:?}");
    assert_eq!(results(page).len(), 1);
    assert_eq!(results(&third).len(), 1);
    eprintln!("a result posted to the other daemon reached the call {:.0} ms later", took.as_secs_f64() * 1000.0);
    t.finish();
}

#[test]
fn a_timeout_racing_a_result_posted_to_the_other_daemon_still_records_one_result() {
    let t = BrowserRun::start();
    let (exec, page, run) = (t.exec(), t.page(), t.run.clone());
    // Each call times out on the executing daemon about when its result is posted on the other
    // (deadlines from 10 to 150 ms; a post takes tens of ms to follow the request): whichever lands
    // first is the one result, and the call returns that one.
    const TIMEOUT_MS: u64 = 150;
    let mut seen = Vec::new();
    for i in 0..8u64 {
        let input = json!({ "to": format!("/p{i}") });
        let call = post_async(
            &exec.url,
            "/api/tools/call",
            json!({ "name": "ui.navigate", "input": input, "runId": run, "timeoutMs": 10 + 20 * i }),
        );
        let inv = poll("the request on the page's daemon", 30, || {
            let v = get(&page.url, &format!("/api/runs/{run}/actions?limit=100"));
            v["actions"]
                .as_array()
                .and_then(|a| a.get(i as usize))
                .and_then(|a| a["invocationId"].as_str().map(String::from))
        });
        let (code, posted) =
            post(&page.url, &format!("/api/runs/{run}/actions/{inv}/result"), json!({ "ok": true, "result": i }));
        let (call_code, got, _) = call.join().unwrap();
        assert_eq!(call_code, 200, "{got}");
        let recorded: Vec<Value> = poll("the result in the log", 30, || {
            let r: Vec<Value> =
                t.results(exec).into_iter().filter(|e| e["data"]["payload"]["invocationId"] == inv.as_str()).collect();
            (!r.is_empty()).then_some(r)
        });
        assert_eq!(recorded.len(), 1, "call {i}: {recorded:?}");
        let by = recorded[0]["data"]["payload"]["resolvedBy"].as_str().unwrap().to_string();
        assert_eq!(got["resolvedBy"], by.as_str(), "call {i}: the call got the recorded result: {got}");
        match by.as_str() {
            "browser" => assert_eq!((code, got["result"].clone()), (200, json!(i)), "{posted}"),
            "timeout" => assert_eq!((code, posted["error"]["code"].clone()), (409, json!("invocation-resolved"))),
            other => panic!("call {i} resolved by {other}"),
        }
        seen.push(by);
    }
    // Long after every deadline, still one result per call.
    let deadline = Instant::now() + Duration::from_millis(TIMEOUT_MS * 4);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(25));
    }
    assert_eq!(t.results(exec).len(), 8, "{seen:?}");
    assert_eq!(t.results(page).len(), 8);
    eprintln!("racing a {TIMEOUT_MS} ms timeout: {seen:?}");
    t.finish();
}
