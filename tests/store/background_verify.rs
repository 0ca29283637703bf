//! Opening costs the tail; the rest of the log is verified by the daemon's background pass.
//!
//! A daemon writes notes and stops cleanly (a checkpoint: every note is before it). A byte of an
//! old note's frame is then flipped in the stopped data dir. The next start must not read that
//! frame (it opens, tail only, instead of refusing for damage it never read); the background pass,
//! started on the daemon's injected clock, finds it: `/api/health` says degraded naming that seq,
//! and a `log_verified` event records it. A clean log's pass records a clean result; it is saved, so
//! a restart still reports it, and the next pass is due a day after it began.
//!
//! A pass that a stop interrupted resumes, after the restart, where it got (it used to start again
//! from seq 1 at every start, so on a big log of a daemon restarted more often than a pass takes it
//! never finished).

use crate::common;
use common::harness::Engine;
use od::limits::{
    BACKGROUND_VERIFY_DELAY_MS, BACKGROUND_VERIFY_INTERVAL_MS, BACKGROUND_VERIFY_PAUSE_MS, BACKGROUND_VERIFY_STEP_BYTES,
};
use od::store::Append;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const NOW: i64 = 1_700_000_000_000;
const NOTES: u64 = 300;
/// The note whose frame is damaged (early in the log, long before the checkpoint).
const DAMAGED: u64 = 7;

fn marker(i: u64) -> String {
    format!("old-note-{i:05}-")
}

/// Advances the clock by `first` to start a pass, then past its pauses, until health reports a
/// pass that began after `after` (ms).
fn wait_for_pass(e: &Engine, first: i64, after: i64) -> Value {
    e.clock.advance(first);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, h) = e.get("/api/health");
        if h["log"]["startedAt"].as_i64().is_some_and(|t| t > after) {
            return h;
        }
        assert!(Instant::now() < deadline, "the background pass never finished: {h}");
        e.clock.advance(BACKGROUND_VERIFY_PAUSE_MS);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `log_verified` events in the log, waiting (bounded) for at least `n`.
fn verified_events(e: &Engine, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, page) = e.get("/api/log/events?stream=system&limit=10000");
        let found: Vec<Value> =
            page["events"].as_array().unwrap().iter().filter(|v| v["event"] == "log_verified").cloned().collect();
        if found.len() >= n || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn background_pass_finds_a_flipped_byte_in_an_old_frame_and_health_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = Engine::start(&data, NOW);
    let mut seq_of = Vec::new();
    for i in 0..NOTES {
        let text = format!("{}{}", marker(i), "q".repeat(80));
        let (code, r) = e.post("/api/log/notes", json!({ "stream": format!("note:old{}", i % 3), "text": text }));
        assert_eq!(code, 200, "{r}");
        seq_of.push(r["firstSeq"].as_u64().unwrap());
    }
    // A clean log: the pass checks everything there was when it began and records a clean result.
    let h = wait_for_pass(&e, BACKGROUND_VERIFY_DELAY_MS, 0);
    assert_eq!(h["status"], "ok", "{h}");
    assert!(h["log"].get("firstBad").is_none(), "{h}");
    assert_eq!(h["log"]["verified"], h["log"]["throughSeq"], "{h}");
    assert!(h["log"]["throughSeq"].as_u64().unwrap() > NOTES, "{h}");
    let ev = verified_events(&e, 1);
    assert_eq!(ev.len(), 1, "one pass, one event: {ev:?}");
    assert!(ev[0]["data"]["payload"].get("firstBad").is_none(), "{ev:?}");
    e.stop();

    // Damage an old frame while the daemon is stopped.
    let seg = data.join("log/00000001.seg");
    let mut bytes = std::fs::read(&seg).unwrap();
    let needle = marker(DAMAGED);
    let at = bytes.windows(needle.len()).position(|w| w == needle.as_bytes()).expect("the note is in segment 1");
    bytes[at + 12] ^= 0x01;
    std::fs::write(&seg, &bytes).unwrap();

    // The open is tail-only: the daemon starts (it did not read the damaged frame).
    let e = Engine::start(&data, NOW + 1_000);
    let (code, h) = e.get("/api/health");
    assert_eq!((code, h["status"].as_str()), (200, Some("ok")), "before the pass: {h}");
    let first = h["log"]["startedAt"].as_i64().expect("the last pass is still reported after a restart");
    assert!(h["log"].get("firstBad").is_none() && h.get("logPass").is_none(), "{h}");

    // The next pass is due a day after the last one began (not at every start); it finds the damage.
    let h = wait_for_pass(&e, BACKGROUND_VERIFY_INTERVAL_MS, first);
    let seq = seq_of[DAMAGED as usize];
    assert_eq!(h["status"], "degraded", "{h}");
    assert_eq!(h["ok"], true, "commits still work: {h}");
    assert_eq!(h["log"]["firstBad"]["seq"], seq, "{h}");
    assert_eq!(h["log"]["verified"], seq - 1, "{h}");
    assert!(h["log"]["firstBad"]["reason"].as_str().unwrap().contains("hash"), "{h}");
    let ev = verified_events(&e, 2);
    let last = &ev.last().unwrap()["data"]["payload"];
    assert_eq!(last["firstBad"]["seq"], seq, "{ev:?}");
    // And the log still takes writes.
    let (code, _) = e.post("/api/log/notes", json!({ "stream": "note:new", "text": "after" }));
    assert_eq!(code, 200);
    e.stop();
}

