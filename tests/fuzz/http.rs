//! Resume points and cursors over HTTP: `Last-Event-ID`, `?after=`, `?limit=`, tool-search
//! cursors, on the log, run, project and tool routes of a daemon that holds a finished run. Each
//! request is answered (never a 5xx, never a dropped connection) within a deadline, and the daemon
//! still answers `/api/health` after it.
//!
//! An input is text: the first line is the request target (`{run}` and `{project}` stand for the
//! ids of the daemon's run and project), every further line a header.

use super::harness::{Bounds, Rng, Target};
use super::mutate::havoc;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A daemon on port 0 with a finished dry-run run, its project and a note.
pub struct Daemon {
    _engine: crate::common::harness::Engine,
    _tmp: tempfile::TempDir,
    addr: String,
    run: String,
    project: String,
}

impl Daemon {
    pub fn start() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let engine = crate::common::harness::Engine::start(&tmp.path().join("data"), 1_800_000_000_000);
        let (run, _) = engine.run(json!({ "pluginId": "od-new-generation",
            "inputs": { "topic": "tea", "audience": "x", "artifactKind": "landing page" } }));
        let (_, info) = engine.get(&format!("/api/runs/{run}"));
        let project = info["run"]["projectId"].as_str().expect("the run's project").to_string();
        let (status, _) = engine.post("/api/log/notes", json!({ "stream": "note:fuzz", "text": "n" }));
        assert_eq!(status, 200);
        let addr = engine.url.trim_start_matches("http://").to_string();
        Daemon { _engine: engine, _tmp: tmp, addr, run, project }
    }
}

/// Status line of a response (and whether the body ended), reading at most until `deadline`. A
/// response that is still streaming when the deadline comes counts as answered.
fn get(addr: &str, target: &str, headers: &[&str], deadline: Duration) -> Option<u16> {
    let mut c = TcpStream::connect(addr).unwrap();
    let mut req = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    c.write_all(req.as_bytes()).unwrap();
    let until = Instant::now() + deadline;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        c.set_read_timeout(Some(left.min(Duration::from_millis(500)))).unwrap();
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if got.windows(4).any(|w| w == b"\r\n\r\n") {
                    break; // headers are in: a live stream, not a hang
                }
            }
            Err(_) => break,
        }
    }
    let head = String::from_utf8_lossy(&got);
    head.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// The request is answered, not with a server error, and the daemon stays healthy.
pub fn check_request(d: &Daemon, input: &[u8]) {
    let text = String::from_utf8_lossy(input).replace("{run}", &d.run).replace("{project}", &d.project);
    let mut lines = text.split('\n').map(|l| l.trim_end_matches('\r'));
    let target = lines.next().unwrap_or("/");
    // Bytes the HTTP/1.1 request line cannot carry are refused by the client side of this test,
    // not by the daemon: keep the target to visible ASCII.
    let target: String = target.chars().filter(|c| c.is_ascii_graphic()).collect();
    let target = if target.starts_with('/') { target } else { format!("/{target}") };
    // Framing headers are the test's own (a `Content-Length` on a GET would make the daemon wait
    // for a body, which is a slow client, not a parser hang).
    let framing = ["content-length", "transfer-encoding", "connection", "host", "expect", "upgrade", "te"];
    let headers: Vec<&str> = lines
        .filter(|l| l.bytes().all(|b| b >= 0x20 && b != 0x7f))
        .filter(|l| l.split_once(':').is_some_and(|(k, _)| !framing.contains(&k.trim().to_ascii_lowercase().as_str())))
        .collect();
    let mut map = axum::http::HeaderMap::new();
    for h in &headers {
        let (k, v) = h.split_once(':').unwrap();
        if let (Ok(k), Ok(v)) =
            (axum::http::HeaderName::try_from(k.trim()), axum::http::HeaderValue::try_from(v.trim()))
        {
            map.append(k, v);
        }
    }
    let _ = od::http::sse::resume_point(&map, None);
    let deadline = Duration::from_secs(10);
    let status = get(&d.addr, &target, &headers, deadline);
    let status = status.unwrap_or_else(|| panic!("GET {target} {headers:?}: no answer (connection dropped or hung)"));
    assert!(status < 500, "GET {target} {headers:?}: {status}");
    let health = get(&d.addr, "/api/health", &[], deadline);
    assert_eq!(health, Some(200), "the daemon stopped answering /api/health after GET {target} {headers:?}");
}

/// Mostly swaps a number of the request (an `after`, a cursor, a limit, an event id) for an
/// interesting one, else mutates its bytes.
fn mutate_request(rng: &mut Rng, input: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    if rng.one_in(2) {
        super::mutate::digits(rng, &mut out);
    } else {
        out = havoc(rng, input, pool);
    }
    out.truncate(2048);
    out
}

pub fn target() -> Target {
    Target {
        name: "http-cursor",
        iterations: 300,
        // The daemon's own heap counts here too (it runs in this process): sled, projections, the
        // runtime; a request must not move it by more than a few MiB.
        bounds: Bounds { deadline: Duration::from_secs(30), memory: |_| 32 << 20 },
        seeds: Vec::new(),
        mutate: mutate_request,
    }
}
