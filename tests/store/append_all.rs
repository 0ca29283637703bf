//! Atomic multi-stream appends (`append_all`): one command's events for several streams land all
//! or nothing — on a conflict, on a refused input, and across a crash — and an op id on the group
//! makes a retry return the original results.

use crate::common;
use common::*;
use od::store::{Append, Expected, SledLog, Store, StoreConfig, StoreError};
use od_events::Event;
use std::path::Path;

fn open_store(dir: &Path) -> Result<Store, StoreError> {
    let mut cfg = StoreConfig::new(dir);
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    SledLog::open(cfg).map(|s| s as Store)
}

fn part(stream: &str, texts: &[&str]) -> Append {
    Append::new(sid(stream), texts.iter().map(|t| note(t)).collect())
}

#[test]
fn all_parts_land_in_one_contiguous_run() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    append_note(&s, "note:b", "before");
    let rs = s
        .append_all(vec![
            part("note:a", &["a1", "a2"]).expect(Expected::NoStream),
            part("note:b", &["b1"]).expect(Expected::Exactly(0)),
            part("note:c", &["c1"]),
        ])
        .unwrap();
    let got: Vec<_> = rs.iter().map(|r| (r.stream.as_str(), r.first_seq, r.last_seq, r.first_version)).collect();
    assert_eq!(got, [("note:a", 2, 3, 0), ("note:b", 4, 4, 1), ("note:c", 5, 5, 0)]);
    assert!(rs.iter().all(|r| !r.deduplicated));
    assert_eq!(texts(&s, "note:b"), ["before", "b1"]);
    assert_eq!(s.last_seq(), 5);
    assert!(s.verify().unwrap().ok());
}

#[test]
fn a_conflict_on_a_later_part_writes_nothing_for_any_part() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    append_note(&s, "note:b", "exists");
    let e = s
        .append_all(vec![
            part("note:a", &["a1"]).expect(Expected::NoStream),
            part("note:b", &["b1"]).expect(Expected::NoStream),
        ])
        .unwrap_err();
    assert!(matches!(&e, StoreError::Conflict { stream, actual: Some(0), .. } if stream == "note:b"), "{e:?}");
    assert_eq!(s.last_seq(), 1, "the first part was written");
    assert_eq!(s.stream_version("note:a").unwrap(), None);
    // Appends queued with it in the same batch are unaffected, and note:a's version is still free.
    let ok = s.submit(part("note:a", &["alone"]).expect(Expected::NoStream)).unwrap();
    assert_eq!(ok.blocking_recv().unwrap().unwrap().first_version, 0);
    assert!(s.verify().unwrap().ok());
}

#[test]
fn refused_groups_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let cases: Vec<(Vec<Append>, &str)> = vec![
        (vec![], "parts"),
        (vec![part("note:a", &["1"]), part("note:a", &["2"])], "stream"),
        (vec![part("note:a", &["1"]).op_id("x"), part("note:b", &["2"]).op_id("y")], "op_id"),
        (vec![part("note:a", &["1"]), part("note:b", &["2"]).op_id("y")], "op_id"),
        (vec![part("note:a", &["1"]), part("note:b", &[])], "events"),
    ];
    for (parts, field) in cases {
        match s.append_all(parts) {
            Err(StoreError::Invalid { field: f, .. }) => assert_eq!(f, field),
            other => panic!("expected invalid {field}: {other:?}"),
        }
    }
    let many: Vec<Append> = (0..=od::limits::MAX_APPEND_PARTS).map(|i| part(&format!("note:{i}"), &["x"])).collect();
    assert!(matches!(s.append_all(many), Err(StoreError::LimitExceeded { .. })));
    // Each part under the byte limit, the group over it: refused whole.
    let big = "z".repeat(60_000);
    let half: Vec<Event> = (0..80).map(|_| note(&big)).collect();
    let r = s.append_all(vec![Append::new(sid("note:x"), half.clone()), Append::new(sid("note:y"), half)]);
    assert!(matches!(r, Err(StoreError::LimitExceeded { limit: "append bytes", .. })), "{r:?}");
    assert_eq!(s.last_seq(), 0);
}

