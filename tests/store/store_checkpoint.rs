//! Checkpoints are bounded in time, not only in bytes: once something was committed and the
//! checkpoint interval has passed, the writer checkpoints even while idle, so a restart after a
//! kill rescans at most that interval's writes. (Before: only every 64 MiB of log or at a clean
//! close, so an idle daemon killed after a burst rescanned the whole burst.)

use crate::common;
use common::*;
use od::store::{EventLog, SledLog, StoreConfig};
use std::time::{Duration, Instant};

fn store(dir: &std::path::Path, interval: Duration) -> std::sync::Arc<SledLog> {
    let mut cfg = StoreConfig::new(dir);
    cfg.checkpoint_interval = interval;
    SledLog::open(cfg).unwrap()
}

#[test]
fn an_idle_writer_checkpoints_once_the_interval_has_passed() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), Duration::from_millis(20));
    assert_eq!(s.checkpointed_seq().unwrap(), 0);
    append_note(&(s.clone() as od::store::Store), "note:c", "one");
    append_note(&(s.clone() as od::store::Store), "note:c", "two");
    // A few bytes, far below the byte bound: only the time bound can checkpoint them.
    let deadline = Instant::now() + Duration::from_secs(60);
    while s.checkpointed_seq().unwrap() < 2 {
        assert!(Instant::now() < deadline, "no checkpoint while idle");
        std::thread::sleep(Duration::from_millis(10));
    }
    // And what the checkpoint wrote reads back (the index moved from memory to sled intact).
    assert_eq!(texts(&(s.clone() as od::store::Store), "note:c"), ["one", "two"]);
    drop(s);
    let s = store(tmp.path(), Duration::from_secs(3600));
    assert_eq!(texts(&(s.clone() as od::store::Store), "note:c"), ["one", "two"]);
    assert!(s.verify().unwrap().ok());
}

/// sled's snapshot files (name, length, modification time): sled writes a new one while opening
/// whenever anything was logged since the last one.
fn sled_snapshots(dir: &std::path::Path) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("sled"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("snap."))
        .map(|e| {
            let m = e.metadata().unwrap();
            (e.file_name().to_string_lossy().into_owned(), m.len(), m.modified().unwrap())
        })
        .collect();
    v.sort();
    v
}

/// A store opened and closed with nothing written logs nothing in sled (no new snapshot at the next
/// open). (Before: every close
/// rewrote the same checkpoint, so the next open replayed it and sled wrote and fsynced a new
/// snapshot while opening — a few ms of every open after any open.)
#[test]
fn a_close_with_nothing_written_logs_nothing_in_sled() {
    let tmp = tempfile::tempdir().unwrap();
    let s = open(tmp.path());
    append_note(&s, "note:q", "one");
    s.close();
    drop(s);
    // This open replays what the writes left in sled's log (and sled writes its snapshot).
    let s = open(tmp.path());
    s.close();
    drop(s);
    let before = sled_snapshots(tmp.path());
    assert_eq!(before.len(), 1, "{before:?}");
    for _ in 0..2 {
        let s = open(tmp.path());
        assert_eq!(texts(&s, "note:q"), ["one"]);
        s.close();
        drop(s);
    }
    assert_eq!(sled_snapshots(tmp.path()), before);
}
