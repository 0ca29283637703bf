//! Installing plugins over real HTTPS (issue 29 item 1): a `github:` source from a local tarball
//! server behind TLS with a CA made in the test, trusted through `SSL_CERT_FILE` or `OD_CA_FILE`;
//! the same server with a certificate from an untrusted CA, for another host, or expired is
//! refused by name (`tls-*`, exit 84) with nothing installed; a bad `OD_CA_FILE` is `tls-setup`; an
//! https marketplace index and the archive it names install with the archive's integrity checked;
//! a redirect from https to http is `tls-downgrade`; `HTTPS_PROXY` tunnels through a CONNECT proxy
//! (and `NO_PROXY` bypasses it); a server that goes silent is given up after the read timeout, one
//! that never accepts after the connect timeout.

use crate::common::tls::{Flaw, TestCa, TlsFront};
use crate::plugin_archives::{installed, serve, tgz, SKILL};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

const OD: &str = env!("CARGO_BIN_EXE_od");

/// Runs `od <args> --data-dir <data>` with no TLS or proxy setting but `env`.
fn od(data: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(OD);
    c.args(args).arg("--data-dir").arg(data).env_remove("OD_DAEMON_URL");
    for v in ["SSL_CERT_FILE", "SSL_CERT_DIR", "OD_CA_FILE", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"] {
        c.env_remove(v);
    }
    for v in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
        c.env_remove(v);
    }
    c.envs(env.iter().copied()).output().unwrap()
}

/// Owned settings as the `(name, value)` pairs [`od`] takes.
fn refs<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(k, x)| (*k, x.as_str())).collect()
}

fn last_line(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or("null")).unwrap()
}

/// `od plugin install <source>`: (exit code, last ND-JSON line).
fn install(data: &Path, source: &str, env: &[(&str, &str)]) -> (Option<i32>, Value) {
    let out = od(data, &["plugin", "install", source, "--json"], env);
    (out.status.code(), last_line(&out))
}

/// The error of a failed install: (code, message).
fn error_of(last: &Value) -> (String, String) {
    let e = &last["data"]["error"];
    (e["code"].as_str().unwrap_or("").into(), e["message"].as_str().unwrap_or("").into())
}

/// A plain server with the `github:acme/repo@v1/plugins/x` tarball; its address.
fn tarball_server(dir: &Path) -> SocketAddr {
    let gh = dir.join("gh.tgz");
    tgz(&gh, &[("repo-v1/plugins/x/SKILL.md", SKILL, tar::EntryType::Regular)]);
    let plain = serve(vec![("/acme/repo/tar.gz/v1".into(), std::fs::read(&gh).unwrap())]);
    plain.trim_start_matches("http://").parse().unwrap()
}

const GH: &str = "github:acme/repo@v1/plugins/x";

