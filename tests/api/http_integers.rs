//! Issue 11 items 2 and 10: client-supplied integers (seq, version, `after`, `Last-Event-ID`,
//! interrupt ids, timeouts, cursors) never wrap; `after` is exclusive everywhere; past the end is
//! an empty answer or a 400; an oversized body is a 413 naming its limit.

use crate::common;

use common::harness::Engine;
use common::raw::{addr_of, request};
use serde_json::{json, Value};
use std::time::Duration;

const NOW: i64 = 1_700_000_000_000;
const MAX: u64 = u64::MAX;

/// A GET that must answer (a hang or a dropped connection fails the test, not the whole run).
fn get_within(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(20)).build();
    let mut req = agent.get(url);
    for (k, v) in headers {
        req = req.set(k, v);
    }
    match req.call() {
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap()),
        Err(e) => panic!("GET {url} did not answer: {e}"),
    }
}

fn notes(e: &Engine, stream: &str, n: usize) {
    for i in 0..n {
        let (code, v) = e.post("/api/log/notes", json!({ "stream": stream, "text": format!("n{i}") }));
        assert_eq!(code, 200, "{v}");
    }
}

#[test]
fn log_tail_after_the_largest_seq_answers_and_the_daemon_stays_up() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    notes(&e, "note:a", 2);
    let (code, body) = get_within(&format!("{}/api/log/tail?after={MAX}", e.url), &[]);
    assert_eq!((code, body.as_str()), (200, ""), "nothing lies after the end");
    // Following from past the end waits (for events that may come) without spinning: the stream
    // opens, and the daemon keeps answering while it is held.
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(20)).build();
    let held = agent.get(&format!("{}/api/log/tail?after={MAX}&follow=true", e.url)).call().unwrap();
    assert_eq!(held.status(), 200);
    notes(&e, "note:a", 1);
    assert_eq!(e.get("/api/health").0, 200, "health still answers");
    drop(held);
}

#[test]
fn log_pages_treat_after_as_exclusive_with_and_without_a_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    notes(&e, "note:p", 5);
    let (_, v) = e.get(&format!("/api/log/events?after={MAX}"));
    assert_eq!(v["events"], json!([]), "past the end is an empty page: {v}");
    let (_, v) = e.get(&format!("/api/log/events?stream=note:p&after={MAX}"));
    assert_eq!(v["events"], json!([]), "{v}");
    // Page through the stream two at a time, resuming after the last version seen.
    let mut seen = Vec::new();
    let mut after: Option<u64> = None;
    for _ in 0..10 {
        let q = after.map(|a| format!("&after={a}")).unwrap_or_default();
        let (_, v) = e.get(&format!("/api/log/events?stream=note:p&limit=2{q}"));
        let page = v["events"].as_array().unwrap().clone();
        if page.is_empty() {
            break;
        }
        for ev in &page {
            seen.push(ev["data"]["version"].as_u64().unwrap());
        }
        after = seen.last().copied();
    }
    assert_eq!(seen, vec![0, 1, 2, 3, 4], "every version once, and the paging ends");
    // Same for the global log: after=N starts at N+1.
    let (_, all) = e.get("/api/log/events");
    let first = all["events"][0]["data"]["seq"].as_u64().unwrap();
    let (_, v) = e.get(&format!("/api/log/events?after={first}&limit=1"));
    assert_eq!(v["events"][0]["data"]["seq"].as_u64(), Some(first + 1));
}

#[test]
fn run_streams_refuse_resume_points_past_the_end() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let (id, _) = e.run(json!({}));
    let max = MAX.to_string();
    for (path, headers) in [
        (format!("/api/runs/{id}/events?after={MAX}"), vec![]),
        (format!("/api/runs/{id}/events"), vec![("Last-Event-ID", max.as_str())]),
        (format!("/api/runs/{id}/watch?after={MAX}"), vec![]),
        (format!("/api/runs/{id}/watch"), vec![("Last-Event-ID", max.as_str())]),
        (format!("/api/runs/{id}/agui?resume=s@{MAX}"), vec![]),
    ] {
        let (code, body) = get_within(&format!("{}{path}", e.url), &headers);
        assert_eq!(code, 400, "{path}: {body}");
    }
    let (_, run) = e.get(&format!("/api/runs/{id}"));
    let pid = run["run"]["projectId"].as_str().unwrap().to_string();
    let (code, body) = get_within(&format!("{}/api/projects/{pid}/events?after={MAX}", e.url), &[]);
    assert_eq!(code, 400, "{body}");
    assert_eq!(e.get("/api/health").0, 200);
}

