//! Issue 11 item 1: a web page must not drive the loopback daemon. Requests are written byte by
//! byte (raw TCP) so the test controls `Host`, `Origin`, `Sec-Fetch-Site` and `Content-Type` exactly
//! as a browser would send them after DNS rebinding or in a preflight-free "simple" request.

mod common;

use common::harness::Engine;
use common::raw::{addr_of, request, RawResponse};
use serde_json::json;

const NOW: i64 = 1_700_000_000_000;

fn post(e: &Engine, path: &str, headers: &[(&str, &str)], body: &str) -> RawResponse {
    request(&e.url, "POST", path, headers, body.as_bytes())
}

fn health_ok(e: &Engine) -> bool {
    e.get("/api/health").0 == 200
}

#[test]
fn a_rebound_host_cannot_start_an_exec_run_or_read_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let port = addr_of(&e.url).rsplit_once(':').unwrap().1.to_string();
    let marker = tmp.path().join("pwned");
    let host = format!("attacker.example:{port}");
    let origin = format!("http://attacker.example:{port}");
    let body = json!({ "agent": "exec", "agentCommand": format!("touch {}", marker.display()) }).to_string();
    let r = post(&e, "/api/runs", &[("Host", &host), ("Origin", &origin), ("Content-Type", "application/json")], &body);
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden-host"), "{r:?}");
    let read = request(&e.url, "GET", "/api/projects", &[("Host", &host)], b"");
    assert_eq!((read.status, read.code().as_str()), (403, "forbidden-host"), "a rebound page reads nothing");
    let (_, runs) = e.get("/api/runs");
    assert_eq!(runs["runs"], json!([]), "no run was created");
    assert!(!marker.exists(), "the command did not run");
}

#[test]
fn loopback_host_names_with_the_bound_port_or_none_are_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let port = addr_of(&e.url).rsplit_once(':').unwrap().1.to_string();
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}"), "localhost".into()]
    {
        let r = request(&e.url, "GET", "/api/health", &[("Host", &host)], b"");
        assert_eq!(r.status, 200, "Host: {host}: {r:?}");
    }
    for host in ["localhost:1", "127.0.0.1.nip.io", "localhost.attacker.example", "127.0.0.2"] {
        let r = request(&e.url, "GET", "/api/health", &[("Host", host)], b"");
        assert_eq!((r.status, r.code().as_str()), (403, "forbidden-host"), "Host: {host}");
    }
}

#[test]
fn simple_cross_site_posts_cannot_stop_cancel_or_revoke() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let host = addr_of(&e.url);
    let id = e.start_run(json!({ "dryRun": { "waitForCancel": "plan" } }));
    let (_, p) = e.post("/api/projects", json!({ "name": "p" }));
    let pid = p["project"]["id"].as_str().unwrap().to_string();
    let routes = [
        "/api/daemon/stop".to_string(),
        format!("/api/runs/{id}/cancel"),
        format!("/api/projects/{pid}/genui/s/revoke"),
    ];
    for path in &routes {
        // What `<form method=post enctype=text/plain>` or `fetch(url, {mode: "no-cors"})` sends.
        let r =
            post(&e, path, &[("Host", &host), ("Origin", "http://evil.example"), ("Content-Type", "text/plain")], "x");
        assert_eq!((r.status, r.code().as_str()), (403, "forbidden-origin"), "{path}: {r:?}");
        let r = post(&e, path, &[("Host", &host), ("Origin", "null"), ("Content-Type", "text/plain")], "");
        assert_eq!((r.status, r.code().as_str()), (403, "forbidden-origin"), "{path} with Origin: null");
        let r = post(&e, path, &[("Host", &host), ("Sec-Fetch-Site", "cross-site")], "");
        assert_eq!((r.status, r.code().as_str()), (403, "forbidden-origin"), "{path} with Sec-Fetch-Site");
        let r = post(&e, path, &[("Host", &host), ("Sec-Fetch-Site", "same-site")], "");
        assert_eq!((r.status, r.code().as_str()), (403, "forbidden-origin"), "{path} same-site");
        // No Origin at all, but a body a form could send: still refused.
        for ct in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
            let r = post(&e, path, &[("Host", &host), ("Content-Type", ct)], "a=b");
            assert_eq!((r.status, r.code().as_str()), (415, "unsupported-media-type"), "{path} as {ct}");
        }
    }
    assert!(health_ok(&e), "the daemon is still up");
    let (_, run) = e.get(&format!("/api/runs/{id}"));
    assert_eq!(run["run"]["status"], "running", "the run was not canceled");
    // The daemon's own origin (and a same-origin fetch) may.
    let own = format!("http://{host}");
    let r = post(
        &e,
        &format!("/api/runs/{id}/cancel"),
        &[("Host", &host), ("Origin", &own), ("Sec-Fetch-Site", "same-origin")],
        "",
    );
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn json_routes_refuse_other_content_types_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let host = addr_of(&e.url);
    let (_, before) = e.get("/api/health");
    let note = json!({ "stream": "note:x", "text": "hi" }).to_string();
    for ct in [None, Some("text/plain"), Some("application/x-www-form-urlencoded"), Some("text/json")] {
        let mut h = vec![("Host", host.as_str())];
        if let Some(ct) = ct {
            h.push(("Content-Type", ct));
        }
        let r = post(&e, "/api/log/notes", &h, &note);
        assert_eq!((r.status, r.code().as_str()), (415, "unsupported-media-type"), "{ct:?}: {r:?}");
    }
    let (_, after) = e.get("/api/health");
    assert_eq!(before["lastSeq"], after["lastSeq"], "nothing was written");
    let r = post(&e, "/api/log/notes", &[("Host", &host), ("Content-Type", "application/json; charset=utf-8")], &note);
    assert_eq!(r.status, 200, "{r:?}");
}
