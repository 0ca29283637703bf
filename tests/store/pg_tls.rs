//! PostgreSQL over TLS with libpq's `sslmode` meanings (issue 29): one server with `ssl=on` whose
//! certificate (for `localhost` and 127.0.0.1) a CA made in the test signed, and the binary's
//! plain server for the modes that must refuse it. verify-full with the right CA works (the
//! EventLog contract runs on it: `store_contract.rs`, `postgres_tls`); a wrong CA or a wrong host
//! name is `store-unreachable` naming TLS and why; verify-ca skips the name; require encrypts
//! without a root; disable stays in clear; `od` reports a TLS failure as exit 82.

use crate::common;

use common::harness::OD;
use common::pg::{self, PgServer};
use od::store::{Append, StoreConfig, StoreError, StoreSpec};
use serde_json::Value;
use std::process::Command;

/// Opens the log at `url` as `--store` would.
fn open(url: &str) -> Result<od::store::Opened, StoreError> {
    let dir = tempfile::tempdir().unwrap().keep();
    StoreSpec::Postgres { url: url.to_string(), setting: "--store" }.open(StoreConfig::new(&dir))
}

/// The message of an unreachable database (panics on anything else).
fn unreachable(r: Result<od::store::Opened, StoreError>) -> String {
    match r {
        Err(e @ StoreError::Unreachable { setting: "--store", .. }) => {
            assert_eq!(e.code(), "store-unreachable");
            e.to_string()
        }
        Err(other) => panic!("expected store-unreachable, got {other:?}"),
        Ok(_) => panic!("expected store-unreachable, but the log opened"),
    }
}

/// The database `url` names.
fn db_of(url: &str) -> &str {
    url.split('?').next().unwrap().rsplit('/').next().unwrap()
}

/// (TLS sessions, plain sessions) open on `url`'s database.
fn sessions(server: &PgServer, url: &str) -> (u32, u32) {
    let sql = format!(
        "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl) \
         FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.datname = '{}'",
        db_of(url)
    );
    let out = server.psql("postgres", &sql);
    let (t, p) = out.split_once('|').unwrap();
    (t.parse().unwrap(), p.parse().unwrap())
}

/// Appends a note and reads it back: the log works.
fn works(opened: &od::store::Opened) {
    let log = &opened.store;
    let r = log.submit(Append::new(common::sid("note:tls"), vec![common::note("over TLS")])).unwrap();
    r.blocking_recv().unwrap().unwrap();
    assert_eq!(log.read_stream("note:tls", 0, 10).unwrap().len(), 1);
    assert!(log.verify().unwrap().ok());
}

#[test]
fn verify_full_with_the_right_ca_works_by_name_and_by_ip_address() {
    let tls = pg::tls_server();
    let ca = tls.ca_file.display().to_string();
    for host in ["localhost", "127.0.0.1"] {
        let url = tls.fresh_url(host, &format!("sslmode=verify-full&sslrootcert={ca}"));
        let opened = open(&url).unwrap_or_else(|e| panic!("{host}: {e}"));
        works(&opened);
        let (t, p) = sessions(&tls.server, &url);
        assert!(t >= 3 && p == 0, "every connection is TLS: {t} TLS, {p} plain");
    }
}

#[test]
fn a_wrong_ca_is_store_unreachable_naming_tls() {
    let tls = pg::tls_server();
    let other = tls.other_ca_file.display().to_string();
    for mode in ["verify-full", "verify-ca", "require"] {
        // require with a root given checks the chain (libpq's meaning).
        let url = tls.fresh_url("localhost", &format!("sslmode={mode}&sslrootcert={other}"));
        let msg = unreachable(open(&url));
        assert!(msg.contains(&format!("TLS ({mode})")), "{msg}");
        assert!(msg.contains(&format!("not signed by a CA in sslrootcert={other}")), "{msg}");
    }
}

