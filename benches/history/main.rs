//! History: what a long-lived data dir costs the daemon — start, memory, lists, new runs and disk —
//! with 0, 10,000 and 100,000 runs already recorded.
//!
//! 1. Capture (`seed.rs`): one real dry-run `od-new-generation` run on the release daemon; its
//!    events (~65: project, conversation, snapshot, run; the same kinds and sizes every such run
//!    writes) become the template.
//! 2. Seed (`seed.rs`): for each size, a fresh data dir under `target/bench-tmp/`, the template
//!    replayed `n` times with fresh ids through the store (`submit_all` per run, pipelined), one run
//!    in ten in one shared project.
//! 3. With the release daemon (`od --data-dir <dir> daemon start --foreground --port 0`, as
//!    `benches/runs`; `daemon.rs`):
//!    - warm-up: the first start after seeding (the daemon folds whatever its read models lack),
//!      spawn → `/api/health` 200, reported apart; then a clean stop (`POST /api/daemon/stop`);
//!    - disk (`disk.rs`), with the daemon stopped: bytes per event by part;
//!    - start after a clean stop: `STARTS` times spawn → health 200; idle VmRSS and RssAnon 1 s after;
//!    - start after `kill -9`: `STARTS` times: an idle daemon is SIGKILLed (no new events since its
//!      start), then spawn → health 200 is timed;
//!    - on a daemon started cleanly: `GET /api/runs?limit=50` and one project's runs
//!      (`?projectId=<shared>&limit=50`), `LIST_REQS` each, p50/p99 (client-side, keep-alive);
//!      `FIRST_RUNS` new runs one at a time, POST sent → first watch line, p50 (after
//!      `FIRST_WARMUP`); `B2B_RUNS` runs back to back, each watched to its end: runs/s.
//!
//! Each size's data dir is deleted once measured.
//!
//! Sizes: `OD_HISTORY_RUNS` (default `0,10000,100000`); starts per kind: `OD_HISTORY_STARTS`
//! (default 3). 100,000 runs take ~3.5 GB of disk while measured.
//!
//! Targets (issue 12, at the largest size): start < 200 ms after a clean stop, < 500 ms after
//! `kill -9`; RssAnon < 64 MB idle; list p99 < 5 ms; first event and runs/s within 10% of the empty
//! data dir; index + read models ≤ 50% of segment bytes.
//!
//! `OD_HISTORY_PROFILE=<dir>` profiles new runs instead (see `profile.rs`).
//!
//! Run: `cargo bench --bench history`. Results: a table on stdout, `target/bench-results/history.json`.

#[path = "../common/mod.rs"]
mod common;
mod daemon;
mod disk;
mod profile;
mod report;
mod seed;

use common::*;
use daemon::{client, get_json, one_run, Daemon};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// List requests per list measured.
const LIST_REQS: usize = 200;
pub const FIRST_WARMUP: usize = 5;
const FIRST_RUNS: usize = 50;
const B2B_RUNS: usize = 100;
const IDLE_WAIT: Duration = Duration::from_secs(1);
/// How long a start may take (a first fold of 100,000 runs is slow before issue 12).
pub const START_DEADLINE: Duration = Duration::from_secs(3600);

fn env_list(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().replace('_', "").parse().unwrap_or_else(|_| panic!("{name}: {s:?} is not a count")))
        .collect()
}

/// Everything measured at one size.
pub struct Cell {
    pub runs: usize,
    pub seeded: seed::Seeded,
    pub warm_ms: f64,
    pub warm_list_ms: f64,
    pub warm_stop_ms: f64,
    pub disk: disk::Disk,
    pub clean_ms: Vec<f64>,
    pub clean_list_ms: Vec<f64>,
    pub idle: Vec<Mem>,
    pub kill_ms: Vec<f64>,
    pub kill_list_ms: Vec<f64>,
    pub list_ms: Vec<f64>,
    pub list_items: usize,
    pub list_body_bytes: usize,
    pub project_ms: Vec<f64>,
    pub project_items: usize,
    pub first_ms: Vec<f64>,
    pub runs_per_s: f64,
    pub after_runs: Mem,
}

fn time_list(agent: &ureq::Agent, url: &str, path: &str) -> (Vec<f64>, usize, usize) {
    let mut ms = Vec::with_capacity(LIST_REQS);
    let (mut items, mut bytes) = (0, 0);
    for _ in 0..LIST_REQS {
        let t0 = Instant::now();
        let body = agent.get(&format!("{url}{path}")).call().expect("list").into_string().expect("list body");
        ms.push(t0.elapsed().as_secs_f64() * 1e3);
        let v: Value = serde_json::from_str(&body).expect("list json");
        items = v["runs"].as_array().map_or(0, Vec::len);
        bytes = body.len();
    }
    ms.sort_by(f64::total_cmp);
    (ms, items, bytes)
}

