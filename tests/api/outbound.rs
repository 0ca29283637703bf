//! Outbound requests and the inputs that reach the file system (issue 36 findings 6, 7, 9, 10, 12,
//! 13, 15 and the followed cross-host redirect; issue 39 findings 3 and 4): every URL from a plugin,
//! a marketplace, OAuth metadata or `connectors.json` passes one rule (no userinfo, plain http only
//! to loopback, never od's own API, redirects only to the same host, a deadline and a size), the
//! routes that make such requests apply the plugin's capability gate, and bad input gets a 4xx
//! naming what was wrong — quickly, with nothing written.
//!
//! The servers here are plain HTTP/1.1 on loopback threads (`Raw`), so a test can trickle bytes,
//! redirect, or record that it was never asked.

use crate::common;

use common::harness::{od_cli, write_plugin, Engine};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NOW: i64 = 1_800_000_000_000;

/// Every test here gets short outbound deadlines (one value, so setting it is race-free).
fn short_deadline() {
    std::env::set_var("OD_OUTBOUND_TIMEOUT_MS", "1500");
}

type Handler = dyn Fn(&str, &mut TcpStream) + Send + Sync;

/// A loopback HTTP/1.1 server: each request's `METHOD path` is recorded, then `handler` answers.
struct Raw {
    base: String,
    hits: Arc<Mutex<Vec<String>>>,
}

impl Raw {
    fn start(handler: impl Fn(&str, &mut TcpStream) + Send + Sync + 'static) -> Raw {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        let hits = Arc::new(Mutex::new(Vec::new()));
        let (h, handler): (_, Arc<Handler>) = (hits.clone(), Arc::new(handler));
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let (h, handler) = (h.clone(), handler.clone());
                std::thread::spawn(move || serve_one(s, &h, &*handler));
            }
        });
        Raw { base, hits }
    }

    fn hits(&self) -> Vec<String> {
        self.hits.lock().unwrap().clone()
    }
}

fn serve_one(mut s: TcpStream, hits: &Mutex<Vec<String>>, handler: &Handler) {
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut first = String::new();
    if r.read_line(&mut first).is_err() || first.is_empty() {
        return;
    }
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; len];
    let _ = r.read_exact(&mut body);
    let req: Vec<&str> = first.split_whitespace().take(2).collect();
    let req = req.join(" ");
    hits.lock().unwrap().push(req.clone());
    handler(&req, &mut s);
}

fn reply(s: &mut TcpStream, status: &str, headers: &str, body: &[u8]) {
    let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n", body.len());
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(body);
}

/// A plugin `name` as a `.tgz` (files below `<name>/`).
fn plugin_tgz(name: &str) -> Vec<u8> {
    let tmp = tempfile::tempdir().unwrap();
    write_plugin(tmp.path(), name, "1.0.0", json!([{ "id": "generate", "atoms": ["file-write"] }]), "Do it.");
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default()));
    for f in ["SKILL.md", "open-design.json"] {
        b.append_path_with_name(tmp.path().join(f), format!("{name}/{f}")).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

/// A raw call with the engine's token: (status, body text).
fn call(e: &Engine, method: &str, path: &str, body: Option<Value>) -> (u16, String) {
    let req = ureq::request(method, &format!("{}{path}", e.url)).set("Authorization", &format!("Bearer {}", e.token));
    let res = match body {
        Some(b) => req.send_json(b),
        None => req.call(),
    };
    match res {
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap()),
        Err(err) => panic!("{method} {path}: {err}"),
    }
}

fn healthy(e: &Engine) -> bool {
    ureq::get(&format!("{}/api/health", e.url)).call().is_ok_and(|r| r.status() == 200)
}

/// A plugin folder whose manifest declares one MCP server reached over HTTP at `url`.
fn mcp_plugin(dir: &Path, name: &str, url: &str) {
    write_plugin(dir, name, "1.0.0", json!([{ "id": "generate", "atoms": ["file-write"] }]), "Use it.");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("open-design.json")).unwrap()).unwrap();
    m["od"]["context"] = json!({ "mcp": [ { "name": "remote", "url": url } ] });
    std::fs::write(dir.join("open-design.json"), m.to_string()).unwrap();
}

