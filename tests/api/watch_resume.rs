//! `od run watch` resumes after a dropped connection: a proxy between the CLI and the daemon cuts
//! the first watch stream after a few events; the CLI reconnects after the last event id it printed
//! and prints every event exactly once, ending with `end`.

use crate::common;

use common::harness::{Engine, OD};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Forwards connections to `upstream`; the first response to a `/watch` request is cut after
/// `cut_after` bytes of body-ish data (headers included), then the connection is closed.
fn proxy(upstream: String, cut_after: usize) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let cut_done = Arc::new(AtomicBool::new(false));
    std::thread::spawn(move || {
        for client in l.incoming() {
            let Ok(mut client) = client else { break };
            let upstream = upstream.clone();
            let cut_done = cut_done.clone();
            std::thread::spawn(move || {
                let mut server = TcpStream::connect(&upstream).unwrap();
                let mut buf = vec![0u8; 65536];
                let n = client.read(&mut buf).unwrap_or(0);
                let request = String::from_utf8_lossy(&buf[..n]).to_string();
                server.write_all(&buf[..n]).unwrap();
                let cut = request.contains("/watch") && !cut_done.swap(true, Ordering::SeqCst);
                let mut c2 = client.try_clone().unwrap();
                let mut s2 = server.try_clone().unwrap();
                std::thread::spawn(move || {
                    let mut b = vec![0u8; 65536];
                    while let Ok(n) = c2.read(&mut b) {
                        if n == 0 || s2.write_all(&b[..n]).is_err() {
                            break;
                        }
                    }
                });
                let mut sent = 0;
                loop {
                    let n = match server.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let n = if cut { n.min(cut_after.saturating_sub(sent)) } else { n };
                    if n == 0 || client.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    sent += n;
                    if cut && sent >= cut_after {
                        break;
                    }
                }
                let _ = client.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    format!("http://{addr}")
}

#[test]
fn watch_reconnects_after_a_dropped_stream_without_gap_or_duplicate() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), 1_800_000_000_000);
    let inputs = json!({ "topic": "tea", "audience": "all", "artifactKind": "poster" });
    let (id, reference) = e.run(json!({ "pluginId": "od-new-generation", "pluginInputs": inputs }));
    let via = proxy(e.url.trim_start_matches("http://").to_string(), 2500);
    let out = std::process::Command::new(OD)
        .args(["run", "watch", &id, "--data-dir"])
        .arg(tmp.path().join("data"))
        .env("OD_DAEMON_URL", &via)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(got.len() > 10);
    assert_eq!(got, reference, "every event once, in order, though the first stream was cut");
}
