//! The log at scale, measured by hand (ignored: it seeds millions of events and times things, and
//! tests never assert on machine speed). Run in release:
//!
//! ```text
//! OD_SCALE_RUNS=100000 OD_SCALE_DIR=target/scale cargo test --release --test store_scale -- --ignored --nocapture
//! ```
//!
//! It seeds a data dir with runs shaped like a dry-run run's (61 events each, mostly ~150-byte
//! payloads and three of ~3 KB, written in 14 appends per run with up to 16 runs interleaved, one
//! op id per run), then prints: bytes per event by part (segments used and preallocated, sled, and
//! the live key/value bytes of each index tree), the store's open time after a clean close, and
//! after a `kill -9` of a child process that appended (and checkpointed nothing new) just before.

use crate::common;
use common::*;
use od::store::{Append, EventLog, SledLog, StoreConfig, VerifyOnOpen};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const RUN_EVENTS: usize = 61;
const RUN_APPENDS: usize = 14;
const IN_FLIGHT: usize = 16;
const CHILD_ENV: &str = "OD_SCALE_CHILD_DIR";

fn runs() -> usize {
    std::env::var("OD_SCALE_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
}

fn scale_dir() -> PathBuf {
    std::env::var_os("OD_SCALE_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("target/scale"))
}

/// Event `i` of a run: three of 61 are ~3 KB (prompt, artifact, devloop), the rest ~150 bytes.
fn run_event(run: usize, i: usize) -> od_events::Event {
    let len = if i == 3 || i == 30 || i == 55 { 3000 } else { 120 };
    let mut t = format!("r{run:07}e{i:02}-");
    t.extend(std::iter::repeat_n('x', len));
    note(&t)
}

/// The appends of one run, in order (14 of them, ~4–5 events each; the first carries an op id).
fn run_appends(run: usize) -> Vec<Append> {
    let stream = sid(&format!("run:r{run:07}"));
    let per = RUN_EVENTS.div_ceil(RUN_APPENDS);
    (0..RUN_EVENTS)
        .collect::<Vec<_>>()
        .chunks(per)
        .enumerate()
        .map(|(k, ix)| {
            let a = Append::new(stream.clone(), ix.iter().map(|&i| run_event(run, i)).collect());
            if k == 0 {
                a.op_id(format!("run:crid-{run:07}"))
            } else {
                a
            }
        })
        .collect()
}

/// Seeds `runs` runs from `first`: IN_FLIGHT runs at a time, their appends interleaved, pipelined.
fn seed(store: &od::store::Store, first: usize, runs: usize) {
    let mut acks = std::collections::VecDeque::new();
    for group in (first..first + runs).collect::<Vec<_>>().chunks(IN_FLIGHT) {
        let per_run: Vec<Vec<Append>> = group.iter().map(|&r| run_appends(r)).collect();
        for k in 0..RUN_APPENDS {
            for appends in &per_run {
                if let Some(a) = appends.get(k) {
                    acks.push_back(store.submit(a.clone()).expect("submit"));
                }
            }
            while acks.len() > 2048 {
                acks.pop_front().unwrap().blocking_recv().unwrap().unwrap();
            }
        }
    }
    for a in acks {
        a.blocking_recv().unwrap().unwrap();
    }
}

/// The store as the daemon opens it: verifying the tail only.
fn open_as_daemon(dir: &Path) -> std::sync::Arc<SledLog> {
    let mut cfg = StoreConfig::new(dir);
    cfg.verify_on_open = VerifyOnOpen::FromCheckpoint;
    SledLog::open(cfg).unwrap()
}

fn file_bytes(p: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let Ok(rd) = std::fs::read_dir(p) else { return (0, 0) };
    let mut out = (0, 0);
    for e in rd.flatten() {
        let m = e.metadata().unwrap();
        if m.is_dir() {
            let (a, b) = file_bytes(&e.path());
            out = (out.0 + a, out.1 + b);
        } else {
            out = (out.0 + m.len(), out.1 + m.blocks() * 512);
        }
    }
    out
}

fn report(dir: &Path, events: u64) {
    let (seg_len, seg_alloc) = file_bytes(&dir.join("log"));
    let (sled_len, sled_alloc) = file_bytes(&dir.join("sled"));
    let s = open_as_daemon(dir);
    let used = s.segment_bytes_used();
    let per = |b: u64| b as f64 / events as f64;
    println!("events {events}");
    println!("segments: used {:.1} B/event, files {:.1} B/event ({seg_alloc} allocated)", per(used), per(seg_len));
    println!("sled: files {:.1} B/event ({sled_alloc} allocated)", per(sled_len));
    for (name, live) in s.index_live_bytes() {
        println!("  sled tree {name}: live keys+values {:.1} B/event", per(live));
    }
}

fn time_open(dir: &Path, what: &str) -> f64 {
    let t = Instant::now();
    let s = open_as_daemon(dir);
    let ms = t.elapsed().as_secs_f64() * 1e3;
    println!("open ({what}): {ms:.1} ms, last seq {}", s.last_seq());
    drop(s);
    ms
}

#[test]
#[ignore = "seeds millions of events; run by hand in release (see the module docs)"]
fn seed_and_measure() {
    let dir = scale_dir();
    let n = runs();
    // OD_SCALE_REUSE=1 measures a data dir seeded by an earlier run.
    if std::env::var_os("OD_SCALE_REUSE").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
        let t = Instant::now();
        let s = open_as_daemon(&dir);
        seed(&(s.clone() as od::store::Store), 0, n);
        println!("seeded {n} runs, {} events in {:.1} s", s.last_seq(), t.elapsed().as_secs_f64());
    }
    let s = open_as_daemon(&dir);
    let events = s.last_seq();
    drop(s);
    report(&dir, events);
    for i in 0..3 {
        time_open(&dir, &format!("clean stop #{i}"));
    }
    // A child appends more runs (OD_SCALE_CHILD_RUNS, 2,000 by default) and is killed with SIGKILL while idle.
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--exact", "store_scale::scale_child", "--nocapture", "--ignored", "--test-threads=1"])
        .env(CHILD_ENV, &dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        if line.unwrap() == "idle" {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    time_open(&dir, "after kill -9");
    time_open(&dir, "clean stop after the kill's recovery");
}

#[test]
#[ignore = "child process of seed_and_measure"]
fn scale_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else { return };
    let s = open_as_daemon(Path::new(&dir));
    let runs = (s.last_seq() as usize) / RUN_EVENTS;
    let n = std::env::var("OD_SCALE_CHILD_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    seed(&(s.clone() as od::store::Store), runs + 1, n);
    let mut out = std::io::stdout().lock();
    writeln!(out, "idle").unwrap();
    out.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(60));
}
