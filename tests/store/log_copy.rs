//! Moving a log between backends: `EventLog::import`'s checks on both backends (a wrong seq, a
//! broken chain, altered bytes, a version that is not the stream's next, an op id the log holds
//! elsewhere: refused, nothing written), and `od log copy` through the `od` binary — embedded →
//! PostgreSQL → a fresh embedded dir, byte for byte, with stream versions, op-id retries and the
//! chain carried over; resuming after a partial copy (a group cut in two included); refusing a
//! target with another history; a source held by another process. PostgreSQL is a private server
//! (`common/pg.rs`): a missing one fails, never skips.

use crate::common;

use common::harness::od_cli;
use common::{note, pg, sid};
use od::clock::{ManualClock, SharedClock};
use od::store::{Append, AppendResult, EventLog, PgLog, RawFrame, SledLog, StoreConfig, StoreError};
use od_events::{Frame, FrameHeader, FrameRef, GENESIS_HASH};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

const T0: i64 = 1_800_000_000_000;

fn clock() -> SharedClock {
    Arc::new(ManualClock::at(T0))
}

fn open_sled(dir: &Path) -> Arc<dyn EventLog> {
    let mut cfg = StoreConfig::new(dir);
    cfg.clock = clock();
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    SledLog::open(cfg).expect("open sled log")
}

fn open_pg(url: &str) -> Arc<dyn EventLog> {
    PgLog::open(url, &tempfile::tempdir().unwrap().keep(), clock()).expect("open PostgreSQL log")
}

fn append(log: &dyn EventLog, a: Append) -> Result<AppendResult, StoreError> {
    log.submit(a)?.blocking_recv().expect("acked")
}

fn append_all(log: &dyn EventLog, parts: Vec<Append>) -> Result<Vec<AppendResult>, StoreError> {
    log.submit_all(parts)?.blocking_recv().expect("acked")
}

fn all_bytes(log: &dyn EventLog) -> Vec<Vec<u8>> {
    log.read_from(1, usize::MAX).unwrap().iter().map(|f| f.bytes().to_vec()).collect()
}

fn raw(bytes: &[u8]) -> RawFrame {
    RawFrame::from_bytes(bytes.to_vec()).unwrap()
}

/// A log under test and what keeps it alive.
struct Backend {
    log: Arc<dyn EventLog>,
    _keep: Box<dyn std::any::Any>,
}

fn sled() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    Backend { log: open_sled(dir.path()), _keep: Box::new(dir) }
}

fn postgres() -> Backend {
    let server = pg::server();
    let url = server.fresh_db();
    Backend { log: open_pg(&url), _keep: Box::new(server) }
}

/// Runs `$body` (a fn of `Backend`) once per backend, as two tests.
macro_rules! both {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[test]
            fn sled() {
                ($body)(super::sled())
            }
            #[test]
            fn postgres() {
                ($body)(super::postgres())
            }
        }
    };
}

/// A source log's frames: two notes on `note:a`, a two-part group with op id `g1`, one on `note:b`.
fn source_frames() -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let log = open_sled(dir.path());
    append(&*log, Append::new(sid("note:a"), vec![note("1"), note("2")])).unwrap();
    let parts =
        vec![Append::new(sid("note:a"), vec![note("3")]).op_id("g1"), Append::new(sid("note:b"), vec![note("x")])];
    append_all(&*log, parts).unwrap();
    append(&*log, Append::new(sid("note:b"), vec![note("y")])).unwrap();
    all_bytes(&*log)
}

/// `log` refuses `frames` with an invalid `field`, and holds what it held before.
fn refused(log: &dyn EventLog, frames: Vec<RawFrame>, field: &str) {
    let before = all_bytes(log);
    match log.import(frames) {
        Err(StoreError::Invalid { field: f, reason }) => assert_eq!(f, field, "{reason}"),
        other => panic!("expected invalid {field}, got {other:?}"),
    }
    assert_eq!(all_bytes(log), before, "a refused import writes nothing");
}