#[test]
fn a_wrong_host_name_is_refused_under_verify_full_and_accepted_under_verify_ca() {
    let tls = pg::tls_server();
    let ca = tls.ca_file.display().to_string();
    // The server's certificate names localhost and 127.0.0.1; the client asks for another name
    // (reaching 127.0.0.1 through libpq's hostaddr).
    let url = tls.fresh_url("db.example.test", &format!("sslmode=verify-full&sslrootcert={ca}"));
    let msg = unreachable(open(&url));
    assert!(msg.contains("TLS (verify-full)") && msg.contains("not valid for host db.example.test"), "{msg}");
    let url = tls.fresh_url("db.example.test", &format!("sslmode=verify-ca&sslrootcert={ca}"));
    let opened = open(&url).expect("verify-ca checks the chain, not the name");
    works(&opened);
    let (t, p) = sessions(&tls.server, &url);
    assert!(t >= 3 && p == 0, "{t} TLS, {p} plain");
}

#[test]
fn require_encrypts_without_a_root_and_refuses_a_server_without_tls() {
    let tls = pg::tls_server();
    let url = tls.fresh_url("127.0.0.1", "sslmode=require");
    let opened = open(&url).expect("require needs no root");
    works(&opened);
    let (t, p) = sessions(&tls.server, &url);
    assert!(t >= 3 && p == 0, "{t} TLS, {p} plain");

    let plain = pg::server();
    for mode in ["require", "verify-full"] {
        let root = if mode == "require" { String::new() } else { format!("&sslrootcert={}", tls.ca_file.display()) };
        let url = format!("{}?sslmode={mode}{root}", plain.fresh_db());
        let msg = unreachable(open(&url));
        assert!(msg.contains(&format!("TLS: the server does not support TLS (sslmode={mode})")), "{msg}");
    }
    // prefer (the default) falls back to plain against it, as libpq does.
    works(&open(&plain.fresh_db()).expect("prefer takes plain when TLS is not offered"));
}

#[test]
fn disable_stays_in_clear_and_prefer_takes_tls_when_offered() {
    let tls = pg::tls_server();
    let url = tls.fresh_url("127.0.0.1", "sslmode=disable");
    let opened = open(&url).unwrap();
    works(&opened);
    let (t, p) = sessions(&tls.server, &url);
    assert!(t == 0 && p >= 3, "{t} TLS, {p} plain");
    let url = tls.fresh_url("127.0.0.1", "application_name=od-test");
    let opened = open(&url).unwrap();
    works(&opened);
    let (t, p) = sessions(&tls.server, &url);
    assert!(t >= 3 && p == 0, "no sslmode is prefer: {t} TLS, {p} plain");
    // prefer with a root that does not sign the server's certificate: the handshake fails and,
    // as libpq does, prefer takes plain instead.
    let other = tls.other_ca_file.display();
    let url = tls.fresh_url("127.0.0.1", &format!("sslmode=prefer&sslrootcert={other}"));
    let opened = open(&url).expect("prefer falls back to plain");
    works(&opened);
    let (t, p) = sessions(&tls.server, &url);
    assert!(t == 0 && p >= 3, "{t} TLS, {p} plain");
}

#[test]
fn allow_tries_plain_first_and_takes_tls_when_the_server_refuses_plain() {
    let tls = pg::tls_server();
    let url = tls.fresh_url("127.0.0.1", "sslmode=allow");
    let opened = open(&url).unwrap();
    works(&opened);
    let (t, p) = sessions(&tls.server, &url);
    assert!(t == 0 && p >= 3, "{t} TLS, {p} plain");
    // Role tlsonly is refused without TLS (pg_hba.conf): allow retries with TLS, disable fails.
    let url = tls.fresh_url("127.0.0.1", "sslmode=allow").replace("//od@", "//tlsonly@");
    let opened = open(&url).expect("allow retries with TLS");
    works(&opened);
    let (t, p) = sessions(&tls.server, &url);
    assert!(t >= 3 && p == 0, "{t} TLS, {p} plain");
    let msg = unreachable(open(&url.replace("sslmode=allow", "sslmode=disable")));
    assert!(msg.contains("no encryption"), "PostgreSQL's own reason: {msg}");
}

