//! Issue 29 item 4, "a daemon that serves TLS": `od daemon start --tls-cert/--tls-key` serves
//! HTTPS (every listener, the web UI's own port too) with a certificate of a CA made in the test;
//! the CLI, trusting that CA through `SSL_CERT_FILE` or `OD_CA_FILE`, talks to it over https
//! (status, plugin list, a run, `--daemon-url https://…`, stop) and, without the CA, names the
//! refused certificate and the URL (exit 84) instead of "unreachable"; plain HTTP on the TLS port
//! gets no HTTP answer; a client that never finishes its handshake is dropped at the header
//! deadline, and holds a slot of the connection cap meanwhile; the login cookie is `Secure` under
//! TLS and behind a declared TLS proxy; a non-loopback bind with a token and no TLS is refused
//! unless a TLS-terminating proxy is declared, which the start and `/api/health` say; bad files
//! are start errors naming the flag and the file, with nothing started. Loopback binds only.

use crate::common;

use common::tls::{Flaw, ServerCert, TestCa};
use od::daemon::{check_exposure, start, DaemonConfig, DaemonError, Running};
use od::http::tls::TlsFiles;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOKEN: &str = "tls-test-token-4d1c";
const INPUTS: &str = r#"{"artifactKind":"landing-page","audience":"operators","topic":"TLS"}"#;

/// A CA and a server certificate for `localhost` + `127.0.0.1` signed by it, in `dir`.
fn pki(dir: &Path) -> (TestCa, ServerCert) {
    let ca = TestCa::new(dir, "serve");
    let cert = ca.server_cert(dir, "daemon", Flaw::None);
    (ca, cert)
}

fn files(cert: &ServerCert) -> TlsFiles {
    TlsFiles { cert: cert.cert_path.clone(), key: cert.key_path.clone() }
}

/// An HTTP client trusting exactly the test CA (od's client config, built on these roots).
fn client(ca: &TestCa) -> ureq::Agent {
    let mut roots = rustls::RootCertStore::empty();
    for c in od::net::tls::read_pem_certs("test CA", &ca.pem_path).unwrap() {
        roots.add(c).unwrap();
    }
    ureq::AgentBuilder::new().tls_config(Arc::new(od::net::tls::build(&roots))).timeout(Duration::from_secs(20)).build()
}

/// A handshake with the daemon at `addr` by a client of `version` offering `alpn`: the version
/// and the ALPN protocol agreed.
fn handshake_with(
    ca: &TestCa,
    addr: &str,
    version: &'static rustls::SupportedProtocolVersion,
    alpn: Vec<Vec<u8>>,
) -> (Option<rustls::ProtocolVersion>, Option<Vec<u8>>) {
    let mut roots = rustls::RootCertStore::empty();
    for c in od::net::tls::read_pem_certs("test CA", &ca.pem_path).unwrap() {
        roots.add(c).unwrap();
    }
    let mut cfg = rustls::ClientConfig::builder_with_provider(od::net::tls::provider())
        .with_protocol_versions(&[version])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(cfg), name).unwrap();
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).unwrap();
    }
    (conn.protocol_version(), conn.alpn_protocol().map(<[u8]>::to_vec))
}

/// A read that saw the peer close (EOF or reset), not the test's own read timeout.
fn closed(r: std::io::Result<usize>) -> bool {
    match r {
        Ok(n) => n == 0,
        Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    }
}

/// A daemon in this process.
struct InProc {
    rt: tokio::runtime::Runtime,
    running: Option<Running>,
    url: String,
}

impl InProc {
    fn start(data: &Path, adjust: impl FnOnce(&mut DaemonConfig)) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let mut cfg = DaemonConfig::new(data.to_path_buf());
        cfg.http.secure_cookies = false;
        cfg.http.tls_terminated_by_proxy = false;
        adjust(&mut cfg);
        let running = rt.block_on(start(cfg)).expect("the daemon starts");
        let url = running.url();
        Self { rt, running: Some(running), url }
    }
    fn addr(&self) -> String {
        self.running.as_ref().unwrap().addr.to_string()
    }
}

impl Drop for InProc {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            self.rt.block_on(r.stop());
        }
    }
}

