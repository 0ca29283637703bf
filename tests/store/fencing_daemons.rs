//! One executor per run with several daemons on one PostgreSQL log (issue 37): two `od daemon`
//! processes on a private server, a short lease TTL (1.5 s) and observation windows of three TTLs
//! (not the 30 s: every effect a stalled daemon could have shows within its first
//! heartbeat and first appends after it wakes).
//!
//! - A stalled daemon (SIGSTOP past the TTL) whose six runs had working exec agents: the other
//!   daemon ends them (`daemon-lost`); once woken, the stalled one appends nothing to them, starts
//!   no agent, and its log names each lease it lost; each run has one `run_ended`.
//! - Runs waiting for a GenUI answer on the stalled daemon, taken over and answered through the
//!   other: each remaining stage runs once, the surface is asked once, one `run_ended`.
//! - A cancel posted to the other daemon during a stall stays `canceled`; the stalled daemon's
//!   agent is ended when it wakes.
//! - PostgreSQL down for longer than the TTL with runs waiting on both daemons: no lease moves
//!   between the live daemons, and each answer is used once.
//! - A data dir carrying a copy of a live daemon's `daemon-id`: refused (exit 83), or given a new
//!   id with `--new-daemon-id`; no run of the first daemon is touched.

use crate::common;

use common::daemon_proc::{self, get, install, poll, post, start_run, Daemon};
use common::harness::{write_plugin, OD};
use common::pg;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const TTL_MS: u64 = 1_500;

fn ttl() -> Duration {
    Duration::from_millis(TTL_MS)
}

fn start_daemon(data: &Path, shared: &Path, db: &str) -> Daemon {
    let env = [("OD_ALLOW_HTTP_EXEC", "1".to_string()), ("OD_LEASE_TTL_MS", TTL_MS.to_string())];
    daemon_proc::start(data, &["--shared-dir", shared.to_str().unwrap(), "--store", db], &env)
}

fn status(url: &str, id: &str) -> Value {
    get(url, &format!("/api/runs/{id}"))["run"].clone()
}

/// A run's events (`{event, data}`), in stream order, as `url` reads them from the log.
fn events(url: &str, run: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut after: Option<u64> = None;
    loop {
        let q = after.map(|a| format!("&after={a}")).unwrap_or_default();
        let page = get(url, &format!("/api/log/events?stream=run:{run}&limit=1000{q}"));
        let page = page["events"].as_array().unwrap().clone();
        if page.is_empty() {
            return out;
        }
        for e in page {
            after = e["data"]["version"].as_u64();
            assert!(after.is_some(), "an event without its version: {e}");
            out.push(e);
        }
    }
}

/// The kinds of a run's events, in stream order.
fn kinds(url: &str, run: &str) -> Vec<String> {
    events(url, run).iter().map(|e| e["event"].as_str().unwrap_or("").to_string()).collect()
}

/// The (stage, iteration) of each event of `kind`: repeated when a stage iteration ran twice.
fn stage_iterations(url: &str, run: &str, kind: &str) -> Vec<(String, u64)> {
    events(url, run)
        .iter()
        .filter(|e| e["event"] == kind)
        .map(|e| {
            let p = &e["data"]["payload"];
            (p["stageId"].as_str().unwrap_or("").to_string(), p["iteration"].as_u64().unwrap_or(u64::MAX))
        })
        .collect()
}

fn assert_once_each(what: &str, items: Vec<(String, u64)>) {
    let mut seen = std::collections::BTreeSet::new();
    for i in &items {
        assert!(seen.insert(i.clone()), "{what} {i:?} ran twice: {items:?}");
    }
}

/// One `run_ended`, and it is the run's last event.
fn ended_once(url: &str, run: &str) -> Vec<String> {
    let k = kinds(url, run);
    let ends = k.iter().filter(|k| *k == "run_ended").count();
    assert_eq!(ends, 1, "run {run}: {ends} run_ended in {k:?}");
    assert_eq!(k.last().map(String::as_str), Some("run_ended"), "run {run}: events after its end: {k:?}");
    k
}

fn lease_holder(server: &pg::PgServer, db: &str, run: &str) -> String {
    server.psql(db, &format!("SELECT daemon_id FROM od_leases WHERE run_id = '{run}'"))
}

fn daemon_id(d: &Daemon) -> String {
    get(&d.url, "/api/daemon/status")["daemonId"].as_str().unwrap().to_string()
}

fn db_name(db_url: &str) -> String {
    db_url.rsplit('/').next().unwrap().to_string()
}