fn od(data: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
    let mut c = Command::new(OD);
    c.args(args).arg("--json").arg("--data-dir").arg(data);
    for k in ["OD_DAEMON_URL", "OD_DATABASE_URL", "OD_DAEMON_DB", "OD_PG_HOST", "OD_PG_SSL_MODE", "OD_PG_SSL_ROOT_CERT"]
    {
        c.env_remove(k);
    }
    c.envs(env.iter().copied());
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let err = stderr.lines().rev().find_map(|l| serde_json::from_str::<Value>(l).ok()).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), err)
}

#[test]
fn od_speaks_verify_full_through_the_upstream_variables_and_exits_82_on_a_tls_failure() {
    let tls = pg::tls_server();
    let url = tls.server.fresh_db();
    let db = db_of(&url).to_string();
    let port = tls.server.port.to_string();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let ca = tls.ca_file.display().to_string();
    let mut env = vec![
        ("OD_DAEMON_DB", "postgres"),
        ("OD_PG_HOST", "localhost"),
        ("OD_PG_PORT", port.as_str()),
        ("OD_PG_DATABASE", db.as_str()),
        ("OD_PG_USER", "od"),
        ("OD_PG_PASSWORD", "s3cret-pw"),
        ("OD_PG_SSL_MODE", "verify-full"),
        ("OD_PG_SSL_ROOT_CERT", ca.as_str()),
    ];
    let (code, err) = od(&data, &["log", "append", "--stream", "note:tls", "--text", "hello over TLS"], &env);
    assert_eq!(code, 0, "{err}");
    assert_eq!(tls.server.psql(&db, "SELECT count(*) FROM od_frames WHERE stream = 'note:tls'"), "1");

    // The wrong CA: exit 82, store-unreachable naming TLS and the setting, no password.
    let other = tls.other_ca_file.display().to_string();
    env.retain(|(k, _)| *k != "OD_PG_SSL_ROOT_CERT");
    env.push(("OD_PG_SSL_ROOT_CERT", other.as_str()));
    let (code, err) = od(&data, &["log", "verify"], &env);
    assert_eq!(code, 82, "{err}");
    assert_eq!(err["error"]["code"], "store-unreachable");
    assert_eq!(err["error"]["data"]["setting"], "OD_DAEMON_DB");
    let msg = err["error"]["message"].as_str().unwrap();
    assert!(msg.contains("TLS (verify-full)") && msg.contains("not signed by a CA"), "{msg}");
    assert!(!msg.contains("s3cret-pw"), "{msg}");

    // The same through --store with the wrong host name: exit 82 naming the host.
    let store = tls.fresh_url("db.example.test", &format!("sslmode=verify-full&sslrootcert={ca}"));
    let (code, err) = od(&data, &["log", "verify", "--store", &store], &[]);
    assert_eq!(code, 82, "{err}");
    assert_eq!(err["error"]["data"]["setting"], "--store");
    let msg = err["error"]["message"].as_str().unwrap();
    assert!(msg.contains("TLS") && msg.contains("not valid for host db.example.test"), "{msg}");

    // verify-full without any root is a malformed setting (exit 2) naming sslrootcert.
    let home = tmp.path().join("home");
    let home_s = home.display().to_string();
    let store = tls.fresh_url("localhost", "sslmode=verify-full");
    let (code, err) = od(&data, &["log", "verify", "--store", &store], &[("HOME", home_s.as_str())]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err["error"]["code"], "store-config");
    assert!(err["error"]["message"].as_str().unwrap().contains("sslrootcert"), "{err}");
}
