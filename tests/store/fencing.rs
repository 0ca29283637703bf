//! Fencing tokens and the monotonic run lifecycle at the log (issue 37), on both backends:
//! an executor's append carries its lease's (daemon, epoch) and is refused (`lease-lost`) once a
//! newer take holds the run; nothing is appended to a run after its `run_ended` (`run-ended`), in
//! one batch or across batches, and a refused group writes none of its parts; a log written
//! before these rules with a run ended twice folds to its first end and `verify` names the run;
//! on PostgreSQL a take moves the lease only from a daemon whose heartbeat stopped, with a greater
//! epoch, and a daemon id held by a live process is refused to a second one.

use crate::common;

use common::pg;
use od::store::{Append, EventLog, Fence, PgLeases, PgLog, RunLeases, SledLog, StoreConfig, StoreError};
use od_events::runs::{RunCreated, RunEnded};
use od_events::system::NoteRecorded;
use od_events::{Event, StreamId};
use std::sync::Arc;
use std::time::Duration;

fn sid(s: &str) -> StreamId {
    StreamId::new(s).unwrap()
}

fn note(t: &str) -> Event {
    Event::NoteRecorded(NoteRecorded { text: t.into(), tags: vec![] })
}

fn ended(run: &str, status: &str) -> Event {
    Event::RunEnded(RunEnded {
        run_id: run.into(),
        status: status.into(),
        code: if status == "succeeded" { 0 } else { 1 },
        reason: String::new(),
        failure_category: od_events::vocab::FailureCategory::None,
        artifact_count: 0,
        ended_at: 1,
    })
}

fn created(run: &str) -> Event {
    Event::RunCreated(RunCreated {
        run_id: run.into(),
        project_id: "p".into(),
        conversation_id: "c".into(),
        client_request_id: String::new(),
        snapshot_id: String::new(),
        plugin_id: String::new(),
        message: String::new(),
        agent: "dry-run".into(),
        agent_config_json: "{}".into(),
        created_at: 1,
    })
}

fn fence(run: &str, daemon: &str, epoch: u64) -> Option<Fence> {
    Some(Fence { run_id: run.into(), daemon_id: daemon.into(), epoch })
}

fn fenced(run: &str, f: Option<Fence>, events: Vec<Event>) -> Append {
    Append::new(sid(&format!("run:{run}")), events).fenced(f)
}

#[test]
fn embedded_log_fences_executors_and_refuses_appends_after_an_end() {
    let dir = tempfile::tempdir().unwrap();
    let store: od::store::Store = SledLog::open(StoreConfig::new(dir.path())).unwrap();
    let fences = store.local_fences().expect("the embedded log keeps its fences");
    let e1 = fences.take("r");
    store.append(fenced("r", fence("r", "d", e1), vec![created("r")])).unwrap();
    // A newer take (a restart resuming the run): the older epoch is fenced off.
    let e2 = fences.take("r");
    assert!(e2 > e1);
    let err = store.append(fenced("r", fence("r", "d", e1), vec![note("stale")])).unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { ref run_id, epoch } if run_id == "r" && epoch == e1), "{err}");
    assert_eq!(err.code(), "lease-lost");
    store.append(fenced("r", fence("r", "d", e2), vec![note("current")])).unwrap();
    // A fence guards its own run's stream only.
    let err = store.append(Append::new(sid("note:x"), vec![note("x")]).fenced(fence("r", "d", e2))).unwrap_err();
    assert!(matches!(err, StoreError::Invalid { field: "fence", .. }), "{err}");
    // Released: no fence holds the run.
    fences.release("r");
    assert!(matches!(
        store.append(fenced("r", fence("r", "d", e2), vec![note("after release")])),
        Err(StoreError::LeaseLost { .. })
    ));
    let e3 = fences.take("r");
    assert!(e3 > e2, "epochs only grow, across releases");

    // The end, then nothing: not a second end, not an unfenced note, not a fenced one.
    store.append(fenced("r", fence("r", "d", e3), vec![ended("r", "succeeded")])).unwrap();
    let head = store.stream_version("run:r").unwrap();
    for a in [
        fenced("r", fence("r", "d", e3), vec![ended("r", "failed")]),
        Append::new(sid("run:r"), vec![note("late")]),
        fenced("r", fence("r", "d", e3), vec![note("late")]),
    ] {
        let err = store.append(a).unwrap_err();
        assert!(matches!(err, StoreError::RunEnded { ref stream } if stream == "run:r"), "{err}");
        assert_eq!(err.code(), "run-ended");
    }
    // A group with a refused part writes none of its parts.
    let err = store
        .append_all(vec![Append::new(sid("note:y"), vec![note("y")]), Append::new(sid("run:r"), vec![note("z")])])
        .unwrap_err();
    assert!(matches!(err, StoreError::RunEnded { .. }), "{err}");
    assert_eq!(store.stream_version("note:y").unwrap(), None);
    assert_eq!(store.stream_version("run:r").unwrap(), head);

    // In one batch: an end queued before another append to the same run refuses it.
    let f = fences.take("s");
    let first = store.submit(fenced("s", fence("s", "d", f), vec![created("s"), ended("s", "canceled")])).unwrap();
    let second = store.submit(Append::new(sid("run:s"), vec![note("after the cancel")])).unwrap();
    first.blocking_recv().unwrap().unwrap();
    assert!(matches!(second.blocking_recv().unwrap(), Err(StoreError::RunEnded { .. })));
    assert_eq!(store.stream_version("run:s").unwrap(), Some(1));
    // Other streams are untouched by the rule.
    store.append(Append::new(sid("note:y"), vec![note("y")])).unwrap();
}

