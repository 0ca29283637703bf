//! Connectors and plugin MCP servers over real HTTPS (issue 29): the fake OAuth provider and API
//! of `connectors.rs` and the MCP server with its authorization server of `mcp_oauth.rs`, each
//! behind a `TlsFront` whose certificate comes from a CA made here, trusted by a daemon process
//! through `SSL_CERT_FILE` (a child process, so no test changes this process's environment).
//!
//! - A connector's whole authorization-code + PKCE connect (the token exchange and the account
//!   lookup) and one tool call go over https; an API whose certificate expired is refused by name
//!   (`tls-expired`, exit 84).
//! - The same provider behind a certificate from a CA nobody trusts: the callback fails by name
//!   (`tls-untrusted`, naming the token URL), no credential is written, and `od connectors
//!   connect` waiting on it exits 84.
//! - A token endpoint over https that redirects to plain http is refused (`tls-downgrade`), and the
//!   http target never sees a request.
//! - An MCP server over https: its 401, discovery (RFC 9728, then RFC 8414), registration (RFC
//!   7591), the token, then indexing and a tool call, all over https; the same server behind an
//!   untrusted certificate is refused by name when indexed and when its authorization starts
//!   (502 `tls-untrusted`, CLI exit 84), with nothing registered.

use crate::common;
use crate::connectors::{connector_plugin, install_restricted_at, start_provider, Provider};
use crate::mcp_oauth::{start_server, Server};

use common::daemon_proc::{self, Daemon};
use common::harness::{script, write_plugin, OD};
use common::tls::{Flaw, TestCa, TlsFront};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

fn addr(base: &str) -> SocketAddr {
    base.trim_start_matches("http://").parse().unwrap()
}

/// A daemon process on `data` trusting exactly the CA in `ca` (the platform's store replaced).
fn daemon(data: &Path, ca: &Path) -> Daemon {
    std::fs::create_dir_all(data).unwrap();
    daemon_proc::start(data, &[], &[("SSL_CERT_FILE", ca.display().to_string())])
}

/// The user's browser: trusts `cas`, follows no redirect itself.
fn browser(cas: &[&TestCa]) -> ureq::Agent {
    let mut roots = rustls::RootCertStore::empty();
    for ca in cas {
        for c in od::net::tls::read_pem_certs("test", &ca.pem_path).unwrap() {
            roots.add(c).unwrap();
        }
    }
    ureq::AgentBuilder::new().tls_config(Arc::new(od::net::tls::build(&roots))).redirects(0).build()
}

/// Opens `authorize_url` (the user approves at once) and follows its redirect to od's callback:
/// the callback's status and page.
fn approve(browser: &ureq::Agent, authorize_url: &str) -> (u16, String) {
    let res = browser.get(authorize_url).call().unwrap();
    assert!((300..400).contains(&res.status()), "{authorize_url}: {}", res.status());
    let back = res.header("location").unwrap().to_string();
    match ureq::get(&back).set("Sec-Fetch-Site", "cross-site").call() {
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap()),
        Err(e) => panic!("{back}: {e}"),
    }
}

/// `od <args> --daemon-url <url> --json`: exit code and the JSON it printed (stdout, else stderr).
fn od(url: &str, args: &[&str]) -> (i32, Value) {
    let out = Command::new(OD).args(args).args(["--daemon-url", url, "--json"]).output().unwrap();
    let text = if out.status.success() { out.stdout } else { out.stderr };
    let v = serde_json::from_slice(&text).unwrap_or_else(|_| json!(String::from_utf8_lossy(&text)));
    (out.status.code().unwrap_or(-1), v)
}

/// A connector on the provider at `base` (`tokenUrl`: `token`).
fn acme(name: &str, base: &str, token: &str) -> Value {
    json!({ "name": name, "clientId": "od-test-client", "authorizeUrl": format!("{base}/oauth/authorize"),
            "tokenUrl": token, "apiBaseUrl": format!("{base}/api"), "scopes": ["channels:read"],
            "account": { "path": "/auth.test", "labelField": "team" },
            "tools": { "channels.list": { "method": "GET", "path": "/conversations.list" } } })
}

/// A plain http server that counts the connections it is sent (and answers none).
fn counting_http() -> (String, Arc<AtomicUsize>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/oauth/token", l.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for _ in l.incoming() {
            h.fetch_add(1, Ordering::SeqCst);
        }
    });
    (url, hits)
}

/// The agent: hands its tool token over, then waits for the test to release it.
const AGENT: &str = r#"
printf '%s' "$OD_TOOL_TOKEN" > "$SIG/token.tmp" && mv "$SIG/token.tmp" "$SIG/token"
while [ ! -e "$SIG/release" ]; do sleep 0.05; done
echo '{"type":"done"}'
"#;

