//! Waiting for a browser to finish an OAuth authorization that `od connectors connect` or
//! `od mcp oauth start` printed the URL of: the status is polled until the account or server is
//! connected with nothing left pending, the authorization ended without it, or the time is up.
//! An authorization that ended because the daemon's token exchange failed reports the daemon's
//! `lastError`: a refused certificate or downgrade by its `tls-*` code (exit 84), anything else as
//! `oauth-state-unknown` with the daemon's words.

use serde_json::Value;
use std::time::{Duration, Instant};

use super::conn::Conn;
use super::{CliError, CliResult};

/// Polls `path` each 500 ms; `state` reads `(connected, still pending, lastError)` from its
/// answer. Returns the answer once connected and nothing is pending.
pub fn wait_for_browser(
    conn: &Conn,
    path: &str,
    timeout_s: u64,
    what: &str,
    state: impl Fn(&Value) -> (bool, bool, &Value),
) -> CliResult<Value> {
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    loop {
        let v = conn.get(path)?;
        let (connected, pending, last_error) = state(&v);
        if connected && !pending {
            return Ok(v);
        }
        if !pending {
            return Err(ended(what, last_error));
        }
        if Instant::now() >= deadline {
            return Err(CliError::new("timeout", format!("no answer from the browser within {timeout_s} s")));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The error of an authorization that ended without a connection (`last`: the daemon's
/// `lastError`, null when it has none).
fn ended(what: &str, last: &Value) -> CliError {
    let mut message = format!("the authorization of {what} ended without a connection");
    if let Some(m) = last["message"].as_str() {
        message.push_str(": ");
        message.push_str(m);
    }
    let code = last["code"].as_str().unwrap_or("oauth-state-unknown");
    CliError::new(code, message).with_data(last.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_refused_certificate_ends_with_its_code() {
        let e = ended("slack", &json!({ "code": "tls-untrusted", "message": "https://p.example/t: not trusted" }));
        assert_eq!((e.code.as_str(), e.exit_code()), ("tls-untrusted", 84));
        assert!(e.message.ends_with("connection: https://p.example/t: not trusted"), "{}", e.message);
        let e = ended("slack", &json!({ "code": null, "message": "the provider refused: invalid_grant" }));
        assert_eq!((e.code.as_str(), e.exit_code()), ("oauth-state-unknown", 74));
        assert_eq!(ended("slack", &Value::Null).message, "the authorization of slack ended without a connection");
    }
}