#[test]
fn github_install_over_https_trusts_only_a_good_certificate() {
    let tmp = tempfile::tempdir().unwrap();
    let upstream = tarball_server(tmp.path());
    let ca = TestCa::new(tmp.path(), "trusted");
    let other = TestCa::new(tmp.path(), "stranger");
    let ca_file = ca.pem_path.to_str().unwrap();
    let cases = [
        ("tls-untrusted", other.server_cert(tmp.path(), "stranger", Flaw::None), "not signed by a trusted"),
        ("tls-wrong-host", ca.server_cert(tmp.path(), "wrong", Flaw::WrongHost), "not valid for this host"),
        ("tls-expired", ca.server_cert(tmp.path(), "old", Flaw::Expired), "expired"),
    ];
    for (code, cert, says) in cases {
        let front = TlsFront::start(&cert, upstream);
        let data = tmp.path().join(format!("data-{code}"));
        let env = [("OD_GITHUB_TARBALL_BASE", front.url()), ("SSL_CERT_FILE", ca_file.to_string())];
        let (exit, last) = install(&data, GH, &refs(&env));
        let (got, msg) = error_of(&last);
        assert_eq!((got.as_str(), exit), (code, Some(84)), "{last}");
        assert!(msg.contains(says) && msg.contains(&front.url()), "{code}: {last}");
        assert_eq!(last["data"]["error"]["data"]["url"].as_str().map(|u| u.starts_with(&front.url())), Some(true));
        assert!(installed(&data).is_empty(), "{code}: something was installed");
    }
    let good = ca.server_cert(tmp.path(), "good", Flaw::None);
    let front = TlsFront::start(&good, upstream);
    let base = front.url();
    // The CA as the whole bundle (SSL_CERT_FILE), then added to the platform's (OD_CA_FILE).
    for (i, setting) in ["SSL_CERT_FILE", "OD_CA_FILE"].into_iter().enumerate() {
        let data = tmp.path().join(format!("data-{i}"));
        let (exit, last) = install(&data, GH, &[("OD_GITHUB_TARBALL_BASE", &base), (setting, ca_file)]);
        assert_eq!((exit, &last["event"]), (Some(0), &json!("success")), "{setting}: {last}");
        assert_eq!(last["data"]["plugin"]["sourceKind"], "github");
    }
    // An OD_CA_FILE that holds no certificate: tls-setup naming the variable and the file.
    let junk = tmp.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    let data = tmp.path().join("data-junk");
    let (exit, last) = install(&data, GH, &[("OD_GITHUB_TARBALL_BASE", &base), ("OD_CA_FILE", junk.to_str().unwrap())]);
    let (code, msg) = error_of(&last);
    assert_eq!((code.as_str(), exit), ("tls-setup", Some(84)), "{last}");
    assert!(msg.contains("OD_CA_FILE=") && msg.contains("junk.pem"), "{msg}");
    assert!(installed(&data).is_empty());
}

#[test]
fn https_marketplace_index_and_archive_install_with_integrity_checked() {
    use base64::Engine as _;
    use sha2::Digest;
    let tmp = tempfile::tempdir().unwrap();
    let packed = tmp.path().join("packed.tgz");
    tgz(&packed, &[("SKILL.md", SKILL, tar::EntryType::Regular)]);
    let bytes = std::fs::read(&packed).unwrap();
    let sri = format!("sha256-{}", base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(&bytes)));
    let mut tampered = bytes.clone();
    let at = tampered.len() - 9; // the gzip trailer's CRC: the archive still parses, the digest does not match
    tampered[at] ^= 0xff;
    let index = json!({ "name": "acme/secure", "version": "1.0.0", "plugins": [
        { "name": "acme/packed", "version": "2.0.0", "source": "./packed.tgz", "integrity": sri },
        { "name": "acme/tampered", "version": "2.0.0", "source": "./tampered.tgz", "dist": { "integrity": sri } },
    ]});
    let upstream = serve(vec![
        ("/m/open-design-marketplace.json".into(), index.to_string().into_bytes()),
        ("/m/packed.tgz".into(), bytes),
        ("/m/tampered.tgz".into(), tampered),
    ]);
    let ca = TestCa::new(tmp.path(), "market");
    let front = TlsFront::start(&ca.server_cert(tmp.path(), "market", Flaw::None), upstream[7..].parse().unwrap());
    let url = format!("{}/m/open-design-marketplace.json", front.url());
    let data = tmp.path().join("data");

    // A CA nobody named: refused by name, nothing added.
    let stranger = TestCa::new(tmp.path(), "stranger");
    let out = od(&data, &["marketplace", "add", &url], &[("SSL_CERT_FILE", stranger.pem_path.to_str().unwrap())]);
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!((err["error"]["code"].as_str(), out.status.code()), (Some("tls-untrusted"), Some(84)), "{err}");
    let trust = [("SSL_CERT_FILE", ca.pem_path.to_str().unwrap())];
    let list: Value = serde_json::from_slice(&od(&data, &["marketplace", "list", "--json"], &trust).stdout).unwrap();
    assert_eq!(list["marketplaces"], json!([]), "nothing was added");

    let out = od(&data, &["marketplace", "add", &url, "--trust", "trusted", "--json"], &trust);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let again: Value =
        serde_json::from_slice(&od(&data, &["marketplace", "refresh", "acme-secure", "--json"], &trust).stdout)
            .unwrap();
    assert_eq!(again["changed"], false, "{again}");
    let (exit, last) = install(&data, "acme/packed", &trust);
    assert_eq!((exit, &last["event"]), (Some(0), &json!("success")), "{last}");
    assert_eq!(last["data"]["plugin"]["trust"], "trusted");
    let (exit, last) = install(&data, "acme/tampered", &trust);
    let (code, msg) = error_of(&last);
    assert_eq!((code.as_str(), exit), ("bad-archive", Some(1)), "{last}");
    assert!(msg.contains("integrity mismatch"), "{msg}");
    assert_eq!(installed(&data).len(), 1, "only the intact archive is installed");
}

