//! Runs: cold start and idle memory of the daemon, time to a run's first event, run throughput back
//! to back, and a burst of concurrent starts — all over loopback HTTP, with the built-in dry-run
//! agent (no model, deterministic, writes its stage artifacts into the run's project directory).
//!
//! The daemon is always the real binary, spawned as a separate process:
//! `od --data-dir <fresh dir> daemon start --foreground --port 0` (the binary Cargo built for this
//! bench's profile, `CARGO_BIN_EXE_od`, i.e. `target/release/od` under `cargo bench`). With port 0
//! it writes its URL to `<data-dir>/daemon.json`. Every scenario gets a fresh data dir on the real
//! disk (`common::tempdir`).
//!
//! Every run is `POST /api/runs` with
//! `{"pluginId":"od-new-generation","pluginInputs":{"topic":"tea","audience":"tea lovers",
//! "artifactKind":"landing-page"},"agent":"dry-run"}`: the bundled scenario's pipeline (discovery,
//! plan, generate, critique repeated until the score reaches 4 — three iterations with the dry-run
//! agent), ~60 events per run. A run is followed through `GET /api/runs/{id}/watch` (ND-JSON, replays
//! from the run's start, ends after `end`), read to its end; every run must end `succeeded`.
//!
//! 1. Cold start: `COLD_STARTS` times, fresh data dir each: spawn → `GET /api/health` answers 200
//!    (the bench polls `daemon.json` and then the health route every 100 µs; connect timeout 5 ms).
//!    Then idle memory: the health answer was the one request served; wait `IDLE_WAIT`, read VmRSS
//!    and VmHWM from `/proc/<pid>/status`. Then `POST /api/daemon/stop` and wait for the exit.
//! 2. Time to first event: one daemon, `FIRST_EVENT_WARMUP` unmeasured runs, then
//!    `FIRST_EVENT_RUNS` runs one at a time; latency = just before the POST is sent until the first
//!    ND-JSON line of the watch (opened right after the 202) has been read. That first line must be
//!    `pipeline_stage_started`. Each run is then read to its end (not timed) before the next. The
//!    client is a plain ureq agent with no socket tuning, so whatever the server's TCP behaviour
//!    costs (e.g. Nagle's algorithm against delayed ACKs on a streamed body) is part of the figure;
//!    each scenario also reports the run's duration on the daemon's own clock (`endedAt -
//!    createdAt` from `GET /api/runs`, ms resolution) to tell engine time from delivery time.
//! 3. Throughput back to back: a fresh daemon, `BACK_TO_BACK_RUNS` runs, each started and watched
//!    to its `end` before the next starts; runs/s = runs / total time. Afterwards the daemon is
//!    restarted on that populated data dir (informational: start time and VmHWM with a log to
//!    verify).
//! 4. Burst: a fresh daemon; `BURST` client threads (one ureq agent each) released together by a
//!    barrier, each POSTs one run and watches it to its end; total time = release → last end.
//!    Repeated `BURSTS` (5) times on the same daemon, so a trend shows. The daemon's VmRSS
//!    before, the peak VmRSS during each burst (sampled every 2 ms), VmRSS (and its anonymous part)
//!    1 s after each burst, VmHWM and the thread count are recorded. od runs at most
//!    `MAX_CONCURRENT_RUNS` (16) at once; the rest wait `queued` for a slot.
//!    "Bounded" (the target) is judged as: every run of every burst succeeded, and neither the peak
//!    RSS during the last burst nor the settled RSS after it exceeds the first burst's by more than
//!    `BOUND_GROWTH` (10%) or `BOUND_SLACK_MB` (1 MB), whichever is larger.
//!
//! MB = 10^6 bytes. Reference: OpenDesign's own daemon on this kind of machine (from the issue):
//! 2.4 s cold start, 270 MB idle, 250 ms to first event, 3.6 runs/s, out of memory under 50
//! concurrent starts. Targets: cold start < 50 ms, idle RSS < 30 MB, first event < 5 ms,
//! > 200 runs/s, bounded memory under the 50-run burst.
//!
//! Run: `cargo bench --bench runs`. Results: tables on stdout, `target/bench-results/runs.json`.
//! `OD_RUNS_BENCH_OD=/path/to/od` runs every scenario against that binary instead.
//!
//! Small settings, two builds side by side (issue 38's before/after, extended by issue 33): with
//! `OD_RUNS_BENCH_COMPARE=before=/path/to/od,after=/path/to/od` only this runs: the binaries
//! alternate for `OD_RUNS_BENCH_ROUNDS` rounds (default 3), each round on a fresh data dir per
//! binary: cold start (spawn → health, as in 1.), idle VmRSS/RssAnon after `IDLE_WAIT`, then
//! `OD_RUNS_BENCH_RUNS` runs (default 40, after 3 unmeasured) back to back, each one's time to
//! first event kept (as in 2., but without the 10 warm-up runs), and the daemon's CPU time per run
//! (user + system from `/proc/<pid>/stat`). Per round and per binary (medians; first event over
//! all its runs) on stdout and in `target/bench-results/runs-compare.json`. On a loaded machine,
//! read the ratio between the binaries, not the absolute figures; CPU per run swings less than
//! runs/s. The data dirs are removed after the last round (see [`compare_round`]).
//! `OD_RUNS_BENCH_DIR=/dev/shm` puts them on tmpfs instead of the real disk, to tell what the file
//! system charges from what od spends (fsync is free there: never a figure to publish).

mod common;

