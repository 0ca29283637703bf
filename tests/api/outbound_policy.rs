//! The outbound address policy end to end (issue 29 item 2): a URL naming a cloud metadata address
//! (however it is spelled) as a plugin's MCP server, a marketplace index, a marketplace entry's
//! archive, a plugin source or a connector endpoint is refused by name (`url-refused`, HTTP 422,
//! exit 2) with nothing fetched and nothing written; the operator's deny list refuses what the
//! default allows; a malformed list entry stops the start (exit 2) naming the variable and entry.
//!
//! The daemons here listen on loopback (the loopback default); the hosted default and the
//! allow/deny precedence are shown unit-level with the exposure injected (`src/net/policy_tests.rs`).

use crate::common;

use common::harness::{od_cli, write_plugin, Engine, OD};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

const NOW: i64 = 1_800_000_000_000;

/// A plugin folder whose manifest declares one MCP server reached over HTTP at `url`.
fn mcp_plugin(dir: &Path, name: &str, url: &str) {
    write_plugin(dir, name, "1.0.0", json!([{ "id": "generate", "atoms": ["file-write"] }]), "Use it.");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("open-design.json")).unwrap()).unwrap();
    m["od"]["context"] = json!({ "mcp": [ { "name": "remote", "url": url } ] });
    std::fs::write(dir.join("open-design.json"), m.to_string()).unwrap();
}

/// Every event in the engine's log, as text.
fn log_text(e: &Engine) -> String {
    e.get("/api/log/events?limit=10000").1.to_string()
}

/// Asserts a `url-refused` 422 naming `url` and the address `addr`.
fn assert_refused(status: u16, body: &Value, url: &str, addr: &str) {
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("url-refused")), "{body}");
    assert_message(body, url, addr);
}

fn assert_message(body: &Value, url: &str, addr: &str) {
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains(url) && msg.contains(addr) && msg.contains("OD_OUTBOUND_ALLOW"), "{msg}");
}

/// `POST /api/plugins/install` (an ND-JSON stream of progress lines): its last line's `data`.
fn install(e: &Engine, body: Value) -> Value {
    let r = ureq::post(&format!("{}/api/plugins/install", e.url))
        .set("Authorization", &format!("Bearer {}", e.token))
        .send_json(body)
        .unwrap();
    let text = r.into_string().unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    last["data"].clone()
}

/// Asserts an install refused with `url-refused` naming `url` and `addr`.
fn assert_install_refused(data: &Value, url: &str, addr: &str) {
    assert_eq!(data["error"]["code"], "url-refused", "{data}");
    assert_message(data, url, addr);
}

/// A loopback server that records each request line and answers `body`.
fn server(body: Vec<u8>) -> (String, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    let hits = Arc::new(Mutex::new(Vec::new()));
    let h = hits.clone();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let mut first = String::new();
            let _ = BufReader::new(s.try_clone().unwrap()).read_line(&mut first);
            h.lock().unwrap().push(first);
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
        }
    });
    (base, hits)
}

#[test]
fn an_mcp_server_at_the_metadata_address_is_refused_by_name_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let before = log_text(&e);
    for (name, url, addr) in [
        ("imds", "http://169.254.169.254/latest/meta-data", "169.254.169.254"),
        ("imds-decimal", "https://2852039166/latest/meta-data", "169.254.169.254"),
        ("imds-mapped", "https://[::ffff:169.254.169.254]/mcp", "169.254.169.254"),
        ("imds-v6", "https://[fd00:ec2::254]/mcp", "fd00:ec2::254"),
        ("gce", "https://metadata.google.internal/computeMetadata/v1/", "metadata.google.internal"),
        ("alibaba", "http://100.100.100.200/latest/meta-data", "100.100.100.200"),
    ] {
        let dir = tmp.path().join(name);
        mcp_plugin(&dir, name, url);
        let body = install(&e, json!({ "source": dir }));
        assert_install_refused(&body, url, addr);
        assert!(body["error"]["message"].as_str().unwrap().contains("cloud metadata"), "{body}");
        assert_eq!(body["error"]["data"]["address"].as_str().map(|a| a.contains(addr)), Some(true), "{body}");
        // The CLI gets the same code and exits 2.
        let (code, err) = e.od_json(&["plugin", "install", dir.to_str().unwrap()]);
        assert_eq!(code, 2, "{err}");
        assert!(err.to_string().contains("url-refused"), "{err}");
        assert!(!e.data.join("plugins").join(name).exists(), "{name}: its files were written");
    }
    let (_, list) = e.get("/api/plugins");
    assert!(!list.to_string().contains("imds") && !list.to_string().contains("gce"), "{list}");
    assert_eq!(log_text(&e), before, "the log changed");
}

