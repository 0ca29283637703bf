//! Checkpoints are bounded in time, not only in bytes: once something was committed and the
//! checkpoint interval has passed, the writer checkpoints even while idle, so a restart after a
//! kill rescans at most that interval's writes. (Before: only every 64 MiB of log or at a clean
//! close, so an idle daemon killed after a burst rescanned the whole burst.)

mod common;
use common::*;
use od::store::{EventLog, SledLog, StoreConfig};
use std::time::{Duration, Instant};

fn store(dir: &std::path::Path, interval: Duration) -> od::store::Store {
    let mut cfg = StoreConfig::new(dir);
    cfg.checkpoint_interval = interval;
    SledLog::open(cfg).unwrap()
}

#[test]
fn an_idle_writer_checkpoints_once_the_interval_has_passed() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), Duration::from_millis(20));
    assert_eq!(s.checkpointed_seq().unwrap(), 0);
    append_note(&s, "note:c", "one");
    append_note(&s, "note:c", "two");
    // A few bytes, far below the byte bound: only the time bound can checkpoint them.
    let deadline = Instant::now() + Duration::from_secs(60);
    while s.checkpointed_seq().unwrap() < 2 {
        assert!(Instant::now() < deadline, "no checkpoint while idle");
        std::thread::sleep(Duration::from_millis(10));
    }
    // And what the checkpoint wrote reads back (the index moved from memory to sled intact).
    assert_eq!(texts(&s, "note:c"), ["one", "two"]);
    drop(s);
    let s = store(tmp.path(), Duration::from_secs(3600));
    assert_eq!(texts(&s, "note:c"), ["one", "two"]);
    assert!(s.verify().unwrap().ok());
}
