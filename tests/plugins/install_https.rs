//! Installing plugins over real HTTPS: a `github:` source from a local tarball server behind TLS
//! with a CA made in the test, trusted through `SSL_CERT_FILE`; the same server with a certificate
//! from an untrusted CA, for another host, or expired is refused by name with nothing installed.

use crate::common::tls::{Flaw, TestCa, TlsFront};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const OD: &str = env!("CARGO_BIN_EXE_od");

fn last_line(out: &std::process::Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or("null")).unwrap()
}

fn install(data: &Path, base: &str, ca: &Path) -> Value {
    let out = Command::new(OD)
        .args(["plugin", "install", "github:acme/repo@v1/plugins/x", "--json", "--data-dir"])
        .arg(data)
        .env_remove("OD_DAEMON_URL")
        .env("OD_GITHUB_TARBALL_BASE", base)
        .env("SSL_CERT_FILE", ca)
        .env_remove("SSL_CERT_DIR")
        .env_remove("OD_CA_FILE")
        .output()
        .unwrap();
    last_line(&out)
}

#[test]
fn github_install_over_https_trusts_only_a_good_certificate() {
    let tmp = tempfile::tempdir().unwrap();
    let gh = tmp.path().join("gh.tgz");
    crate::plugin_archives::tgz(
        &gh,
        &[("repo-v1/plugins/x/SKILL.md", crate::plugin_archives::SKILL, tar::EntryType::Regular)],
    );
    let plain = crate::plugin_archives::serve(vec![("/acme/repo/tar.gz/v1".into(), std::fs::read(&gh).unwrap())]);
    let upstream: std::net::SocketAddr = plain.trim_start_matches("http://").parse().unwrap();
    let ca = TestCa::new(tmp.path(), "trusted");
    let other = TestCa::new(tmp.path(), "stranger");
    let cases = [
        ("untrusted", other.server_cert(tmp.path(), "stranger", Flaw::None), "not signed by a trusted"),
        ("wrong-host", ca.server_cert(tmp.path(), "wrong", Flaw::WrongHost), "not valid for this host"),
        ("expired", ca.server_cert(tmp.path(), "old", Flaw::Expired), "expired"),
    ];
    for (name, cert, says) in cases {
        let front = TlsFront::start(&cert, upstream);
        let data = tmp.path().join(format!("data-{name}"));
        let last = install(&data, &front.url(), &ca.pem_path);
        assert_eq!(last["event"], "error", "{name}: {last}");
        let msg = last["data"]["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains(says) && msg.contains(&front.url()), "{name}: {last}");
        assert!(crate::plugin_archives::installed(&data).is_empty(), "{name}: something was installed");
    }
    let good = ca.server_cert(tmp.path(), "good", Flaw::None);
    let front = TlsFront::start(&good, upstream);
    let last = install(&tmp.path().join("data"), &front.url(), &ca.pem_path);
    assert_eq!(last["event"], "success", "{last}");
    assert_eq!(last["data"]["plugin"]["sourceKind"], "github");
}