/// Frames of a log written before the rule: `run:old` created, ended `failed`, then ended again
/// `succeeded` (what a stalled daemon did), chained from genesis.
fn legacy_frames() -> Vec<od::store::RawFrame> {
    let mut prev = od_events::GENESIS_HASH;
    let evs = [created("old"), ended("old", "failed"), ended("old", "succeeded")];
    evs.iter()
        .enumerate()
        .map(|(i, e)| {
            let payload = e.encode_payload();
            let h = od_events::FrameHeader {
                kind: e.kind().code(),
                schema: e.kind().current_schema(),
                seq: i as u64 + 1,
                version: i as u64,
                recorded_at: 1,
                stream: "run:old",
                op_id: None,
            };
            let bytes = od_events::Frame::encode(&h, &payload, &prev);
            prev = bytes[bytes.len() - 32..].try_into().unwrap();
            od::store::RawFrame::from_bytes(bytes).unwrap()
        })
        .collect()
}

#[test]
fn a_run_ended_twice_in_an_old_log_folds_to_its_first_end_and_verify_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledLog::open(StoreConfig::new(dir.path())).unwrap();
    store.import(legacy_frames()).unwrap();
    let last = store.last_seq();
    let ws = od::projector::fold_records_until::<od_projections::Workspace>(&*store, last).unwrap();
    let run = od_projections::workspace_read::run(&ws, "old").unwrap();
    assert_eq!(run.status, od_events::vocab::RunStatus::Failed, "the first end stands");
    let report = store.verify().unwrap();
    assert!(report.ok());
    assert_eq!(report.runs_ended_twice, vec!["run:old".to_string()]);
    // The copied end closes the run for appends too.
    assert!(matches!(store.append(Append::new(sid("run:old"), vec![note("x")])), Err(StoreError::RunEnded { .. })));
    drop(store);
    let offline = od::store::verify_dir(dir.path()).unwrap();
    assert_eq!(offline.runs_ended_twice, vec!["run:old".to_string()]);
}

/// A log on the database (as a daemon opens it), and the same as the engine's `Store`.
fn pg_log(url: &str) -> (Arc<PgLog>, od::store::Store) {
    let dir = tempfile::tempdir().unwrap().keep();
    let log = PgLog::open(url, &dir, Arc::new(od::clock::SystemClock)).unwrap();
    (log.clone(), log)
}

