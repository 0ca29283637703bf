//! A full disk (and failing writes): health reports it, nothing of a failed commit is acknowledged,
//! the writer recovers by itself once space returns, and a data dir whose first segment cannot be
//! made refuses to open, naming the directory and the space needed, leaving nothing behind.
//! Faults come from the injectable file layer (`tests/common/faults.rs`).

use crate::common;
use common::faults::{FaultFiles, Layer, Op};
use common::*;
use od::daemon::{start, DaemonConfig, DaemonError};
use od::store::{Append, EventLog, SledLog, StoreConfig, StoreError, StoreState};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn config(dir: &Path, faults: &Arc<FaultFiles>) -> StoreConfig {
    let mut cfg = StoreConfig::new(dir);
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    cfg.files = Arc::new(Layer(faults.clone()));
    cfg
}

fn call(method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    let req = ureq::request(method, url);
    let res = match body {
        Some(b) => req.send_json(b),
        None => req.call(),
    };
    match res {
        Ok(r) => (r.status(), r.into_json().unwrap_or(Value::Null)),
        Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap_or(Value::Null)),
        Err(e) => panic!("{method} {url}: {e}"),
    }
}

fn tmp_files(log: &Path) -> Vec<String> {
    std::fs::read_dir(log)
        .map(|rd| {
            rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(".tmp")).collect()
        })
        .unwrap_or_default()
}

/// Through the daemon: writes fail with `storage-full` while the disk is full, `/api/health` says
/// so with a 503, and once space returns the next write succeeds and health is ok again — no
/// restart. (Before: every write after the first failure returned `store-poisoned` until a
/// restart, while health said ok.)
#[test]
fn a_full_disk_is_reported_and_writes_resume_when_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultFiles::new();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut cfg = DaemonConfig::new(dir.path().to_path_buf());
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    cfg.files = Arc::new(Layer(faults.clone()));
    let running = rt.block_on(start(cfg)).unwrap();
    let url = running.url();
    let note =
        |text: &str| call("POST", &format!("{url}/api/log/notes"), Some(json!({"stream": "note:disk", "text": text})));
    let health = || call("GET", &format!("{url}/api/health"), None);

    let (code, first) = note("before");
    assert_eq!(code, 200, "{first}");
    assert_eq!(
        health(),
        (
            200,
            json!({"ok": true, "status": "ok", "lastSeq": first["lastSeq"],
                   "store": {"state": "ok", "restartNeeded": false},
                   "tls": {"serving": false, "terminatedByProxy": false}})
        )
    );

    faults.fail(Op::Write, ".seg", libc::ENOSPC);
    let last = health().1["lastSeq"].clone();
    for i in 0..3 {
        let (code, err) = note(&format!("while full {i}"));
        assert_eq!((code, err["error"]["code"].as_str()), (507, Some("storage-full")), "{err}");
    }
    let (code, h) = health();
    assert_eq!(code, 503, "{h}");
    assert_eq!((h["ok"].as_bool(), h["store"]["state"].as_str()), (Some(false), Some("full")), "{h}");
    assert_eq!(h["store"]["restartNeeded"], false);
    assert!(h["store"]["reason"].as_str().unwrap().contains("No space left"), "{h}");
    assert_eq!(h["lastSeq"], last, "a failed write moved the log's end");

    faults.clear();
    let (code, after) = note("after");
    assert_eq!(code, 200, "{after}");
    assert_eq!(after["firstSeq"].as_u64(), last.as_u64().map(|l| l + 1), "the failed writes left a gap or a trace");
    assert_eq!(health().0, 200);
    rt.block_on(running.stop());

    // Nothing of the refused notes is in the log; everything acknowledged is.
    let s = open(dir.path());
    let notes = texts(&s, "note:disk");
    assert_eq!(notes, ["before", "after"]);
    assert!(s.verify().unwrap().ok());
}

/// An EIO on fdatasync: the batch is not acknowledged, and with no further writes the idle writer
/// probes and turns healthy by itself once the fault is gone.
#[test]
fn the_idle_writer_probes_and_recovers_once_the_fault_clears() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultFiles::new();
    let mut cfg = config(dir.path(), &faults);
    cfg.probe_interval = Duration::from_millis(20);
    let s = SledLog::open(cfg).unwrap();
    append_note(&(s.clone() as od::store::Store), "note:p", "one");
    faults.fail(Op::Sync, ".seg", libc::EIO);
    let e = s.append(Append::new(sid("note:p"), vec![note("two")])).unwrap_err();
    assert!(matches!(e, StoreError::Io { .. }), "{e:?}");
    assert_eq!(s.health().state, StoreState::Failing);
    faults.clear();
    let deadline = Instant::now() + Duration::from_secs(60);
    while s.health().state != StoreState::Ok {
        assert!(Instant::now() < deadline, "health stayed {:?}", s.health());
        std::thread::sleep(Duration::from_millis(10));
    }
    let r = append_note(&(s.clone() as od::store::Store), "note:p", "three");
    assert_eq!((r.first_seq, r.first_version), (2, 1));
    assert_eq!(texts(&(s.clone() as od::store::Store), "note:p"), ["one", "three"]);
}