/// Runs `f` on a thread, failing (instead of hanging) when it takes longer than `secs`.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> (T, Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    let v = rx.recv_timeout(Duration::from_secs(secs)).unwrap_or_else(|_| panic!("{what}: no answer in {secs} s"));
    (v, started.elapsed())
}

// --- Finding 7: a plugin's URLs never reach od's own API ---

#[test]
fn an_mcp_url_naming_the_daemon_is_refused_and_the_daemon_keeps_running() {
    short_deadline();
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let dir = tmp.path().join("selfstop");
    mcp_plugin(&dir, "selfstop", &format!("{}/api/daemon/stop", e.url));
    e.install(&dir);
    let (code, idx) = e.od_json(&["tools", "index", "--plugin", "selfstop"]);
    assert_eq!(code, 0, "{idx}");
    let row = &idx["servers"][0];
    assert_eq!(row["status"], "failed", "{idx}");
    assert!(row["reason"].as_str().unwrap().contains("od's own API"), "{row}");
    assert!(healthy(&e), "the daemon stopped");
}

/// An MCP server whose authorization server registers clients at `registration`.
fn oauth_server(registration: Arc<Mutex<String>>) -> Raw {
    let base = Arc::new(Mutex::new(String::new()));
    let b = base.clone();
    let raw = Raw::start(move |req, s| {
        let base = b.lock().unwrap().clone();
        match req {
            "GET /.well-known/oauth-protected-resource/mcp" => {
                let v = json!({ "resource": format!("{base}/mcp"), "authorization_servers": [format!("{base}/auth")] });
                reply(s, "200 OK", "Content-Type: application/json\r\n", v.to_string().as_bytes())
            }
            "GET /.well-known/oauth-authorization-server/auth" => {
                let v = json!({ "issuer": format!("{base}/auth"), "authorization_endpoint": format!("{base}/auth/authorize"),
                    "token_endpoint": format!("{base}/auth/token"), "registration_endpoint": *registration.lock().unwrap(),
                    "code_challenge_methods_supported": ["S256"] });
                reply(s, "200 OK", "Content-Type: application/json\r\n", v.to_string().as_bytes())
            }
            "POST /auth/register" => reply(s, "201 Created", "", br#"{"client_id":"c1"}"#),
            _ => reply(s, "401 Unauthorized", "", b""),
        }
    });
    *base.lock().unwrap() = raw.base.clone();
    raw
}

#[test]
fn an_oauth_registration_endpoint_naming_the_daemon_is_refused() {
    short_deadline();
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let registration = Arc::new(Mutex::new(format!("{}/api/daemon/stop", e.url)));
    let server = oauth_server(registration.clone());
    let dir = tmp.path().join("reg");
    mcp_plugin(&dir, "reg", &format!("{}/mcp", server.base));
    e.install(&dir);
    let (code, body) =
        call(&e, "POST", "/api/mcp/oauth/start", Some(json!({ "pluginId": "reg", "serverId": "remote" })));
    assert!((400..500).contains(&code), "{code} {body}");
    assert!(body.contains("registration_endpoint") && body.contains("od's own API"), "{body}");
    assert!(healthy(&e), "the daemon stopped");
    // The same plugin with an honest registration endpoint gets its authorization URL.
    *registration.lock().unwrap() = format!("{}/auth/register", server.base);
    let (code, body) =
        call(&e, "POST", "/api/mcp/oauth/start", Some(json!({ "pluginId": "reg", "serverId": "remote" })));
    assert_eq!(code, 200, "{body}");
}

#[test]
fn mcp_oauth_start_applies_the_capability_gate() {
    short_deadline();
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let server = oauth_server(Arc::new(Mutex::new(String::new())));
    let dir = tmp.path().join("gated");
    mcp_plugin(&dir, "gated", &format!("{}/mcp", server.base));
    let (code, body) = call(&e, "POST", "/api/plugins/install", Some(json!({ "source": dir, "trust": "restricted" })));
    assert_eq!(code, 200, "{body}");
    let (code, body) =
        call(&e, "POST", "/api/mcp/oauth/start", Some(json!({ "pluginId": "gated", "serverId": "remote" })));
    assert_eq!(code, 409, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "capabilities-required", "{v}");
    assert!(v["error"]["data"]["missing"].as_array().unwrap().contains(&json!("mcp:remote")), "{v}");
    assert!(server.hits().is_empty(), "the plugin's server was asked: {:?}", server.hits());
    // /api/tools/index refuses the same plugin the same way.
    let (code, body) = call(&e, "POST", "/api/tools/index", Some(json!({ "pluginId": "gated" })));
    assert_eq!(code, 409, "{body}");
}

// --- Finding 9: marketplace indexes are bounded in time and size ---

#[test]
fn a_fifo_marketplace_index_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Arc::new(Engine::start(&tmp.path().join("data"), NOW));
    let fifo = tmp.path().join("index.json");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let e2 = e.clone();
    let url = fifo.display().to_string();
    let ((code, body), took) =
        within(10, "adding a FIFO", move || call(&e2, "POST", "/api/marketplaces", Some(json!({ "url": url }))));
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("not a regular file"), "{body}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    eprintln!("a FIFO index refused in {took:?}");
}