/// A plain server answering every request with a redirect to `to`.
fn redirector(to: String) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            while r.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
                line.clear();
            }
            let head =
                format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = s.write_all(head.as_bytes());
        }
    });
    addr
}

#[test]
fn a_redirect_from_https_to_http_is_a_refused_downgrade() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = tarball_server(tmp.path());
    let to = format!("http://{plain}/acme/repo/tar.gz/v1");
    let ca = TestCa::new(tmp.path(), "ca");
    let front = TlsFront::start(&ca.server_cert(tmp.path(), "srv", Flaw::None), redirector(to.clone()));
    let data = tmp.path().join("data");
    let env = [("OD_GITHUB_TARBALL_BASE", front.url()), ("SSL_CERT_FILE", ca.pem_path.display().to_string())];
    let (exit, last) = install(&data, GH, &refs(&env));
    let (code, msg) = error_of(&last);
    assert_eq!((code.as_str(), exit), ("tls-downgrade", Some(84)), "{last}");
    assert!(msg.contains(&front.url()) && msg.contains(&to), "{msg}");
    assert!(installed(&data).is_empty());
}

/// A CONNECT proxy on loopback: records each request line and the `Proxy-Authorization` header,
/// then tunnels the bytes to the named host and port.
fn connect_proxy() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(client.try_clone().unwrap());
                let (mut first, mut line) = (String::new(), String::new());
                r.read_line(&mut first).unwrap();
                while r.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
                    if line.to_ascii_lowercase().starts_with("proxy-authorization:") {
                        log.lock().unwrap().push(line.trim().to_string());
                    }
                    line.clear();
                }
                log.lock().unwrap().push(first.trim().to_string());
                let target = first.split_whitespace().nth(1).unwrap_or("").to_string();
                let Ok(up) = TcpStream::connect(target) else { return };
                let mut down = client;
                down.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").unwrap();
                let (mut up2, mut down2) = (up.try_clone().unwrap(), down.try_clone().unwrap());
                std::thread::spawn(move || std::io::copy(&mut down2, &mut up2));
                let _ = std::io::copy(&mut { up }, &mut down);
            });
        }
    });
    (addr, seen)
}

