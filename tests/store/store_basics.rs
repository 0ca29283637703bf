//! The log's contract: order, versions, expected-version conflicts, op-id idempotency, limits,
//! persistence across reopen, and segment roll-over.

use crate::common;
use common::*;
use od::store::{Append, Expected, StoreError};

#[test]
fn appends_get_gapless_seqs_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let a = s.append(Append::new(sid("note:a"), vec![note("1"), note("2")])).unwrap();
    let b = append_note(&s, "note:b", "x");
    let c = append_note(&s, "note:a", "3");
    assert_eq!((a.first_seq, a.last_seq, a.first_version, a.last_version), (1, 2, 0, 1));
    assert_eq!((b.first_seq, b.first_version), (3, 0));
    assert_eq!((c.first_seq, c.first_version), (4, 2));
    assert_eq!(s.last_seq(), 4);
    assert_eq!(texts(&s, "note:a"), ["1", "2", "3"]);
    let all: Vec<u64> = s.read_from(1, 100).unwrap().iter().map(|f| f.seq()).collect();
    assert_eq!(all, [1, 2, 3, 4]);
    assert_eq!(s.stream_version("note:a").unwrap(), Some(2));
    assert_eq!(s.stream_version("note:none").unwrap(), None);
    assert!(s.verify().unwrap().ok());
}

#[test]
fn stream_prefixes_do_not_bleed() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    append_note(&s, "note:a", "a");
    append_note(&s, "note:ab", "ab");
    assert_eq!(texts(&s, "note:a"), ["a"]);
    assert_eq!(s.stream_version("note:a").unwrap(), Some(0));
}

#[test]
fn expected_version_conflicts_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let ok = s.append(Append::new(sid("note:a"), vec![note("1")]).expect(Expected::NoStream)).unwrap();
    assert_eq!(ok.last_version, 0);
    let e = s.append(Append::new(sid("note:a"), vec![note("2")]).expect(Expected::NoStream)).unwrap_err();
    assert_eq!(e, StoreError::Conflict { stream: "note:a".into(), expected: "no stream".into(), actual: Some(0) });
    let e = s.append(Append::new(sid("note:a"), vec![note("2")]).expect(Expected::Exactly(5))).unwrap_err();
    assert!(matches!(e, StoreError::Conflict { actual: Some(0), .. }));
    let e = s.append(Append::new(sid("note:new"), vec![note("2")]).expect(Expected::Exactly(0))).unwrap_err();
    assert!(matches!(e, StoreError::Conflict { actual: None, .. }));
    s.append(Append::new(sid("note:a"), vec![note("2")]).expect(Expected::Exactly(0))).unwrap();
    assert_eq!(s.last_seq(), 2);
    assert_eq!(texts(&s, "note:a"), ["1", "2"]);
}

#[test]
fn repeated_op_id_returns_first_result_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let first = s.append(Append::new(sid("note:a"), vec![note("1"), note("2")]).op_id("req-1")).unwrap();
    assert!(!first.deduplicated);
    append_note(&s, "note:a", "other");
    let again = s.append(Append::new(sid("note:a"), vec![note("changed")]).op_id("req-1")).unwrap();
    assert!(again.deduplicated);
    assert_eq!((again.first_seq, again.last_seq, again.first_version, again.last_version), (1, 2, 0, 1));
    assert_eq!(s.last_seq(), 3);
    drop(s);
    let s = open(dir.path());
    let after_reopen = s.append(Append::new(sid("note:a"), vec![note("x")]).op_id("req-1")).unwrap();
    assert_eq!(after_reopen.first_seq, 1);
    assert_eq!(s.last_seq(), 3);
}

#[test]
fn op_ids_repeated_inside_one_batch_write_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let rxs: Vec<_> = (0..50)
        .map(|i| s.submit(Append::new(sid("note:a"), vec![note(&i.to_string())]).op_id("same")).unwrap())
        .collect();
    let results: Vec<_> = rxs.into_iter().map(|r| r.blocking_recv().unwrap().unwrap()).collect();
    assert_eq!(s.last_seq(), 1);
    assert!(results.iter().all(|r| r.first_seq == 1));
    assert_eq!(results.iter().filter(|r| !r.deduplicated).count(), 1);
}

#[test]
fn limits_are_enforced_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let big = "x".repeat(od::limits::MAX_EVENT_BYTES + 1);
    let e = s.append(Append::new(sid("note:a"), vec![note(&big)])).unwrap_err();
    assert!(matches!(e, StoreError::LimitExceeded { limit: "event bytes", .. }), "{e}");
    let e = s.append(Append::new(sid("note:a"), vec![])).unwrap_err();
    assert!(matches!(e, StoreError::Invalid { field: "events", .. }));
    let many = vec![note("x"); od::limits::MAX_EVENTS_PER_APPEND + 1];
    assert!(matches!(s.append(Append::new(sid("note:a"), many)), Err(StoreError::LimitExceeded { .. })));
    let long_op = "o".repeat(od::limits::MAX_OP_ID_BYTES + 1);
    assert!(s.append(Append::new(sid("note:a"), vec![note("x")]).op_id(long_op)).is_err());
    assert_eq!(s.last_seq(), 0);
}

#[test]
fn survives_reopen_and_segment_rollover() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    // ~20 MiB of frames through 16 MiB segments forces at least one roll-over.
    let text = "y".repeat(2000);
    for i in 0..10_000u64 {
        let batch: Vec<_> = (0..1).map(|_| note(&text)).collect();
        let r = s.append(Append::new(sid(&format!("note:{}", i % 7)), batch)).unwrap();
        assert_eq!(r.first_seq, i + 1);
    }
    drop(s);
    let s = open(dir.path());
    assert_eq!(s.last_seq(), 10_000);
    assert!(s.verify().unwrap().ok());
    let r = append_note(&s, "note:0", "after");
    assert_eq!(r.first_seq, 10_001);
    assert_eq!(s.stream_version("note:0").unwrap(), Some(1429));
}

#[test]
fn interleaved_streams_read_from_any_version_across_index_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    // Every append a different stream than the last: one pack per event, 32 packs per index chunk.
    for i in 0..100u64 {
        for st in ["note:a", "note:b", "note:c"] {
            append_note(&s, st, &format!("{st}-{i}"));
        }
    }
    let check = |s: &od::store::Store, when: &str| {
        for from in [0u64, 1, 31, 32, 33, 63, 64, 99] {
            let got: Vec<u64> =
                s.read_stream("note:b", from, usize::MAX).unwrap().iter().map(|f| f.view().version()).collect();
            assert_eq!(got, (from..100).collect::<Vec<_>>(), "from {from}, {when}");
        }
        assert_eq!(s.read_stream("note:b", 40, 5).unwrap().len(), 5);
        assert_eq!(s.stream_version("note:c").unwrap(), Some(99));
        assert_eq!(texts(s, "note:c")[57], "note:c-57");
        assert!(s.verify().unwrap().ok());
    };
    check(&s, "live");
    drop(s);
    check(&open(dir.path()), "reopened");
}

#[test]
fn a_data_dir_held_by_another_handle_is_reported_locked() {
    let dir = tempfile::tempdir().unwrap();
    let _held = open(dir.path());
    let mut cfg = od::store::StoreConfig::new(dir.path());
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    match od::store::SledLog::open(cfg) {
        Err(StoreError::Locked(d)) => assert!(d.contains("sled")),
        Err(other) => panic!("expected Locked, got {other}"),
        Ok(_) => panic!("two handles opened one data dir"),
    }
}