/// Answers headers, then one byte of the body every 200 ms.
fn trickle(_: &str, s: &mut TcpStream) {
    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nContent-Type: application/json\r\n\r\n");
    for _ in 0..100_000 {
        if s.write_all(b" ").is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_slow_or_huge_marketplace_index_stops_at_the_deadline_and_the_size() {
    short_deadline();
    let tmp = tempfile::tempdir().unwrap();
    let e = Arc::new(Engine::start(&tmp.path().join("data"), NOW));
    let slow = Raw::start(trickle);
    let (e2, url) = (e.clone(), format!("{}/index.json", slow.base));
    let ((code, body), took) =
        within(20, "a slow index", move || call(&e2, "POST", "/api/marketplaces", Some(json!({ "url": url }))));
    assert_eq!(code, 502, "{body}");
    assert!(body.contains("within 1500 ms"), "{body}");
    assert!(took < Duration::from_secs(6), "{took:?}");
    eprintln!("a trickling index (deadline 1500 ms) refused after {took:?}");
    let huge = Raw::start(|_, s| reply(s, "200 OK", "", &vec![b' '; 5 * 1024 * 1024]));
    let (code, body) = call(&e, "POST", "/api/marketplaces", Some(json!({ "url": format!("{}/i.json", huge.base) })));
    assert_eq!(code, 502, "{body}");
    assert!(body.contains(&format!("larger than {} bytes", od::limits::MAX_MARKETPLACE_INDEX_BYTES)), "{body}");
}

#[test]
fn sigterm_stops_a_daemon_in_the_middle_of_a_slow_index() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    // The default deadline (a minute): the stop must not wait for it.
    let mut d = common::daemon_proc::start(&data, &[], &[("OD_OUTBOUND_TIMEOUT_MS", "60000".into())]);
    let slow = Raw::start(trickle);
    let (url, index) = (d.url.clone(), format!("{}/index.json", slow.base));
    std::thread::spawn(move || {
        let _ = ureq::post(&format!("{url}/api/marketplaces")).send_json(json!({ "url": index }));
    });
    common::daemon_proc::poll("the index request", 10, || (!slow.hits().is_empty()).then_some(()));
    let started = Instant::now();
    unsafe { libc::kill(d.child.id() as i32, libc::SIGTERM) };
    let status = common::daemon_proc::poll("the daemon to exit", 20, || d.child.try_wait().unwrap());
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    eprintln!("SIGTERM during a slow index: exited after {:?}", started.elapsed());
    assert!(status.success(), "{status:?}");
}

// --- The cross-host redirect, finding 12 (userinfo) ---

#[test]
fn an_archive_redirect_is_followed_only_to_the_same_host() {
    short_deadline();
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let tgz = plugin_tgz("hop");
    let other = Raw::start(move |_, s| reply(s, "200 OK", "", &tgz));
    let port = other.base.rsplit(':').next().unwrap().to_string();
    let tgz = plugin_tgz("hop");
    let first = Raw::start(move |req, s| match req {
        "GET /elsewhere.tgz" => reply(s, "302 Found", &format!("Location: http://localhost:{port}/p.tgz\r\n"), b""),
        "GET /old.tgz" => reply(s, "301 Moved", "Location: /p.tgz\r\n", b""),
        _ => reply(s, "200 OK", "", &tgz),
    });
    let (code, body) =
        call(&e, "POST", "/api/plugins/install", Some(json!({ "source": format!("{}/elsewhere.tgz", first.base) })));
    assert!(body.contains("redirected") && !body.contains("\"success\""), "{code} {body}");
    assert!(other.hits().is_empty(), "the other host was asked: {:?}", other.hits());
    // A redirect on the same host is followed (and checked again).
    let (code, body) =
        call(&e, "POST", "/api/plugins/install", Some(json!({ "source": format!("{}/old.tgz", first.base) })));
    assert!(body.contains("\"success\""), "{code} {body}");
    assert_eq!(first.hits()[1..], ["GET /old.tgz".to_string(), "GET /p.tgz".to_string()]);
}

#[test]
fn a_password_in_a_source_url_is_refused_and_never_recorded() {
    short_deadline();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = Engine::start(&data, NOW);
    let tgz = plugin_tgz("secretive");
    let server = Raw::start(move |_, s| reply(s, "200 OK", "", &tgz));
    let source = server.base.replace("http://", "http://alice:hunter2@") + "/p.tgz";
    let (code, body) = call(&e, "POST", "/api/plugins/install", Some(json!({ "source": source })));
    assert!(!body.contains("\"success\""), "{code} {body}");
    assert!(body.contains("userinfo"), "{body}");
    assert!(!body.contains("hunter2"), "{body}");
    assert!(server.hits().is_empty(), "{:?}", server.hits());
    let (_, list) = e.od_json(&["plugin", "list"]);
    assert!(!list.to_string().contains("hunter2"), "{list}");
    let (_, log) = e.get("/api/log/events?limit=10000");
    assert!(!log.to_string().contains("hunter2"), "{log}");
    // A marketplace URL with one is refused the same way.
    let (code, body) = call(&e, "POST", "/api/marketplaces", Some(json!({ "url": source.replace("p.tgz", "i.json") })));
    assert_eq!(code, 422, "{body}");
    assert!(!body.contains("hunter2"), "{body}");
}

// --- Finding 10: a path parameter stays one segment of the route ---

#[test]
fn a_dot_dot_path_parameter_cannot_leave_the_tool_route() {
    let provider = Raw::start(|_, s| reply(s, "200 OK", "Content-Type: application/json\r\n", b"{}"));
    let tmp = tempfile::tempdir().unwrap();
    let catalog_dir = tmp.path();
    let file = json!({ "connectors": { "acme": { "name": "Acme", "authorizeUrl": format!("{}/a", provider.base),
        "tokenUrl": format!("{}/t", provider.base), "apiBaseUrl": format!("{}/api/v1", provider.base),
        "tools": { "item.detail": { "method": "GET", "path": "/items/{id}/detail" } } } } });
    std::fs::write(catalog_dir.join("connectors.json"), file.to_string()).unwrap();
    let catalog = od::connectors::Catalog::load(catalog_dir).unwrap();
    let def = catalog.get("acme").unwrap();
    let tool = &def.tools["item.detail"];
    let cred = od::connectors::Credential { access_token: "tok".into(), ..Default::default() };
    for bad in ["..", ".", ""] {
        let e = od::connectors::call::call(def, tool, &cred, &json!({ "id": bad })).unwrap_err();
        assert!(e.to_string().contains("input.id"), "{bad:?}: {e}");
    }
    assert!(provider.hits().is_empty(), "{:?}", provider.hits());
    for (id, path) in [("../../admin", "/api/v1/items/..%2F..%2Fadmin/detail"), ("a/b", "/api/v1/items/a%2Fb/detail")] {
        od::connectors::call::call(def, tool, &cred, &json!({ "id": id })).unwrap();
        assert_eq!(provider.hits().last().unwrap(), &format!("GET {path}"));
    }
}

// --- Finding 13: versions are SemVer, publishing stays inside ---

#[test]
fn a_version_with_a_path_in_it_is_refused_and_publish_writes_nothing_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugin");
    write_plugin(&dir, "pv", "9/../../X", json!([{ "id": "generate", "atoms": ["file-write"] }]), "Do it.");
    let market = tmp.path().join("m").join("k");
    std::fs::create_dir_all(market.join("pv-9")).unwrap();
    let out = od_cli(
        &tmp.path().join("data"),
        &["plugin", "publish", dir.to_str().unwrap(), "--to", market.to_str().unwrap(), "--json"],
    );
    assert!(!out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("version-invalid") || err.contains("SemVer"), "{err}");
    assert!(!tmp.path().join("m").join("X.tgz").exists(), "publish wrote outside the marketplace folder");
    assert!(!market.join("open-design-marketplace.json").exists());
    for ok in ["1.0.0", "0.1.0-beta.2+build.7", "10.20.30"] {
        assert!(od::plugins::is_semver(ok), "{ok}");
    }
    for bad in ["9/../../X", "1", "1.0", "01.0.0", "1.0.0-", "1.0.0+", "v1.0.0", "1.0.0-01"] {
        assert!(!od::plugins::is_semver(bad), "{bad}");
    }
}