/// `od <args> --data-dir <data> --json` with only `env` of the TLS and daemon settings: the exit
/// code and the JSON it printed (stdout on success, the error envelope otherwise).
fn od(data: &Path, args: &[&str], env: &[(&str, &Path)]) -> (i32, Value) {
    let mut c = Command::new(common::harness::OD);
    c.args(args).arg("--data-dir").arg(data).arg("--json");
    for k in
        ["SSL_CERT_FILE", "SSL_CERT_DIR", "OD_CA_FILE", "OD_DAEMON_URL", "OD_API_TOKEN", "OD_TLS_CERT", "OD_TLS_KEY"]
    {
        c.env_remove(k);
    }
    c.env_remove("OD_TLS_TERMINATED_BY_PROXY").env("OD_DAEMON_START_TIMEOUT_MS", "20000");
    c.envs(env.iter().map(|(k, v)| (*k, v.as_os_str())));
    let out = c.output().unwrap();
    let text = if out.status.success() { out.stdout } else { out.stderr };
    let v = serde_json::from_slice(&text).unwrap_or_else(|_| json!(String::from_utf8_lossy(&text)));
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn the_cli_speaks_https_to_a_tls_daemon_and_names_a_certificate_it_does_not_trust() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, cert) = pki(tmp.path());
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let (c, k) = (cert.cert_path.to_str().unwrap(), cert.key_path.to_str().unwrap());
    let d = common::daemon_proc::start(&data, &["--tls-cert", c, "--tls-key", k], &[]);
    assert!(d.url.starts_with("https://127.0.0.1:"), "{}", d.url);
    let discovery: Value = serde_json::from_str(&std::fs::read_to_string(data.join("daemon.json")).unwrap()).unwrap();
    assert_eq!(discovery["url"], d.url.as_str(), "daemon.json records the https URL");

    let ssl = [("SSL_CERT_FILE", ca.pem_path.as_path())];
    let (code, st) = od(&data, &["daemon", "status"], &ssl);
    assert_eq!(code, 0, "{st}");
    let served = PathBuf::from(st["dataDir"].as_str().unwrap_or_else(|| panic!("{st}")));
    assert_eq!(served.canonicalize().unwrap(), data.canonicalize().unwrap());
    let added = [("OD_CA_FILE", ca.pem_path.as_path())];
    let (code, plugins) = od(&data, &["plugin", "list"], &added);
    assert_eq!(code, 0, "{plugins}");
    assert!(plugins.to_string().contains("od-new-generation"), "{plugins}");
    let (code, run) = od(&data, &["run", "start", "--plugin", "od-new-generation", "--inputs", INPUTS], &added);
    assert_eq!(code, 0, "{run}");
    let (code, runs) = od(&data, &["--daemon-url", &d.url, "run", "list"], &added);
    assert_eq!(code, 0, "{runs}");
    let run_id = run["runId"].as_str().or(run["id"].as_str()).unwrap_or_else(|| panic!("{run}"));
    assert!(runs.to_string().contains(run_id), "{runs}");

    // Without the CA: the certificate is named, with the URL — not "no daemon".
    for args in [vec!["daemon", "status"], vec!["--daemon-url", &d.url, "plugin", "list"], vec!["plugin", "list"]] {
        let (code, err) = od(&data, &args, &[]);
        assert_eq!((code, err["error"]["code"].as_str()), (84, Some("tls-untrusted")), "{args:?}: {err}");
        let msg = err["error"]["message"].as_str().unwrap();
        assert!(msg.contains(&d.url) && msg.contains("certificate"), "{msg}");
    }

    let (code, stopped) = od(&data, &["daemon", "stop"], &ssl);
    assert_eq!(code, 0, "{stopped}");
}

/// `od daemon start` in the background with relative `--tls-cert`/`--tls-key` (the spawned daemon
/// gets them absolute): the starting CLI waits for it over https and reports its https URL.
#[test]
fn a_background_daemon_started_with_relative_tls_files_is_found_over_https() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, _cert) = pki(tmp.path());
    let data = tmp.path().join("data");
    let mut c = Command::new(common::harness::OD);
    c.args(["daemon", "start", "--port", "0", "--tls-cert", "daemon.crt", "--tls-key", "daemon.key", "--json"]);
    c.arg("--data-dir").arg(&data).current_dir(tmp.path());
    for k in ["SSL_CERT_FILE", "OD_DAEMON_URL", "OD_API_TOKEN", "OD_TLS_CERT", "OD_TLS_KEY"] {
        c.env_remove(k);
    }
    let out = c.env("OD_CA_FILE", &ca.pem_path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let started: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(started["url"].as_str().unwrap().starts_with("https://127.0.0.1:"), "{started}");
    let (code, stopped) = od(&data, &["daemon", "stop"], &[("OD_CA_FILE", ca.pem_path.as_path())]);
    assert_eq!(code, 0, "{stopped}");
}