fn cell(t: &seed::Template, n: usize, starts: usize) -> Cell {
    let holder = tempdir();
    let dir = holder.path().join("data");
    println!("\n== {n} runs: seeding");
    let seeded = seed::seed(t, &dir, n);
    println!("seeded {} runs, {} events in {:.1} s", seeded.runs, seeded.events, seeded.secs);

    let d = Daemon::spawn(&dir, START_DEADLINE);
    let (warm_ms, warm_list_ms) = (d.ready_ms, d.list_ready_ms);
    let warm_stop_ms = d.stop();
    println!("warm-up start {warm_ms:.1} ms (runs list answered at {warm_list_ms:.1} ms), stop {warm_stop_ms:.1} ms");
    let disk = disk::measure(&dir);

    let (mut clean_ms, mut clean_list_ms, mut idle) = (vec![], vec![], vec![]);
    for _ in 0..starts {
        let d = Daemon::spawn(&dir, START_DEADLINE);
        clean_ms.push(d.ready_ms);
        clean_list_ms.push(d.list_ready_ms);
        std::thread::sleep(IDLE_WAIT);
        idle.push(d.mem());
        d.stop();
    }
    println!("after a clean stop: {clean_ms:.1?} ms");

    let (mut kill_ms, mut kill_list_ms) = (vec![], vec![]);
    let mut d = Daemon::spawn(&dir, START_DEADLINE);
    for _ in 0..starts {
        std::thread::sleep(IDLE_WAIT);
        d.kill9();
        d = Daemon::spawn(&dir, START_DEADLINE);
        kill_ms.push(d.ready_ms);
        kill_list_ms.push(d.list_ready_ms);
    }
    d.stop();
    println!("after kill -9: {kill_ms:.1?} ms");

    let d = Daemon::spawn(&dir, START_DEADLINE);
    let agent = client();
    let (list_ms, list_items, list_body_bytes) = time_list(&agent, &d.url, "/api/runs?limit=50");
    let (project_ms, project_items) = if n > 0 {
        let (ms, items, _) =
            time_list(&agent, &d.url, &format!("/api/runs?projectId={}&limit=50", seeded.shared_project));
        (ms, items)
    } else {
        (vec![], 0)
    };
    for _ in 0..FIRST_WARMUP {
        assert_eq!(one_run(&agent, &d.url).1, "succeeded", "warm-up run");
    }
    let mut first_ms: Vec<f64> = (0..FIRST_RUNS)
        .map(|_| {
            let (ms, status) = one_run(&agent, &d.url);
            assert_eq!(status, "succeeded", "a measured run");
            ms
        })
        .collect();
    first_ms.sort_by(f64::total_cmp);
    let t0 = Instant::now();
    for _ in 0..B2B_RUNS {
        assert_eq!(one_run(&agent, &d.url).1, "succeeded", "a back-to-back run");
    }
    let runs_per_s = B2B_RUNS as f64 / t0.elapsed().as_secs_f64();
    let after_runs = d.mem();
    let total = get_json(&agent, &d.url, "/api/health")["lastSeq"].as_u64().unwrap_or(0);
    d.stop();
    println!(
        "lists p50 {:.2} ms / project p50 {:.2} ms; first event p50 {:.2} ms; {runs_per_s:.1} runs/s; log now {total} events",
        quantile(&list_ms, 0.5),
        quantile(&project_ms, 0.5),
        quantile(&first_ms, 0.5)
    );
    remove(holder.path());
    Cell {
        runs: n,
        seeded,
        warm_ms,
        warm_list_ms,
        warm_stop_ms,
        disk,
        clean_ms,
        clean_list_ms,
        idle,
        kill_ms,
        kill_list_ms,
        list_ms,
        list_items,
        list_body_bytes,
        project_ms,
        project_items,
        first_ms,
        runs_per_s,
        after_runs,
    }
}

fn remove(p: &Path) {
    if let Err(e) = std::fs::remove_dir_all(p) {
        eprintln!("could not remove {}: {e}", p.display());
    }
}

fn main() {
    let started = Instant::now();
    let sizes = env_list("OD_HISTORY_RUNS", "0,10000,100000");
    let starts = env_list("OD_HISTORY_STARTS", "3").first().copied().unwrap_or(3).max(1);
    if let Some(root) = std::env::var_os("OD_HISTORY_PROFILE") {
        return profile::run(Path::new(&root), &sizes);
    }
    println!(
        "history: the od daemon ({}) on data dirs seeded with {sizes:?} dry-run od-new-generation runs; \
         {starts} starts per kind",
        daemon::od_binary().display()
    );
    let cap = tempdir();
    let template = seed::capture(&cap.path().join("data"));
    remove(cap.path());
    println!(
        "template: {} events, {} payload bytes per run; kinds {:?}",
        template.events, template.payload_bytes, template.kinds
    );
    let cells: Vec<Cell> = sizes.iter().map(|&n| cell(&template, n, starts)).collect();
    let json = report::print(&cells, &template);
    write_json(
        "history",
        &json!({
            "bench": "history",
            "machine": machine(),
            "template": { "events_per_run": template.events, "payload_bytes_per_run": template.payload_bytes,
                          "kinds": template.kinds, "shared_project_every": seed::SHARED_EVERY },
            "method": {
                "daemon": "od --data-dir <dir> daemon start --foreground --port 0 (release)",
                "starts_per_kind": starts, "list_requests": LIST_REQS, "first_event_runs": FIRST_RUNS,
                "first_event_warmup": FIRST_WARMUP, "back_to_back_runs": B2B_RUNS, "idle_wait_s": IDLE_WAIT.as_secs_f64(),
            },
            "sizes": json,
            "total_bench_secs": started.elapsed().as_secs_f64(),
        }),
    );
}