#[test]
fn agent_timeouts_are_bounded_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let (_, before) = e.get("/api/health");
    for field in ["agentTimeoutMs", "agentIdleTimeoutMs", "agentOutputMaxBytes", "agentOutputMaxEvents"] {
        let (code, v) = e.post("/api/runs", json!({ field: MAX }));
        assert_eq!((code, v["error"]["data"]["field"].as_str()), (400, Some(field)), "{v}");
    }
    for field in ["agentOutputMaxBytes", "agentOutputMaxEvents"] {
        let (code, v) = e.post("/api/runs", json!({ field: 0 }));
        assert_eq!((code, v["error"]["data"]["field"].as_str()), (400, Some(field)), "{v}");
    }
    let (_, after) = e.get("/api/health");
    assert_eq!(before["lastSeq"], after["lastSeq"], "nothing was written");
}

#[test]
fn tool_search_cursors_and_limits_do_not_wrap() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    // Out-of-range numbers are refused naming the field (a cursor is opaque, not a number).
    let (code, v) = e.get(&format!("/api/tools/search?limit={}", usize::MAX));
    assert_eq!((code, v["error"]["data"]["field"].clone()), (400, json!("limit")), "{v}");
    let (code, v) = e.get(&format!("/api/tools/search?cursor={}", usize::MAX));
    assert_eq!((code, v["error"]["data"]["field"].clone()), (400, json!("cursor")), "{v}");
    // A well-formed cursor anchored at the largest position, past every tool: an empty last page.
    let mut key = vec![1u8];
    key.extend_from_slice(&u32::MAX.to_be_bytes());
    key.extend_from_slice(&0f32.to_bits().to_be_bytes());
    key.extend_from_slice(b"zzzz");
    let cursor = od::page::encode_cursor("tools", &key);
    for q in ["", "query=search"] {
        let (code, v) = e.get(&format!("/api/tools/search?{q}&cursor={cursor}&limit=100"));
        assert_eq!(code, 200, "{v}");
        assert!(v.get("nextCursor").is_none(), "{v}");
    }
}

#[test]
fn an_oversized_body_is_413_naming_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let host = addr_of(&e.url);
    let big = format!("{{\"stream\":\"note:x\",\"text\":\"{}\"}}", "a".repeat(3 * 1024 * 1024));
    let r = request(
        &e.url,
        "POST",
        "/api/log/notes",
        &[("Host", &host), ("Content-Type", "application/json")],
        big.as_bytes(),
    );
    assert_eq!((r.status, r.code().as_str()), (413, "payload-too-large"), "{}", r.head);
    assert_eq!(r.json()["error"]["data"]["limit"], "MAX_REQUEST_BODY_BYTES", "{}", r.body);
    let (_, p) = e.post("/api/projects", json!({ "name": "p" }));
    let pid = p["project"]["id"].as_str().unwrap().to_string();
    let file = vec![b'x'; od::limits::MAX_PROJECT_FILE_BYTES + 1];
    let r = request(
        &e.url,
        "PUT",
        &format!("/api/projects/{pid}/files/big.bin"),
        &[("Host", &host), ("Content-Type", "application/octet-stream")],
        &file,
    );
    assert_eq!((r.status, r.code().as_str()), (413, "payload-too-large"), "{}", r.head);
    assert_eq!(r.json()["error"]["data"]["limit"], "MAX_PROJECT_FILE_BYTES", "{}", r.body);
}

#[test]
fn integers_out_of_range_are_400_envelopes_naming_the_query() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let (id, _) = e.run(json!({}));
    let over = "18446744073709551616"; // 2^64
    for path in [
        format!("/api/log/events?after={over}"),
        "/api/log/events?after=-1".to_string(),
        format!("/api/log/tail?after={over}"),
        format!("/api/runs/{id}/events?after={over}"),
        format!("/api/runs/{id}/watch?after={over}"),
    ] {
        let (code, body) = get_within(&format!("{}{path}", e.url), &[]);
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        assert_eq!((code, v["error"]["data"]["field"].as_str()), (400, Some("query")), "{path}: {body}");
    }
    // A page size is named as such.
    let (code, body) = get_within(&format!("{}/api/tools/search?limit={over}0", e.url), &[]);
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    assert_eq!((code, v["error"]["data"]["field"].as_str()), (400, Some("limit")), "{body}");
    let (code, body) = get_within(&format!("{}/api/runs/{id}/events", e.url), &[("Last-Event-ID", over)]);
    assert_eq!(code, 400, "{body}");
}