#[test]
fn every_listener_serves_tls_and_health_says_so_while_plain_http_gets_no_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, cert) = pki(tmp.path());
    let d = InProc::start(&tmp.path().join("data"), |cfg| {
        cfg.tls = Some(files(&cert));
        cfg.http.headless = false;
        cfg.web_port = Some(0);
    });
    assert!(d.url.starts_with("https://"), "{}", d.url);
    let agent = client(&ca);
    let health: Value = agent.get(&format!("{}/api/health", d.url)).call().unwrap().into_json().unwrap();
    assert_eq!(health["ok"], true);
    assert_eq!(health["tls"], json!({ "serving": true, "terminatedByProxy": false }), "{health}");
    let web = d.running.as_ref().unwrap().web_url().expect("a web UI listener");
    assert!(web.starts_with("https://"), "{web}");
    let r = agent.get(&format!("{web}/api/health")).call().unwrap();
    assert_eq!(r.status(), 200);

    // ALPN picks http/1.1 (a client offering h2 first too); TLS 1.2 is served, for older clients.
    let offered = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let (proto, alpn) = handshake_with(&ca, &d.addr(), &rustls::version::TLS12, offered);
    assert_eq!((proto, alpn.as_deref()), (Some(rustls::ProtocolVersion::TLSv1_2), Some(&b"http/1.1"[..])));

    // Plain HTTP on the TLS port: no HTTP answer, and no request reaches the router.
    let mut tcp = TcpStream::connect(d.addr()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.write_all(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let _ = tcp.read_to_end(&mut got);
    assert!(!got.starts_with(b"HTTP/"), "{:?}", String::from_utf8_lossy(&got));
    let plain = ureq::get(&format!("http://{}/api/health", d.addr())).timeout(Duration::from_secs(10)).call();
    assert!(matches!(plain, Err(ureq::Error::Transport(_))), "{plain:?}");
}

#[test]
fn a_client_that_never_finishes_its_handshake_is_dropped_at_the_header_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, cert) = pki(tmp.path());
    let deadline = Duration::from_millis(400);
    let d = InProc::start(&tmp.path().join("data"), |cfg| {
        cfg.tls = Some(files(&cert));
        cfg.http.header_read_timeout = deadline;
    });
    // One sends nothing; one sends the start of a ClientHello record and stalls.
    let mut silent = TcpStream::connect(d.addr()).unwrap();
    let mut partial = TcpStream::connect(d.addr()).unwrap();
    partial.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).unwrap();
    let opened = Instant::now();
    for s in [&mut silent, &mut partial] {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 64];
        assert!(closed(s.read(&mut buf)), "the daemon closes it");
    }
    let took = opened.elapsed();
    assert!(took >= deadline - Duration::from_millis(50), "not before the deadline: {took:?}");
    assert!(took < deadline * 5, "at the deadline: {took:?}");
    // The daemon still answers a client that completes its handshake.
    let r = client(&ca).get(&format!("{}/api/health", d.url)).call().unwrap();
    assert_eq!(r.status(), 200);
}

#[test]
fn handshakes_in_progress_hold_slots_of_the_connection_cap_and_are_shed_first() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, cert) = pki(tmp.path());
    let d = InProc::start(&tmp.path().join("data"), |cfg| {
        cfg.tls = Some(files(&cert));
        cfg.http.max_connections = 2;
        cfg.http.header_read_timeout = Duration::from_secs(30);
    });
    let stalled: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(d.addr()).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200)); // both admitted
    let opened = Instant::now();
    let st: Value = client(&ca)
        .get(&format!("{}/api/daemon/status", d.url))
        .set("Authorization", &format!("Bearer {}", d.running.as_ref().unwrap().local_token))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert!(st["http"]["shed"].as_u64().unwrap() >= 1, "a handshaking connection was counted and shed: {st}");
    let mut first = &stalled[0];
    first.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert!(closed(first.read(&mut [0u8; 16])), "the oldest handshaking connection was closed");
    assert!(opened.elapsed() < Duration::from_secs(10), "shed, not timed out");
}

/// The `Set-Cookie` of a login with the token.
fn login_cookie(agent: &ureq::Agent, url: &str) -> String {
    let r = agent.post(&format!("{url}/api/auth/login")).send_json(json!({ "token": TOKEN })).unwrap();
    r.header("set-cookie").unwrap().to_string()
}

fn secure(cookie: &str) -> bool {
    cookie.split(';').map(str::trim).any(|a| a == "Secure")
}

