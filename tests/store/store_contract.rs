//! The event log's contract, run against BOTH backends: the embedded log (sled) and PostgreSQL (a
//! private server from the machine's packages, `common/pg.rs`; a missing server fails, never
//! skips), PostgreSQL also over TLS under `sslmode=verify-full`. Order, conflicts, op-id idempotency across a reopen, all-or-nothing multi-stream
//! appends, live subscriptions (exactly once, in order, including another daemon's commits on
//! PostgreSQL), verification, and durability of every acked event across a database crash. With
//! the same clock, both backends write byte-identical frames: the same chain, the same head hash.

use crate::common;

use common::{note, pg, sid};
use od::clock::{ManualClock, SharedClock};
use od::store::{Append, AppendResult, EventLog, Expected, PgLog, SledLog, StoreConfig, StoreError};
use std::sync::Arc;

const T0: i64 = 1_800_000_000_000;

fn clock() -> SharedClock {
    Arc::new(ManualClock::at(T0))
}

/// A log under test and what keeps it alive (a data dir, a database server).
struct Backend {
    log: Arc<dyn EventLog>,
    reopen: Box<dyn Fn() -> Arc<dyn EventLog>>,
    _keep: Box<dyn std::any::Any>,
}

fn sled() -> Backend {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let path = dir.path().to_path_buf();
    let open = move || -> Arc<dyn EventLog> {
        let mut cfg = StoreConfig::new(&path);
        cfg.clock = clock();
        cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
        SledLog::open(cfg).expect("open sled log")
    };
    let log = open();
    Backend { log, reopen: Box::new(open), _keep: Box::new(dir) }
}

fn postgres() -> Backend {
    let server = pg::server();
    let url = server.fresh_db();
    let open = move || -> Arc<dyn EventLog> { PgLog::open(&url, &pg_dir(), clock()).expect("open PostgreSQL log") };
    let log = open();
    Backend { log, reopen: Box::new(open), _keep: Box::new(server) }
}

/// PostgreSQL over TLS (`ssl=on`), the server's certificate checked against the test's CA and
/// its host name (`sslmode=verify-full`, issue 29).
fn postgres_tls() -> Backend {
    let tls = pg::tls_server();
    let url = tls.fresh_url("localhost", &format!("sslmode=verify-full&sslrootcert={}", tls.ca_file.display()));
    let open =
        move || -> Arc<dyn EventLog> { PgLog::open(&url, &pg_dir(), clock()).expect("open PostgreSQL over TLS") };
    let log = open();
    Backend { log, reopen: Box::new(open), _keep: Box::new(tls) }
}

/// A fresh local data dir for a PostgreSQL-backed log (its read models would live there).
fn pg_dir() -> std::path::PathBuf {
    tempfile::tempdir().expect("temp dir").keep()
}

fn append(log: &dyn EventLog, a: Append) -> Result<AppendResult, StoreError> {
    log.submit(a)?.blocking_recv().expect("acked")
}

fn append_all(log: &dyn EventLog, parts: Vec<Append>) -> Result<Vec<AppendResult>, StoreError> {
    log.submit_all(parts)?.blocking_recv().expect("acked")
}

