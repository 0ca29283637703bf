//! Which backend holds the log, chosen by one setting: `--store` (`embedded`, or a
//! `postgres://` URL), else `OD_DATABASE_URL`, else upstream's `OD_DAEMON_DB=postgres` with
//! `OD_PG_HOST`, `OD_PG_PORT`, `OD_PG_DATABASE`, `OD_PG_USER`, `OD_PG_PASSWORD`, `OD_PG_SSL_MODE`
//! (its defaults: port 5432, SSL mode `require`), else the embedded log. Opening names the setting
//! in every error: a malformed one is `store-config`, an unreachable or refusing database is
//! `store-unreachable`.

use std::path::Path;
use std::sync::Arc;

use super::pg::{redact_url, PgLog};
use super::{SledLog, Store, StoreConfig, StoreError};

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

/// Percent-encodes what a URL's user info or path may not carry as is.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl StoreSpec {
    /// The choice from the `--store` flag and the environment (`env` looks a variable up).
    pub fn resolve(flag: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, StoreError> {
        if let Some(f) = flag.map(str::trim) {
            return match f {
                "embedded" | "sled" => Ok(StoreSpec::Embedded),
                u if is_pg_url(u) => Ok(StoreSpec::Postgres { url: u.to_string(), setting: "--store" }),
                other => Err(config("--store", format!("{other:?} is neither `embedded` nor a postgres:// URL"))),
            };
        }
        if let Some(u) = env("OD_DATABASE_URL").filter(|u| !u.trim().is_empty()) {
            let u = u.trim();
            if !is_pg_url(u) {
                return Err(config("OD_DATABASE_URL", format!("{:?} is not a postgres:// URL", redact_url(u))));
            }
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
        match ssl.as_str() {
            "disable" => {}
            "require" | "verify-full" => {
                return Err(config(
                    "OD_PG_SSL_MODE",
                    format!(
                        "{ssl} (the default) needs TLS, which this od does not speak to PostgreSQL yet; \
                         set OD_PG_SSL_MODE=disable on a trusted network or a local socket, or put a TLS \
                         tunnel in front of the database"
                    ),
                ))
            }
            other => return Err(config("OD_PG_SSL_MODE", format!("{other:?}: use disable, require or verify-full"))),
        }
        let (host, db, user) = (get("OD_PG_HOST").unwrap(), get("OD_PG_DATABASE").unwrap(), get("OD_PG_USER").unwrap());
        let password = get("OD_PG_PASSWORD").map(|p| format!(":{}", enc(&p))).unwrap_or_default();
        let host = if host.contains(':') { format!("[{host}]") } else { host };
        let url = format!("postgres://{}{password}@{host}:{port}/{}?sslmode=disable", enc(&user), enc(&db));
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
                    other => other,
                })?;
                Ok(Opened { store: log.clone(), sled: None, pg: Some(log) })
            }
        }
    }
}