#[test]
fn the_login_cookie_is_secure_under_tls_and_behind_a_declared_proxy_and_not_otherwise() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, cert) = pki(tmp.path());
    let tls = InProc::start(&tmp.path().join("a"), |cfg| {
        cfg.tls = Some(files(&cert));
        cfg.token = Some(TOKEN.into());
    });
    let cookie = login_cookie(&client(&ca), &tls.url);
    assert!(secure(&cookie), "{cookie}");
    drop(tls);

    let proxied = InProc::start(&tmp.path().join("b"), |cfg| {
        cfg.token = Some(TOKEN.into());
        cfg.http.tls_terminated_by_proxy = true;
    });
    let agent = ureq::AgentBuilder::new().build();
    assert!(secure(&login_cookie(&agent, &proxied.url)));
    let health: Value = agent
        .get(&format!("{}/api/health", proxied.url))
        .set("Authorization", &format!("Bearer {TOKEN}"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(health["tls"], json!({ "serving": false, "terminatedByProxy": true }), "{health}");
    drop(proxied);

    let plain = InProc::start(&tmp.path().join("c"), |cfg| cfg.token = Some(TOKEN.into()));
    let cookie = login_cookie(&agent, &plain.url);
    assert!(!secure(&cookie), "plain loopback HTTP: {cookie}");
}

#[test]
fn a_non_loopback_bind_with_a_token_needs_tls_or_the_proxy_opt_in() {
    let lan = "192.0.2.7".parse().unwrap();
    let lo = "127.0.0.1".parse().unwrap();
    let refused = check_exposure("192.0.2.7", lan, true, false, false).unwrap_err();
    assert!(matches!(refused, DaemonError::TlsRequired { .. }), "{refused}");
    let msg = refused.to_string();
    for remedy in ["--tls-cert", "--tls-key", "--tls-terminated-by-proxy", "OD_TLS_TERMINATED_BY_PROXY"] {
        assert!(msg.contains(remedy), "{msg}");
    }
    assert!(check_exposure("192.0.2.7", lan, true, true, false).is_ok(), "its own TLS");
    assert!(check_exposure("192.0.2.7", lan, true, false, true).is_ok(), "a declared TLS proxy");
    let no_token = check_exposure("192.0.2.7", lan, false, true, true).unwrap_err();
    assert!(matches!(no_token, DaemonError::TokenRequired { .. }), "TLS does not replace the token");
    assert!(check_exposure("127.0.0.1", lo, false, false, false).is_ok(), "loopback needs neither");

    // The CLI's start says so and exits 2 before anything is opened (a TEST-NET address: were the
    // rule missing, the bind would fail anyway; nothing listens beyond loopback).
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut c = Command::new(common::harness::OD);
    c.args(["daemon", "start", "--foreground", "--host", "192.0.2.7", "--port", "0", "--data-dir"]).arg(&data);
    let out = c.env("OD_API_TOKEN", TOKEN).env_remove("OD_TLS_TERMINATED_BY_PROXY").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "tls-required");
    assert!(!data.join("daemon.json").exists());
}

#[test]
fn the_proxy_opt_in_is_said_at_start_and_in_health() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let d = common::daemon_proc::start(&data, &["--tls-terminated-by-proxy"], &[]);
    let health: Value = ureq::get(&format!("{}/api/health", d.url)).call().unwrap().into_json().unwrap();
    assert_eq!(health["tls"], json!({ "serving": false, "terminatedByProxy": true }), "{health}");
    let said = std::fs::read_to_string(data.with_extension("stderr")).unwrap();
    assert!(said.contains("TLS-terminating proxy") && said.contains("--tls-terminated-by-proxy"), "{said}");
}

#[test]
fn bad_tls_files_are_a_start_error_naming_the_flag_and_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, cert) = pki(tmp.path());
    let other = ca.server_cert(tmp.path(), "other", Flaw::None);
    let missing = tmp.path().join("absent.crt");
    let (c, k) = (cert.cert_path.to_str().unwrap(), cert.key_path.to_str().unwrap());
    let cases: [(Vec<&str>, &str, &str); 4] = [
        (vec!["--tls-cert", missing.to_str().unwrap(), "--tls-key", k], "--tls-cert", missing.to_str().unwrap()),
        (
            vec!["--tls-cert", c, "--tls-key", other.key_path.to_str().unwrap()],
            "--tls-key",
            other.key_path.to_str().unwrap(),
        ),
        (vec!["--tls-cert", k, "--tls-key", k], "--tls-cert", k),
        (vec!["--tls-cert", c], "--tls-key", "OD_TLS_KEY"),
    ];
    for (i, (flags, setting, named)) in cases.into_iter().enumerate() {
        let data = tmp.path().join(format!("data{i}"));
        let mut args = vec!["daemon", "start", "--foreground", "--port", "0"];
        args.extend(flags.iter().copied());
        let (code, err) = od(&data, &args, &[]);
        assert_eq!((code, err["error"]["code"].as_str()), (2, Some("tls-config")), "{flags:?}: {err}");
        assert_eq!(err["error"]["data"]["setting"], setting, "{err}");
        let msg = err["error"]["message"].as_str().unwrap();
        assert!(msg.contains(setting) && msg.contains(named), "{msg}");
        assert!(!data.join("daemon.json").exists(), "nothing started");
    }
}