// --- Finding 15: a name too long is the caller's error, naming the path ---

#[test]
fn a_300_byte_file_name_is_a_400_naming_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let (code, p) = e.post("/api/projects", json!({ "name": "long" }));
    assert!(code < 300, "{p}");
    let id = p["project"]["id"].as_str().or(p["id"].as_str()).unwrap().to_string();
    let name = format!("{}.txt", "n".repeat(296));
    for method in ["PUT", "GET", "DELETE"] {
        let req = ureq::request(method, &format!("{}/api/projects/{id}/files/dir/{name}", e.url))
            .set("Authorization", &format!("Bearer {}", e.token));
        let r = match method {
            "PUT" => req.set("Content-Type", "application/octet-stream").send_bytes(b"hello"),
            _ => req.call(),
        };
        let Err(ureq::Error::Status(code, r)) = r else { panic!("{method}: {r:?}") };
        let v: Value = r.into_json().unwrap();
        assert_eq!(code, 400, "{method}: {v}");
        assert_eq!(v["error"]["data"]["field"], "path", "{method}: {v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(&name), "{method}: {v}");
    }
}

// --- Finding 6: a diff has a CPU deadline ---

#[test]
fn a_1_mib_diff_answers_within_its_deadline() {
    // 2 × 1 MiB of short lines with nothing in common: the worst case of a line diff.
    let a: String = (0..262_144).map(|i| format!("{:03x}\n", i % 4096)).collect();
    let b: String = (0..262_144).map(|i| format!("{:03X}\n", (i * 7 + 3) % 4096)).collect();
    assert!(a.len() >= 1 << 20 && b.len() >= 1 << 20);
    let (diff, took) = within(30, "a 1 MiB diff", move || od::engine::run_files::unified_diff(&a, &b, "a/f", "b/f"));
    let limit = Duration::from_millis(od::limits::DIFF_DEADLINE_MS);
    assert!(took < limit + Duration::from_secs(3), "{took:?}");
    assert!(diff.is_none(), "{took:?}");
    eprintln!("a 1 MiB diff gave up after {took:?}");
    // An ordinary change is found well within the deadline.
    let a: String = (0..4096).map(|i| format!("{i:03x}\n")).collect();
    let b = a.replacen("abc\n", "ABC\n", 1);
    let diff = od::engine::run_files::unified_diff(&a, &b, "a/f", "b/f").unwrap();
    assert!(diff.starts_with("--- a/f\n+++ b/f\n") && diff.contains("\n-abc\n+ABC\n"), "{diff}");
}