/// Health's `logPass` (the pass under way), waiting (bounded) until it has checked past seq 1.
fn pass_under_way(e: &Engine) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, h) = e.get("/api/health");
        if h["logPass"]["nextSeq"].as_u64().is_some_and(|n| n > 1) {
            return h["logPass"].clone();
        }
        assert!(Instant::now() < deadline, "no pass under way: {h}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_pass_interrupted_by_a_stop_resumes_where_it_got() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    // A log of about three steps of the pass, written through the store.
    let store = common::open(&data);
    let text = "v".repeat(16 * 1024);
    let events = (3 * BACKGROUND_VERIFY_STEP_BYTES) as usize / text.len();
    for chunk in 0..events / 64 {
        let notes = (0..64).map(|_| common::note(&text)).collect();
        store.append(Append::new(common::sid(&format!("note:big{}", chunk % 5)), notes)).unwrap();
    }
    store.close();
    drop(store);

    // The first pass takes one step, then waits for its pause (the clock is not advanced past it).
    let e = Engine::start(&data, NOW);
    e.clock.advance(BACKGROUND_VERIFY_DELAY_MS);
    let under_way = pass_under_way(&e);
    let (got, through) = (under_way["nextSeq"].as_u64().unwrap(), under_way["throughSeq"].as_u64().unwrap());
    assert!(got <= through, "one step of three did not cover the log: {under_way}");
    e.stop();

    // After a restart the same pass is under way, where it got.
    let e = Engine::start(&data, NOW + BACKGROUND_VERIFY_DELAY_MS + 1_000);
    let (_, h) = e.get("/api/health");
    assert_eq!(h["logPass"], under_way, "the pass resumes where it got: {h}");
    assert!(h.get("log").is_none(), "no pass finished yet: {h}");
    let h = wait_for_pass(&e, BACKGROUND_VERIFY_DELAY_MS, 0);
    // It finished the pass the first start began: same start, same tail, every frame to it verified.
    assert_eq!(h["log"]["startedAt"], under_way["startedAt"], "{h}");
    assert_eq!(h["log"]["throughSeq"], through, "{h}");
    assert_eq!(h["log"]["verified"], through, "{h}");
    assert!(h["log"].get("firstBad").is_none() && h.get("logPass").is_none(), "{h}");
    let ev = verified_events(&e, 1);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["data"]["payload"]["throughSeq"], through, "{ev:?}");
    e.stop();
}