#[test]
fn marketplace_index_entry_archive_and_source_urls_at_metadata_addresses_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let before = log_text(&e);
    // An index at the metadata address.
    let url = "http://169.254.169.254/latest/index.json";
    let (status, body) = e.post("/api/marketplaces", json!({ "url": url }));
    assert_refused(status, &body, url, "169.254.169.254");
    // An archive source in hex spelling.
    let body = install(&e, json!({ "source": "https://0xa9fea9fe/p.tgz" }));
    assert_install_refused(&body, "https://0xa9fea9fe/p.tgz", "169.254.169.254");
    assert_eq!(log_text(&e), before, "the log changed");
    // A (local) index whose entry's archive is at the metadata address: the index is added, the
    // entry's install is refused.
    let index = tmp.path().join("index.json");
    let entry = json!({ "name": "imds", "version": "1.0.0", "source": "http://[::ffff:a9fe:a9fe]/p.tgz" });
    std::fs::write(&index, json!({ "name": "hostile", "plugins": [entry] }).to_string()).unwrap();
    let (status, body) = e.post("/api/marketplaces", json!({ "url": index, "trust": "trusted" }));
    assert_eq!(status, 201, "{body}");
    let body = install(&e, json!({ "source": "imds" }));
    assert_install_refused(&body, "http://[::ffff:a9fe:a9fe]/p.tgz", "169.254.169.254");
    let (_, list) = e.get("/api/plugins");
    assert!(!list.to_string().contains("imds"), "{list}");
}

#[test]
fn connector_endpoints_at_metadata_or_link_local_addresses_are_refused_when_loaded() {
    let tmp = tempfile::tempdir().unwrap();
    for (field, url, why) in [
        ("tokenUrl", "https://169.254.169.254/token", "cloud metadata"),
        ("apiBaseUrl", "https://[fe80::1]/", "link-local"),
        ("authorizeUrl", "https://metadata/a", "cloud metadata"),
    ] {
        let mut acme = json!({ "name": "Acme", "authorizeUrl": "https://acme.example/a",
                               "tokenUrl": "https://acme.example/t", "apiBaseUrl": "https://api.acme.example", "tools": {} });
        acme[field] = json!(url);
        std::fs::write(tmp.path().join("connectors.json"), json!({ "connectors": { "acme": acme } }).to_string())
            .unwrap();
        let e = od::connectors::Catalog::load(tmp.path()).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains(&format!("connectors.acme.{field}")) && e.contains(why) && e.contains("is refused"), "{e}");
    }
}

/// `od <args>` embedded with extra environment: (exit code, the last stderr line as JSON).
fn od_env(data: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
    let out = std::process::Command::new(OD)
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env_remove("OD_DAEMON_URL")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().rev().find_map(|l| serde_json::from_str::<Value>(l).ok()).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), last)
}