// --- Issue 39 #3, #4: connectors.json ---

fn catalog_with(dir: &Path, acme: Value) -> Result<od::connectors::Catalog, String> {
    let base = json!({ "name": "Acme", "authorizeUrl": "https://acme.example/a", "tokenUrl": "https://acme.example/t",
                       "apiBaseUrl": "https://api.acme.example", "tools": {} });
    let mut entry = base;
    entry.as_object_mut().unwrap().extend(acme.as_object().unwrap().clone());
    std::fs::write(dir.join("connectors.json"), json!({ "connectors": { "acme": entry } }).to_string()).unwrap();
    od::connectors::Catalog::load(dir).map_err(|e| e.to_string())
}

#[test]
fn connector_endpoints_pass_the_url_rule_and_secrets_come_from_od_connector_variables() {
    let tmp = tempfile::tempdir().unwrap();
    let e = catalog_with(tmp.path(), json!({ "tokenUrl": "http://localhost:1@evil.example/token" })).unwrap_err();
    assert!(e.contains("connectors.acme.tokenUrl") && e.contains("userinfo") && !e.contains("localhost:1@"), "{e}");
    let e = catalog_with(tmp.path(), json!({ "apiBaseUrl": "http://evil.example/" })).unwrap_err();
    assert!(e.contains("connectors.acme.apiBaseUrl"), "{e}");
    for bad in ["OD_API_TOKEN", "HOME", "OD_CONNECTOR_", "od_connector_x"] {
        let e = catalog_with(tmp.path(), json!({ "clientSecretEnv": bad })).unwrap_err();
        assert!(e.contains("connectors.acme.clientSecretEnv") && e.contains("OD_CONNECTOR_"), "{bad}: {e}");
    }
    let c = catalog_with(tmp.path(), json!({ "clientSecretEnv": "OD_CONNECTOR_ACME_SECRET" })).unwrap();
    assert_eq!(c.get("acme").unwrap().client_secret_env, "OD_CONNECTOR_ACME_SECRET");
}