#[test]
fn https_proxy_tunnels_with_connect_and_no_proxy_bypasses_it() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new(tmp.path(), "ca");
    let front = TlsFront::start(&ca.server_cert(tmp.path(), "srv", Flaw::None), tarball_server(tmp.path()));
    let (proxy, seen) = connect_proxy();
    let proxy_url = format!("http://od:s3cret@{proxy}");
    let (base, ca_file) = (front.url(), ca.pem_path.display().to_string());
    let env = |extra: &[(&'static str, &'static str)]| {
        let mut v = vec![("OD_GITHUB_TARBALL_BASE", base.clone()), ("SSL_CERT_FILE", ca_file.clone())];
        v.push(("HTTPS_PROXY", proxy_url.clone()));
        v.extend(extra.iter().map(|(k, x)| (*k, x.to_string())));
        v
    };

    let (exit, last) = install(&tmp.path().join("d1"), GH, &refs(&env(&[])));
    assert_eq!((exit, &last["event"]), (Some(0), &json!("success")), "{last}");
    let lines = seen.lock().unwrap().clone();
    let connect = format!("CONNECT localhost:{} HTTP/1.1", front.addr.port());
    assert!(lines.contains(&connect), "the proxy saw {lines:?}");
    // The credentials from the variable, percent-decoded, as Basic proxy authorization.
    assert!(lines.iter().any(|l| l.eq_ignore_ascii_case("Proxy-Authorization: basic b2Q6czNjcmV0")), "{lines:?}");

    seen.lock().unwrap().clear();
    let (exit, last) = install(&tmp.path().join("d2"), GH, &refs(&env(&[("NO_PROXY", "example.com,.localhost")])));
    assert_eq!((exit, &last["event"]), (Some(0), &json!("success")), "{last}");
    assert!(seen.lock().unwrap().is_empty(), "NO_PROXY bypassed the proxy");

    // A proxy variable od cannot use: named, its password never printed, nothing installed.
    let data = tmp.path().join("d3");
    let mut bad = env(&[]);
    bad.push(("HTTPS_PROXY", "https://od:s3cret@proxy.example:3128".into()));
    let (exit, last) = install(&data, GH, &refs(&bad));
    let (code, msg) = error_of(&last);
    assert_eq!((code.as_str(), exit), ("proxy-config", Some(2)), "{last}");
    assert!(msg.starts_with("HTTPS_PROXY=https://proxy.example:3128") && !last.to_string().contains("s3cret"), "{msg}");
    assert!(installed(&data).is_empty());
}

#[test]
fn a_server_that_goes_silent_is_given_up_after_the_read_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    // Accepts, reads the request, answers nothing (the connections are held until the test ends).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let held: Vec<TcpStream> = listener.incoming().flatten().collect();
        drop(held);
    });
    let ca = TestCa::new(tmp.path(), "ca");
    let front = TlsFront::start(&ca.server_cert(tmp.path(), "srv", Flaw::None), silent);
    let ca_file = ca.pem_path.display().to_string();
    let env = [
        ("OD_GITHUB_TARBALL_BASE", front.url()),
        ("SSL_CERT_FILE", ca_file),
        ("OD_OUTBOUND_READ_TIMEOUT_MS", "300".into()),
    ];
    let started = std::time::Instant::now();
    let (exit, last) = install(&tmp.path().join("data"), GH, &refs(&env));
    let (code, msg) = error_of(&last);
    assert_eq!((code.as_str(), exit), ("fetch-failed", Some(1)), "{last}");
    assert!(msg.contains("sent nothing for 300 ms") && msg.contains(&front.url()), "{msg}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "well before the 60 s deadline");
}

#[test]
fn a_server_that_never_accepts_is_given_up_after_the_connect_timeout() {
    use std::os::fd::AsRawFd;
    // A listener whose accept queue is full (backlog 0, one connection waiting): the kernel drops
    // further SYNs, so a connect hangs as it does to a host that drops packets.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
    let addr = listener.local_addr().unwrap();
    let _queued = TcpStream::connect(addr).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let source = format!("https://{addr}/x.tgz");
    let started = std::time::Instant::now();
    let (exit, last) = install(&tmp.path().join("data"), &source, &[("OD_OUTBOUND_CONNECT_TIMEOUT_MS", "300")]);
    let (code, msg) = error_of(&last);
    assert_eq!((code.as_str(), exit), ("fetch-failed", Some(1)), "{last}");
    assert!(msg.contains("no connection within 300 ms") && msg.contains(&source), "{msg}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "well before the 60 s deadline");
}
