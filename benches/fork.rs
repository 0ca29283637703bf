//! Fork latency (issue 16): how long `POST /api/runs/{id}/fork` takes — from the request until the
//! fork's first event (`run_forked`, with its `run_created`) is durable and the 202 is read — for a
//! parent run of ~60 events and one of ~6,000, next to the SQLite peer doing what an engine that
//! stores a run as rows must do to fork one: copy the parent's rows into the new run, durably.
//!
//! The daemon runs in-process (`od::daemon::start`, a fresh data dir on the real disk, the real
//! clock) and is called over loopback HTTP with a plain ureq agent. The parent is `examples/brancher`: stages
//! `plan`, `generate` (asks `style` at its entry) and a `critique` devloop (three rounds with the
//! dry-run agent) — 60 events. The long parent is the same run with 6,000 signals posted through
//! `POST /api/runs/{id}/signals` while it waits for `style` (each an event of its stream), then
//! answered and run to its end. Each fork is measured at two points: `end` (the fork has nothing
//! left to do; it is watched to its end, untimed, before the next fork) and the `style` request
//! (the fork waits for its answer, idle).
//! `FORKS` forks per (parent, point), after `WARMUP` unmeasured ones; median and p95.
//!
//! The peer: SQLite (WAL, `synchronous=FULL`, as every bench's peer) holding the same number of
//! 300-byte rows for the parent's stream; a fork is one IMMEDIATE transaction
//! `INSERT INTO events(stream, version, payload) SELECT 'run:<fork>', version, payload FROM events
//! WHERE stream = 'run:<parent>'` and its commit. Ratio = od / SQLite (below 1: od is faster).
//!
//! Target: under 10 ms for both sizes (the fork must not copy the parent's events).
//!
//! Run: `cargo bench --bench fork`. Results: table on stdout, `target/bench-results/fork.json`.

mod common;

use common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::time::Instant;

const FORKS: usize = 50;
const WARMUP: usize = 5;
const LONG_SIGNALS: usize = 6_000;
const TARGET_MS: f64 = 10.0;
const PEER_PAYLOAD: usize = 300;

struct Daemon {
    rt: tokio::runtime::Runtime,
    running: Option<od::daemon::Running>,
    url: String,
    token: String,
    agent: ureq::Agent,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start() -> Self {
        let dir = tempdir();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let cfg = od::daemon::DaemonConfig::new(dir.path().join("data"));
        let running = rt.block_on(od::daemon::start(cfg)).expect("daemon starts");
        let (url, token) = (running.url(), running.local_token.clone());
        Self { rt, running: Some(running), url, token, agent: ureq::AgentBuilder::new().build(), _dir: dir }
    }

    fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .agent
            .post(&format!("{}{path}", self.url))
            .set("Authorization", &format!("Bearer {}", self.token))
            .send_json(body);
        match r {
            Ok(r) => (r.status(), r.into_json().unwrap_or(Value::Null)),
            Err(ureq::Error::Status(c, r)) => (c, r.into_json().unwrap_or(Value::Null)),
            Err(e) => panic!("{path}: {e}"),
        }
    }

    /// The run's `{"id","event","data"}` lines until `stop` (or `end`).
    fn until(&self, run: &str, stop: impl Fn(&Value) -> bool) -> Vec<Value> {
        let r = self.agent.get(&format!("{}/api/runs/{run}/watch?ids=true", self.url)).call().unwrap();
        let mut out = Vec::new();
        for line in BufReader::new(r.into_reader()).lines() {
            let line = line.unwrap();
            if line.is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(&line).unwrap();
            let done = stop(&v) || v["event"] == "end";
            out.push(v);
            if done {
                break;
            }
        }
        out
    }

    /// A finished brancher run with `signals` extra events; its id, its last event id and the id
    /// of its `style` request.
    fn parent(&self, signals: usize) -> (String, u64, u64) {
        let (code, v) = self.post("/api/runs", json!({ "pluginId": "brancher" }));
        assert_eq!(code, 202, "{v}");
        let id = v["runId"].as_str().unwrap().to_string();
        let asked = self.until(&id, |v| v["event"] == "genui_surface_request");
        let request = asked.last().unwrap()["id"].as_u64().unwrap();
        // Posted from 8 threads at once (each request waits on its own round trip).
        std::thread::scope(|sc| {
            for t in 0..8 {
                let id = &id;
                sc.spawn(move || {
                    for i in (t..signals).step_by(8) {
                        let body = json!({ "name": "bench.n", "value": i });
                        let (code, v) = self.post(&format!("/api/runs/{id}/signals"), body);
                        assert_eq!(code, 200, "{v}");
                    }
                });
            }
        });
        let (code, v) = self.post(&format!("/api/runs/{id}/genui/style/respond"), json!({ "value": "bold" }));
        assert_eq!(code, 200, "{v}");
        let all = self.until(&id, |_| false);
        assert_eq!(all.last().unwrap()["data"]["status"], "succeeded");
        (id, all.last().unwrap()["id"].as_u64().unwrap(), request)
    }

    /// One fork's latency; a fork at the end is then watched to its end (not timed), so it does not
    /// run while the next fork is measured.
    fn fork_ms(&self, parent: &str, at: &str) -> f64 {
        let t = Instant::now();
        let (code, v) = self.post(&format!("/api/runs/{parent}/fork"), json!({ "at": at }));
        let ms = t.elapsed().as_secs_f64() * 1e3;
        assert_eq!(code, 202, "{v}");
        if at == "end" {
            let ev = self.until(v["runId"].as_str().unwrap(), |_| false);
            assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
        }
        ms
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            self.rt.block_on(r.stop());
        }
    }
}