both!(import_checks_every_frame, |b: Backend| {
    let log = &*b.log;
    let src = source_frames();
    let mut live = log.live();
    // Not the log's next seq.
    refused(log, vec![raw(&src[1]), raw(&src[2])], "seq");
    // Altered bytes (a payload byte): the frame's hash no longer matches.
    let mut bad = src[0].clone();
    let at = bad.len() - 40;
    bad[at] ^= 1;
    refused(log, vec![raw(&bad)], "frame");
    // Frames that skip one.
    refused(log, vec![raw(&src[0]), raw(&src[2])], "seq");
    // A version that is not the stream's next (a valid frame, hash and all).
    let h = FrameHeader { kind: 0, schema: 0, seq: 1, version: 0, recorded_at: T0, stream: "note:a", op_id: None };
    let payload = note("v").encode_payload();
    let kind = note("v").kind();
    let h = FrameHeader { kind: kind.code(), schema: kind.current_schema(), version: 3, ..h };
    refused(log, vec![raw(&Frame::encode(&h, &payload, &GENESIS_HASH))], "version");
    // Nothing above was written: the whole source imports, in two parts that cut the group.
    assert_eq!(log.import(vec![raw(&src[0]), raw(&src[1]), raw(&src[2])]).unwrap(), 3);
    assert_eq!(log.import(src[3..].iter().map(|f| raw(f)).collect()).unwrap(), src.len() as u64);
    assert_eq!(all_bytes(log), src);
    assert_eq!(log.last_seq(), 5);
    assert_eq!((log.stream_version("note:a").unwrap(), log.stream_version("note:b").unwrap()), (Some(2), Some(1)));
    // Live subscribers got every imported frame, in order.
    let mut seen = Vec::new();
    while seen.len() < src.len() {
        for f in live.blocking_recv().expect("published").iter() {
            seen.push(FrameRef::parse(f).unwrap().seq());
        }
    }
    assert_eq!(seen, [1, 2, 3, 4, 5]);
    // The op id's results were derived from the frames, across the cut.
    let retry =
        vec![Append::new(sid("note:a"), vec![note("3")]).op_id("g1"), Append::new(sid("note:b"), vec![note("x")])];
    let rs = append_all(log, retry).unwrap();
    let got: Vec<_> =
        rs.iter().map(|r| (r.stream.as_str(), r.first_seq, r.last_seq, r.first_version, r.deduplicated)).collect();
    assert_eq!(got, [("note:a", 3, 3, 2, true), ("note:b", 4, 4, 0, true)]);
    // A frame that does not chain to the head (another log's frame 6) and an op id held elsewhere.
    let other = Frame::encode(&FrameHeader { seq: 6, version: 0, stream: "note:c", ..h.clone() }, &payload, &[7u8; 32]);
    refused(log, vec![raw(&other)], "prev_hash");
    let head = *FrameRef::parse(&src[4]).unwrap().hash();
    let dup =
        Frame::encode(&FrameHeader { seq: 6, version: 0, stream: "note:c", op_id: Some("g1"), ..h }, &payload, &head);
    refused(log, vec![raw(&dup)], "op_id");
    // Appends chain on after an import.
    let r = append(log, Append::new(sid("note:a"), vec![note("4")])).unwrap();
    assert_eq!((r.first_seq, r.first_version), (6, 3));
    assert!(log.verify().unwrap().ok());
});

// ---- `od log copy` ----

/// A populated embedded log: several streams, a multi-part group and a single append with op ids.
/// Returns the op ids' original results.
fn populate(dir: &Path) -> (Vec<AppendResult>, AppendResult) {
    let log = open_sled(dir);
    for i in 0..40 {
        let s = ["note:a", "note:b", "note:c"][i % 3];
        append(&*log, Append::new(sid(s), vec![note(&format!("n{i}")), note("more")])).unwrap();
    }
    let parts = vec![
        Append::new(sid("note:a"), vec![note("g1"), note("g2")]).op_id("group-1"),
        Append::new(sid("note:d"), vec![note("g3")]),
        Append::new(sid("note:b"), vec![note("g4"), note("g5"), note("g6")]),
    ];
    let group = append_all(&*log, parts).unwrap();
    let single = append(&*log, Append::new(sid("note:c"), vec![note("s")]).op_id("single-1")).unwrap();
    append(&*log, Append::new(sid("note:e"), vec![note("last")])).unwrap();
    log.close();
    (group, single)
}

fn group_retry() -> Vec<Append> {
    vec![
        Append::new(sid("note:a"), vec![note("g1"), note("g2")]).op_id("group-1"),
        Append::new(sid("note:d"), vec![note("g3")]),
        Append::new(sid("note:b"), vec![note("g4"), note("g5"), note("g6")]),
    ]
}

