//! Fault injection at every step of a commit: ENOSPC and EIO (and torn writes) on each segment
//! write and fdatasync, the commit mark's write, and each step of making a segment (reserve,
//! zero-fill, sync, rename, directory sync, open) — at open and at a roll-over — with several
//! appenders (single and multi-stream appends) running. After each run the store is closed and
//! reopened on the real file system, and:
//!
//! - no acknowledged event is lost: every ack is in the log, at its seqs and versions, with its text;
//! - nothing else is: the failed appends left no trace (the log holds exactly the acknowledged ones);
//! - none was acknowledged that was not durable: every acknowledged frame's record lies in bytes the
//!   fault layer saw made durable by a successful fdatasync, after they were last written;
//! - failed appends got `storage-full` (ENOSPC) or `storage-io` (EIO), never anything else;
//! - appends succeed again without a restart once the fault clears, and health is ok again.
//!
//! The refusal to open without room for the first segment is in `disk_full.rs`.

use crate::common;
use common::faults::{FaultFiles, Layer, Op, Rule};
use common::*;
use od::store::{verify_dir, Append, AppendResult, SledLog, Store, StoreConfig, StoreError, StoreState};
use od_events::{Event, FrameRef};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const APPENDERS: u64 = 4;

fn config(dir: &Path, faults: &Arc<FaultFiles>) -> StoreConfig {
    let mut cfg = StoreConfig::new(dir);
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    cfg.files = Arc::new(Layer(faults.clone()));
    cfg
}

/// One acknowledged append: per part, its result and the texts it carried.
type Acked = Vec<(AppendResult, Vec<String>)>;

/// What the appenders saw.
#[derive(Default)]
struct Seen {
    /// Acknowledged appends: op id → (per part: result and texts).
    acks: Mutex<HashMap<String, Acked>>,
    refused: Mutex<Vec<StoreError>>,
    ok: AtomicU64,
}

/// One append (a single stream, or every third one two streams at once) of `size`-byte notes.
fn build(op: &str, i: u64, size: usize) -> Vec<(Append, Vec<String>)> {
    let parts = if i.is_multiple_of(3) { 2 } else { 1 };
    (0..parts)
        .map(|p| {
            let n = 1 + (i % 4) as usize;
            let texts: Vec<String> =
                (0..n).map(|k| format!("{op}/{p}/{k}/{}", "x".repeat(size + (i as usize * 37) % 500))).collect();
            let events: Vec<Event> = texts.iter().map(|t| note(t)).collect();
            let mut a = Append::new(sid(&format!("note:f{}", (i + p) % 5)), events);
            if p == 0 {
                a = a.op_id(op);
            }
            (a, texts)
        })
        .collect()
}

fn appender(store: &Store, t: u64, stop: &AtomicBool, seen: &Seen, size: usize) {
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let op = format!("t{t}n{i}");
        let (parts, texts): (Vec<Append>, Vec<Vec<String>>) = build(&op, i, size).into_iter().unzip();
        match store.append_all(parts) {
            Ok(rs) => {
                seen.acks.lock().unwrap().insert(op, rs.into_iter().zip(texts).collect());
                seen.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(e @ (StoreError::Full { .. } | StoreError::Io { .. })) => seen.refused.lock().unwrap().push(e),
            Err(e) => panic!("{op}: unexpected error {e:?}"),
        }
    }
}

/// Runs `APPENDERS` appenders on `store` while `drive` runs, then stops them.
fn with_load(store: &Store, seen: &Seen, size: usize, drive: impl FnOnce()) {
    /// Stops the appenders however `drive` ends (a failed assertion included).
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..APPENDERS {
            let stop = &stop;
            s.spawn(move || appender(store, t, stop, seen, size));
        }
        let _stop = StopOnDrop(&stop);
        drive();
    });
}

