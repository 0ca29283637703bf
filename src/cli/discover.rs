//! Finding the daemon that serves a data dir: an explicit `--daemon-url`/`OD_DAEMON_URL` must
//! answer (else exit 3); otherwise the data dir's `daemon.json`, then the default
//! `http://127.0.0.1:7456` if it serves this data dir; otherwise none (the caller embeds the engine
//! or starts a daemon: `conn.rs`, `autostart.rs`).
//!
//! `https://` daemons are spoken to with od's one TLS client config (`net/tls.rs`); a certificate
//! the CLI refuses is its own error naming the URL (exit 84), never "unreachable".
//!
//! Token: the local token of the engine's discovery file (`daemon.json` / `engine.json`, readable
//! by the user only) when that file names the URL being spoken to — it lets the CLI supply agent
//! commands — else `OD_API_TOKEN`. A file's token is never sent to a URL the file does not name.

use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::error::{CliError, CliResult};
use crate::daemon::{discovery_file, engine_file};

/// Default daemon URL.
pub const DEFAULT_URL: &str = "http://127.0.0.1:7456";

/// The CLI's HTTP client to a daemon: for an `https://` daemon it trusts what od trusts
/// (`net/tls.rs`: the platform's store, `SSL_CERT_FILE`, `OD_CA_FILE`) and nothing else — when
/// that store cannot be set up, nothing ([`tls_setup`] names why before a request is made).
pub fn agent(timeout: Option<Duration>) -> ureq::Agent {
    let tls = crate::net::tls::client_config()
        .unwrap_or_else(|_| Arc::new(crate::net::tls::build(&rustls::RootCertStore::empty())));
    let mut b = ureq::AgentBuilder::new().timeout_connect(Duration::from_millis(500)).tls_config(tls);
    if let Some(t) = timeout {
        b = b.timeout_read(t);
    }
    b.build()
}

/// For an `https://` URL: od's TLS client can be set up (`tls-setup`, exit 84, naming the
/// setting at fault, otherwise).
pub fn tls_setup(url: &str) -> CliResult {
    if !url.starts_with("https://") {
        return Ok(());
    }
    crate::net::tls::client_config()
        .map(|_| ())
        .map_err(|e| CliError::new("tls-setup", format!("cannot reach {url}: {e}")).with_data(json!({ "url": url })))
}

/// A request to the daemon at `url` that got no HTTP answer: a refused certificate is named
/// (`tls-untrusted`, `tls-wrong-host`, `tls-expired`, `tls-certificate`: exit 84, naming the URL)
/// — the daemon may well be running — anything else is `daemon-unreachable`.
pub fn transport_error(url: &str, t: &ureq::Transport) -> CliError {
    match crate::net::outbound::tls_problem(t) {
        Some(p) => CliError::new(p.code(), format!("{url}: {p}")).with_data(json!({ "url": url })),
        None => CliError::new("daemon-unreachable", format!("{url}: {t}")),
    }
}

/// A failed call to the daemon at `url`: its error envelope, or [`transport_error`].
pub fn call_error(url: &str, e: ureq::Error) -> CliError {
    match e {
        ureq::Error::Status(code, r) => CliError::from_body(code, &r.into_string().unwrap_or_default()),
        ureq::Error::Transport(t) => transport_error(url, &t),
    }
}

/// Whether a daemon answers `/api/health` at `base`, and which data dir it serves.
pub fn probe(base: &str, token: Option<&str>) -> Option<Value> {
    let mut req = agent(Some(Duration::from_secs(2))).get(&format!("{base}/api/daemon/status"));
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    req.call().ok()?.into_json().ok()
}

/// The error an od daemon at `base` refused the status probe with (a wrong token, too many
/// wrong tokens), when one answered with od's error envelope; or the certificate the CLI refused.
fn refusal(base: &str, token: Option<&str>) -> Option<CliError> {
    let mut req = agent(Some(Duration::from_secs(2))).get(&format!("{base}/api/daemon/status"));
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    match req.call() {
        Err(ureq::Error::Status(code, r)) => {
            let body = r.into_string().ok()?;
            let v: Value = serde_json::from_str(&body).ok()?;
            v["error"]["code"].is_string().then(|| CliError::from_body(code, &body))
        }
        // A certificate refused is not an absent daemon: say which and why.
        Err(ureq::Error::Transport(t)) => {
            crate::net::outbound::tls_problem(&t).is_some().then(|| transport_error(base, &t))
        }
        _ => None,
    }
}

/// A daemon's 429: the CLI says it is throttled, not absent, and for how long.
fn throttled(mut e: CliError, url: &str) -> CliError {
    e.message = format!(
        "the od daemon at {url} throttles this address after too many wrong tokens (it is running; this is not a \
         missing daemon): {}",
        e.message
    );
    e
}

/// `(url, token)` of a discovery file.
fn discovered(file: &Path) -> Option<(String, Option<String>)> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(file).ok()?).ok()?;
    let url = v["url"].as_str()?.trim_end_matches('/').to_string();
    Some((url, v["token"].as_str().filter(|t| !t.is_empty()).map(str::to_string)))
}

/// The token to send to `url`: the local token of this data dir's discovery file naming `url`,
/// else `fallback` (`OD_API_TOKEN`).
pub fn token_for(data_dir: &Path, url: &str, fallback: Option<&str>) -> Option<String> {
    let url = url.trim_end_matches('/');
    [discovery_file(data_dir), engine_file(data_dir)]
        .iter()
        .filter_map(|f| discovered(f))
        .find(|(u, t)| u == url && t.is_some())
        .and_then(|(_, t)| t)
        .or_else(|| fallback.map(str::to_string))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// The URL of a daemon serving `data_dir`, if one is running.
pub fn find_daemon(data_dir: &Path, explicit_url: Option<&str>, token: Option<&str>) -> CliResult<Option<String>> {
    if let Some(url) = explicit_url {
        tls_setup(url)?;
        let token = token_for(data_dir, url, token);
        return match probe(url, token.as_deref()) {
            Some(_) => Ok(Some(url.trim_end_matches('/').to_string())),
            None => Err(match refusal(url, token.as_deref()) {
                Some(e) if e.code == "too-many-attempts" => throttled(e, url),
                Some(e) => e,
                None => CliError::new("daemon-unreachable", format!("no od daemon answers at {url}")),
            }),
        };
    }
    for file in [discovery_file(data_dir), engine_file(data_dir)] {
        let Some((url, local)) = discovered(&file) else { continue };
        tls_setup(&url)?;
        // It must serve this data dir (a stale file may point at a port someone else took).
        let sent = local.as_deref().or(token);
        match probe(&url, sent) {
            Some(st) if st["dataDir"].as_str().is_none_or(|d| same_dir(Path::new(d), data_dir)) => {
                return Ok(Some(url))
            }
            Some(_) => {}
            // An od daemon that answers but throttles this address is there: say so, rather than
            // fall through to "another od process holds the data dir".
            None => {
                match refusal(&url, sent) {
                    Some(e) if e.code == "too-many-attempts" => return Err(throttled(e, &url)),
                    // The daemon's certificate is not trusted here: starting another engine
                    // would only find the data dir locked.
                    Some(e) if e.code.starts_with("tls-") => return Err(e),
                    _ => {}
                }
            }
        }
    }
    if let Some(st) = probe(DEFAULT_URL, token_for(data_dir, DEFAULT_URL, token).as_deref()) {
        if st["dataDir"].as_str().is_some_and(|d| same_dir(Path::new(d), data_dir)) {
            return Ok(Some(DEFAULT_URL.to_string()));
        }
    }
    Ok(None)
}