/// A run of a restricted plugin declaring `channels.list` of each of `ids` (granted them),
/// started with the daemon's local token: its agent's tool token, and the file that releases it.
fn run_token(d: &Daemon, dir: &Path, ids: &[&str]) -> (String, std::path::PathBuf) {
    let plugin = dir.join("digest");
    let required: Vec<Value> = ids.iter().map(|id| json!({ "id": id, "tools": ["channels.list"] })).collect();
    connector_plugin(&plugin, "digest", json!({ "required": required }));
    install_restricted_at(&d.url, &plugin);
    let sig = dir.join("sig");
    std::fs::create_dir_all(&sig).unwrap();
    let agent = script(dir, "agent.sh", AGENT);
    let local: Value = serde_json::from_slice(&std::fs::read(d.data.join("daemon.json")).unwrap()).unwrap();
    let mut grants: Vec<String> = ids.iter().map(|id| format!("connector:{id}")).collect();
    grants.push("pipeline:*".into());
    let body = json!({ "pluginId": "digest", "grantCaps": grants, "agent": "exec",
        "agentCommand": [agent.to_str().unwrap()], "agentEnv": { "SIG": sig.to_str().unwrap() } });
    let started = ureq::post(&format!("{}/api/runs", d.url))
        .set("Authorization", &format!("Bearer {}", local["token"].as_str().unwrap()))
        .send_json(body);
    assert_eq!(started.map(|r| r.status()).ok(), Some(202), "run started");
    let token = daemon_proc::poll("the agent's tool token", 60, || std::fs::read_to_string(sig.join("token")).ok());
    (token, sig.join("release"))
}

/// One `channels.list` call of connector `id` with the run's tool `token`.
fn tool_call(d: &Daemon, token: &str, id: &str) -> (u16, Value) {
    let res = ureq::post(&format!("{}/api/tools/connectors/execute", d.url))
        .set("Authorization", &format!("Bearer {token}"))
        .send_json(json!({ "connectorId": id, "toolName": "channels.list", "input": { "limit": 2 } }));
    match res {
        Ok(r) => (r.status(), r.into_json().unwrap()),
        Err(ureq::Error::Status(c, r)) => (c, r.into_json().unwrap()),
        Err(e) => panic!("execute: {e}"),
    }
}

/// Connects `id` through the browser, asserting the page says so.
fn connect(d: &Daemon, browser: &ureq::Agent, id: &str, says: &str) {
    let (code, started) = daemon_proc::post(&d.url, &format!("/api/connectors/{id}/connect/start"), json!({}));
    assert_eq!(code, 200, "{started}");
    let (status, html) = approve(browser, started["authorizeUrl"].as_str().unwrap());
    assert_eq!(status, 200, "{html}");
    assert!(html.contains(says), "{html}");
}