fn signal(d: &Daemon, sig: i32) {
    // SAFETY: signals the test's own child process.
    assert_eq!(unsafe { libc::kill(d.child.id() as i32, sig) }, 0);
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn stderr_of(d: &Daemon) -> String {
    std::fs::read_to_string(d.data.with_extension("stderr")).unwrap_or_default()
}

/// A plugin of three stages, each an exec agent's.
fn staged_plugin(tmp: &Path) -> PathBuf {
    let dir = tmp.join("staged");
    let stage = |id: &str| json!({ "id": id, "atoms": ["file-write"] });
    write_plugin(&dir, "staged", "1.0.0", json!([stage("plan"), stage("generate"), stage("critique")]), "Go.");
    dir
}

/// An exec agent that notes each start (`$STARTS`: run, stage, pid), writes its pid to
/// `$PIDS/<run>`, then prints a line of output every 100 ms, `$TICKS` times.
fn agent_script(tmp: &Path) -> PathBuf {
    let path = tmp.join("agent.sh");
    std::fs::write(
        &path,
        "#!/bin/sh\necho \"$OD_RUN_ID $OD_STAGE_ID $$\" >> \"$STARTS\"\n\
         echo $$ > \"$PIDS/$OD_RUN_ID.tmp\"\nmv \"$PIDS/$OD_RUN_ID.tmp\" \"$PIDS/$OD_RUN_ID\"\n\
         i=0\nwhile [ $i -lt \"$TICKS\" ]; do echo '{\"type\":\"text\",\"text\":\"working\"}'; sleep 0.1; i=$((i+1)); done\n",
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&path).status().unwrap();
    path
}

struct Cluster {
    server: std::sync::Arc<pg::PgServer>,
    db: String,
    tmp: tempfile::TempDir,
    a: Daemon,
    b: Daemon,
}

impl Cluster {
    fn start() -> Cluster {
        Self::on(pg::server())
    }

    /// On a server of its own (a test that stops it).
    fn own() -> Cluster {
        Self::on(std::sync::Arc::new(pg::PgServer::start()))
    }

    fn on(server: std::sync::Arc<pg::PgServer>) -> Cluster {
        let db = server.fresh_db();
        let tmp = tempfile::tempdir().unwrap();
        let shared = tmp.path().join("shared");
        let a = start_daemon(&tmp.path().join("a"), &shared, &db);
        let b = start_daemon(&tmp.path().join("b"), &shared, &db);
        Cluster { server, db, tmp, a, b }
    }

    fn dbn(&self) -> String {
        db_name(&self.db)
    }

    /// An exec run of the staged plugin on `url`, its agent working `ticks` × 100 ms per stage.
    fn exec_run(&self, url: &str, ticks: u32) -> String {
        let t = self.tmp.path();
        std::fs::create_dir_all(t.join("pids")).unwrap();
        let body = json!({ "pluginId": "staged", "agent": "exec", "agentCommand": [agent_script(t).to_str().unwrap()],
            "agentEnv": { "STARTS": t.join("starts").to_str().unwrap(), "PIDS": t.join("pids").to_str().unwrap(),
                          "TICKS": ticks.to_string() } });
        start_run(url, body)
    }

    fn pid(&self, run: &str) -> i32 {
        let f = self.tmp.path().join("pids").join(run);
        poll("an agent's pid", 60, || std::fs::read_to_string(&f).ok().and_then(|s| s.trim().parse().ok()))
    }

    fn starts(&self) -> usize {
        std::fs::read_to_string(self.tmp.path().join("starts")).unwrap_or_default().lines().count()
    }
}

#[test]
fn a_stalled_daemon_wakes_to_lost_leases_and_appends_nothing_to_runs_the_other_ended() {
    let c = Cluster::start();
    install(&c.a.url, &staged_plugin(c.tmp.path()));
    // Six runs on A with working agents (3 s per stage: they finish during the stall, so A, once
    // awake, would go on to their next stages).
    let runs: Vec<String> = (0..6).map(|_| c.exec_run(&c.a.url, 30)).collect();
    for r in &runs {
        c.pid(r);
    }
    signal(&c.a, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(300));
    let starts = c.starts();
    for r in &runs {
        let s = poll("B to end a stalled daemon's run", 60, || {
            let s = status(&c.b.url, r);
            (s["status"] != "running" && s["status"] != "queued").then_some(s)
        });
        assert_eq!((s["status"].as_str(), s["failureCategory"].as_str()), (Some("failed"), Some("daemon-lost")), "{s}");
    }
    std::thread::sleep(ttl() * 2);
    signal(&c.a, libc::SIGCONT);
    std::thread::sleep(ttl() * 3);

    assert_eq!(c.starts(), starts, "no agent started after the stall");
    let log = stderr_of(&c.a);
    for r in &runs {
        ended_once(&c.b.url, r);
        assert_eq!(status(&c.a.url, r)["status"], "failed", "both daemons report the one end");
        assert!(
            log.lines().any(|l| l.contains("lease lost") && l.contains(r.as_str())),
            "A's log does not name the lost lease of {r}:\n{log}"
        );
    }
    // A is alive and working: a new run on it executes.
    let after = c.exec_run(&c.a.url, 1);
    let s = poll("a run after the stall", 60, || {
        let s = status(&c.a.url, &after);
        (s["status"] == "succeeded" || s["status"] == "failed").then_some(s)
    });
    assert_eq!(s["status"], "succeeded", "{s}");
}

#[test]
fn genui_runs_taken_over_during_a_stall_execute_once_and_ask_once() {
    let c = Cluster::start();
    let brief = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ui/plugins/brief");
    install(&c.a.url, &brief);
    let runs: Vec<String> = (0..3).map(|_| start_run(&c.a.url, json!({ "pluginId": "brief" }))).collect();
    for r in &runs {
        poll("a run to wait for its brief", 60, || (status(&c.a.url, r)["status"] == "awaiting-input").then_some(()));
    }
    signal(&c.a, libc::SIGSTOP);
    let b_id = daemon_id(&c.b);
    for r in &runs {
        poll("B to take the waiting run", 60, || (lease_holder(&c.server, &c.dbn(), r) == b_id).then_some(()));
        let (code, v) = post(
            &c.b.url,
            &format!("/api/runs/{r}/genui/project-brief/respond"),
            json!({ "value": { "audience": "tea lovers", "tone": "bold" } }),
        );
        assert_eq!(code, 200, "{v}");
    }
    for r in &runs {
        let s = poll("B to finish the run", 60, || {
            let s = status(&c.b.url, r);
            (s["status"] == "succeeded" || s["status"] == "failed").then_some(s)
        });
        assert_eq!(s["status"], "succeeded", "{s}");
    }
    signal(&c.a, libc::SIGCONT);
    std::thread::sleep(ttl() * 3);
    for r in &runs {
        let k = ended_once(&c.b.url, r);
        let count = |kind: &str| k.iter().filter(|x| *x == kind).count();
        assert_eq!(count("surface_requested"), 1, "the surface is asked once: {k:?}");
        assert_eq!(count("surface_responded"), 1, "{k:?}");
        // Each stage iteration started once, its agent once (the resumed one is not redone).
        assert_once_each("stage", stage_iterations(&c.b.url, r, "stage_started"));
        assert_once_each("agent", stage_iterations(&c.b.url, r, "agent_started"));
        assert!(count("agent_started") > 0, "{k:?}");
        assert_eq!(status(&c.a.url, r)["status"], "succeeded");
    }
}

#[test]
fn a_cancel_through_the_other_daemon_during_a_stall_stays_canceled() {
    let c = Cluster::start();
    install(&c.a.url, &staged_plugin(c.tmp.path()));
    let run = c.exec_run(&c.a.url, 600);
    let pid = c.pid(&run);
    signal(&c.a, libc::SIGSTOP);
    let (code, v) = post(&c.b.url, &format!("/api/runs/{run}/cancel"), json!({}));
    assert_eq!(code, 200, "{v}");
    let s = poll("the cancel to end the run", 60, || {
        let s = status(&c.b.url, &run);
        (s["status"] != "running").then_some(s)
    });
    assert_eq!(s["status"], "canceled", "{s}");
    let starts = c.starts();
    std::thread::sleep(ttl());
    signal(&c.a, libc::SIGCONT);
    // The stalled daemon's agent is ended once it wakes (its lease is gone).
    poll("the stalled daemon's agent to be ended", 30, || (!alive(pid)).then_some(()));
    std::thread::sleep(ttl() * 3);
    ended_once(&c.b.url, &run);
    assert_eq!(status(&c.b.url, &run)["status"], "canceled");
    assert_eq!(status(&c.a.url, &run)["status"], "canceled");
    assert_eq!(c.starts(), starts, "no agent started after the cancel");
}

#[test]
fn a_database_outage_longer_than_the_ttl_moves_no_lease_between_live_daemons() {
    let c = Cluster::own();
    let brief = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ui/plugins/brief");
    install(&c.a.url, &brief);
    let on_a: Vec<String> = (0..2).map(|_| start_run(&c.a.url, json!({ "pluginId": "brief" }))).collect();
    let on_b: Vec<String> = (0..2).map(|_| start_run(&c.b.url, json!({ "pluginId": "brief" }))).collect();
    let (a_id, b_id) = (daemon_id(&c.a), daemon_id(&c.b));
    let all: Vec<(&String, &Daemon, &Daemon, &String)> =
        on_a.iter().map(|r| (r, &c.a, &c.b, &a_id)).chain(on_b.iter().map(|r| (r, &c.b, &c.a, &b_id))).collect();
    for (r, home, _, id) in &all {
        poll("a run to wait for its brief", 60, || (status(&home.url, r)["status"] == "awaiting-input").then_some(()));
        assert_eq!(lease_holder(&c.server, &c.dbn(), r), **id);
    }
    c.server.down_for(ttl() * 2);
    std::thread::sleep(ttl() * 3);
    for (r, _, _, id) in &all {
        assert_eq!(lease_holder(&c.server, &c.dbn(), r), **id, "run {r}'s lease moved after the outage");
    }
    // Each answered through the other daemon, once; each run ends once, asked once.
    for (r, _, other, _) in &all {
        let (code, v) = post(
            &other.url,
            &format!("/api/runs/{r}/genui/project-brief/respond"),
            json!({ "value": { "audience": "tea lovers", "tone": "calm" } }),
        );
        assert_eq!(code, 200, "{v}");
    }
    for (r, home, _, _) in &all {
        let s = poll("the answered run to end", 60, || {
            let s = status(&home.url, r);
            (s["status"] == "succeeded" || s["status"] == "failed").then_some(s)
        });
        assert_eq!(s["status"], "succeeded", "{s}");
        let k = ended_once(&home.url, r);
        assert_eq!(k.iter().filter(|x| *x == "surface_requested").count(), 1, "{k:?}");
    }
    let logs = stderr_of(&c.a) + &stderr_of(&c.b);
    assert!(logs.contains("taking no other daemon's lease"), "no quiet period after the outage:\n{logs}");
    assert!(!logs.contains("taken over from a daemon that is gone"), "a live daemon's run was taken over:\n{logs}");
}

#[test]
fn a_copied_daemon_id_is_refused_or_renewed_and_touches_no_run_of_the_first() {
    let c = Cluster::start();
    install(&c.a.url, &staged_plugin(c.tmp.path()));
    let runs: Vec<String> = (0..2).map(|_| c.exec_run(&c.a.url, 600)).collect();
    let pids: Vec<i32> = runs.iter().map(|r| c.pid(r)).collect();
    let a_id = daemon_id(&c.a);
    // A cloned volume: a data dir carrying A's daemon-id.
    let copy = c.tmp.path().join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::copy(c.a.data.join("daemon-id"), copy.join("daemon-id")).unwrap();
    let shared = c.tmp.path().join("shared");
    let refused = Command::new(OD)
        .args(["daemon", "start", "--foreground", "--port", "0", "--json", "--data-dir"])
        .arg(&copy)
        .args(["--shared-dir", shared.to_str().unwrap(), "--store", &c.db])
        .env("OD_LEASE_TTL_MS", TTL_MS.to_string())
        .env_remove("OD_NEW_DAEMON_ID")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(83), "{stderr}");
    assert!(stderr.contains("daemon-id-in-use") && stderr.contains(&a_id), "{stderr}");
    // With --new-daemon-id it starts under a new id, beside A.
    let renewed = daemon_proc::start(
        &copy,
        &["--shared-dir", shared.to_str().unwrap(), "--store", &c.db, "--new-daemon-id"],
        &[("OD_LEASE_TTL_MS", TTL_MS.to_string())],
    );
    let new_id = daemon_id(&renewed);
    assert_ne!(new_id, a_id);
    assert_eq!(std::fs::read_to_string(copy.join("daemon-id")).unwrap().trim(), new_id);
    std::thread::sleep(ttl() * 3);
    for (r, pid) in runs.iter().zip(&pids) {
        assert_eq!(status(&c.a.url, r)["status"], "running", "run {r} was touched");
        assert_eq!(lease_holder(&c.server, &c.dbn(), r), a_id);
        assert!(alive(*pid), "run {r}'s agent was ended");
        assert!(!kinds(&c.a.url, r).contains(&"run_ended".to_string()));
    }
    drop(renewed);
    for pid in pids {
        // SAFETY: ends the test's own agent groups (A is killed without ending them).
        unsafe { libc::killpg(pid, libc::SIGKILL) };
    }
}