/// Installs `examples/brancher` (see the module docs).
fn install_brancher(d: &Daemon) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/brancher");
    let r = d.agent.post(&format!("{}/api/plugins/install", d.url)).send_json(json!({ "source": dir })).unwrap();
    let last = r.into_string().unwrap().lines().last().unwrap().to_string();
    assert!(last.contains("success"), "{last}");
}

/// The peer's fork of a parent of `rows` rows: the copy's durable commit, ms (median, p95).
fn peer(rows: usize) -> (f64, f64) {
    let dir = tempdir();
    let c = sqlite_open(&dir.path().join("peer.db"));
    {
        let tx = c.unchecked_transaction().unwrap();
        let payload = vec![b'x'; PEER_PAYLOAD];
        for v in 0..rows {
            tx.execute(
                "INSERT INTO events(stream, version, payload) VALUES ('run:parent', ?1, ?2)",
                rusqlite::params![v as i64, payload],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let mut times = Vec::new();
    for i in 0..WARMUP + FORKS {
        let t = Instant::now();
        let tx = rusqlite::Transaction::new_unchecked(&c, rusqlite::TransactionBehavior::Immediate).unwrap();
        tx.execute(
            "INSERT INTO events(stream, version, payload) SELECT ?1, version, payload FROM events WHERE stream = 'run:parent'",
            rusqlite::params![format!("run:fork-{i}")],
        )
        .unwrap();
        tx.commit().unwrap();
        if i >= WARMUP {
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    times.sort_by(f64::total_cmp);
    (quantile(&times, 0.5), quantile(&times, 0.95))
}

fn main() {
    let d = Daemon::start();
    install_brancher(&d);
    let mut rows = Vec::new();
    println!("fork latency: POST /api/runs/{{id}}/fork → 202 (the fork's first events durable), ms");
    println!(
        "{:<10} {:>7} {:<8} {:>8} {:>8} {:>10} {:>8} {:>7}",
        "parent", "events", "at", "median", "p95", "peer med", "ratio", "target"
    );
    for (label, signals) in [("short", 0), ("long", LONG_SIGNALS)] {
        let (parent, last, request) = d.parent(signals);
        let events = last + 1;
        let (peer_med, peer_p95) = peer(events as usize);
        for at in ["end".to_string(), request.to_string()] {
            let mut times = Vec::new();
            for i in 0..WARMUP + FORKS {
                let ms = d.fork_ms(&parent, &at);
                if i >= WARMUP {
                    times.push(ms);
                }
            }
            times.sort_by(f64::total_cmp);
            let (med, p95) = (quantile(&times, 0.5), quantile(&times, 0.95));
            let pass = p95 < TARGET_MS;
            let point = if at == "end" { "end".to_string() } else { format!("{at} (waiting)") };
            println!(
                "{label:<10} {events:>7} {point:<8} {med:>8.2} {p95:>8.2} {peer_med:>10.2} {:>8.2} {:>7}",
                med / peer_med,
                verdict(pass)
            );
            rows.push(json!({ "parent": label, "parentEvents": events, "at": point, "forks": FORKS,
                "medianMs": med, "p95Ms": p95, "peerMedianMs": peer_med, "peerP95Ms": peer_p95,
                "ratio": med / peer_med, "targetMs": TARGET_MS, "pass": pass }));
        }
    }
    write_json("fork", &json!({ "bench": "fork", "machine": machine(), "results": rows }));
}
