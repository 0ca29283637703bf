//! What the HTTP server is told at start: its timeouts, its connection cap, the extra Host names it
//! answers to, and whether requests may supply agent commands without a token. Defaults come from
//! `limits.rs`; [`HttpConfig::from_env`] lets an operator (and the CLI's embedded engine) override
//! them; tests set the fields directly (e.g. 200 ms timeouts), so nothing waits tens of seconds.
//!
//! | variable | field |
//! |---|---|
//! | `OD_HTTP_HEADER_TIMEOUT_MS` | [`HttpConfig::header_read_timeout`] (also the idle keep-alive timeout) |
//! | `OD_HTTP_BODY_TIMEOUT_MS` | [`HttpConfig::body_read_timeout`] |
//! | `OD_HTTP_WRITE_TIMEOUT_MS` | [`HttpConfig::write_stall_timeout`] |
//! | `OD_SSE_KEEPALIVE_MS` | [`HttpConfig::stream_keepalive`] |
//! | `OD_HTTP_MAX_CONNECTIONS` | [`HttpConfig::max_connections`] |
//! | `OD_ALLOWED_HOSTS` | [`HttpConfig::allowed_hosts`] (comma-separated `name` or `name:port`) |
//! | `OD_ALLOW_HTTP_EXEC` | [`HttpConfig::allow_http_exec`] (`1`/`true`) |
//! | `OD_SECURE_COOKIES` | [`HttpConfig::secure_cookies`] (`1`/`true`) |
//! | `OD_TLS_TERMINATED_BY_PROXY` | [`HttpConfig::tls_terminated_by_proxy`] (`1`/`true`) |
//!
//! [`HttpConfig::tls`] is set by the daemon's start from `--tls-cert`/`--tls-key` (`tls.rs`).

use std::time::Duration;

use crate::limits::*;

/// The HTTP server's settings.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// A request head must be complete within this after the connection opens or its previous
    /// response ends (so it is the idle keep-alive timeout too).
    pub header_read_timeout: Duration,
    /// A request body must be complete within this after the handler starts reading it.
    pub body_read_timeout: Duration,
    /// A connection whose peer takes no bytes for this long is closed.
    pub write_stall_timeout: Duration,
    /// Silence after which a streaming response sends a keep-alive.
    pub stream_keepalive: Duration,
    /// Open connections at most (further bounded by the descriptor limit, see `serve.rs`).
    pub max_connections: usize,
    /// Host names (lowercase, `name` or `name:port`) accepted besides the loopback ones.
    pub allowed_hosts: Vec<String>,
    /// Any request that passes the browser checks may supply an agent command (`agentCommand`,
    /// `agentEnv`), not only one that carries a token.
    pub allow_http_exec: bool,
    /// Headless (`od daemon start --headless`, `OD_HEADLESS`): the JSON API only, no web UI pages.
    pub headless: bool,
    /// Browsers reach the daemon over HTTPS (a TLS listener, or a TLS proxy in front): the login
    /// cookie is marked `Secure`, so a browser never sends it over plain HTTP.
    pub secure_cookies: bool,
    /// The daemon serves TLS itself (`--tls-cert`/`--tls-key`): every listener wraps its
    /// connections in this config.
    pub tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    /// The daemon serves plain HTTP behind a proxy that terminates TLS for it
    /// (`--tls-terminated-by-proxy`, `OD_TLS_TERMINATED_BY_PROXY`): browsers reach it over HTTPS.
    pub tls_terminated_by_proxy: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_millis(HTTP_HEADER_READ_TIMEOUT_MS),
            body_read_timeout: Duration::from_millis(HTTP_BODY_READ_TIMEOUT_MS),
            write_stall_timeout: Duration::from_millis(HTTP_WRITE_STALL_TIMEOUT_MS),
            stream_keepalive: Duration::from_millis(STREAM_KEEPALIVE_MS),
            max_connections: MAX_HTTP_CONNECTIONS,
            allowed_hosts: Vec::new(),
            allow_http_exec: false,
            headless: false,
            secure_cookies: false,
            tls: None,
            tls_terminated_by_proxy: false,
        }
    }
}

fn env_ms(name: &str) -> Option<Duration> {
    std::env::var(name).ok()?.trim().parse::<u64>().ok().filter(|ms| *ms > 0).map(Duration::from_millis)
}

/// `1`, `true`, `yes` or `on` (any case).
pub fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
}

impl HttpConfig {
    /// The defaults, overridden by the `OD_*` variables above (a malformed or zero value is ignored).
    pub fn from_env() -> Self {
        let d = Self::default();
        Self {
            header_read_timeout: env_ms("OD_HTTP_HEADER_TIMEOUT_MS").unwrap_or(d.header_read_timeout),
            body_read_timeout: env_ms("OD_HTTP_BODY_TIMEOUT_MS").unwrap_or(d.body_read_timeout),
            write_stall_timeout: env_ms("OD_HTTP_WRITE_TIMEOUT_MS").unwrap_or(d.write_stall_timeout),
            stream_keepalive: env_ms("OD_SSE_KEEPALIVE_MS").unwrap_or(d.stream_keepalive),
            max_connections: std::env::var("OD_HTTP_MAX_CONNECTIONS")
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|n| *n > 0)
                .unwrap_or(d.max_connections),
            allowed_hosts: std::env::var("OD_ALLOWED_HOSTS").map(|v| parse_hosts(&v)).unwrap_or_default(),
            allow_http_exec: env_flag("OD_ALLOW_HTTP_EXEC"),
            headless: env_flag("OD_HEADLESS"),
            secure_cookies: env_flag("OD_SECURE_COOKIES"),
            tls: None,
            tls_terminated_by_proxy: env_flag("OD_TLS_TERMINATED_BY_PROXY"),
        }
    }

    /// The scheme of the daemon's own URLs: `https` when it serves TLS itself.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Whether browsers reach the daemon over HTTPS, so the login cookie is `Secure`:
    /// `OD_SECURE_COOKIES`, a TLS listener, or a TLS-terminating proxy in front.
    pub fn cookies_secure(&self) -> bool {
        self.secure_cookies || self.tls.is_some() || self.tls_terminated_by_proxy
    }
}

/// `a.example, b.example:8080` → `["a.example", "b.example:8080"]` (lowercase, empties dropped).
pub fn parse_hosts(v: &str) -> Vec<String> {
    v.split(',').map(|h| h.trim().to_ascii_lowercase()).filter(|h| !h.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_split_trimmed_and_lowercased() {
        assert_eq!(parse_hosts(" A.example ,, b.example:8080,"), vec!["a.example", "b.example:8080"]);
    }
}