#[test]
fn a_connector_connects_and_calls_over_https_and_refuses_what_it_cannot_trust() {
    let tmp = tempfile::tempdir().unwrap();
    let prt = runtime();
    let provider = Arc::new(Provider::default());
    let upstream = addr(&start_provider(&prt, provider.clone()));
    let (ca, stranger) = (TestCa::new(tmp.path(), "trusted"), TestCa::new(tmp.path(), "stranger"));
    let good = TlsFront::start(&ca.server_cert(tmp.path(), "good", Flaw::None), upstream);
    let bad = TlsFront::start(&stranger.server_cert(tmp.path(), "bad", Flaw::None), upstream);
    let old = TlsFront::start(&ca.server_cert(tmp.path(), "old", Flaw::Expired), upstream);
    let (g, b) = (good.url(), bad.url());
    let (plain_target, plain_hits) = counting_http();
    let moved = format!("{g}/oauth/moved?to={}", url_escape(&plain_target));
    let catalog = json!({ "connectors": {
        "acme": acme("Acme", &g, &format!("{g}/oauth/token")),
        "acme-untrusted": acme("Acme Untrusted", &b, &format!("{b}/oauth/token")),
        "acme-moved": acme("Acme Moved", &g, &moved),
        "acme-expired": { "name": "Acme Expired", "clientId": "od-test-client", "authorizeUrl": format!("{g}/oauth/authorize"),
            "tokenUrl": format!("{g}/oauth/token"), "apiBaseUrl": format!("{}/api", old.url()), "scopes": ["channels:read"],
            "tools": { "channels.list": { "method": "GET", "path": "/conversations.list" } } } } });
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("connectors.json"), catalog.to_string()).unwrap();
    let d = daemon(&data, &ca.pem_path);
    let browser = browser(&[&ca, &stranger]);
    let cred = |id: &str| data.join(format!("credentials/connectors/{id}.json"));

    // The whole connect over https: authorize, token exchange (PKCE checked), account lookup.
    let (code, started) = daemon_proc::post(&d.url, "/api/connectors/acme/connect/start", json!({}));
    assert_eq!(code, 200, "{started}");
    let url = started["authorizeUrl"].as_str().unwrap();
    assert!(url.starts_with(&format!("{g}/oauth/authorize?")) && url.contains("code_challenge="), "{url}");
    let (status, html) = approve(&browser, url);
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("Connected to Acme") && html.contains("Acme Team"), "{html}");
    assert_eq!(provider.exchanged.lock().unwrap().len(), 1);
    assert!(provider.api_calls.lock().unwrap().contains(&"auth.test".to_string()));
    assert!(std::fs::read_to_string(cred("acme")).unwrap().contains(crate::connectors::ACCESS));

    // One tool call over https, with the token the exchange stored; an API whose certificate
    // expired is refused by name (502 tls-expired naming it; `od connectors execute` exits 84).
    connect(&d, &browser, "acme-expired", "Connected to Acme Expired");
    let (token, release) = run_token(&d, tmp.path(), &["acme", "acme-expired"]);
    let (code, out) = tool_call(&d, &token, "acme");
    assert_eq!(code, 200, "{out}");
    assert_eq!(out["output"]["channels"][1]["name"], "design", "{out}");
    assert!(provider.api_calls.lock().unwrap().contains(&"conversations.list limit=2".to_string()));
    let (code, out) = tool_call(&d, &token, "acme-expired");
    assert_eq!((code, out["error"]["code"].as_str()), (502, Some("tls-expired")), "{out}");
    assert!(out["error"]["message"].as_str().unwrap().contains(&old.url()), "{out}");
    let cli = Command::new(OD)
        .args(["connectors", "execute", "acme-expired", "channels.list", "--json", "--daemon-url", &d.url])
        .env("OD_TOOL_TOKEN", &token)
        .output()
        .unwrap();
    assert_eq!(cli.status.code(), Some(84), "{}", String::from_utf8_lossy(&cli.stderr));
    std::fs::write(release, "").unwrap();

    // An untrusted certificate at the token endpoint: refused by name, nothing stored, and the CLI
    // waiting on the browser exits 84.
    let mut cli = Command::new(OD)
        .args(["connectors", "connect", "acme-untrusted", "--timeout", "60", "--json", "--daemon-url", &d.url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(cli.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let started: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    let url = started["authorizeUrl"].as_str().unwrap();
    assert!(url.starts_with(&format!("{b}/oauth/authorize?")), "{url}");
    let (status, html) = approve(&browser, url);
    assert_eq!(status, 502, "{html}");
    assert!(html.contains("tls-untrusted") && html.contains(&format!("{b}/oauth/token")), "{html}");
    let out = cli.wait_with_output().unwrap();
    let err: Value = serde_json::from_slice(&out.stderr).unwrap_or(Value::Null);
    assert_eq!(out.status.code(), Some(84), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(err["error"]["code"], "tls-untrusted", "{err}");
    assert!(err["error"]["message"].as_str().unwrap().contains(&b), "{err}");
    assert!(!cred("acme-untrusted").exists(), "no credential is written");
    assert_eq!(provider.exchanged.lock().unwrap().len(), 2, "the provider never saw the code");
    let info = daemon_proc::get(&d.url, "/api/connectors/acme-untrusted");
    assert_eq!(info["connector"]["status"], "pending", "{info}");

    // A token endpoint over https redirecting to plain http: refused, the http target never asked.
    let (code, started) = daemon_proc::post(&d.url, "/api/connectors/acme-moved/connect/start", json!({}));
    assert_eq!(code, 200, "{started}");
    let (status, html) = approve(&browser, started["authorizeUrl"].as_str().unwrap());
    assert_eq!(status, 502, "{html}");
    assert!(html.contains("tls-downgrade") && html.contains(&plain_target), "{html}");
    let info = daemon_proc::get(&d.url, "/api/connectors/acme-moved");
    assert_eq!(info["connector"]["lastError"]["code"], "tls-downgrade", "{info}");
    assert_eq!(plain_hits.load(Ordering::SeqCst), 0, "the http target saw no request");
    assert!(!cred("acme-moved").exists());
}

/// `s` as a query-string value.
fn url_escape(s: &str) -> String {
    s.bytes()
        .map(|c| match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (c as char).to_string(),
            _ => format!("%{c:02X}"),
        })
        .collect()
}

#[test]
fn an_mcp_server_over_https_is_discovered_authorized_and_called() {
    let tmp = tempfile::tempdir().unwrap();
    let srt = runtime();
    let server = Arc::new(Server::default());
    let upstream = addr(&start_server(&srt, server.clone()));
    let (ca, stranger) = (TestCa::new(tmp.path(), "trusted"), TestCa::new(tmp.path(), "stranger"));
    let front = TlsFront::start(&ca.server_cert(tmp.path(), "good", Flaw::None), upstream);
    let bad = TlsFront::start(&stranger.server_cert(tmp.path(), "bad", Flaw::None), upstream);
    // Its metadata names the https front.
    *server.base.lock().unwrap() = front.url();
    let d = daemon(&tmp.path().join("data"), &ca.pem_path);

    let dir = tmp.path().join("brand");
    write_plugin(&dir, "brand", "1.0.0", json!([ { "id": "generate", "atoms": ["file-write"] } ]), "Use the brand.");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("open-design.json")).unwrap()).unwrap();
    m["od"]["context"] = json!({ "mcp": [ { "name": "brandkit", "url": format!("{}/mcp", front.url()) },
                                          { "name": "badkit", "url": format!("{}/mcp", bad.url()) } ] });
    std::fs::write(dir.join("open-design.json"), m.to_string()).unwrap();
    daemon_proc::install(&d.url, &dir);

    // Indexing: the trusted server answers 401 (authorize it); the untrusted one is named.
    let (code, idx) = od(&d.url, &["tools", "index", "--plugin", "brand"]);
    assert_eq!(code, 0, "{idx}");
    let row =
        |idx: &Value, s: &str| idx["servers"].as_array().unwrap().iter().find(|r| r["server"] == s).unwrap().clone();
    let brandkit = row(&idx, "brandkit");
    assert_eq!(brandkit["status"], "failed", "{brandkit}");
    assert!(brandkit["reason"].as_str().unwrap().contains("od mcp oauth start"), "{brandkit}");
    let badkit = row(&idx, "badkit");
    assert_eq!(
        (badkit["status"].as_str(), badkit["code"].as_str()),
        (Some("failed"), Some("tls-untrusted")),
        "{badkit}"
    );
    assert!(badkit["reason"].as_str().unwrap().contains(&bad.url()), "{badkit}");

    // Discovery at the untrusted server: 502 tls-untrusted naming its URL, exit 84, nothing registered.
    let (code, v) =
        daemon_proc::post(&d.url, "/api/mcp/oauth/start", json!({ "pluginId": "brand", "serverId": "badkit" }));
    assert_eq!((code, v["error"]["code"].as_str()), (502, Some("tls-untrusted")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains(&bad.url()), "{v}");
    let (code, v) = od(&d.url, &["mcp", "oauth", "start", "--plugin", "brand", "--server", "badkit", "--no-wait"]);
    assert_eq!((code, v["error"]["code"].as_str()), (84, Some("tls-untrusted")), "{v}");
    assert!(server.registered.lock().unwrap().is_empty());

    // Discovery, registration and the PKCE authorization over https.
    let (code, started) =
        daemon_proc::post(&d.url, "/api/mcp/oauth/start", json!({ "pluginId": "brand", "serverId": "brandkit" }));
    assert_eq!(code, 200, "{started}");
    let url = started["authorizeUrl"].as_str().unwrap();
    assert!(url.starts_with(&format!("{}/auth/authorize?", front.url())), "{url}");
    assert_eq!(server.registered.lock().unwrap().len(), 1);
    let (status, html) = approve(&browser(&[&ca]), url);
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("Authorized MCP server brandkit"), "{html}");

    // The tools index and call with the token, over https.
    let (code, idx) = od(&d.url, &["tools", "index", "--plugin", "brand"]);
    assert_eq!(code, 0, "{idx}");
    let brandkit = row(&idx, "brandkit");
    assert_eq!(brandkit["tools"], json!(["brand.brandkit.palette"]), "{brandkit}");
    let (code, out) = od(&d.url, &["tools", "call", "brand.brandkit.palette", "--input", r#"{"brand":"acme"}"#]);
    assert_eq!(code, 0, "{out}");
    assert!(out.to_string().contains("acme: #ff6600"), "{out}");
    let seen = server.seen.lock().unwrap();
    let call = seen.iter().rfind(|m| m.0 == "tools/call").unwrap();
    assert_eq!(call.1, format!("Bearer {}", crate::mcp_oauth::ACCESS));
}
