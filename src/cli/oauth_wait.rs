//! Waiting for a browser to finish an OAuth authorization that `od connectors connect` or
//! `od mcp oauth start` printed the URL of: the status is polled until the account or server is
//! connected with nothing left pending, the authorization ended without it, or the time is up.

use serde_json::Value;
use std::time::{Duration, Instant};

use super::conn::Conn;
use super::{CliError, CliResult};

/// Polls `path` each 500 ms; `state` reads `(connected, still pending)` from its answer. Returns
/// the answer once connected and nothing is pending.
pub fn wait_for_browser(
    conn: &Conn,
    path: &str,
    timeout_s: u64,
    what: &str,
    state: impl Fn(&Value) -> (bool, bool),
) -> CliResult<Value> {
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    loop {
        let v = conn.get(path)?;
        let (connected, pending) = state(&v);
        if connected && !pending {
            return Ok(v);
        }
        if !pending {
            return Err(CliError::new(
                "oauth-state-unknown",
                format!("the authorization of {what} ended without a connection"),
            ));
        }
        if Instant::now() >= deadline {
            return Err(CliError::new("timeout", format!("no answer from the browser within {timeout_s} s")));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