fn texts(log: &dyn EventLog, stream: &str) -> Vec<String> {
    log.read_stream(stream, 0, usize::MAX)
        .unwrap()
        .iter()
        .map(|f| match f.decode().unwrap().event {
            od_events::Event::NoteRecorded(n) => n.text,
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

fn one(log: &dyn EventLog, stream: &str, text: &str) -> AppendResult {
    append(log, Append::new(sid(stream), vec![note(text)])).unwrap()
}

/// Runs `$body` (a fn of `Backend`) once per backend, as three tests (PostgreSQL in clear and
/// over TLS with `sslmode=verify-full`).
macro_rules! contract {
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
            #[test]
            fn postgres_tls() {
                ($body)(super::postgres_tls())
            }
        }
    };
}

contract!(order, |b: Backend| {
    let log = &*b.log;
    let a = append(log, Append::new(sid("note:a"), vec![note("1"), note("2")])).unwrap();
    let x = one(log, "note:b", "x");
    let c = one(log, "note:a", "3");
    assert_eq!((a.first_seq, a.last_seq, a.first_version, a.last_version), (1, 2, 0, 1));
    assert_eq!((x.first_seq, x.first_version), (3, 0));
    assert_eq!((c.first_seq, c.first_version), (4, 2));
    assert_eq!(log.last_seq(), 4);
    assert_eq!(texts(log, "note:a"), ["1", "2", "3"]);
    let seqs: Vec<u64> = log.read_from(1, 100).unwrap().iter().map(|f| f.seq()).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    let tail: Vec<u64> = log.read_from(3, 1).unwrap().iter().map(|f| f.seq()).collect();
    assert_eq!(tail, [3]);
    assert_eq!(log.read_stream("note:a", 1, 1).unwrap()[0].view().version(), 1);
    assert_eq!(log.stream_version("note:a").unwrap(), Some(2));
    assert_eq!(log.stream_version("note:none").unwrap(), None);
    let mut n = 0;
    assert_eq!(log.fold_stream("note:a", &mut |_| n += 1).unwrap(), 3);
    assert_eq!(n, 3);
});

contract!(conflicts, |b: Backend| {
    let log = &*b.log;
    append(log, Append::new(sid("note:a"), vec![note("1")]).expect(Expected::NoStream)).unwrap();
    let e = append(log, Append::new(sid("note:a"), vec![note("2")]).expect(Expected::NoStream)).unwrap_err();
    assert_eq!(e, StoreError::Conflict { stream: "note:a".into(), expected: "no stream".into(), actual: Some(0) });
    let e = append(log, Append::new(sid("note:a"), vec![note("2")]).expect(Expected::Exactly(5))).unwrap_err();
    assert!(matches!(e, StoreError::Conflict { actual: Some(0), .. }), "{e:?}");
    let e = append(log, Append::new(sid("note:new"), vec![note("2")]).expect(Expected::Exactly(0))).unwrap_err();
    assert!(matches!(e, StoreError::Conflict { actual: None, .. }), "{e:?}");
    append(log, Append::new(sid("note:a"), vec![note("2")]).expect(Expected::Exactly(0))).unwrap();
    assert_eq!(log.last_seq(), 2);
    assert_eq!(texts(log, "note:a"), ["1", "2"]);
});

contract!(idempotency_survives_reopen, |b: Backend| {
    let first = append(&*b.log, Append::new(sid("note:a"), vec![note("1"), note("2")]).op_id("req-1")).unwrap();
    assert!(!first.deduplicated);
    one(&*b.log, "note:a", "other");
    let again = append(&*b.log, Append::new(sid("note:a"), vec![note("ignored")]).op_id("req-1")).unwrap();
    assert_eq!(again, AppendResult { deduplicated: true, ..first.clone() });
    drop(b.log);
    let log = (b.reopen)();
    let after = append(&*log, Append::new(sid("note:a"), vec![note("ignored")]).op_id("req-1")).unwrap();
    assert_eq!(after, AppendResult { deduplicated: true, ..first });
    assert_eq!(texts(&*log, "note:a"), ["1", "2", "other"]);
    assert_eq!(log.last_seq(), 3);
});

contract!(all_or_nothing, |b: Backend| {
    let log = &*b.log;
    one(log, "note:b", "b0");
    // The second part conflicts: neither part is written.
    let e = append_all(
        log,
        vec![
            Append::new(sid("note:a"), vec![note("a0")]).op_id("grp"),
            Append::new(sid("note:b"), vec![note("b1")]).expect(Expected::NoStream),
        ],
    )
    .unwrap_err();
    assert!(matches!(e, StoreError::Conflict { .. }), "{e:?}");
    assert_eq!(log.stream_version("note:a").unwrap(), None);
    assert_eq!(log.last_seq(), 1);
    let rs = append_all(
        log,
        vec![
            Append::new(sid("note:a"), vec![note("a0")]).op_id("grp"),
            Append::new(sid("note:b"), vec![note("b1")]).expect(Expected::Exactly(0)),
        ],
    )
    .unwrap();
    assert_eq!(rs.iter().map(|r| (r.first_seq, r.stream.as_str())).collect::<Vec<_>>(), [(2, "note:a"), (3, "note:b")]);
    assert_eq!(texts(log, "note:b"), ["b0", "b1"]);
});

// Appends queued together (the writer takes them as one batch, one transaction, when it can): a
// refused one fails alone, checked against what the batch staged before it, and its neighbours
// commit in queue order.
contract!(a_refused_append_fails_alone_among_queued_ones, |b: Backend| {
    let log = &*b.log;
    let submit = |stream: &str, text: &str, expected: Expected, op: Option<&str>| {
        let mut a = Append::new(sid(stream), vec![note(text)]).expect(expected);
        if let Some(op) = op {
            a = a.op_id(op);
        }
        log.submit(a).unwrap()
    };
    let queued = vec![
        submit("note:a", "a0", Expected::NoStream, None),
        submit("note:a", "a1", Expected::NoStream, None),
        submit("note:b", "b0", Expected::Any, Some("op-1")),
        submit("note:c", "c0", Expected::Exactly(0), None),
        submit("note:b", "again", Expected::Any, Some("op-1")),
        submit("note:a", "a2", Expected::Exactly(0), None),
    ];
    let r: Vec<Result<AppendResult, StoreError>> = queued.into_iter().map(|rx| rx.blocking_recv().unwrap()).collect();
    assert_eq!(r[0].as_ref().unwrap().first_seq, 1);
    assert_eq!(
        r[1].as_ref().unwrap_err(),
        &StoreError::Conflict { stream: "note:a".into(), expected: "no stream".into(), actual: Some(0) }
    );
    let b0 = r[2].as_ref().unwrap();
    assert_eq!((b0.first_seq, b0.deduplicated), (2, false));
    assert!(matches!(r[3], Err(StoreError::Conflict { actual: None, .. })), "{:?}", r[3]);
    assert_eq!(r[4].as_ref().unwrap(), &AppendResult { deduplicated: true, ..b0.clone() });
    assert_eq!((r[5].as_ref().unwrap().first_seq, r[5].as_ref().unwrap().first_version), (3, 1));
    assert_eq!(log.last_seq(), 3);
    assert_eq!(texts(log, "note:a"), ["a0", "a2"]);
    assert_eq!(texts(log, "note:b"), ["b0"]);
    assert_eq!(log.stream_version("note:c").unwrap(), None);
});

contract!(subscriptions_see_each_frame_once_in_order, |b: Backend| {
    let mut live = b.log.live();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let log = b.log.clone();
            std::thread::spawn(move || {
                for i in 0..25 {
                    one(&*log, &format!("note:t{t}"), &format!("{i}"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut seen = Vec::new();
    while seen.len() < 100 {
        let batch = live.blocking_recv().expect("published");
        for f in batch.iter() {
            seen.push(od_events::FrameRef::parse(f).unwrap().seq());
        }
    }
    assert_eq!(seen, (1..=100).collect::<Vec<u64>>());
});

contract!(verify_walks_the_chain, |b: Backend| {
    for i in 0..50 {
        one(&*b.log, &format!("note:{}", i % 7), &format!("{i}"));
    }
    let r = b.log.verify().unwrap();
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.verified, 50);
});

/// The same appends with the same clock give byte-identical frames on both backends.
#[test]
fn both_backends_write_the_same_frames() {
    let (s, p) = (sled(), postgres());
    for b in [&s, &p] {
        append(&*b.log, Append::new(sid("note:a"), vec![note("1"), note("2")]).op_id("o")).unwrap();
        append_all(
            &*b.log,
            vec![Append::new(sid("note:b"), vec![note("3")]), Append::new(sid("note:c"), vec![note("4")])],
        )
        .unwrap();
    }
    let bytes = |b: &Backend| b.log.read_from(1, 100).unwrap().iter().map(|f| f.bytes().to_vec()).collect::<Vec<_>>();
    assert_eq!(bytes(&s), bytes(&p));
    assert_eq!(s.log.verify().unwrap().head_hash, p.log.verify().unwrap().head_hash);
}

/// Two logs on one database are two daemons: each one's live subscribers get the other's commits,
/// exactly once and in seq order, and the seqs interleave without a gap.
#[test]
fn postgres_two_daemons_share_one_log() {
    let server = pg::server();
    let url = server.fresh_db();
    let a = PgLog::open(&url, &pg_dir(), clock()).unwrap();
    let b = PgLog::open(&url, &pg_dir(), clock()).unwrap();
    let mut live_b = b.live();
    let writers: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .enumerate()
        .map(|(n, log)| {
            std::thread::spawn(move || {
                for i in 0..40 {
                    one(&*log, "note:shared", &format!("{n}-{i}"));
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let mut seen = Vec::new();
    while seen.len() < 80 {
        for f in live_b.blocking_recv().expect("published").iter() {
            seen.push(od_events::FrameRef::parse(f).unwrap().seq());
        }
    }
    assert_eq!(seen, (1..=80).collect::<Vec<u64>>());
    let versions: Vec<u64> =
        a.read_stream("note:shared", 0, 1000).unwrap().iter().map(|f| f.view().version()).collect();
    assert_eq!(versions, (0..80).collect::<Vec<u64>>());
    assert!(a.verify().unwrap().ok());
}

/// Every acked append survives the database crashing (SIGKILL of the postmaster, then restart):
/// a new log on the restarted server reads them all, and the chain verifies.
#[test]
fn postgres_acked_appends_survive_a_database_crash() {
    let server = pg::PgServer::start(); // its own: the crash would break other tests' connections
    let url = server.fresh_db();
    let log = PgLog::open(&url, &pg_dir(), clock()).unwrap();
    let acked: Vec<AppendResult> = (0..30).map(|i| one(&*log, "note:d", &format!("{i}"))).collect();
    server.crash_and_restart();
    drop(log);
    let log = PgLog::open(&url, &pg_dir(), clock()).unwrap();
    assert_eq!(log.last_seq(), acked.last().unwrap().last_seq);
    assert_eq!(texts(&*log, "note:d"), (0..30).map(|i| i.to_string()).collect::<Vec<_>>());
    assert!(log.verify().unwrap().ok());
    one(&*log, "note:d", "after");
    assert_eq!(log.stream_version("note:d").unwrap(), Some(30));
}

/// A database restart while two daemons run: appends fail while the server is down (a failure is
/// never an ack), then succeed on new connections; retried with their op ids, none is written
/// twice. The other daemon's subscriber goes on receiving every frame exactly once, in order (its
/// reader and LISTEN connection are reopened; the poll catches up on what it missed).
#[test]
fn postgres_daemons_reconnect_after_a_database_restart() {
    let server = pg::PgServer::start(); // its own: the restart would break other tests' connections
    let url = server.fresh_db();
    let a = PgLog::open(&url, &pg_dir(), clock()).unwrap();
    let b = PgLog::open(&url, &pg_dir(), clock()).unwrap();
    let mut live = b.live();
    for i in 0..10 {
        one(&*a, "note:r", &i.to_string());
    }
    server.crash_and_restart();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut i = 10;
    let mut failures = 0;
    while i < 20 {
        let a_ = Append::new(sid("note:r"), vec![note(&i.to_string())]).op_id(format!("r-{i}"));
        match append(&*a, a_) {
            Ok(_) => i += 1,
            Err(e) => {
                assert!(matches!(e, StoreError::Io { .. }), "{e:?}");
                assert!(std::time::Instant::now() < deadline, "no append accepted since the restart: {e}");
                failures += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
    let mut seen = Vec::new();
    while seen.len() < 20 {
        for f in live.blocking_recv().expect("published").iter() {
            seen.push(od_events::FrameRef::parse(f).unwrap().seq());
        }
    }
    assert_eq!(seen, (1..=20).collect::<Vec<u64>>());
    assert_eq!(texts(&*b, "note:r"), (0..20).map(|i| i.to_string()).collect::<Vec<_>>());
    assert!(b.verify().unwrap().ok());
    eprintln!("appends refused while the database restarted: {failures}");
}
