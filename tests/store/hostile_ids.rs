//! Identifiers at the edge (issue 39, finding 1): op ids and `clientRequestId`s with a NUL or
//! another control character are refused 400 naming the field, on every backend, before anything
//! is batched — so on PostgreSQL, notes with NUL op ids posted among concurrent honest ones fail
//! alone. A request PostgreSQL itself refuses fails alone in its batch too (the writer retries the
//! rest one per transaction; the refusal comes from a trigger this test installs). An embedded log
//! that took a NUL op id before the rule (built here through `import`, as such a log was written)
//! is carried whole by `od log copy` to PostgreSQL. PostgreSQL is a private server
//! (`common/pg.rs`): a missing one fails, never skips.

use crate::common;

use common::harness::{od_cli, Engine};
use common::{daemon_proc, note, pg, sid};
use od::clock::{ManualClock, SharedClock};
use od::store::{Append, EventLog, PgLog, RawFrame, SledLog, StoreConfig, StoreError};
use od_events::{Frame, FrameHeader, Hash, GENESIS_HASH};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

const T0: i64 = 1_800_000_000_000;

fn clock() -> SharedClock {
    Arc::new(ManualClock::at(T0))
}

fn post(url: &str, path: &str, body: &Value) -> (u16, Value) {
    match ureq::post(&format!("{url}{path}")).send_json(body.clone()) {
        Ok(r) => (r.status(), r.into_json().unwrap_or(Value::Null)),
        Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap_or(Value::Null)),
        Err(e) => panic!("POST {path}: {e}"),
    }
}

fn get(url: &str, path: &str) -> Value {
    ureq::get(&format!("{url}{path}")).call().unwrap().into_json().unwrap()
}

/// A 400 naming `field`.
fn refused(r: &(u16, Value), field: &str) {
    assert_eq!((r.0, r.1["error"]["data"]["field"].as_str()), (400, Some(field)), "{}", r.1);
}

/// The bad op ids: NUL (which PostgreSQL's `text` refuses), CR/LF, DEL, a C1 control.
const BAD: [&str; 5] = ["op\0nul", "\0", "op\r\nx", "op\u{7f}", "op\u{85}"];