use common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Cold starts, each on a fresh data dir.
const COLD_STARTS: usize = 10;
/// Idle time before reading the daemon's memory.
const IDLE_WAIT: Duration = Duration::from_secs(1);
/// Unmeasured runs before the first-event measurement.
const FIRST_EVENT_WARMUP: usize = 10;
/// Measured runs for time to first event.
const FIRST_EVENT_RUNS: usize = 200;
/// Runs started back to back, each waited to its end.
const BACK_TO_BACK_RUNS: usize = 200;
/// Runs started at once.
const BURST: usize = 50;
/// Bursts against the same daemon.
const BURSTS: usize = 5;
/// Allowed growth of the burst memory figures from the first burst to the last.
const BOUND_GROWTH: f64 = 0.10;
const BOUND_SLACK_MB: f64 = 1.0;
/// The od runner's concurrency limit (`od::limits::MAX_CONCURRENT_RUNS`), for the report.
const MAX_CONCURRENT_RUNS: usize = od::limits::MAX_CONCURRENT_RUNS;

/// Targets.
const TARGET_COLD_START_MS: f64 = 50.0;
const TARGET_IDLE_RSS_MB: f64 = 30.0;
const TARGET_FIRST_EVENT_MS: f64 = 5.0;
const TARGET_RUNS_PER_S: f64 = 200.0;
/// OpenDesign's own daemon on this kind of machine, from the issue.
const REFERENCE_COLD_START_MS: f64 = 2_400.0;
const REFERENCE_IDLE_RSS_MB: f64 = 270.0;
const REFERENCE_FIRST_EVENT_MS: f64 = 250.0;
const REFERENCE_RUNS_PER_S: f64 = 3.6;
const REFERENCE_BURST: &str = "out of memory";

/// The body of every `POST /api/runs`.
const START_BODY: &str = r#"{"pluginId":"od-new-generation","pluginInputs":{"topic":"tea","audience":"tea lovers","artifactKind":"landing-page"},"agent":"dry-run"}"#;

// ---------------------------------------------------------------- the daemon process

/// The `od` binary: `OD_RUNS_BENCH_OD` when set (another build, e.g. main's, for a before/after),
/// else the one Cargo built for this bench, else the one next to the bench executable.
fn od_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("OD_RUNS_BENCH_OD") {
        return PathBuf::from(p);
    }
    let built = PathBuf::from(env!("CARGO_BIN_EXE_od"));
    if built.is_file() {
        return built;
    }
    // target/<profile>/deps/runs-<hash> → target/<profile>/od
    let exe = std::env::current_exe().expect("bench executable");
    let beside = exe.parent().and_then(Path::parent).map(|p| p.join("od")).expect("target dir");
    assert!(beside.is_file(), "no od binary at {} nor {}", built.display(), beside.display());
    beside
}

/// A spawned daemon; killed on drop if still running (a failed assertion leaves no orphan).
struct Daemon {
    child: Child,
    pid: u32,
    url: String,
    /// Spawn → `daemon.json` readable (ms).
    discovery_ms: f64,
    /// Spawn → `GET /api/health` answered 200 (ms).
    ready_ms: f64,
    /// `lastSeq` the first health answer reported.
    last_seq: u64,
}

impl Daemon {
    /// Spawns `od daemon start --foreground --port 0` on `data` and polls until it is healthy.
    fn spawn(data: &Path) -> Daemon {
        Self::spawn_with(&od_binary(), data)
    }

