//! A bare `od` (issue 17, daemon modes): a short status of the data dir and its daemon with hints,
//! exit 0 — never a usage error, and never starting a daemon or writing to the data dir.

use crate::common;

use common::harness::{Engine, OD};
use serde_json::Value;

fn bare(data: &std::path::Path, human: bool) -> std::process::Output {
    let mut c = std::process::Command::new(OD);
    c.arg("--data-dir").arg(data).env_remove("OD_DAEMON_URL");
    if human {
        c.env("OD_OUTPUT", "human");
    }
    c.output().unwrap()
}

#[test]
fn a_bare_od_says_where_it_stands_and_what_to_try() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let out = bare(&data, false);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["daemon"], Value::Null);
    assert_eq!(v["dataDir"], data.to_str().unwrap());
    assert!(v["hints"].as_array().unwrap().iter().any(|h| h["command"] == "od --help"), "{v}");
    assert!(!data.exists(), "nothing was written and no daemon started");
    let text = String::from_utf8_lossy(&bare(&data, true).stdout).to_string();
    assert!(text.contains("daemon: not running") && text.contains("od run start"), "{text}");

    let e = Engine::start(&data, 1_800_000_000_000);
    let v: Value = serde_json::from_slice(&bare(&data, false).stdout).unwrap();
    assert_eq!(v["daemon"]["url"], e.url.as_str(), "{v}");
    let text = String::from_utf8_lossy(&bare(&data, true).stdout).to_string();
    assert!(text.contains("daemon: running"), "{text}");
}