#[test]
fn postgres_fences_a_stalled_daemon_s_executor_and_refuses_appends_after_an_end() {
    let server = pg::server();
    let url = server.fresh_db();
    let ttl = Duration::from_millis(1_000);
    let ((pa, la), (pb, lb)) = (pg_log(&url), pg_log(&url));
    let a = PgLeases::start(&pa, "daemon-a".into(), "nonce-a".into(), String::new(), ttl).unwrap();
    let b = PgLeases::start(&pb, "daemon-b".into(), "nonce-b".into(), String::new(), ttl).unwrap();
    let ea = a.take("r").unwrap().expect("a free run");
    la.append(fenced("r", a.fence("r", ea), vec![created("r")])).unwrap();
    assert_eq!(b.take("r").unwrap(), None, "a live daemon's lease does not move");
    // A stops heart-beating (its leases object is gone); its executor's fence lives on.
    let stale = a.fence("r", ea);
    drop(a);
    std::thread::sleep(ttl * 2);
    let eb = b.take("r").unwrap().expect("a dead daemon's lease moves");
    assert!(eb > ea, "epochs only grow: {eb} after {ea}");
    let err = la.append(fenced("r", stale.clone(), vec![note("from the stalled daemon")])).unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { epoch, .. } if epoch == ea), "{err}");
    lb.append(fenced("r", b.fence("r", eb), vec![note("from the new holder")])).unwrap();
    lb.append(fenced("r", b.fence("r", eb), vec![ended("r", "failed")])).unwrap();
    for a in
        [fenced("r", b.fence("r", eb), vec![ended("r", "succeeded")]), Append::new(sid("run:r"), vec![note("late")])]
    {
        assert!(matches!(lb.append(a), Err(StoreError::RunEnded { .. })));
    }
    assert!(matches!(la.append(Append::new(sid("run:r"), vec![note("late")])), Err(StoreError::RunEnded { .. })));
    // Released: nobody's fence holds the run; the next take is newer still.
    let et = b.take("t").unwrap().unwrap();
    lb.append(fenced("t", b.fence("t", et), vec![created("t")])).unwrap();
    b.release("t");
    let err = lb.append(fenced("t", b.fence("t", et), vec![note("x")])).unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { .. }), "{err}");
    assert!(b.take("t").unwrap().unwrap() > et);
    // The run holds: created, the new holder's note, the end — nothing of the stale daemon.
    assert_eq!(lb.stream_version("run:r").unwrap(), Some(2));
    // The database's own record of ends, and a verify that finds no run ended twice.
    let report = lb.verify().unwrap();
    assert!(report.ok() && report.runs_ended_twice.is_empty(), "{report:?}");
}

#[test]
fn postgres_refuses_a_daemon_id_held_by_a_live_process_and_takes_over_a_dead_one_s() {
    let server = pg::server();
    let url = server.fresh_db();
    let ttl = Duration::from_millis(800);
    let ((p1, l1), (p2, _)) = (pg_log(&url), pg_log(&url));
    let first = PgLeases::start(&p1, "same-id".into(), "first".into(), "127.0.0.1:1".into(), ttl).unwrap();
    let e = first.take("kept").unwrap().unwrap();
    let err = match PgLeases::start(&p2, "same-id".into(), "second".into(), String::new(), ttl) {
        Err(e) => e,
        Ok(_) => panic!("a second process took a live daemon's id"),
    };
    assert!(matches!(err, StoreError::DaemonIdInUse { ref listen, .. } if listen == "127.0.0.1:1"), "{err}");
    assert_eq!(err.code(), "daemon-id-in-use");
    // The refused one touched nothing: the first still holds its run at the same epoch.
    l1.append(fenced("kept", first.fence("kept", e), vec![created("kept")])).unwrap();
    // Once the first is gone (no heartbeat for a TTL), a new process of the id starts.
    drop(first);
    std::thread::sleep(ttl * 2);
    let next = PgLeases::start(&p2, "same-id".into(), "third".into(), String::new(), ttl).unwrap();
    let e2 = next.take("kept").unwrap().unwrap();
    assert!(e2 > e);
    assert!(matches!(
        l1.append(fenced(
            "kept",
            Some(Fence { run_id: "kept".into(), daemon_id: "same-id".into(), epoch: e }),
            vec![note("x")]
        )),
        Err(StoreError::LeaseLost { .. })
    ));
}