#[test]
fn nul_op_ids_among_concurrent_notes_on_postgres_fail_alone() {
    let server = pg::server();
    let url = server.fresh_db();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let d = daemon_proc::start(&data, &["--store", &url], &[]);
    // 6 clients × 20 notes: 20 with a bad op id among 100 honest ones (with and without op ids).
    let clients: Vec<_> = (0..6)
        .map(|c| {
            let base = d.url.clone();
            std::thread::spawn(move || {
                (0..20)
                    .map(|i| {
                        let n = c * 20 + i;
                        let op = match n % 6 {
                            0 => Some(format!("{}-{n}", BAD[n % BAD.len()])),
                            1 => None,
                            _ => Some(format!("honest-{n}")),
                        };
                        let body = json!({ "stream": "note:crowd", "text": format!("n{n}"), "opId": op });
                        (n, op.is_some_and(|o| o.chars().any(char::is_control)), post(&base, "/api/log/notes", &body))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut honest = 0;
    for c in clients {
        for (n, bad, r) in c.join().unwrap() {
            if bad {
                refused(&r, "opId");
            } else {
                assert_eq!(r.0, 200, "honest note {n}: {}", r.1);
                honest += 1;
            }
        }
    }
    assert_eq!(honest, 100);
    let page = get(&d.url, "/api/log/events?stream=note:crowd&limit=1000");
    assert_eq!(page["events"].as_array().unwrap().len(), 100, "only the honest notes were written");

    // A run's client request id: the same rule, named as the field it came in.
    let runs = |u: &str| get(u, "/api/runs")["runs"].as_array().map_or(0, Vec::len);
    let before = runs(&d.url);
    refused(&post(&d.url, "/api/runs", &json!({ "clientRequestId": "r\u{0}x" })), "clientRequestId");
    refused(&post(&d.url, "/api/runs", &json!({ "clientRequestId": "r\r\nx" })), "clientRequestId");
    let long = "r".repeat(od::limits::MAX_CLIENT_REQUEST_ID_BYTES + 1);
    refused(&post(&d.url, "/api/runs", &json!({ "clientRequestId": long })), "clientRequestId");
    assert_eq!(runs(&d.url), before, "nothing was written");
    let ok = post(&d.url, "/api/runs", &json!({ "clientRequestId": "r-honest" }));
    assert_eq!(ok.0, 202, "{}", ok.1);
    let v = get(&d.url, "/api/log/verify");
    assert!(v["firstBad"].is_null() && v["verified"].as_u64() > Some(100), "{v}");
}

#[test]
fn the_embedded_log_refuses_control_characters_at_the_edge_and_below_it() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), T0);
    let last = |e: &Engine| e.get("/api/log/stats").1["lastSeq"].as_u64().unwrap();
    let before = last(&e);
    for op in BAD {
        refused(&e.post("/api/log/notes", json!({ "stream": "note:x", "text": "t", "opId": op })), "opId");
    }
    refused(&e.post("/api/log/notes", json!({ "stream": "note:x", "text": "t", "opId": "" })), "opId");
    refused(&e.post("/api/runs", json!({ "clientRequestId": "r\u{0}x" })), "clientRequestId");
    assert_eq!(last(&e), before, "nothing was written");
    let (code, v) = e.post("/api/log/notes", json!({ "stream": "note:x", "text": "t", "opId": "fine é" }));
    assert_eq!(code, 200, "{v}");
    e.stop();

    // Below the edge, the store applies the same rule (every backend prepares appends alike).
    let log = common::open(&tmp.path().join("below"));
    for op in BAD {
        match log.append(Append::new(sid("note:x"), vec![note("t")]).op_id(op)) {
            Err(StoreError::Invalid { field: "op_id", .. }) => {}
            other => panic!("{op:?}: {other:?}"),
        }
    }
}

/// `od_ops` of database `url` refuses op ids starting with `poison-` (a stand-in for any value the
/// server refuses).
fn poison_trigger(server: &pg::PgServer, url: &str) {
    let db = url.rsplit('/').next().unwrap();
    server.psql(
        db,
        "CREATE FUNCTION od_test_refuse() RETURNS trigger AS $$ BEGIN
           IF NEW.op_id LIKE 'poison-%' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW;
         END $$ LANGUAGE plpgsql;
         CREATE TRIGGER od_test_refuse BEFORE INSERT ON od_ops FOR EACH ROW EXECUTE FUNCTION od_test_refuse();",
    );
}

#[test]
fn a_request_postgres_refuses_fails_alone_in_its_batch() {
    let server = pg::server();
    let url = server.fresh_db();
    let log = PgLog::open(&url, &tempfile::tempdir().unwrap().keep(), clock()).unwrap();
    poison_trigger(&server, &url);
    // Queued at once, so the writer takes them in batches that mix poison and honest requests.
    let acks: Vec<_> = (0..120)
        .map(|i| {
            let op = if i % 7 == 3 { format!("poison-{i}") } else { format!("honest-{i}") };
            let a = Append::new(sid(&format!("note:s{}", i % 5)), vec![note(&format!("n{i}"))]).op_id(op.clone());
            (op, log.submit(a).unwrap())
        })
        .collect();
    let mut written = 0u64;
    for (op, ack) in acks {
        let r = ack.blocking_recv().expect("acked");
        if op.starts_with("poison-") {
            assert!(matches!(r, Err(StoreError::Io { .. })), "{op}: {r:?}");
        } else {
            r.unwrap_or_else(|e| panic!("{op} failed with its batch: {e}"));
            written += 1;
        }
    }
    assert_eq!(written, 120 - 17);
    assert_eq!(log.last_seq(), written, "every honest append, and nothing of the refused ones");
    assert!(log.verify().unwrap().ok());
}

/// Frames as an older embedded log wrote them: a note whose op id holds a NUL, then an honest one.
fn legacy_frames() -> Vec<Vec<u8>> {
    let mut prev: Hash = GENESIS_HASH;
    let mut out = Vec::new();
    for (seq, (stream, op)) in
        [("note:a", Some("legacy\0op")), ("note:a", Some("fine-op")), ("note:b", None)].into_iter().enumerate()
    {
        let n = note(&format!("legacy {seq}"));
        let kind = n.kind();
        let h = FrameHeader {
            kind: kind.code(),
            schema: kind.current_schema(),
            seq: seq as u64 + 1,
            version: if stream == "note:a" { seq as u64 } else { 0 },
            recorded_at: T0,
            stream,
            op_id: op,
        };
        let bytes = Frame::encode(&h, &n.encode_payload(), &prev);
        prev = bytes[bytes.len() - 32..].try_into().unwrap();
        out.push(bytes);
    }
    out
}

fn all_bytes(log: &dyn EventLog) -> Vec<Vec<u8>> {
    log.read_from(1, usize::MAX).unwrap().iter().map(|f| f.bytes().to_vec()).collect()
}

fn open_sled(dir: &Path) -> Arc<SledLog> {
    let mut cfg = StoreConfig::new(dir);
    cfg.clock = clock();
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    SledLog::open(cfg).unwrap()
}

#[test]
fn log_copy_carries_an_embedded_log_holding_a_nul_op_id() {
    let src = tempfile::tempdir().unwrap();
    {
        let log = open_sled(src.path());
        let frames = legacy_frames().iter().map(|b| RawFrame::from_bytes(b.clone()).unwrap()).collect();
        assert_eq!(log.import(frames).unwrap(), 3);
        log.submit(Append::new(sid("note:b"), vec![note("after")]).op_id("later-op"))
            .unwrap()
            .blocking_recv()
            .unwrap()
            .unwrap();
        log.close();
    }
    let before = all_bytes(&*open_sled(src.path()));
    let server = pg::server();
    let url = server.fresh_db();
    let out = od_cli(src.path(), &["log", "copy", "--json", "--to", &url]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["copied"].as_u64(), v["verified"].as_bool()), (Some(4), Some(true)), "{v}");

    let pg = PgLog::open(&url, &tempfile::tempdir().unwrap().keep(), clock()).unwrap();
    assert_eq!(all_bytes(&*pg), before, "every frame, byte for byte, the NUL op id's included");
    assert!(pg.verify().unwrap().ok());
    // The other op ids were carried: their retries are deduplicated; the log goes on.
    let again = Append::new(sid("note:b"), vec![note("after")]).op_id("later-op");
    assert!(pg.submit(again).unwrap().blocking_recv().unwrap().unwrap().deduplicated);
    let again = Append::new(sid("note:a"), vec![note("legacy 1")]).op_id("fine-op");
    assert!(pg.submit(again).unwrap().blocking_recv().unwrap().unwrap().deduplicated);
    let next = pg.submit(Append::new(sid("note:a"), vec![note("new")])).unwrap().blocking_recv().unwrap().unwrap();
    assert_eq!(next.first_seq, 5);

    // And back to a fresh embedded dir.
    let back = tempfile::tempdir().unwrap();
    let to = back.path().join("od");
    let out = od_cli(src.path(), &["log", "copy", "--json", "--from", &url, "--to", to.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(all_bytes(&*open_sled(&to))[..4], before[..]);
}
