//! Concurrent writers on one stream with expected versions: optimistic concurrency loses nothing
//! and duplicates nothing. Every writer reads the stream's version, appends with
//! `Expected::Exactly(version)` (or `NoStream`), and on a conflict reads again and retries, until
//! each of its appends has landed; the stream must end up with every append exactly once, at
//! gapless versions, and conflicts must really have happened.

use crate::common;
use common::*;
use od::store::{Append, AppendResult, Expected, Store, StoreError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;

const WRITERS: u64 = 8;
const APPENDS_PER_WRITER: u64 = 25;
const STREAM: &str = "note:contended";

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

fn item(writer: u64, k: u64) -> String {
    format!("w{writer}-{k}")
}

/// What the writer expects: the version it just read.
fn expected_for(v: Option<u64>) -> Expected {
    v.map_or(Expected::NoStream, Expected::Exactly)
}

/// Checks the stream holds every writer's items exactly once, at versions `0..total` with no
/// gap, each writer's items in the order it appended them, at the versions its acks named.
fn check_stream(s: &Store, acks: &HashMap<String, AppendResult>) {
    let total = WRITERS * APPENDS_PER_WRITER;
    let frames = s.read_stream(STREAM, 0, usize::MAX).unwrap();
    assert_eq!(frames.len() as u64, total, "lost or duplicated appends");
    let mut at: HashMap<String, u64> = HashMap::new();
    for (i, f) in frames.iter().enumerate() {
        let st = f.decode().unwrap();
        assert_eq!(st.envelope.version, i as u64, "version gap");
        let od_events::Event::NoteRecorded(n) = st.event else { panic!("unexpected event") };
        if let Some(op) = &st.envelope.op_id {
            assert_eq!(op, &n.text, "op id and text disagree");
        }
        let prev = at.insert(n.text.clone(), st.envelope.version);
        assert!(prev.is_none(), "{} appended twice", n.text);
    }
    for w in 0..WRITERS {
        let versions: Vec<u64> = (0..APPENDS_PER_WRITER)
            .map(|k| *at.get(&item(w, k)).unwrap_or_else(|| panic!("{} lost", item(w, k))))
            .collect();
        assert!(versions.windows(2).all(|p| p[0] < p[1]), "writer {w}'s appends out of order: {versions:?}");
        for k in 0..APPENDS_PER_WRITER {
            let r = &acks[&item(w, k)];
            assert_eq!(
                (r.first_version, r.last_version, r.stream.as_str()),
                (at[&item(w, k)], at[&item(w, k)], STREAM),
                "the ack for {} names another place",
                item(w, k)
            );
            let f = &s.read_from(r.first_seq, 1).unwrap()[0];
            assert_eq!(f.view().version(), r.first_version, "ack seq vs version");
        }
    }
    assert_eq!(s.stream_version(STREAM).unwrap(), Some(total - 1));
    let v = s.verify().unwrap();
    assert!(v.ok() && v.verified == s.last_seq(), "{v:?}");
}

/// Read-version-then-append in a retry loop, no op ids.
#[test]
fn expected_version_writers_lose_and_duplicate_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let conflicts = AtomicU64::new(0);
    let start = Barrier::new(WRITERS as usize);
    let acks: HashMap<String, AppendResult> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (s, conflicts, start) = (&s, &conflicts, &start);
                scope.spawn(move || {
                    start.wait();
                    let mut acks = Vec::new();
                    for k in 0..APPENDS_PER_WRITER {
                        loop {
                            let v = s.stream_version(STREAM).unwrap();
                            let a = Append::new(sid(STREAM), vec![note(&item(w, k))]).expect(expected_for(v));
                            match s.append(a) {
                                Ok(r) => {
                                    assert_eq!(r.first_version, v.map_or(0, |v| v + 1));
                                    assert!(!r.deduplicated);
                                    acks.push((item(w, k), r));
                                    break;
                                }
                                Err(StoreError::Conflict { actual, .. }) => {
                                    // Someone else appended since we read: the stream moved on.
                                    assert!(actual > v, "conflict at {actual:?}, read {v:?}");
                                    conflicts.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(e) => panic!("writer {w}: {e}"),
                            }
                        }
                    }
                    acks
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let conflicts = conflicts.into_inner();
    eprintln!("{WRITERS} writers × {APPENDS_PER_WRITER} appends: {conflicts} conflicts retried");
    assert!(conflicts > 0, "no conflict was observed: the test did not contend");
    check_stream(&s, &acks);
    assert_eq!(s.last_seq(), WRITERS * APPENDS_PER_WRITER);
    drop(s);
    let s = open(dir.path());
    check_stream(&s, &acks);
}

/// The same with op ids, as a client retrying after a lost ack would: each logical append keeps
/// its op id across retries; some submissions are abandoned without waiting for their ack and
/// retried at once (the abandoned one may still land), and some landed appends are re-sent with a
/// stale expected version. Each op id must land exactly once, and a re-send must return the
/// original result, never a conflict and never a second copy.
#[test]
fn op_id_retries_under_contention_land_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let (conflicts, dedups, abandoned) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let start = Barrier::new(WRITERS as usize);
    let acks: HashMap<String, AppendResult> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (s, start) = (&s, &start);
                let (conflicts, dedups, abandoned) = (&conflicts, &dedups, &abandoned);
                scope.spawn(move || {
                    let mut rng = Rng::new(w + 1);
                    start.wait();
                    let mut acks = Vec::new();
                    for k in 0..APPENDS_PER_WRITER {
                        let op = item(w, k);
                        let make = |v: Option<u64>| {
                            Append::new(sid(STREAM), vec![note(&op)]).expect(expected_for(v)).op_id(op.clone())
                        };
                        let r = loop {
                            let v = s.stream_version(STREAM).unwrap();
                            if rng.below(3) == 0 {
                                // The ack is lost: the client gives up waiting and retries.
                                drop(s.submit(make(v)).unwrap());
                                abandoned.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                            match s.append(make(v)) {
                                Ok(r) => break r,
                                Err(StoreError::Conflict { actual, .. }) => {
                                    assert!(actual > v, "conflict at {actual:?}, read {v:?}");
                                    conflicts.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(e) => panic!("writer {w}: {e}"),
                            }
                        };
                        if r.deduplicated {
                            dedups.fetch_add(1, Ordering::Relaxed); // an abandoned try had landed
                        }
                        if rng.below(4) == 0 {
                            // Re-send after the ack, with an expected version long stale.
                            let again = s
                                .append(make(None))
                                .unwrap_or_else(|e| panic!("re-sending {op} must return its result, got {e}"));
                            assert!(again.deduplicated, "{op} written twice: {again:?}");
                            assert_eq!(
                                (again.first_seq, again.first_version),
                                (r.first_seq, r.first_version),
                                "{op}: re-send returned another result"
                            );
                            dedups.fetch_add(1, Ordering::Relaxed);
                        }
                        acks.push((op, r));
                    }
                    acks
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let (conflicts, dedups, abandoned) = (conflicts.into_inner(), dedups.into_inner(), abandoned.into_inner());
    eprintln!(
        "{WRITERS} writers × {APPENDS_PER_WRITER} op-id appends: {conflicts} conflicts, \
         {abandoned} abandoned submissions, {dedups} deduplicated results"
    );
    assert!(conflicts > 0, "no conflict was observed: the test did not contend");
    assert!(dedups > 0, "no op-id retry was exercised");
    check_stream(&s, &acks);
    drop(s);
    let s = open(dir.path());
    check_stream(&s, &acks);
}
