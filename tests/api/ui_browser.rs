//! Real-browser tests of the web UI: Debian's chromium (`/usr/bin/chromium`, or `$CHROMIUM`)
//! driven by playwright-core from tests/ui_js (pinned with axe-core in its package-lock.json). The
//! harness's own tests first (tests/ui_js/harness.test.mjs), then every flow in tests/ui_js/flows/
//! (tests/ui_js/run-flows.mjs), each against a fresh daemon of this build. Screenshots go to
//! target/ui-screenshots/. A missing browser or node_modules fails, naming the fix; nothing skips.

use crate::common::ui_node;

use std::path::Path;
use std::time::Duration;

fn prerequisites() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).is_file(),
        "{chromium} is missing: install Debian's browser with `apt-get install -y chromium chromium-driver` (.ci/run does)"
    );
    ui_node::require_node_modules();
}

#[test]
fn browser_harness_and_ui_flows_pass_in_chromium() {
    prerequisites();
    let od = Path::new(env!("CARGO_BIN_EXE_od"));
    ui_node::run(&["--test", "tests/ui_js/harness.test.mjs"], &[("OD_BIN", od)], Duration::from_secs(300));
    ui_node::run(&["tests/ui_js/run-flows.mjs"], &[("OD_BIN", od)], Duration::from_secs(900));
}

/// Issue 29: the login flow once against a daemon serving TLS (`OD_TLS_CERT`/`OD_TLS_KEY`, a
/// certificate for 127.0.0.1 from a CA made here): chromium trusts exactly that certificate's key
/// (`--ignore-certificate-errors-spki-list`, harness.mjs), node's fetches trust the CA
/// (`NODE_EXTRA_CA_CERTS`); the page logs in over https, its cookie `Secure`.
#[test]
fn the_login_flow_passes_in_chromium_over_https() {
    prerequisites();
    let tmp = tempfile::tempdir().unwrap();
    let ca = crate::common::tls::TestCa::new(tmp.path(), "ui");
    let cert = ca.server_cert(tmp.path(), "daemon", crate::common::tls::Flaw::None);
    let od = Path::new(env!("CARGO_BIN_EXE_od"));
    let env = [
        ("OD_BIN", od),
        ("OD_UI_TLS_CERT", cert.cert_path.as_path()),
        ("OD_UI_TLS_KEY", cert.key_path.as_path()),
        ("NODE_EXTRA_CA_CERTS", ca.pem_path.as_path()),
    ];
    ui_node::run(&["tests/ui_js/run-flows.mjs", "login"], &env, Duration::from_secs(300));
}

/// Issue 30 item 3: the follow-up flow alone (also part of the full run above), so a change to
/// conversations can be checked in a browser without every flow.
#[test]
fn the_follow_up_flow_passes_in_chromium() {
    prerequisites();
    let od = Path::new(env!("CARGO_BIN_EXE_od"));
    ui_node::run(&["tests/ui_js/run-flows.mjs", "followup"], &[("OD_BIN", od)], Duration::from_secs(300));
}
