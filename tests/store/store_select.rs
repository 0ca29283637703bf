//! Choosing the log's backend from the command line and the environment (issue 15): a bad or
//! unreachable database is a clear error at start — its exit code, its code, the setting it came
//! from, no password in the message, nothing written — and a good one serves the same commands as
//! the embedded log.

use crate::common;

use common::harness::OD;
use common::pg;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn od(data: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, Value, String) {
    let mut c = Command::new(OD);
    c.args(args).arg("--json").arg("--data-dir").arg(data);
    for k in ["OD_DAEMON_URL", "OD_DATABASE_URL", "OD_DAEMON_DB", "OD_PG_HOST", "OD_PG_SSL_MODE"] {
        c.env_remove(k);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let err = stderr.lines().rev().find_map(|l| serde_json::from_str::<Value>(l).ok()).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), err, String::from_utf8_lossy(&out.stdout).to_string())
}

#[test]
fn an_unreachable_or_missing_database_is_exit_82_naming_the_setting() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    // Nothing listens on port 1.
    let (code, err, _) =
        od(&data, &["daemon", "start", "--foreground", "--store", "postgres://od:secret@127.0.0.1:1/x"], &[]);
    assert_eq!(code, 82, "{err}");
    assert_eq!(err["error"]["code"], "store-unreachable");
    assert_eq!(err["error"]["data"]["setting"], "--store");
    let msg = err["error"]["message"].as_str().unwrap();
    assert!(!msg.contains("secret") && msg.contains("od:***@127.0.0.1:1"), "{msg}");

    // A server that answers, but no such database: PostgreSQL's own message, from the variable.
    let server = pg::server();
    let url = server.url("no_such_database");
    let (code, err, _) = od(&data, &["plugin", "list"], &[("OD_DATABASE_URL", url.as_str())]);
    assert_eq!(code, 82, "{err}");
    assert_eq!(err["error"]["data"]["setting"], "OD_DATABASE_URL");
    assert!(err["error"]["message"].as_str().unwrap().contains("no_such_database"), "{err}");
    assert!(!data.join("sled").exists(), "no embedded log was made instead");
}

#[test]
fn a_malformed_setting_is_exit_2_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let (code, err, _) = od(&data, &["plugin", "list"], &[("OD_DAEMON_DB", "postgres"), ("OD_PG_HOST", "db")]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err["error"]["code"], "store-config");
    assert_eq!(err["error"]["data"]["setting"], "OD_DAEMON_DB");
    assert!(err["error"]["message"].as_str().unwrap().contains("OD_PG_DATABASE, OD_PG_USER"), "{err}");
    let (code, err, _) = od(&data, &["plugin", "list", "--store", "mysql://h/db"], &[]);
    assert_eq!((code, err["error"]["data"]["setting"].as_str()), (2, Some("--store")), "{err}");
    assert!(!data.exists(), "nothing written for a bad setting");
}

#[test]
fn the_upstream_variables_reach_a_real_database() {
    let server = pg::server();
    let url = server.fresh_db();
    let db = url.rsplit('/').next().unwrap().to_string();
    let port = server.port.to_string();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let env = [
        ("OD_DAEMON_DB", "postgres"),
        ("OD_PG_HOST", "127.0.0.1"),
        ("OD_PG_PORT", port.as_str()),
        ("OD_PG_DATABASE", db.as_str()),
        ("OD_PG_USER", "od"),
        ("OD_PG_SSL_MODE", "disable"),
    ];
    let (code, err, out) =
        od(&data, &["log", "append", "--stream", "note:env", "--text", "hello from the environment"], &env);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("lastSeq"), "{out}");
    // The note is in the database, not in a local log.
    assert_eq!(server.psql(&db, "SELECT count(*) FROM od_frames WHERE stream = 'note:env'"), "1");
    assert!(!data.join("sled").exists());
    let (code, err, out) = od(&data, &["log", "verify"], &env);
    assert_eq!(code, 0, "{err} {out}");
}