fn dedup(rs: &[AppendResult]) -> Vec<AppendResult> {
    rs.iter().map(|r| AppendResult { deduplicated: true, ..r.clone() }).collect()
}

/// Runs `od log copy` with `args` on `data`; its exit code and stdout as JSON (or stderr's error).
fn copy(data: &Path, args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["log", "copy", "--json"];
    all.extend_from_slice(args);
    let out = od_cli(data, &all);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code().unwrap_or(-1), serde_json::from_str(&stdout).unwrap_or(Value::Null), stderr)
}

/// Both logs hold the same frames, the same stream heads, and the target verifies.
fn same_log(a: &dyn EventLog, b: &dyn EventLog) {
    assert_eq!(all_bytes(a), all_bytes(b), "the same frames, byte for byte");
    for s in ["note:a", "note:b", "note:c", "note:d", "note:e"] {
        assert_eq!(a.stream_version(s).unwrap(), b.stream_version(s).unwrap(), "{s}");
    }
    let (ra, rb) = (a.verify().unwrap(), b.verify().unwrap());
    assert!(rb.ok(), "{rb:?}");
    assert_eq!((ra.verified, ra.head_hash), (rb.verified, rb.head_hash));
}

/// The op ids' retries on `log` return the original results; a new append chains on.
fn carries_ops(log: &dyn EventLog, group: &[AppendResult], single: &AppendResult) {
    assert_eq!(append_all(log, group_retry()).unwrap(), dedup(group));
    let again = append(log, Append::new(sid("note:c"), vec![note("s")]).op_id("single-1")).unwrap();
    assert_eq!(again, AppendResult { deduplicated: true, ..single.clone() });
    let last = log.last_seq();
    let r = append(log, Append::new(sid("note:a"), vec![note("after")])).unwrap();
    assert_eq!(r.first_seq, last + 1);
    assert!(log.verify().unwrap().ok());
}