/// A roll-over into a new segment that cannot be reserved fails the batch with `storage-full`
/// (leaving no temporary file), and succeeds once space returns.
#[test]
fn a_segment_roll_over_without_space_fails_cleanly_and_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultFiles::new();
    let s = SledLog::open(config(dir.path(), &faults)).unwrap();
    // Fill the first segment to just under its end with big appends.
    let big: Vec<_> = (0..100).map(|i| note(&format!("{i} {}", "f".repeat(60_000)))).collect();
    let mut n = 0;
    while n < 2 {
        s.append(Append::new(sid("note:fill"), big.clone())).unwrap();
        n += 1;
    }
    faults.space_budget(0);
    let mut refused = 0;
    let mut written = 0;
    loop {
        match s.append(Append::new(sid("note:fill"), big.clone())) {
            Ok(_) => written += 1,
            Err(StoreError::Full { message, .. }) => {
                assert!(message.contains(&dir.path().join("log").display().to_string()), "{message}");
                refused += 1;
                if refused == 2 {
                    break;
                }
            }
            Err(e) => panic!("{e:?}"),
        }
        assert!(written < 10, "the segment never filled");
    }
    assert!(tmp_files(&dir.path().join("log")).is_empty(), "{:?}", tmp_files(&dir.path().join("log")));
    let before = s.last_seq();
    faults.clear();
    let r = s.append(Append::new(sid("note:fill"), big.clone())).unwrap();
    assert_eq!(r.first_seq, before + 1);
    assert!(dir.path().join("log/00000002.seg").exists());
    assert!(s.verify().unwrap().ok());
    drop(s);
    let s = open(dir.path());
    assert_eq!(s.last_seq(), before + 100);
}

/// No room for the first segment: opening refuses at once with `storage-full`, naming the data
/// dir's log directory and the bytes a segment needs, and leaves no `.seg.tmp` behind; the daemon
/// refuses to start the same way. (Before: it started "healthy" while a background thread failed
/// to zero-fill the segment and left a partial `.seg.tmp`.)
#[test]
fn no_room_for_the_first_segment_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultFiles::new();
    faults.space_budget(1 << 20);
    let e = SledLog::open(config(dir.path(), &faults)).err().expect("open refused");
    let StoreError::Full { message, .. } = &e else { panic!("{e:?}") };
    let log = dir.path().join("log");
    assert!(message.contains(&log.display().to_string()), "{message}");
    assert!(message.contains(&od::limits::MIN_SEGMENT_BYTES.to_string()), "{message}");
    assert_eq!(e.code(), "storage-full");
    assert!(tmp_files(&log).is_empty(), "{:?}", tmp_files(&log));

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut cfg = DaemonConfig::new(dir.path().to_path_buf());
    cfg.files = Arc::new(Layer(faults.clone()));
    match rt.block_on(start(cfg)) {
        Err(DaemonError::Store(StoreError::Full { message, .. })) => {
            assert!(message.contains(&log.display().to_string()), "{message}")
        }
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("the daemon started without room for its first segment"),
    }
    assert!(tmp_files(&log).is_empty());
}

/// A half-made segment left by a crash during its zero-fill is removed when the log opens.
#[test]
fn a_stale_segment_temp_file_is_removed_on_open() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    std::fs::write(dir.path().join("log/00000002.seg.tmp"), vec![0u8; 4096]).unwrap();
    let s = open(dir.path());
    assert!(tmp_files(&dir.path().join("log")).is_empty());
    drop(s);
}

/// A checkpoint is not the commit point: when one fails (here the commit mark's fdatasync), the
/// batch that triggered it stays acknowledged, writes go on, health reports the failure, and the
/// checkpoint is retried after the next batch. (Before: the durable batch was reported failed and
/// the store poisoned.)
#[test]
fn a_failed_checkpoint_fails_no_durable_write() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultFiles::new();
    let s = SledLog::open(config(dir.path(), &faults)).unwrap();
    faults.fail(Op::Sync, "commit", libc::EIO);
    let big: Vec<_> = (0..100).map(|i| note(&format!("{i} {}", "c".repeat(60_000)))).collect();
    let per_append = 100 * 60_000;
    let appends = od::limits::CHECKPOINT_BYTES as usize / per_append + 2;
    for _ in 0..appends {
        s.append(Append::new(sid("note:cp"), big.clone())).unwrap();
    }
    let h = s.health();
    assert_eq!(h.state, StoreState::Failing, "{h:?}");
    assert!(h.reason.as_deref().unwrap_or("").contains("commit mark"), "{h:?}");
    faults.clear();
    s.append(Append::new(sid("note:cp"), vec![note("after")])).unwrap();
    // The retried checkpoint runs right after that ack.
    let deadline = Instant::now() + Duration::from_secs(60);
    while s.health().state != StoreState::Ok {
        assert!(Instant::now() < deadline, "health stayed {:?}", s.health());
        std::thread::sleep(Duration::from_millis(5));
    }
    let last = s.last_seq();
    drop(s);
    let s = open(dir.path());
    assert_eq!(s.last_seq(), last);
    assert_eq!(last, appends as u64 * 100 + 1);
}