    /// [`Daemon::spawn`] of a given binary.
    fn spawn_with(exe: &Path, data: &Path) -> Daemon {
        let discovery = data.join("daemon.json");
        let _ = std::fs::remove_file(&discovery);
        let probe =
            ureq::AgentBuilder::new().timeout_connect(Duration::from_millis(5)).timeout(Duration::from_secs(5)).build();
        let t0 = Instant::now();
        let mut child = Command::new(exe)
            .arg("--data-dir")
            .arg(data)
            .args(["daemon", "start", "--foreground", "--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", exe.display()));
        let pid = child.id();
        let deadline = t0 + Duration::from_secs(30);
        let mut found: Option<(String, f64)> = None;
        loop {
            if found.is_none() {
                // Written with a plain write, so a read can see it half done: retry until it parses.
                if let Some(v) =
                    std::fs::read_to_string(&discovery).ok().and_then(|t| serde_json::from_str::<Value>(&t).ok())
                {
                    assert_eq!(v["pid"].as_u64(), Some(u64::from(pid)), "daemon.json of another process: {v}");
                    let url = v["url"].as_str().expect("daemon.json url").to_string();
                    found = Some((url, t0.elapsed().as_secs_f64() * 1e3));
                }
            }
            if let Some((url, discovery_ms)) = &found {
                if let Ok(r) = probe.get(&format!("{url}/api/health")).call() {
                    let v: Value = r.into_json().expect("health json");
                    let ready_ms = t0.elapsed().as_secs_f64() * 1e3;
                    assert_eq!(v["ok"], true, "health: {v}");
                    let last_seq = v["lastSeq"].as_u64().expect("lastSeq");
                    return Daemon { child, pid, url: url.clone(), discovery_ms: *discovery_ms, ready_ms, last_seq };
                }
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the daemon exited before answering: {status}");
            }
            assert!(Instant::now() < deadline, "the daemon did not answer within 30 s");
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    fn mem(&self) -> Mem {
        Mem::of(self.pid)
    }

    /// `POST /api/daemon/stop`, then waits for the process to exit; ms from the request to the exit.
    fn stop(mut self) -> f64 {
        let t0 = Instant::now();
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build();
        let v: Value = agent
            .post(&format!("{}/api/daemon/stop", self.url))
            .call()
            .expect("daemon stop")
            .into_json()
            .expect("stop json");
        assert_eq!(v["stopping"], true, "stop: {v}");
        let deadline = t0 + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the daemon") {
                assert!(status.success(), "the daemon exited with {status}");
                return t0.elapsed().as_secs_f64() * 1e3;
            }
            assert!(Instant::now() < deadline, "the daemon did not exit within 30 s of the stop");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------- runs over HTTP

fn client() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout_connect(Duration::from_secs(5)).timeout_read(Duration::from_secs(120)).build()
}

/// `POST /api/runs` (must answer 202 `queued`); the run id.
fn start_run(agent: &ureq::Agent, url: &str) -> String {
    let r = agent
        .post(&format!("{url}/api/runs"))
        .set("Content-Type", "application/json")
        .send_string(START_BODY)
        .unwrap_or_else(|e| panic!("POST /api/runs: {e}"));
    assert_eq!(r.status(), 202, "POST /api/runs status");
    let v: Value = r.into_json().expect("start json");
    v["runId"].as_str().unwrap_or_else(|| panic!("no runId in {v}")).to_string()
}

/// The run's watch stream, line by line.
fn open_watch(agent: &ureq::Agent, url: &str, id: &str) -> BufReader<Box<dyn Read + Send + Sync>> {
    let r = agent.get(&format!("{url}/api/runs/{id}/watch")).call().unwrap_or_else(|e| panic!("watch {id}: {e}"));
    BufReader::new(r.into_reader())
}

/// The next line (without its newline); None at the end of the stream.
fn next_line(reader: &mut impl BufRead, buf: &mut String) -> Option<()> {
    buf.clear();
    let n = reader.read_line(buf).expect("read the watch stream");
    if n == 0 {
        return None;
    }
    while buf.ends_with('\n') || buf.ends_with('\r') {
        buf.pop();
    }
    Some(())
}

/// Reads the watch stream to its end; (lines read including `end`, the `end` line's status).
fn watch_to_end(reader: &mut impl BufRead, id: &str, mut lines: usize, mut last: String) -> (usize, String) {
    let mut buf = String::new();
    while next_line(reader, &mut buf).is_some() {
        if buf.is_empty() {
            continue;
        }
        lines += 1;
        std::mem::swap(&mut last, &mut buf);
    }
    let v: Value = serde_json::from_str(&last).unwrap_or_else(|e| panic!("run {id}: last line {last:?}: {e}"));
    assert_eq!(v["event"], "end", "run {id}: the watch stream ended without `end`: {last}");
    (lines, v["data"]["status"].as_str().unwrap_or("?").to_string())
}

/// One run, timed: POST → first line → end.
struct RunTiming {
    /// Send → 202 read (ms).
    post_ms: f64,
    /// Send → first watch line read (ms).
    first_ms: f64,
    /// Send → `end` read (ms).
    end_ms: f64,
    first_event: String,
    lines: usize,
    status: String,
}

fn one_run(agent: &ureq::Agent, url: &str) -> RunTiming {
    let t0 = Instant::now();
    let id = start_run(agent, url);
    let post_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut reader = open_watch(agent, url, &id);
    let mut first = String::new();
    next_line(&mut reader, &mut first).unwrap_or_else(|| panic!("run {id}: empty watch stream"));
    let first_ms = t0.elapsed().as_secs_f64() * 1e3;
    let v: Value = serde_json::from_str(&first).unwrap_or_else(|e| panic!("run {id}: first line {first:?}: {e}"));
    let first_event = v["event"].as_str().unwrap_or("?").to_string();
    let (lines, status) = watch_to_end(&mut reader, &id, 1, first);
    let end_ms = t0.elapsed().as_secs_f64() * 1e3;
    RunTiming { post_ms, first_ms, end_ms, first_event, lines, status }
}

/// `GET /api/runs`: how many runs the daemon holds, by status, and each ended run's duration on
/// the daemon's own clock (`endedAt - createdAt`, ms resolution, sorted).
fn runs_summary(agent: &ureq::Agent, url: &str) -> (BTreeMap<String, usize>, Vec<f64>) {
    let mut by = BTreeMap::new();
    let mut server_ms = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        // Every page (the list is paged: 50 by default), so the counts cover all the runs.
        let mut req = agent.get(&format!("{url}/api/runs")).query("limit", "1000");
        if let Some(c) = &cursor {
            req = req.query("cursor", c);
        }
        let v: Value = req.call().expect("list runs").into_json().expect("runs json");
        for r in v["runs"].as_array().expect("runs array") {
            *by.entry(r["status"].as_str().unwrap_or("?").to_string()).or_insert(0) += 1;
            if let (Some(c), Some(e)) = (r["createdAt"].as_i64(), r["endedAt"].as_i64()) {
                server_ms.push((e - c) as f64);
            }
        }
        match v["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    (by, sorted(server_ms))
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn lat_json(v: &[f64]) -> Value {
    json!({
        "n": v.len(), "min": v.first(), "p50": quantile(v, 0.5), "p90": quantile(v, 0.9),
        "p99": quantile(v, 0.99), "max": v.last(),
    })
}

// ---------------------------------------------------------------- 1. cold start and idle memory

struct ColdStart {
    discovery_ms: f64,
    ready_ms: f64,
    idle: Mem,
    stop_ms: f64,
}

fn cold_starts() -> Vec<ColdStart> {
    (0..COLD_STARTS)
        .map(|_| {
            let dir = tempdir();
            let d = Daemon::spawn(dir.path());
            // The health answer was the one request served; now let it sit idle.
            std::thread::sleep(IDLE_WAIT);
            let idle = d.mem();
            let (discovery_ms, ready_ms) = (d.discovery_ms, d.ready_ms);
            let stop_ms = d.stop();
            ColdStart { discovery_ms, ready_ms, idle, stop_ms }
        })
        .collect()
}

// ---------------------------------------------------------------- 2. time to first event

struct FirstEvent {
    timings: Vec<RunTiming>,
    by_status: BTreeMap<String, usize>,
    server_ms: Vec<f64>,
    mem_after: Mem,
}

fn first_event() -> FirstEvent {
    let dir = tempdir();
    let d = Daemon::spawn(dir.path());
    let agent = client();
    for _ in 0..FIRST_EVENT_WARMUP {
        let t = one_run(&agent, &d.url);
        assert_eq!(t.status, "succeeded", "warm-up run");
    }
    let timings: Vec<RunTiming> = (0..FIRST_EVENT_RUNS).map(|_| one_run(&agent, &d.url)).collect();
    for t in &timings {
        assert_eq!(t.first_event, "pipeline_stage_started", "a run's first watch line");
        assert_eq!(t.status, "succeeded", "a measured run");
    }
    let (by_status, server_ms) = runs_summary(&agent, &d.url);
    let mem_after = d.mem();
    d.stop();
    FirstEvent { timings, by_status, server_ms, mem_after }
}

// ---------------------------------------------------------------- 3. throughput back to back

struct BackToBack {
    secs: f64,
    timings: Vec<RunTiming>,
    by_status: BTreeMap<String, usize>,
    server_ms: Vec<f64>,
    mem_after: Mem,
    /// Restart on the populated data dir: (ready ms, lastSeq at start, idle mem).
    restart_ms: f64,
    restart_seq: u64,
    restart_mem: Mem,
}

fn back_to_back() -> BackToBack {
    let dir = tempdir();
    let d = Daemon::spawn(dir.path());
    let agent = client();
    let t0 = Instant::now();
    let timings: Vec<RunTiming> = (0..BACK_TO_BACK_RUNS).map(|_| one_run(&agent, &d.url)).collect();
    let secs = t0.elapsed().as_secs_f64();
    for t in &timings {
        assert_eq!(t.status, "succeeded", "a back-to-back run");
    }
    let (by_status, server_ms) = runs_summary(&agent, &d.url);
    let mem_after = d.mem();
    d.stop();
    // Informational: start again on the populated data dir (the daemon verifies the whole log).
    let d = Daemon::spawn(dir.path());
    std::thread::sleep(IDLE_WAIT);
    let restart_mem = d.mem();
    let (restart_ms, restart_seq) = (d.ready_ms, d.last_seq);
    d.stop();
    BackToBack { secs, timings, by_status, server_ms, mem_after, restart_ms, restart_seq, restart_mem }
}

// ---------------------------------------------------------------- 4. burst

struct Burst {
    secs: f64,
    timings: Vec<RunTiming>,
    /// Peak VmRSS sampled during the burst.
    peak: Mem,
    /// 1 s after the burst.
    settled: Mem,
}

struct Bursts {
    before: Mem,
    bursts: Vec<Burst>,
    by_status: BTreeMap<String, usize>,
    server_ms: Vec<f64>,
}

fn one_burst(url: &str, pid: u32) -> Burst {
    let barrier = Arc::new(Barrier::new(BURST + 1));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = Mem::default();
            while !done.load(Ordering::Relaxed) {
                let m = Mem::of(pid);
                if m.rss_kib > peak.rss_kib {
                    peak = Mem { threads: peak.threads.max(m.threads), ..m };
                } else {
                    peak.threads = peak.threads.max(m.threads);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            peak
        })
    };
    let clients: Vec<_> = (0..BURST)
        .map(|_| {
            let (barrier, url) = (barrier.clone(), url.to_string());
            std::thread::spawn(move || {
                let agent = client();
                barrier.wait();
                one_run(&agent, &url)
            })
        })
        .collect();
    barrier.wait();
    let t0 = Instant::now();
    let timings: Vec<RunTiming> = clients.into_iter().map(|h| h.join().expect("burst client")).collect();
    let secs = t0.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let mut peak = sampler.join().expect("memory sampler");
    std::thread::sleep(IDLE_WAIT);
    let settled = Mem::of(pid);
    peak.hwm_kib = settled.hwm_kib;
    Burst { secs, timings, peak, settled }
}

fn bursts() -> Bursts {
    let dir = tempdir();
    let d = Daemon::spawn(dir.path());
    let agent = client();
    std::thread::sleep(IDLE_WAIT);
    let before = d.mem();
    let bursts: Vec<Burst> = (0..BURSTS).map(|_| one_burst(&d.url, d.pid)).collect();
    let (by_status, server_ms) = runs_summary(&agent, &d.url);
    d.stop();
    Bursts { before, bursts, by_status, server_ms }
}

// ---------------------------------------------------------------- report

/// One build's figures in one round of [`compare`].
struct Round {
    ready_ms: f64,
    idle: Mem,
    rps: f64,
    /// The daemon's CPU time (user + system) per back-to-back run.
    cpu_ms: f64,
    first_ms: Vec<f64>,
}

/// One round of [`compare`] for build `exe`: cold start on a fresh data dir, idle memory after
/// `IDLE_WAIT`, 3 unmeasured runs, then `runs` back to back (each one's time to first event and
/// the daemon's CPU time kept). The data dir is returned, not removed: deleting thousands of files
/// right before the next build's round makes that build's file creations slower (ext4 skips
/// recently deleted inodes when it allocates one), so every dir is removed after the last round.
fn compare_round(exe: &Path, runs: usize) -> (Round, tempfile::TempDir) {
    let dir = match std::env::var("OD_RUNS_BENCH_DIR") {
        Ok(base) => tempfile::Builder::new().prefix("cell-").tempdir_in(base).expect("tempdir in OD_RUNS_BENCH_DIR"),
        Err(_) => tempdir(),
    };
    let d = Daemon::spawn_with(exe, dir.path());
    std::thread::sleep(IDLE_WAIT);
    let idle = d.mem();
    let agent = client();
    for _ in 0..3 {
        assert_eq!(one_run(&agent, &d.url).status, "succeeded");
    }
    let (t0, cpu0) = (Instant::now(), cpu_ms(d.pid));
    let mut first_ms = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = one_run(&agent, &d.url);
        assert_eq!(t.status, "succeeded", "a back-to-back run");
        assert_eq!(t.first_event, "pipeline_stage_started", "a run's first watch line");
        first_ms.push(t.first_ms);
    }
    let rps = runs as f64 / t0.elapsed().as_secs_f64();
    let cpu_ms = (cpu_ms(d.pid) - cpu0) / runs as f64;
    let ready_ms = d.ready_ms;
    d.stop();
    (Round { ready_ms, idle, rps, cpu_ms, first_ms }, dir)
}

/// `OD_RUNS_BENCH_COMPARE`: several builds side by side, alternating round by round (see the top):
/// per build and round the cold start, idle memory, back-to-back runs/s and each run's time to
/// first event; medians per build on stdout and in `target/bench-results/runs-compare.json`.
fn compare(spec: &str) {
    let env_n = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let (runs, rounds) = (env_n("OD_RUNS_BENCH_RUNS", 40), env_n("OD_RUNS_BENCH_ROUNDS", 3));
    let builds: Vec<(String, PathBuf)> = spec
        .split(',')
        .map(|b| {
            let (label, path) = b.split_once('=').expect("label=path");
            (label.to_string(), PathBuf::from(path))
        })
        .collect();
    println!("{rounds} rounds, builds alternating; per daemon: cold start, idle memory after {} s, {runs} runs back to back after 3 unmeasured", IDLE_WAIT.as_secs());
    println!("| round | build | cold start ms | idle VmRSS MB | idle RssAnon MB | runs/s | daemon CPU ms/run | first event p50 ms |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let mut all: Vec<Vec<Round>> = builds.iter().map(|_| Vec::new()).collect();
    let mut dirs = Vec::new();
    for round in 1..=rounds {
        for (i, (label, exe)) in builds.iter().enumerate() {
            let (r, dir) = compare_round(exe, runs);
            dirs.push(dir);
            let fe = quantile(&sorted(r.first_ms.clone()), 0.5);
            println!(
                "| {round} | {label} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {fe:.3} |",
                r.ready_ms,
                r.idle.rss_mb(),
                mb(r.idle.anon_kib),
                r.rps,
                r.cpu_ms
            );
            all[i].push(r);
        }
    }
    drop(dirs);
    let mut out = Vec::new();
    println!();
    println!("| build (median of {rounds} rounds) | cold start ms | idle VmRSS MB | idle RssAnon MB | runs/s | daemon CPU ms/run | first event p50 / p99 ms (all runs) |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for ((label, exe), rs) in builds.iter().zip(&all) {
        let med = |f: &dyn Fn(&Round) -> f64| quantile(&sorted(rs.iter().map(f).collect()), 0.5);
        let first = sorted(rs.iter().flat_map(|r| r.first_ms.iter().copied()).collect());
        let (ready, rss, anon, rps, cpu) = (
            med(&|r| r.ready_ms),
            med(&|r| r.idle.rss_mb()),
            med(&|r| mb(r.idle.anon_kib)),
            med(&|r| r.rps),
            med(&|r| r.cpu_ms),
        );
        println!(
            "| {label} | {ready:.1} | {rss:.1} | {anon:.1} | {rps:.1} | {cpu:.2} | {:.3} / {:.3} |",
            quantile(&first, 0.5),
            quantile(&first, 0.99)
        );
        out.push(json!({
            "label": label, "binary": exe.display().to_string(),
            "cold_start_ms": rs.iter().map(|r| r.ready_ms).collect::<Vec<_>>(), "cold_start_ms_median": ready,
            "idle": rs.iter().map(|r| r.idle.json()).collect::<Vec<_>>(), "idle_rss_mb_median": rss,
            "idle_rss_anon_mb_median": anon,
            "runs_per_s": rs.iter().map(|r| r.rps).collect::<Vec<_>>(), "runs_per_s_median": rps,
            "cpu_ms_per_run": rs.iter().map(|r| r.cpu_ms).collect::<Vec<_>>(), "cpu_ms_per_run_median": cpu,
            "first_event_ms": lat_json(&first),
        }));
    }
    write_json(
        "runs-compare",
        &json!({
            "machine": machine(), "runs_per_round": runs, "rounds": rounds, "warmup_runs": 3,
            "idle_wait_s": IDLE_WAIT.as_secs(), "builds": out,
        }),
    );
}

fn main() {
    if let Ok(spec) = std::env::var("OD_RUNS_BENCH_COMPARE") {
        return compare(&spec);
    }
    let started = Instant::now();
    let exe = od_binary();
    println!(
        "runs: the od daemon ({}) spawned per scenario on a fresh data dir, loopback HTTP (ureq), dry-run agent, \
         plugin od-new-generation; {COLD_STARTS} cold starts; {FIRST_EVENT_RUNS} runs for time to first event; \
         {BACK_TO_BACK_RUNS} back to back; {BURSTS} bursts of {BURST}",
        exe.display()
    );

    // 1.
    let cold = cold_starts();
    let ready = sorted(cold.iter().map(|c| c.ready_ms).collect());
    let discovery = sorted(cold.iter().map(|c| c.discovery_ms).collect());
    let stop = sorted(cold.iter().map(|c| c.stop_ms).collect());
    let idle_rss = sorted(cold.iter().map(|c| c.idle.rss_mb()).collect());
    let idle_hwm = sorted(cold.iter().map(|c| c.idle.hwm_mb()).collect());
    let idle_threads = cold.iter().map(|c| c.idle.threads).max().unwrap_or(0);
    let cold_p50 = quantile(&ready, 0.5);
    let cold_max = ready.last().copied().unwrap_or(f64::NAN);
    let idle_max = idle_rss.last().copied().unwrap_or(f64::NAN);
    let hwm_max = idle_hwm.last().copied().unwrap_or(f64::NAN);
    println!();
    println!("| cold start ({COLD_STARTS}×, fresh data dir) | p50 | min | max |");
    println!("|---|---:|---:|---:|");
    let row3 = |name: &str, v: &[f64], unit: &str| {
        println!(
            "| {name} | {:.1} {unit} | {:.1} {unit} | {:.1} {unit} |",
            quantile(v, 0.5),
            v.first().copied().unwrap_or(f64::NAN),
            v.last().copied().unwrap_or(f64::NAN)
        );
    };
    row3("spawn → daemon.json", &discovery, "ms");
    row3("spawn → /api/health 200", &ready, "ms");
    row3(&format!("idle VmRSS ({} s after)", IDLE_WAIT.as_secs()), &idle_rss, "MB");
    row3("idle VmHWM", &idle_hwm, "MB");
    row3("idle RssAnon (heap, stacks)", &sorted(cold.iter().map(|c| mb(c.idle.anon_kib)).collect()), "MB");
    row3("POST /api/daemon/stop → exit", &stop, "ms");
    println!("idle threads: {idle_threads}");

    // 2.
    let fe = first_event();
    let first = sorted(fe.timings.iter().map(|t| t.first_ms).collect());
    let post = sorted(fe.timings.iter().map(|t| t.post_ms).collect());
    let end = sorted(fe.timings.iter().map(|t| t.end_ms).collect());
    let lines_per_run = fe.timings.iter().map(|t| t.lines).sum::<usize>() as f64 / fe.timings.len() as f64;
    let (fe_p50, fe_p99) = (quantile(&first, 0.5), quantile(&first, 0.99));
    println!();
    println!(
        "| one run at a time ({FIRST_EVENT_RUNS} runs after {FIRST_EVENT_WARMUP} warm-up) | p50 ms | p90 ms | p99 ms | max ms |"
    );
    println!("|---|---:|---:|---:|---:|");
    let row4 = |name: &str, v: &[f64]| {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} |",
            quantile(v, 0.5),
            quantile(v, 0.9),
            quantile(v, 0.99),
            v.last().copied().unwrap_or(f64::NAN)
        );
    };
    row4("POST /api/runs → 202", &post);
    row4("POST sent → first watch line (pipeline_stage_started)", &first);
    row4("POST sent → end", &end);
    row4("on the daemon: createdAt → endedAt (ms resolution, all runs)", &fe.server_ms);
    println!(
        "watch lines per run: {lines_per_run:.1}; runs on the daemon: {:?}; daemon after: VmRSS {:.1} MB, VmHWM {:.1} MB",
        fe.by_status,
        fe.mem_after.rss_mb(),
        fe.mem_after.hwm_mb()
    );

    // 3.
    let bb = back_to_back();
    let rps = BACK_TO_BACK_RUNS as f64 / bb.secs;
    let bb_end = sorted(bb.timings.iter().map(|t| t.end_ms).collect());
    let bb_ok = bb.timings.iter().all(|t| t.status == "succeeded");
    println!();
    println!(
        "back to back: {BACK_TO_BACK_RUNS} runs in {:.2} s = {rps:.1} runs/s (per run p50 {:.2} ms, p99 {:.2} ms; \
         on the daemon's clock p50 {:.0} ms); all succeeded: {bb_ok}; runs on the daemon: {:?}; \
         daemon after: VmRSS {:.1} MB, VmHWM {:.1} MB",
        bb.secs,
        quantile(&bb_end, 0.5),
        quantile(&bb_end, 0.99),
        quantile(&bb.server_ms, 0.5),
        bb.by_status,
        bb.mem_after.rss_mb(),
        bb.mem_after.hwm_mb()
    );
    println!(
        "restart on that data dir ({} events): spawn → /api/health 200 in {:.1} ms; idle VmRSS {:.1} MB, \
         VmHWM {:.1} MB",
        bb.restart_seq,
        bb.restart_ms,
        bb.restart_mem.rss_mb(),
        bb.restart_mem.hwm_mb()
    );

    // 4.
    let bu = bursts();
    println!();
    println!(
        "| burst of {BURST} (≤ {MAX_CONCURRENT_RUNS} executing) | total s | runs/s | succeeded | end p50 ms | end max ms | \
         first line p50 ms | peak VmRSS MB | VmRSS after MB | RssAnon after MB | VmHWM MB | peak threads |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| before | | | | | | | | {:.1} | {:.1} | {:.1} | {} |",
        bu.before.rss_mb(),
        mb(bu.before.anon_kib),
        bu.before.hwm_mb(),
        bu.before.threads
    );
    for (i, b) in bu.bursts.iter().enumerate() {
        let end = sorted(b.timings.iter().map(|t| t.end_ms).collect());
        let first = sorted(b.timings.iter().map(|t| t.first_ms).collect());
        println!(
            "| burst {} | {:.3} | {:.1} | {}/{} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
            i + 1,
            b.secs,
            BURST as f64 / b.secs,
            b.timings.iter().filter(|t| t.status == "succeeded").count(),
            BURST,
            quantile(&end, 0.5),
            end.last().copied().unwrap_or(f64::NAN),
            quantile(&first, 0.5),
            b.peak.rss_mb(),
            b.settled.rss_mb(),
            mb(b.settled.anon_kib),
            b.settled.hwm_mb(),
            b.peak.threads
        );
    }
    let (b1, bn) = (&bu.bursts[0], bu.bursts.last().expect("a burst"));
    let growth_kb_per_run =
        (bn.settled.rss_kib as f64 - b1.settled.rss_kib as f64) * 1.024 / (BURST * (BURSTS - 1)).max(1) as f64;
    println!(
        "runs on the daemon: {:?}; on the daemon's clock createdAt → endedAt p50 {:.0} ms, max {:.0} ms; \
         settled VmRSS after burst {BURSTS} vs burst 1: {:+.1} MB ({growth_kb_per_run:.1} kB per run recorded since)",
        bu.by_status,
        quantile(&bu.server_ms, 0.5),
        bu.server_ms.last().copied().unwrap_or(f64::NAN),
        bn.settled.rss_mb() - b1.settled.rss_mb()
    );
    let all_ok = bu.bursts.iter().all(|b| b.timings.iter().all(|t| t.status == "succeeded"))
        && bu.by_status.get("succeeded").copied() == Some(BURST * BURSTS)
        && bu.by_status.len() == 1;
    let within = |first: f64, last: f64| last <= first + (first * BOUND_GROWTH).max(BOUND_SLACK_MB);
    let bounded =
        all_ok && within(b1.peak.rss_mb(), bn.peak.rss_mb()) && within(b1.settled.rss_mb(), bn.settled.rss_mb());
    let burst_rps = sorted(bu.bursts.iter().map(|b| BURST as f64 / b.secs).collect());
    let burst_rps_p50 = quantile(&burst_rps, 0.5);

    // Summary.
    let pass_cold = cold_p50 < TARGET_COLD_START_MS;
    let pass_idle = idle_max < TARGET_IDLE_RSS_MB;
    let pass_fe50 = fe_p50 < TARGET_FIRST_EVENT_MS;
    let pass_fe99 = fe_p99 < TARGET_FIRST_EVENT_MS;
    let pass_rps = bb_ok && rps > TARGET_RUNS_PER_S;
    let pass_burst_rps = all_ok && burst_rps_p50 > TARGET_RUNS_PER_S;
    println!();
    println!("| measure | od | OpenDesign daemon | OpenDesign / od | target | verdict |");
    println!("|---|---:|---:|---:|---:|:-:|");
    println!(
        "| cold start, spawn → health (p50 of {COLD_STARTS}; max) | {cold_p50:.1} ms (max {cold_max:.1}) | {:.1} s | {:.0}x | \
         < {TARGET_COLD_START_MS} ms | {} |",
        REFERENCE_COLD_START_MS / 1e3,
        REFERENCE_COLD_START_MS / cold_p50,
        verdict(pass_cold)
    );
    println!(
        "| idle VmRSS (max of {COLD_STARTS}; VmHWM) | {idle_max:.1} MB (HWM {hwm_max:.1}) | {REFERENCE_IDLE_RSS_MB} MB | \
         {:.0}x | < {TARGET_IDLE_RSS_MB} MB | {} |",
        REFERENCE_IDLE_RSS_MB / idle_max,
        verdict(pass_idle)
    );
    println!(
        "| time to first event p50 | {fe_p50:.3} ms | {REFERENCE_FIRST_EVENT_MS} ms | {:.0}x | < {TARGET_FIRST_EVENT_MS} ms | {} |",
        REFERENCE_FIRST_EVENT_MS / fe_p50,
        verdict(pass_fe50)
    );
    println!(
        "| time to first event p99 | {fe_p99:.3} ms | {REFERENCE_FIRST_EVENT_MS} ms | {:.0}x | < {TARGET_FIRST_EVENT_MS} ms | {} |",
        REFERENCE_FIRST_EVENT_MS / fe_p99,
        verdict(pass_fe99)
    );
    println!(
        "| runs/s back to back ({BACK_TO_BACK_RUNS}, each to its end) | {rps:.1} | {REFERENCE_RUNS_PER_S} | {:.0}x | \
         > {TARGET_RUNS_PER_S} | {} |",
        rps / REFERENCE_RUNS_PER_S,
        verdict(pass_rps)
    );
    println!(
        "| runs/s, burst of {BURST} (median of {BURSTS}) | {burst_rps_p50:.1} | {REFERENCE_BURST} | - | \
         > {TARGET_RUNS_PER_S} | {} |",
        verdict(pass_burst_rps)
    );
    println!(
        "| memory under {BURSTS} bursts of {BURST}: peak VmRSS, first → last; after | {:.1} → {:.1} MB; {:.1} → {:.1} MB \
         (all {} succeeded: {all_ok}) | {REFERENCE_BURST} | - | bounded | {} |",
        b1.peak.rss_mb(),
        bn.peak.rss_mb(),
        b1.settled.rss_mb(),
        bn.settled.rss_mb(),
        BURST * BURSTS,
        verdict(bounded)
    );

    println!("\ntargets:");
    println!(
        "  {} cold start < {TARGET_COLD_START_MS} ms: p50 {cold_p50:.1} ms, max {cold_max:.1} ms",
        verdict(pass_cold)
    );
    println!("  {} idle RSS < {TARGET_IDLE_RSS_MB} MB: max {idle_max:.1} MB", verdict(pass_idle));
    println!(
        "  {} first event < {TARGET_FIRST_EVENT_MS} ms: p50 {fe_p50:.3} ms (p99 {fe_p99:.3} ms: {})",
        verdict(pass_fe50),
        verdict(pass_fe99)
    );
    println!("  {} > {TARGET_RUNS_PER_S} runs/s back to back: {rps:.1}", verdict(pass_rps));
    println!(
        "  {} bounded memory under the {BURST}-run burst: peak {:.1} → {:.1} MB, after {:.1} → {:.1} MB",
        verdict(bounded),
        b1.peak.rss_mb(),
        bn.peak.rss_mb(),
        b1.settled.rss_mb(),
        bn.settled.rss_mb()
    );
    println!("total bench time {:.1} s", started.elapsed().as_secs_f64());

    let timings_json = |ts: &[RunTiming]| {
        json!({
            "post_ms": lat_json(&sorted(ts.iter().map(|t| t.post_ms).collect())),
            "first_line_ms": lat_json(&sorted(ts.iter().map(|t| t.first_ms).collect())),
            "end_ms": lat_json(&sorted(ts.iter().map(|t| t.end_ms).collect())),
            "watch_lines_per_run": ts.iter().map(|t| t.lines).sum::<usize>() as f64 / ts.len().max(1) as f64,
            "succeeded": ts.iter().filter(|t| t.status == "succeeded").count(),
            "first_events": ts.iter().fold(BTreeMap::<String, usize>::new(), |mut m, t| {
                *m.entry(t.first_event.clone()).or_insert(0) += 1;
                m
            }),
        })
    };
    write_json(
        "runs",
        &json!({
            "bench": "runs",
            "machine": machine(),
            "daemon": {
                "binary": exe.display().to_string(),
                "command": "od --data-dir <fresh dir> daemon start --foreground --port 0",
                "transport": "loopback HTTP/1.1, ureq 2 clients (keep-alive)",
                "agent": "dry-run",
                "run_body": serde_json::from_str::<Value>(START_BODY).expect("body"),
                "max_concurrent_runs": MAX_CONCURRENT_RUNS,
            },
            "cold_start": {
                "starts": COLD_STARTS,
                "spawn_to_discovery_ms": lat_json(&discovery),
                "spawn_to_health_ms": lat_json(&ready),
                "stop_to_exit_ms": lat_json(&stop),
                "idle_wait_s": IDLE_WAIT.as_secs_f64(),
                "idle_rss_mb": lat_json(&idle_rss),
                "idle_hwm_mb": lat_json(&idle_hwm),
                "idle_threads_max": idle_threads,
                "runs": cold.iter().map(|c| json!({
                    "discovery_ms": c.discovery_ms, "ready_ms": c.ready_ms, "stop_ms": c.stop_ms, "idle": c.idle.json(),
                })).collect::<Vec<_>>(),
            },
            "first_event": {
                "warmup_runs": FIRST_EVENT_WARMUP,
                "runs": FIRST_EVENT_RUNS,
                "measure": "just before POST /api/runs is sent → first ND-JSON line of /api/runs/{id}/watch read",
                "timings": timings_json(&fe.timings),
                "runs_by_status": fe.by_status,
                "server_run_ms": lat_json(&fe.server_ms),
                "daemon_after": fe.mem_after.json(),
            },
            "back_to_back": {
                "runs": BACK_TO_BACK_RUNS,
                "secs": bb.secs,
                "runs_per_s": rps,
                "all_succeeded": bb_ok,
                "timings": timings_json(&bb.timings),
                "runs_by_status": bb.by_status,
                "server_run_ms": lat_json(&bb.server_ms),
                "daemon_after": bb.mem_after.json(),
                "restart_on_populated_dir": {
                    "events": bb.restart_seq, "spawn_to_health_ms": bb.restart_ms, "idle": bb.restart_mem.json(),
                },
            },
            "burst": {
                "size": BURST,
                "bursts": BURSTS,
                "before": bu.before.json(),
                "runs": bu.bursts.iter().map(|b| json!({
                    "secs": b.secs,
                    "runs_per_s": BURST as f64 / b.secs,
                    "timings": timings_json(&b.timings),
                    "peak_during": b.peak.json(),
                    "settled_after": b.settled.json(),
                })).collect::<Vec<_>>(),
                "runs_by_status": bu.by_status,
                "server_run_ms": lat_json(&bu.server_ms),
                "settled_growth_kb_per_run": growth_kb_per_run,
                "all_succeeded": all_ok,
                "bounded_rule": format!(
                    "all runs succeeded and the last burst's peak and settled VmRSS exceed the first's by at most \
                     max({:.0}%, {BOUND_SLACK_MB} MB)", BOUND_GROWTH * 100.0),
                "bounded": bounded,
            },
            "reference": {
                "system": "OpenDesign's own daemon, this kind of machine (from the issue)",
                "cold_start_ms": REFERENCE_COLD_START_MS,
                "idle_rss_mb": REFERENCE_IDLE_RSS_MB,
                "first_event_ms": REFERENCE_FIRST_EVENT_MS,
                "runs_per_s": REFERENCE_RUNS_PER_S,
                "burst_50": REFERENCE_BURST,
            },
            "targets": [
                { "target": "cold start < 50 ms (p50)", "measured_ms": cold_p50, "max_ms": cold_max,
                  "reference_ms": REFERENCE_COLD_START_MS, "pass": pass_cold },
                { "target": "idle RSS < 30 MB (max over starts)", "measured_mb": idle_max,
                  "reference_mb": REFERENCE_IDLE_RSS_MB, "pass": pass_idle },
                { "target": "time to first event < 5 ms (p50)", "measured_ms": fe_p50,
                  "reference_ms": REFERENCE_FIRST_EVENT_MS, "pass": pass_fe50 },
                { "target": "time to first event < 5 ms (p99)", "measured_ms": fe_p99,
                  "reference_ms": REFERENCE_FIRST_EVENT_MS, "pass": pass_fe99 },
                { "target": "> 200 runs/s back to back", "measured_runs_per_s": rps,
                  "reference_runs_per_s": REFERENCE_RUNS_PER_S, "pass": pass_rps },
                { "target": "> 200 runs/s in a burst of 50 (informational)", "measured_runs_per_s": burst_rps_p50,
                  "pass": pass_burst_rps },
                { "target": "bounded memory under a 50-run burst", "peak_first_mb": b1.peak.rss_mb(),
                  "peak_last_mb": bn.peak.rss_mb(), "settled_first_mb": b1.settled.rss_mb(),
                  "settled_last_mb": bn.settled.rss_mb(), "reference": REFERENCE_BURST, "pass": bounded },
            ],
            "total_bench_secs": started.elapsed().as_secs_f64(),
        }),
    );
}
