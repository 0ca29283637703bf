//! Which backend holds the log, chosen by one setting: `--store` (`embedded`, or a
//! `postgres://` URL), else `OD_DATABASE_URL`, else upstream's `OD_DAEMON_DB=postgres` with
//! `OD_PG_HOST`, `OD_PG_PORT`, `OD_PG_DATABASE`, `OD_PG_USER`, `OD_PG_PASSWORD`, `OD_PG_SSL_MODE`,
//! `OD_PG_SSL_ROOT_CERT` (its defaults: port 5432, SSL mode `require`), else the embedded log. A
//! URL's TLS is libpq's `sslmode` / `sslrootcert` (`pg/tls.rs`; a URL naming none is `prefer`).
//! Opening names the setting in every error: a malformed one is `store-config`, an unreachable or
//! refusing database (a failed TLS handshake included) is `store-unreachable`.

use std::path::Path;
use std::sync::Arc;

use super::pg::tls::{split_url, SslMode};
use super::pg::{redact_url, PgLog};
use super::{SledLog, Store, StoreConfig, StoreError};
use crate::net::percent_encode;

/// An opened log, with its backend's own handle (for what only that backend does).
pub struct Opened {
    pub store: Store,
    pub sled: Option<Arc<SledLog>>,
    pub pg: Option<Arc<PgLog>>,
}

/// Where the log lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// The embedded log in the data directory.
    Embedded,
    /// A PostgreSQL database shared by several daemons; `setting` names where the URL came from.
    Postgres { url: String, setting: &'static str },
}

fn is_pg_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

fn config(setting: &'static str, reason: impl Into<String>) -> StoreError {
    StoreError::Config { setting, reason: reason.into() }
}