#[test]
fn a_huge_or_fifo_connectors_json_is_refused_quickly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    std::fs::File::create(dir.join("connectors.json")).unwrap().set_len(1 << 30).unwrap();
    let d = dir.clone();
    let (r, took) = within(10, "a 1 GiB sparse connectors.json", move || {
        od::connectors::Catalog::load(&d).map(|_| ()).map_err(|e| e.to_string())
    });
    let e = r.unwrap_err();
    // The size comes from the open file's metadata: nothing was read.
    assert!(e.contains("1073741824 bytes, larger than") && e.contains("connectors.json"), "{e}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    std::fs::remove_file(dir.join("connectors.json")).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(dir.join("connectors.json")).status().unwrap().success());
    let d = dir.clone();
    let (r, took) = within(10, "a FIFO connectors.json", move || {
        od::connectors::Catalog::load(&d).map(|_| ()).map_err(|e| e.to_string())
    });
    assert!(r.unwrap_err().contains("not a regular file"));
    assert!(took < Duration::from_secs(1), "{took:?}");
}

#[test]
fn a_1_mib_diff_over_http_answers_within_its_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let dir = tmp.path().join("big");
    write_plugin(&dir, "big", "1.0.0", json!([{ "id": "generate", "atoms": ["file-write"] }]), "Write it.");
    e.install(&dir);
    // The run records 1 MiB of short lines; the project's file is then replaced by 1 MiB of others.
    let agent = common::harness::script(
        tmp.path(),
        "agent.sh",
        r#"seq 0 262143 | awk '{ printf "%03x\n", $1 % 4096 }' > big.txt
echo '{"type":"artifact","path":"big.txt","title":"Big"}'
echo '{"type":"done"}'"#,
    );
    let (run, ev) = e.run(json!({ "pluginId": "big", "agent": "exec", "agentCommand": [agent.to_str().unwrap()],
                                  "agentProtocol": "od" }));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:?}");
    let (_, info) = e.get(&format!("/api/runs/{run}"));
    let project = info["projectId"].as_str().or(info["run"]["projectId"].as_str()).unwrap().to_string();
    let other: String = (0..262_144).map(|i| format!("{:03X}\n", (i * 7 + 3) % 4096)).collect();
    ureq::put(&format!("{}/api/projects/{project}/files/big.txt", e.url))
        .set("Authorization", &format!("Bearer {}", e.token))
        .set("Content-Type", "application/octet-stream")
        .send_bytes(other.as_bytes())
        .unwrap();
    let started = Instant::now();
    let (code, v) = e.get(&format!("/api/files/diff?path=big.txt&from={run}"));
    let took = started.elapsed();
    assert_eq!(code, 200, "{v}");
    assert_eq!((v["from"]["bytes"].clone(), v["to"]["bytes"].clone()), (json!(1 << 20), json!(1 << 20)), "{v:#}");
    assert_eq!(v["diff"], Value::Null, "{v:#}");
    assert!(v["diffOmitted"].as_str().unwrap().contains("DIFF_DEADLINE_MS"), "{v:#}");
    assert!(took < Duration::from_millis(od::limits::DIFF_DEADLINE_MS) + Duration::from_secs(4), "{took:?}");
    eprintln!("GET /api/files/diff on two 1 MiB files answered in {took:?}");
}