#[test]
fn the_deny_list_refuses_what_the_default_allows_and_a_malformed_entry_stops_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (base, hits) = server(b"not fetched".to_vec());
    let source = format!("{base}/p.tgz");
    for deny in ["127.0.0.1", "127.0.0.0/8,*.example", "::ffff:127.0.0.1"] {
        let (code, err) = od_env(&data, &["plugin", "install", &source], &[("OD_OUTBOUND_DENY", deny)]);
        assert_eq!(code, 2, "{deny}: {err}");
        let e = &err["error"];
        assert_eq!(e["code"], "url-refused", "{err}");
        assert!(e["message"].as_str().unwrap().contains("OD_OUTBOUND_DENY entry"), "{err}");
        // A deny entry beats an allow entry of the same address.
        let both = [("OD_OUTBOUND_DENY", deny), ("OD_OUTBOUND_ALLOW", "127.0.0.1")];
        assert_eq!(od_env(&data, &["plugin", "install", &source], &both).0, 2);
    }
    assert!(hits.lock().unwrap().is_empty(), "the server was asked: {:?}", hits.lock().unwrap());
    // A malformed entry: exit 2 naming the variable and the entry, before anything opens.
    for (var, entry) in [("OD_OUTBOUND_DENY", "10.0.0.0/33"), ("OD_OUTBOUND_ALLOW", "0xa9fea9fe")] {
        let (code, err) = od_env(&data, &["plugin", "list"], &[(var, &format!("ok.example,{entry}"))]);
        assert_eq!(code, 2, "{err}");
        assert_eq!(err["error"]["code"], "invalid-input", "{err}");
        let msg = err["error"]["message"].as_str().unwrap();
        assert!(msg.contains(var) && msg.contains(entry), "{msg}");
        assert_eq!(err["error"]["data"]["field"], var, "{err}");
        // `od daemon start` says so itself, before spawning a daemon.
        let (code, err) = od_env(&data, &["daemon", "start", "--port", "0"], &[(var, entry)]);
        assert_eq!((code, err["error"]["code"].as_str()), (2, Some("invalid-input")), "{err}");
    }
    // Without a list the same source is fetched (the loopback default allows a local server).
    let out = od_cli(&data, &["plugin", "install", &source]);
    assert_ne!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(hits.lock().unwrap().len(), 1, "{:?}", hits.lock().unwrap());
}

#[test]
fn a_deny_entry_added_after_the_install_refuses_at_apply_and_at_connect() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let dir = tmp.path().join("corp");
    // A name is not resolved at install: it passes (and is checked when it resolves).
    mcp_plugin(&dir, "corp", "https://mcp.corp.example/mcp");
    let out = od_cli(&data, &["plugin", "install", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let deny = [("OD_OUTBOUND_DENY", "*.corp.example")];
    let (code, err) = od_env(&data, &["plugin", "apply", "corp", "--json"], &deny);
    assert_eq!((code, err["error"]["code"].as_str()), (2, Some("url-refused")), "{err}");
    assert!(err["error"]["message"].as_str().unwrap().contains("OD_OUTBOUND_DENY entry `*.corp.example`"), "{err}");
    assert_eq!(od_env(&data, &["plugin", "apply", "corp", "--json"], &[]).0, 0);
    // Indexing its tools (the connect) names the refusal in the server's row.
    let out = std::process::Command::new(OD)
        .args(["tools", "index", "--plugin", "corp", "--json", "--data-dir"])
        .arg(&data)
        .env_remove("OD_DAEMON_URL")
        .envs(deny)
        .output()
        .unwrap();
    let idx: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let row = &idx["servers"][0];
    assert_eq!(row["status"], "failed", "{idx} {}", String::from_utf8_lossy(&out.stderr));
    assert!(row["reason"].as_str().unwrap().contains("OD_OUTBOUND_DENY"), "{row}");
}

#[test]
fn oauth_discovery_naming_a_metadata_authorization_server_is_refused_before_it_is_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    // Every path answers protected-resource metadata naming the metadata address.
    let prm = json!({ "resource": "x", "authorization_servers": ["http://169.254.169.254/latest"] });
    let (base, hits) = server(prm.to_string().into_bytes());
    let dir = tmp.path().join("disc");
    mcp_plugin(&dir, "disc", &format!("{base}/mcp"));
    assert_eq!(install(&e, json!({ "source": dir }))["plugin"]["id"], "disc");
    let (status, body) = e.post("/api/mcp/oauth/start", json!({ "pluginId": "disc", "serverId": "remote" }));
    assert!((400..500).contains(&status), "{status} {body}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("authorization server") && msg.contains("169.254.169.254") && msg.contains("cloud metadata"),
        "{msg}"
    );
    // Only the MCP server's own metadata was read.
    assert!(
        hits.lock().unwrap().iter().all(|h| h.contains("/.well-known/oauth-protected-resource")),
        "{:?}",
        hits.lock().unwrap()
    );
}