#[test]
fn op_id_retry_returns_the_original_results() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let first = s
        .append_all(vec![part("note:a", &["a"]).op_id("cmd-1"), part("note:b", &["b1", "b2"]).op_id("cmd-1")])
        .unwrap();
    // Same op id inside one batch, and after it: the original results, nothing written.
    let rxs: Vec<_> = (0..5)
        .map(|_| s.submit_all(vec![part("note:a", &["again"]).op_id("cmd-1"), part("note:z", &["z"])]).unwrap())
        .collect();
    for rx in rxs {
        let again = rx.blocking_recv().unwrap().unwrap();
        assert!(again.iter().all(|r| r.deduplicated));
        assert_eq!(strip(&again), strip(&first));
    }
    // A single append retried with the group's op id gets the part on its stream.
    let one = s.append(part("note:b", &["x"]).op_id("cmd-1")).unwrap();
    assert!(one.deduplicated);
    assert_eq!(strip(std::slice::from_ref(&one)), strip(&first[1..]));
    assert_eq!(s.last_seq(), 3);
    drop(s);
    let s = open(dir.path());
    let after = s.append_all(vec![part("note:a", &["x"]).op_id("cmd-1")]).unwrap();
    assert_eq!(strip(&after), strip(&first));
    assert_eq!(s.last_seq(), 3);
}

fn strip(rs: &[od::store::AppendResult]) -> Vec<(String, u64, u64, u64, u64)> {
    rs.iter().map(|r| (r.stream.clone(), r.first_seq, r.last_seq, r.first_version, r.last_version)).collect()
}

/// The segment bytes of a group written after a checkpoint, laid over a copy of the data dir as of
/// that checkpoint: what a crash leaves before the index is made durable. Whole, recovery indexes
/// every part (and rebuilds the group's op result from the frames); torn anywhere, it keeps none.
#[test]
fn crash_recovery_keeps_a_group_whole_or_not_at_all() {
    const PAGE: usize = 4096;
    let tmp = tempfile::tempdir().unwrap();
    let (src, at_checkpoint) = (tmp.path().join("src"), tmp.path().join("cp"));
    let s = open_store(&src).unwrap();
    for i in 0..10 {
        append_note(&s, "note:small", &format!("small {i}"));
    }
    s.checkpoint().unwrap();
    copy_dir(&src, &at_checkpoint);
    let big = |k: usize| note(&format!("{k} {}", "g".repeat(3000)));
    let rs = s
        .append_all(vec![
            Append::new(sid("note:p"), (0..3).map(big).collect()).op_id("group"),
            Append::new(sid("note:q"), (3..6).map(big).collect()),
        ])
        .unwrap();
    assert_eq!((rs[0].first_seq, rs[1].last_seq), (11, 16));
    let segment = "log/00000001.seg";
    let bytes = std::fs::read(src.join(segment)).unwrap();
    drop(s);

    // Whole: both parts come back, and the op id still returns both results.
    let whole = tmp.path().join("whole");
    copy_dir(&at_checkpoint, &whole);
    std::fs::write(whole.join(segment), &bytes).unwrap();
    let s = open_store(&whole).unwrap();
    assert_eq!(s.last_seq(), 16);
    assert_eq!(texts(&s, "note:p").len(), 3);
    assert_eq!(texts(&s, "note:q").len(), 3);
    let again = s.append_all(vec![part("note:p", &["retry"]).op_id("group")]).unwrap();
    assert_eq!(strip(&again), strip(&rs));
    drop(s);

    // Torn at every page boundary inside the group (the second part's pages lost, or the first's).
    let end_of_small = frame_ends(&bytes, 10)[9];
    let group_end = frame_ends(&bytes, 16)[15];
    let mut tears = 0;
    for tear in (end_of_small / PAGE + 1..=group_end / PAGE).map(|p| p * PAGE) {
        let torn = tmp.path().join(format!("torn-{tear}"));
        copy_dir(&at_checkpoint, &torn);
        let mut b = bytes.clone();
        b[tear..group_end].fill(0);
        std::fs::write(torn.join(segment), &b).unwrap();
        let s = open_store(&torn).unwrap_or_else(|e| panic!("tear at {tear}: a torn, unacknowledged tail: {e}"));
        let (p, q) = (texts(&s, "note:p").len(), texts(&s, "note:q").len());
        assert!(s.last_seq() == 10 && p == 0 && q == 0, "tear at {tear}: kept {p} + {q} events of a torn group");
        let r = s.append_all(vec![part("note:p", &["retry"]).op_id("group")]).unwrap();
        assert!(!r[0].deduplicated, "tear at {tear}: the retry matched a torn group");
        tears += 1;
    }
    assert!(tears >= 3, "only {tears} tears tried");
}

/// End offsets of the first `n` records of a segment (`[u32 len][u64][u64][frame]` each).
fn frame_ends(bytes: &[u8], n: usize) -> Vec<usize> {
    let mut pos = 0;
    (0..n)
        .map(|_| {
            pos += 20 + u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
            pos
        })
        .collect()
}