/// The setting that names URL parameter `param` of a database chosen by `setting`: upstream's
/// own variables for `OD_PG_*`, else the URL's setting.
fn pg_setting(setting: &'static str, param: &str) -> &'static str {
    match (setting, param) {
        ("OD_DAEMON_DB", "sslmode") => "OD_PG_SSL_MODE",
        ("OD_DAEMON_DB", "sslrootcert") => "OD_PG_SSL_ROOT_CERT",
        _ => setting,
    }
}

/// A URL's TLS parameters, checked before anything is opened (the root file is read at open).
fn check_tls(setting: &'static str, url: &str) -> Result<(), StoreError> {
    split_url(url).map(|_| ()).map_err(|e| config(setting, format!("{}: {}", e.param, e.reason)))
}

impl StoreSpec {
    /// The choice from the `--store` flag and the environment (`env` looks a variable up).
    pub fn resolve(flag: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, StoreError> {
        if let Some(f) = flag.map(str::trim) {
            return match f {
                "embedded" | "sled" => Ok(StoreSpec::Embedded),
                u if is_pg_url(u) => {
                    check_tls("--store", u)?;
                    Ok(StoreSpec::Postgres { url: u.to_string(), setting: "--store" })
                }
                other => Err(config("--store", format!("{other:?} is neither `embedded` nor a postgres:// URL"))),
            };
        }
        if let Some(u) = env("OD_DATABASE_URL").filter(|u| !u.trim().is_empty()) {
            let u = u.trim();
            if !is_pg_url(u) {
                return Err(config("OD_DATABASE_URL", format!("{:?} is not a postgres:// URL", redact_url(u))));
            }
            check_tls("OD_DATABASE_URL", u)?;
            return Ok(StoreSpec::Postgres { url: u.to_string(), setting: "OD_DATABASE_URL" });
        }
        let kind = env("OD_DAEMON_DB").unwrap_or_default().trim().to_ascii_lowercase();
        match kind.as_str() {
            "" | "sqlite" | "embedded" | "sled" => return Ok(StoreSpec::Embedded),
            "postgres" => {}
            other => {
                return Err(config("OD_DAEMON_DB", format!("{other:?}: use postgres or sqlite (the embedded log)")))
            }
        }
        let get = |k: &str| env(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let missing: Vec<&str> =
            ["OD_PG_HOST", "OD_PG_DATABASE", "OD_PG_USER"].into_iter().filter(|k| get(k).is_none()).collect();
        if !missing.is_empty() {
            return Err(config(
                "OD_DAEMON_DB",
                format!("OD_DAEMON_DB=postgres needs {} (OD_PG_PORT defaults to 5432)", missing.join(", ")),
            ));
        }
        let port = get("OD_PG_PORT").unwrap_or_else(|| "5432".into());
        if port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(config("OD_PG_PORT", format!("{port:?} is not a port number")));
        }
        let ssl = get("OD_PG_SSL_MODE").unwrap_or_else(|| "require".into()).to_ascii_lowercase();
        let mode = SslMode::parse(&ssl).map_err(|r| config("OD_PG_SSL_MODE", r))?;
        let mut query = format!("sslmode={}", mode.name());
        if let Some(root) = get("OD_PG_SSL_ROOT_CERT") {
            query.push_str(&format!("&sslrootcert={}", percent_encode(&root)));
        }
        let (host, db, user) = (get("OD_PG_HOST").unwrap(), get("OD_PG_DATABASE").unwrap(), get("OD_PG_USER").unwrap());
        let password = get("OD_PG_PASSWORD").map(|p| format!(":{}", percent_encode(&p))).unwrap_or_default();
        let host = if host.contains(':') { format!("[{host}]") } else { host };
        let url =
            format!("postgres://{}{password}@{host}:{port}/{}?{query}", percent_encode(&user), percent_encode(&db));
        split_url(&url).map_err(|e| config(pg_setting("OD_DAEMON_DB", e.param), e.reason))?;
        Ok(StoreSpec::Postgres { url, setting: "OD_DAEMON_DB" })
    }

    /// The choice from the process environment.
    pub fn from_env(flag: Option<&str>) -> Result<Self, StoreError> {
        Self::resolve(flag, &|k| std::env::var(k).ok())
    }

    /// Where the log lives, for people (a database URL without its password).
    pub fn describe(&self, data_dir: &Path) -> String {
        match self {
            StoreSpec::Embedded => data_dir.display().to_string(),
            StoreSpec::Postgres { url, .. } => redact_url(url),
        }
    }

    /// Opens the log: the embedded one with `cfg`, or the database (with `cfg.dir` as this
    /// process's own data directory).
    pub fn open(&self, cfg: StoreConfig) -> Result<Opened, StoreError> {
        match self {
            StoreSpec::Embedded => {
                let log = SledLog::open(cfg)?;
                Ok(Opened { store: log.clone(), sled: Some(log), pg: None })
            }
            StoreSpec::Postgres { url, setting } => {
                let log = PgLog::open(url, &cfg.dir, cfg.clock.clone()).map_err(|e| match e {
                    StoreError::Io { during, message } if during.starts_with("connecting") => {
                        StoreError::Unreachable { setting, location: redact_url(url), message }
                    }
                    // A URL parameter at fault (a root file that cannot be read, verify-* without roots).
                    StoreError::Config { setting: param, reason }
                        if matches!(param, "sslmode" | "sslrootcert" | "url") =>
                    {
                        let reason = if param == "url" { reason } else { format!("{param}: {reason}") };
                        StoreError::Config { setting: pg_setting(setting, param), reason }
                    }
                    other => other,
                })?;
                Ok(Opened { store: log.clone(), sled: None, pg: Some(log) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(flag: Option<&str>, vars: &[(&str, &str)]) -> Result<StoreSpec, StoreError> {
        let env: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        StoreSpec::resolve(flag, &|k| env.get(k).cloned())
    }

    fn setting_of(r: Result<StoreSpec, StoreError>) -> (&'static str, String) {
        match r {
            Err(StoreError::Config { setting, reason }) => (setting, reason),
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn nothing_set_is_the_embedded_log_and_the_flag_wins_over_the_environment() {
        assert_eq!(resolve(None, &[]).unwrap(), StoreSpec::Embedded);
        assert_eq!(resolve(None, &[("OD_DAEMON_DB", "sqlite")]).unwrap(), StoreSpec::Embedded);
        let pg = resolve(Some("postgres://u@h/db"), &[("OD_DATABASE_URL", "postgres://x@y/z")]).unwrap();
        assert_eq!(pg, StoreSpec::Postgres { url: "postgres://u@h/db".into(), setting: "--store" });
        let emb = resolve(Some("embedded"), &[("OD_DATABASE_URL", "postgres://x@y/z")]).unwrap();
        assert_eq!(emb, StoreSpec::Embedded);
        let env = resolve(None, &[("OD_DATABASE_URL", "postgresql://x@y/z"), ("OD_DAEMON_DB", "postgres")]).unwrap();
        assert_eq!(env, StoreSpec::Postgres { url: "postgresql://x@y/z".into(), setting: "OD_DATABASE_URL" });
    }

    #[test]
    fn a_bad_setting_is_named() {
        assert_eq!(setting_of(resolve(Some("mysql://h/db"), &[])).0, "--store");
        let (s, why) = setting_of(resolve(None, &[("OD_DATABASE_URL", "mysql://u:secret@h/db")]));
        assert_eq!(s, "OD_DATABASE_URL");
        assert!(!why.contains("secret"), "{why}");
        assert_eq!(setting_of(resolve(None, &[("OD_DAEMON_DB", "mysql")])).0, "OD_DAEMON_DB");
        let (s, why) = setting_of(resolve(None, &[("OD_DAEMON_DB", "postgres"), ("OD_PG_HOST", "h")]));
        assert_eq!(s, "OD_DAEMON_DB");
        assert!(why.contains("OD_PG_DATABASE") && why.contains("OD_PG_USER") && !why.contains("OD_PG_HOST"), "{why}");
        let full = [("OD_DAEMON_DB", "postgres"), ("OD_PG_HOST", "h"), ("OD_PG_DATABASE", "d"), ("OD_PG_USER", "u")];
        let bad_root = [&full[..], &[("OD_PG_SSL_MODE", "verify-ca"), ("OD_PG_SSL_ROOT_CERT", "system")]].concat();
        let (s, why) = setting_of(resolve(None, &bad_root));
        assert_eq!(s, "OD_PG_SSL_MODE");
        assert!(why.contains("verify-full"), "{why}");
        let (s, why) = setting_of(resolve(Some("postgres://u:secret@h/db?sslmode=sometimes"), &[]));
        assert_eq!(s, "--store");
        assert!(why.starts_with("sslmode:") && why.contains("verify-full") && !why.contains("secret"), "{why}");
        let (s, why) = setting_of(resolve(None, &[("OD_DATABASE_URL", "postgres://u@h/db?sslrootcert=")]));
        assert_eq!(s, "OD_DATABASE_URL");
        assert!(why.starts_with("sslrootcert:"), "{why}");
        let bad_port = [&full[..], &[("OD_PG_SSL_MODE", "disable"), ("OD_PG_PORT", "99999")]].concat();
        assert_eq!(setting_of(resolve(None, &bad_port)).0, "OD_PG_PORT");
        let bad_mode = [&full[..], &[("OD_PG_SSL_MODE", "sometimes")]].concat();
        assert_eq!(setting_of(resolve(None, &bad_mode)).0, "OD_PG_SSL_MODE");
    }

    #[test]
    fn upstream_variables_build_an_encoded_url() {
        let vars = [
            ("OD_DAEMON_DB", "Postgres"),
            ("OD_PG_HOST", "db.local"),
            ("OD_PG_PORT", "6543"),
            ("OD_PG_DATABASE", "open design"),
            ("OD_PG_USER", "od"),
            ("OD_PG_PASSWORD", "p@ss:w/rd"),
            ("OD_PG_SSL_MODE", "disable"),
        ];
        let StoreSpec::Postgres { url, setting } = resolve(None, &vars).unwrap() else { panic!("not postgres") };
        assert_eq!(setting, "OD_DAEMON_DB");
        assert_eq!(url, "postgres://od:p%40ss%3Aw%2Frd@db.local:6543/open%20design?sslmode=disable");
        assert_eq!(redact_url(&url), "postgres://od:***@db.local:6543/open%20design?sslmode=disable");
        let parsed: tokio_postgres::Config = url.parse().expect("tokio-postgres reads it");
        assert_eq!(parsed.get_password(), Some(&b"p@ss:w/rd"[..]));
        assert_eq!(parsed.get_dbname(), Some("open design"));
    }

    #[test]
    fn upstream_tls_variables_reach_the_url() {
        let full = [("OD_DAEMON_DB", "postgres"), ("OD_PG_HOST", "h"), ("OD_PG_DATABASE", "d"), ("OD_PG_USER", "u")];
        // Upstream's default SSL mode is `require`: it now works.
        let StoreSpec::Postgres { url, .. } = resolve(None, &full).unwrap() else { panic!("not postgres") };
        assert_eq!(url, "postgres://u@h:5432/d?sslmode=require");
        let vars =
            [&full[..], &[("OD_PG_SSL_MODE", "Verify-Full"), ("OD_PG_SSL_ROOT_CERT", "/etc/od/ca root.pem")]].concat();
        let StoreSpec::Postgres { url, .. } = resolve(None, &vars).unwrap() else { panic!("not postgres") };
        assert_eq!(url, "postgres://u@h:5432/d?sslmode=verify-full&sslrootcert=%2Fetc%2Fod%2Fca%20root.pem");
        let (rest, params) = split_url(&url).unwrap();
        assert_eq!(rest, "postgres://u@h:5432/d");
        assert_eq!(params.mode, Some(SslMode::VerifyFull));
        assert_eq!(params.root_cert.as_deref(), Some("/etc/od/ca root.pem"));
    }

    #[test]
    fn a_root_file_that_cannot_be_read_names_its_setting_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let missing = dir.path().join("no-such-ca.pem");
        let url = format!("postgres://u@127.0.0.1:1/d?sslmode=verify-full&sslrootcert={}", missing.display());
        let spec = StoreSpec::Postgres { url, setting: "OD_DATABASE_URL" };
        let e = spec.open(StoreConfig::new(&data)).err().expect("refused");
        let StoreError::Config { setting, reason } = e else { panic!("expected a config error, got {e:?}") };
        assert_eq!(setting, "OD_DATABASE_URL");
        assert!(reason.starts_with("sslrootcert:") && reason.contains("no-such-ca.pem"), "{reason}");
        assert!(!data.exists(), "nothing is written for a bad setting");
        let full = [
            ("OD_DAEMON_DB", "postgres"),
            ("OD_PG_HOST", "127.0.0.1"),
            ("OD_PG_PORT", "1"),
            ("OD_PG_DATABASE", "d"),
            ("OD_PG_USER", "u"),
            ("OD_PG_SSL_MODE", "verify-ca"),
        ];
        let with_root = [&full[..], &[("OD_PG_SSL_ROOT_CERT", missing.to_str().unwrap())]].concat();
        let e = resolve(None, &with_root).unwrap().open(StoreConfig::new(&data)).err().expect("refused");
        assert!(matches!(e, StoreError::Config { setting: "OD_PG_SSL_ROOT_CERT", .. }), "{e:?}");
    }
}