/// Waits (bounded) until the appenders acknowledged `n` more appends than now.
fn until_more_acks(seen: &Seen, n: u64, what: &str) {
    let target = seen.ok.load(Ordering::Relaxed) + n;
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen.ok.load(Ordering::Relaxed) < target {
        assert!(Instant::now() < deadline, "{what}: appends did not succeed again");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits (bounded) until the fault layer has failed `n` calls in all.
fn until_failures(faults: &FaultFiles, n: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while faults.failures() < n {
        assert!(Instant::now() < deadline, "{what}: the fault was never hit");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// How many segments hold records (their first record's length is not zero).
fn written_segments(dir: &Path) -> usize {
    use std::io::Read;
    let mut n = 0;
    for e in std::fs::read_dir(dir.join("log")).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "seg") {
            let mut head = [0u8; 4];
            std::fs::File::open(e.path()).unwrap().read_exact(&mut head).unwrap();
            n += (head != [0; 4]) as usize;
        }
    }
    n
}

/// seq → (segment path, offset, length) of each record in the closed store's segments.
fn records(dir: &Path) -> HashMap<u64, (std::path::PathBuf, u64, u64)> {
    let mut out = HashMap::new();
    let log = dir.join("log");
    let mut segs: Vec<_> = std::fs::read_dir(&log)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    segs.sort();
    for path in segs {
        let b = std::fs::read(&path).unwrap();
        let mut at = 0;
        while at + 20 <= b.len() {
            let len = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
            let Some(frame) = b.get(at + 20..at + 20 + len).filter(|_| len > 0) else { break };
            let Ok(f) = FrameRef::parse_verified(frame) else { break };
            out.insert(f.seq(), (path.clone(), at as u64, (20 + len) as u64));
            at += 20 + len;
        }
    }
    out
}

/// The checks of the module doc, on the closed store in `dir`.
fn check(dir: &Path, faults: &FaultFiles, seen: &Seen, what: &str) {
    let refused = seen.refused.lock().unwrap();
    let acks = seen.acks.lock().unwrap();
    let located = records(dir);
    let s = open(dir);
    let mut frames = 0;
    for (op, parts) in acks.iter() {
        for (r, texts) in parts {
            assert_eq!(
                (r.last_seq - r.first_seq, r.last_version - r.first_version),
                (texts.len() as u64 - 1, texts.len() as u64 - 1)
            );
            let got = s.read_stream(&r.stream, r.first_version, texts.len()).unwrap();
            let got: Vec<(u64, String)> = got
                .iter()
                .map(|f| match f.decode().unwrap().event {
                    Event::NoteRecorded(n) => (f.seq(), n.text),
                    e => panic!("{e:?}"),
                })
                .collect();
            let want: Vec<(u64, String)> = (r.first_seq..).zip(texts.iter().cloned()).collect();
            assert!(got == want, "{what}: acknowledged append {op} ({r:?}) is not in the log as acknowledged");
            for seq in r.first_seq..=r.last_seq {
                let (path, off, len) = located.get(&seq).unwrap_or_else(|| panic!("{what}: no record of seq {seq}"));
                assert!(
                    faults.is_synced(path, *off, *len),
                    "{what}: seq {seq} ({op}) was acknowledged but its record was never made durable"
                );
            }
            frames += texts.len() as u64;
        }
    }
    assert_eq!(s.last_seq(), frames, "{what}: the log holds frames of refused appends ({} refused)", refused.len());
    assert!(s.verify().unwrap().ok());
    drop(s);
    let v = verify_dir(dir).unwrap();
    assert!(v.ok() && v.verified == frames, "{what}: {v:?}");
    let tmp: Vec<_> = std::fs::read_dir(dir.join("log"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .map(|e| e.file_name())
        .collect();
    assert!(tmp.is_empty(), "{what}: left {tmp:?}");
}

fn expect_kind(refused: &[StoreError], errno: i32, what: &str) {
    assert!(!refused.is_empty(), "{what}: no append was refused");
    for e in refused {
        let ok = match errno {
            libc::ENOSPC => matches!(e, StoreError::Full { .. }),
            _ => matches!(e, StoreError::Io { .. }),
        };
        assert!(ok, "{what}: refused with {e:?}");
    }
}

/// Faults on the commit path of a running store: each segment write (whole or torn) and fdatasync,
/// and the commit mark's write; then a segment roll-over whose new segment cannot be reserved or
/// zero-filled. Each fault fails a few calls while four appenders run, then clears by itself.
#[test]
fn faults_at_each_commit_step_lose_nothing_acknowledged() {
    let commit_steps: &[(Op, &str, bool)] = &[
        (Op::Write, ".seg", true),
        (Op::Write, ".seg", false),
        (Op::Sync, ".seg", false),
        (Op::Write, "commit", false),
    ];
    for &(op, name, partial) in commit_steps {
        for errno in [libc::ENOSPC, libc::EIO] {
            let what = format!("{op:?} {name} errno {errno}{}", if partial { " (torn)" } else { "" });
            let dir = tempfile::tempdir().unwrap();
            let faults = FaultFiles::new();
            let s = SledLog::open(config(dir.path(), &faults)).unwrap();
            let seen = Seen::default();
            with_load(&(s.clone() as od::store::Store), &seen, 200, || {
                until_more_acks(&seen, 20, &what);
                faults.add(Rule { op, name: name.into(), errno, skip: 3, times: 4, partial });
                until_failures(&faults, 4, &what);
                until_more_acks(&seen, 20, &what);
            });
            assert_eq!(s.health().state, StoreState::Ok, "{what}");
            drop(s);
            check(dir.path(), &faults, &seen, &what);
            expect_kind(&seen.refused.lock().unwrap(), errno, &what);
        }
    }
}

/// Roll-overs: the next segment's reservation, zero-fill (torn), sync, rename, the directory sync
/// and the new segment's open fail in turn (with ENOSPC, then EIO), each while the log
/// crosses into a new segment.
#[test]
fn faults_while_rolling_over_lose_nothing_acknowledged() {
    let steps: &[(Op, &str, bool)] = &[
        (Op::Allocate, ".seg.tmp", false),
        (Op::Write, ".seg.tmp", true),
        (Op::Sync, ".seg.tmp", false),
        (Op::Rename, ".seg", false),
        (Op::SyncDir, "log", false),
        (Op::Open, ".seg", false),
    ];
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultFiles::new();
    let s = SledLog::open(config(dir.path(), &faults)).unwrap();
    let seen = Seen::default();
    for (k, &(op, name, partial)) in steps.iter().flat_map(|s| [s, s]).enumerate() {
        let errno = if k % 2 == 0 { libc::ENOSPC } else { libc::EIO };
        let what = format!("roll-over: {op:?} {name} errno {errno}");
        let before = faults.failures();
        let had = written_segments(dir.path());
        with_load(&(s.clone() as od::store::Store), &seen, 40_000, || {
            faults.add(Rule { op, name: name.into(), errno, skip: 0, times: 2, partial });
            until_failures(&faults, before + 2, &what);
            until_more_acks(&seen, 20, &what);
        });
        assert!(written_segments(dir.path()) > had, "{what}: no roll-over happened");
        // A failure preparing the next segment in the background surfaces (as `storage-full` or
        // `storage-io`, as the appenders check) only at the roll-over, possibly in a later step —
        // or not at all, when the roll-over then makes the segment itself.
        assert_eq!(s.health().state, StoreState::Ok, "{what}");
    }
    drop(s);
    check(dir.path(), &faults, &seen, "roll-overs");
}

/// Faults while a fresh data dir is opened (the first segment's reservation, the commit mark's
/// creation) refuse the open with `storage-full`/`storage-io` and leave nothing half-made; faults
/// in the first segment's background zero-fill fail the first commits instead. Either way, once the
/// fault clears, the same data dir opens (or the same store appends) normally.
#[test]
fn faults_while_making_a_fresh_log_are_refused_cleanly() {
    let steps: &[(Op, &str)] = &[
        (Op::Create, ".seg.tmp"),
        (Op::Allocate, ".seg.tmp"),
        (Op::Write, ".seg.tmp"),
        (Op::Sync, ".seg.tmp"),
        (Op::Rename, ".seg"),
        (Op::Create, "commit.tmp"),
        (Op::Write, "commit.tmp"),
        (Op::Sync, "commit.tmp"),
        (Op::Rename, "commit"),
        (Op::SyncDir, "log"),
    ];
    for &(op, name) in steps {
        for errno in [libc::ENOSPC, libc::EIO] {
            let what = format!("fresh log: {op:?} {name} errno {errno}");
            let dir = tempfile::tempdir().unwrap();
            let faults = FaultFiles::new();
            faults.add(Rule { op, name: name.into(), errno, skip: 0, times: 1, partial: false });
            let mut refused_opens = Vec::new();
            let s = loop {
                match SledLog::open(config(dir.path(), &faults)) {
                    Ok(s) => break s,
                    Err(e) => refused_opens.push(e),
                }
                assert!(refused_opens.len() < 3, "{what}: {refused_opens:?}");
            };
            let seen = Seen::default();
            with_load(&(s.clone() as od::store::Store), &seen, 200, || until_more_acks(&seen, 10, &what));
            assert_eq!(faults.failures(), 1, "{what}: the fault was not hit");
            drop(s);
            let mut all = refused_opens;
            all.extend(seen.refused.lock().unwrap().drain(..));
            expect_kind(&all, errno, &what);
            check(dir.path(), &faults, &seen, &what);
        }
    }
}