#[test]
fn copies_embedded_to_postgres_and_back() {
    let server = pg::server();
    let url = server.fresh_db();
    let src = tempfile::tempdir().unwrap();
    let (group, single) = populate(src.path());
    let before = all_bytes(&*open_sled(src.path()));

    let (code, v, err) = copy(src.path(), &["--to", &url]);
    assert_eq!(code, 0, "{err}");
    let n = before.len() as u64;
    assert_eq!((v["copied"].as_u64(), v["lastSeq"].as_u64(), v["verified"].as_bool()), (Some(n), Some(n), Some(true)));
    assert_eq!(v["complete"], true);
    assert_eq!(v["to"], url.as_str());

    // PostgreSQL → a fresh embedded dir, the source named by --store.
    let back = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let to = back.path().join("od");
    let (code, v2, err) = copy(scratch.path(), &["--store", &url, "--to", to.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v2["copied"].as_u64(), Some(n));
    assert_eq!(v2["headHash"], v["headHash"]);

    let source = open_sled(src.path());
    assert_eq!(all_bytes(&*source), before, "the source is unchanged");
    let target = open_pg(&url);
    same_log(&*source, &*target);
    let back = open_sled(&to);
    same_log(&*source, &*back);
    drop(source);
    carries_ops(&*target, &group, &single);
    carries_ops(&*back, &group, &single);
}

#[test]
fn a_copy_resumes_from_the_target_head_and_refuses_another_history() {
    let server = pg::server();
    let url = server.fresh_db();
    let src = tempfile::tempdir().unwrap();
    let (group, single) = populate(src.path());
    let frames = all_bytes(&*open_sled(src.path()));
    // A prefix imported by the library, ending inside the op id's group (frames 81..86).
    let k = 83;
    {
        let target = open_pg(&url);
        target.import(frames[..k].iter().map(|f| raw(f)).collect()).unwrap();
    }
    let (code, v, err) = copy(src.path(), &["--to", &url, "--max-frames", "2"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        (v["copied"].as_u64(), v["lastSeq"].as_u64(), v["complete"].as_bool()),
        (Some(2), Some(85), Some(false))
    );
    let (code, v, err) = copy(src.path(), &["--to", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["copied"].as_u64(), Some(frames.len() as u64 - 85));
    // Complete: nothing more to copy.
    let (code, v, err) = copy(src.path(), &["--to", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!((v["copied"].as_u64(), v["complete"].as_bool()), (Some(0), Some(true)));
    {
        let source = open_sled(src.path());
        assert_eq!(all_bytes(&*source), frames);
        let target = open_pg(&url);
        same_log(&*source, &*target);
        carries_ops(&*target, &group, &single);
    }

    // A target whose history differs (another first event): refused, nothing written.
    let other = tempfile::tempdir().unwrap();
    {
        let log = open_sled(other.path());
        append(&*log, Append::new(sid("note:a"), vec![note("not the source's")])).unwrap();
    }
    let theirs = all_bytes(&*open_sled(other.path()));
    let (code, _, err) = copy(src.path(), &["--to", other.path().to_str().unwrap()]);
    assert_eq!(code, 76, "{err}");
    assert!(err.contains("log-copy-diverged") && err.contains("not a prefix"), "{err}");
    assert_eq!(all_bytes(&*open_sled(other.path())), theirs, "the target is unchanged");
    // Nor may a target be longer than the source: PostgreSQL has an append more now.
    let pg_before = all_bytes(&*open_pg(&url));
    assert_eq!(pg_before.len(), frames.len() + 1);
    let (code, _, err) = copy(src.path(), &["--to", &url]);
    assert_eq!(code, 76, "{err}");
    assert!(err.contains("log-copy-diverged"), "{err}");
    assert_eq!(all_bytes(&*open_pg(&url)), pg_before, "the target is unchanged");
    assert_eq!(all_bytes(&*open_sled(src.path())), frames, "the source is unchanged");
}

#[test]
fn a_log_held_by_another_process_is_refused_naming_the_daemon() {
    let src = tempfile::tempdir().unwrap();
    populate(src.path());
    let held = open_sled(src.path());
    let to = tempfile::tempdir().unwrap();
    let (code, _, err) = copy(src.path(), &["--to", to.path().join("copy").to_str().unwrap()]);
    assert_eq!(code, 80, "{err}");
    assert!(err.contains("data-dir-locked") && err.contains("stop the daemon first"), "{err}");
    assert!(!to.path().join("copy").exists(), "nothing was created for the target");
    drop(held);
    // A held target likewise.
    let target = open_sled(to.path());
    let (code, _, err) = copy(src.path(), &["--to", to.path().to_str().unwrap()]);
    assert_eq!(code, 80, "{err}");
    assert!(err.contains("--to") && err.contains("stop the daemon first"), "{err}");
    assert_eq!(target.last_seq(), 0, "nothing was written");
}

const CHILD_DIR: &str = "OD_LOG_COPY_CHILD_DIR";

/// The child of the test below: imports the source in two parts that cut its op-id group,
/// checkpoints between them, and exits without closing the log (nothing after the checkpoint
/// reaches sled's files but what sled wrote on its own; the segments hold both imports).
#[test]
#[ignore = "run by a_group_cut_by_two_imports_survives_a_crash"]
fn child_imports_and_exits() {
    let Ok(dir) = std::env::var(CHILD_DIR) else { return };
    let src = source_frames();
    let mut cfg = StoreConfig::new(&dir);
    cfg.clock = clock();
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    cfg.checkpoint_interval = std::time::Duration::from_secs(3600);
    let log: Arc<dyn EventLog> = SledLog::open(cfg).unwrap();
    log.import(src[..3].iter().map(|f| raw(f)).collect()).unwrap();
    log.checkpoint().unwrap();
    log.import(src[3..].iter().map(|f| raw(f)).collect()).unwrap();
    std::process::exit(0);
}

/// Recovery re-indexes the batches after the checkpoint: the second part of a group an import cut
/// extends the op id's stored results (it used to replace them, so a retry got the second part only).
#[test]
fn a_group_cut_by_two_imports_survives_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "log_copy::child_imports_and_exits", "--ignored", "--nocapture"])
        .env(CHILD_DIR, dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let log = open_sled(dir.path());
    assert_eq!(all_bytes(&*log), source_frames());
    let retry =
        vec![Append::new(sid("note:a"), vec![note("3")]).op_id("g1"), Append::new(sid("note:b"), vec![note("x")])];
    let got: Vec<_> =
        append_all(&*log, retry).unwrap().iter().map(|r| (r.stream.clone(), r.first_seq, r.last_seq)).collect();
    assert_eq!(got, [("note:a".to_string(), 3, 3), ("note:b".to_string(), 4, 4)]);
    assert!(log.verify().unwrap().ok());
}
