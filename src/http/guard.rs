//! The gate in front of every route: what a daemon reachable from browsers accepts.
//!
//! A daemon on loopback is reachable from every web page the user opens, through DNS rebinding
//! (a page whose name resolves to 127.0.0.1 sends `Host: attacker.example`) and through "simple"
//! cross-site requests (a form or a `no-cors` fetch: POST with `text/plain`, no preflight). So:
//!
//! 1. **Host** (loopback binds only): `127.0.0.1`, `localhost` or `[::1]` (any port: the name is
//!    what rebinding cannot forge, and a TCP forward such as `ssh -L 9000:127.0.0.1:7456` keeps
//!    its own port), or a name configured in `OD_ALLOWED_HOSTS` (`name`: with the bound port or
//!    none; `name:port`: exactly); else 403 `forbidden-host`. A request without `Host` (HTTP/1.0
//!    tools) passes: browsers always send one.
//! 2. **State-changing requests** (every method but GET, HEAD, OPTIONS), on every bind — and, for
//!    the Origin and `Sec-Fetch-Site` rules, reads of `/api/*` too (an `<img>` or `no-cors` fetch
//!    sends a GET without a preflight, and some GETs cost or record):
//!    - an `Origin` must be the daemon's own (`http://` + an accepted host with the bound port,
//!      or `https://` when browsers reach it over HTTPS — its own TLS or a TLS proxy;
//!      on a non-loopback bind also `http(s)://` + the request's own `Host`: a page the daemon
//!      served, reached by IP or name, see [`Access::same_as_host`]); `Origin: null` (sandboxed
//!      frames, `file:` pages) is refused; no `Origin` (the CLI, curl) passes — 403
//!      `forbidden-origin`;
//!    - `Sec-Fetch-Site: cross-site` or `same-site` is refused (403 `forbidden-origin`); `same-origin`,
//!      `none` or no header pass;
//!    - a body must say what it is, in one of the types od's clients send ([`ACCEPTED_TYPES`]:
//!      `application/json`, and `application/octet-stream` for files and bundles); anything else
//!      — the types a form can send (`text/plain`, `application/x-www-form-urlencoded`,
//!      `multipart/form-data`), the beacons a page sends without a preflight (`text/ping` of
//!      `<a ping>`, `application/reports+json` and `application/csp-report` of the Reporting API),
//!      a body without a `Content-Type` — gets 415 `unsupported-media-type` (a type outside the
//!      list with or without a body; no type only without one). Both accepted types make a browser
//!      preflight, which od never approves (it answers no CORS); the web UI sends JSON only (its
//!      login form is submitted by its script as JSON).
//! 3. **Token** (`auth.rs`): the bearer token (or login session) rule for `OD_API_TOKEN`, and who
//!    may supply an agent command ([`Caller`](super::auth::Caller)); guessable tokens are
//!    throttled per address without locking out the right one (`throttle.rs`).
//! 4. **Body deadline**: a request body must arrive within the body-read timeout (`body.rs`).

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::sync::Arc;

use super::error::ApiError;
use super::throttle::{Throttle, Verdict};
use super::HttpShared;

/// Who may reach the daemon, fixed at start.
#[derive(Clone, Debug)]
pub struct Access {
    /// The daemon listens on a loopback address (the Host check applies).
    pub loopback: bool,
    /// The bound port (None: any port, for a router served outside the daemon).
    pub port: Option<u16>,
    /// `OD_API_TOKEN`: required on every `/api/*` request when set.
    pub api_token: Option<String>,
    /// The token this daemon minted at start and wrote to its discovery file (mode 0600) for the
    /// CLI: it authenticates like the API token.
    pub local_token: String,
    /// Extra accepted Host names (`name` or `name:port`, lowercase).
    pub allowed_hosts: Vec<String>,
    /// Requests without a token may supply agent commands too (`OD_ALLOW_HTTP_EXEC`).
    pub allow_http_exec: bool,
    /// Browsers reach the daemon over HTTPS (its own TLS, or a TLS-terminating proxy): its own
    /// pages' Origin is `https://` + an accepted host (port 443 when none is written).
    pub https: bool,
}

impl Default for Access {
    fn default() -> Self {
        Self {
            loopback: true,
            port: None,
            api_token: None,
            local_token: super::auth::mint_token(),
            allowed_hosts: Vec::new(),
            allow_http_exec: false,
            https: false,
        }
    }
}

const LOOPBACK_NAMES: [&str; 3] = ["127.0.0.1", "localhost", "[::1]"];

/// `name[:port]` → (lowercase name, port). `[v6]` names keep their brackets. None: malformed.
fn split_host(h: &str) -> Option<(String, Option<u16>)> {
    let h = h.trim().to_ascii_lowercase();
    let (name, port) = if h.starts_with('[') {
        let end = h.find(']')?;
        let rest = &h[end + 1..];
        let port = if rest.is_empty() { None } else { Some(rest.strip_prefix(':')?) };
        (h[..=end].to_string(), port)
    } else {
        match h.split_once(':') {
            Some((n, p)) => (n.to_string(), Some(p)),
            None => (h.clone(), None),
        }
    };
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    (!name.is_empty()).then_some((name, port))
}

impl Access {
    /// Whether `name:port` names this daemon. `origin`: an Origin's default port (80 for
    /// `http://`, 443 for `https://`), meaning its port must be the bound one (another port is
    /// another origin: another local app).
    fn accepts(&self, value: &str, origin: Option<u16>) -> bool {
        let Some((name, port)) = split_host(value) else { return false };
        let port = match origin {
            Some(default) => Some(port.unwrap_or(default)),
            None => port,
        };
        let origin = origin.is_some();
        let port_ok = |p: Option<u16>| p.is_none() || self.port.is_none() || p == self.port;
        if LOOPBACK_NAMES.contains(&name.as_str()) {
            return !origin || port_ok(port);
        }
        self.allowed_hosts.iter().any(|allowed| match split_host(allowed) {
            Some((n, Some(p))) => n == name && port == Some(p),
            Some((n, None)) => n == name && port_ok(port),
            None => false,
        })
    }

    fn host_ok(&self, headers: &HeaderMap) -> bool {
        if !self.loopback {
            return true;
        }
        match headers.get(header::HOST) {
            None => true,
            Some(v) => v.to_str().is_ok_and(|h| self.accepts(h, None)),
        }
    }

    fn origin_ok(&self, headers: &HeaderMap) -> bool {
        let Some(v) = headers.get(header::ORIGIN) else { return true };
        let origin = v.to_str().unwrap_or("");
        let own = match (origin.strip_prefix("http://"), origin.strip_prefix("https://")) {
            (Some(rest), _) => Some((rest, 80)),
            (None, Some(rest)) if self.https => Some((rest, 443)),
            _ => None,
        };
        if let Some((rest, default_port)) = own {
            if !rest.contains('/') && self.accepts(rest, Some(default_port)) {
                return true;
            }
        }
        !self.loopback && self.same_as_host(origin, headers)
    }

    /// A non-loopback daemon is reached by whatever address or name routes to it (its IP, a LAN
    /// name, a proxy's), so a page it served itself has the Origin `http://` (or `https://`, behind
    /// a TLS proxy) + the request's own `Host`, which is then same-origin. A page elsewhere cannot
    /// make that pair unless its name resolves to the daemon (DNS rebinding): such a page's
    /// requests carry no token — the login cookie belongs to the daemon's own name — and a
    /// non-loopback daemon always requires one.
    fn same_as_host(&self, origin: &str, headers: &HeaderMap) -> bool {
        let Some(authority) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
            return false;
        };
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        !authority.contains('/') && !host.is_empty() && authority.eq_ignore_ascii_case(host.trim())
    }
}

fn state_changing(m: &Method) -> bool {
    !matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS)
}

fn fetch_site_ok(headers: &HeaderMap) -> bool {
    match headers.get("sec-fetch-site").map(|v| v.to_str().unwrap_or("").trim().to_ascii_lowercase()) {
        None => true,
        Some(site) => !matches!(site.as_str(), "cross-site" | "same-site"),
    }
}

/// Whether the request carries a body (a length above 0, or chunked).
pub fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().parse::<u64>().map_or(true, |n| n > 0))
}

/// The media type without parameters, lowercase.
pub fn media_type(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(header::CONTENT_TYPE)?.to_str().unwrap_or("");
    Some(v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
}

/// The media types a state-changing request may carry: what the CLI, the web UI and API clients
/// send. Everything else is refused, so no preflight-free type (a form's, a beacon's) reaches a
/// handler — an allow-list, because browsers keep adding such types (`text/ping`).
pub const ACCEPTED_TYPES: [&str; 2] = ["application/json", "application/octet-stream"];

fn forbidden(code: &'static str, message: String, data: serde_json::Value) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, code, message).with_data(data)
}

/// The 415 envelope.
pub fn unsupported_media_type(got: Option<&str>, expected: &str) -> ApiError {
    let message = match got {
        Some(t) => format!("Content-Type {t:?} is not accepted here; send {expected}"),
        None => format!("a request body needs a Content-Type; send {expected}"),
    };
    ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported-media-type", message)
        .with_data(json!({ "contentType": got, "expected": expected }))
}

/// Checks 1 and 2 of the module doc; `Err` is the refusal to send.
fn check(access: &Access, req: &Request) -> Result<(), ApiError> {
    let headers = req.headers();
    if !access.host_ok(headers) {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
        let msg = format!(
            "Host {host:?} is not this daemon's: a loopback daemon answers to 127.0.0.1, localhost and [::1] (and OD_ALLOWED_HOSTS)"
        );
        return Err(forbidden("forbidden-host", msg, json!({ "host": host })));
    }
    // Reads of `/api/*` from another site are refused too: some GETs cost (`/api/log/verify`) or
    // record facts (`doctor` marks stale snapshots), and an `<img>` or `no-cors` fetch sends them
    // without a preflight. Browsers mark every such request with `Sec-Fetch-Site` (and fetches
    // with `Origin`); the CLI and curl send neither.
    // The OAuth callback is a provider's cross-site redirect by design; its single-use `state`
    // is what authorizes it (`connectors.rs`).
    if req.method() == Method::GET && super::connectors::is_oauth_callback(req.uri().path()) {
        return Ok(());
    }
    let api_read = !state_changing(req.method()) && req.uri().path().starts_with("/api/");
    if !state_changing(req.method()) && !api_read {
        return Ok(());
    }
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !access.origin_ok(headers) || !fetch_site_ok(headers) {
        let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
        let msg = format!(
            "{} requests from other origins are refused (Origin {origin:?}, Sec-Fetch-Site {site:?})",
            req.method()
        );
        return Err(forbidden("forbidden-origin", msg, json!({ "origin": origin, "secFetchSite": site })));
    }
    if api_read {
        return Ok(());
    }
    let media = media_type(headers);
    let refused = match &media {
        Some(t) => !ACCEPTED_TYPES.contains(&t.as_str()),
        None => has_body(headers),
    };
    if refused {
        let expected = "application/json (or application/octet-stream for a file)";
        return Err(unsupported_media_type(media.as_deref(), expected));
    }
    Ok(())
}

/// The 429 of a client that presented too many wrong tokens (`throttle.rs`).
fn too_many_attempts(left_ms: i64) -> Response {
    let secs = (left_ms + 999) / 1000;
    let msg = format!(
        "too many wrong tokens from this address: tokens other than the daemon's own are checked again in {secs} s"
    );
    let mut res = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too-many-attempts", msg)
        .with_data(json!({ "retryAfterMs": left_ms }))
        .into_response();
    res.headers_mut().insert(header::RETRY_AFTER, secs.into());
    res
}

/// The 429 for a wrong token from a throttled address: the wait until its next check.
fn throttled_refusal(throttle: &Throttle, ip: std::net::IpAddr) -> Response {
    match throttle.may_check(ip) {
        Verdict::Wait(ms) => too_many_attempts(ms),
        Verdict::Check | Verdict::Open => too_many_attempts(1000),
    }
}

/// The middleware: the checks, then the token rule (guessable tokens throttled per address, see
/// `throttle.rs`), then the body deadline.
pub async fn gate(State(shared): State<Arc<HttpShared>>, req: Request, next: Next) -> Response {
    if let Err(refusal) = check(&shared.access, &req) {
        return refusal.into_response();
    }
    let peer = req.extensions().get::<super::throttle::Peer>().map(|p| p.0);
    let login = req.method() == Method::POST && req.uri().path() == "/api/auth/login";
    let watched = peer.filter(|_| login || super::auth::guessable_bearer(&shared, &req));
    let mut throttled = false;
    if let Some(ip) = watched {
        match shared.throttle.may_check(ip) {
            Verdict::Wait(ms) => return too_many_attempts(ms),
            Verdict::Check => throttled = true,
            Verdict::Open => {}
        }
    }
    let req = match super::auth::authorize(&shared, req) {
        Ok(req) => req,
        Err(refusal) => {
            if let Some(ip) = watched.filter(|_| !login) {
                shared.throttle.failed(ip);
                if throttled {
                    return throttled_refusal(&shared.throttle, ip);
                }
            }
            return refusal.into_response();
        }
    };
    let req = super::body::with_deadline(req, shared.config.body_read_timeout);
    let res = next.run(req).await;
    if let Some(ip) = watched.filter(|_| login && res.status() == StatusCode::UNAUTHORIZED) {
        shared.throttle.failed(ip);
        if throttled {
            return throttled_refusal(&shared.throttle, ip);
        }
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(port: u16, allowed: &[&str]) -> Access {
        Access { port: Some(port), allowed_hosts: allowed.iter().map(|s| s.to_string()).collect(), ..Access::default() }
    }

    #[test]
    fn hosts_are_loopback_names_or_configured() {
        let a = access(7456, &["od.test", "other.test:9000"]);
        let ok = ["127.0.0.1:7456", "LOCALHOST", "[::1]:7456", "[::1]", "localhost:9000", "od.test", "od.test:7456"];
        for ok in ok.into_iter().chain(["other.test:9000"]) {
            assert!(a.accepts(ok, None), "{ok}");
        }
        for bad in ["od.test:1", "attacker.example:7456", "127.0.0.1.nip.io", "other.test", "[::1]x", "localhost:x", ""]
        {
            assert!(!a.accepts(bad, None), "{bad}");
        }
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (k.clone(), v.parse().unwrap())).collect()
    }

    #[test]
    fn a_non_loopback_daemon_takes_the_origin_of_its_own_host_and_no_other() {
        let lan = Access { loopback: false, ..access(7456, &[]) };
        let same =
            [("http://192.0.2.7:7456", "192.0.2.7:7456"), ("http://OD.lan", "od.lan"), ("https://od.lan", "od.lan")];
        for (origin, host) in same {
            let h = headers(&[(header::ORIGIN, origin), (header::HOST, host)]);
            assert!(lan.origin_ok(&h), "{origin} on Host {host}");
        }
        let other = [
            ("http://evil.example", "192.0.2.7:7456"),
            ("http://192.0.2.7:7457", "192.0.2.7:7456"),
            ("http://192.0.2.7:7456/x", "192.0.2.7:7456"),
            ("null", "192.0.2.7:7456"),
            ("http://192.0.2.7:7456", ""),
        ];
        for (origin, host) in other {
            let h = headers(&[(header::ORIGIN, origin), (header::HOST, host)]);
            assert!(!lan.origin_ok(&h), "{origin} on Host {host:?}");
        }
        // On loopback the Host rule alone decides; a rebound name is not made same-origin by it.
        let h = headers(&[(header::ORIGIN, "http://attacker.example:7456"), (header::HOST, "attacker.example:7456")]);
        assert!(!access(7456, &[]).origin_ok(&h));
    }

    #[test]
    fn an_origin_without_a_port_is_port_80() {
        let a = access(7456, &[]);
        assert!(!a.accepts("localhost", Some(80)));
        assert!(!a.accepts("localhost:3000", Some(80)), "another local app's page");
        assert!(a.accepts("localhost:7456", Some(80)));
        assert!(access(80, &[]).accepts("localhost", Some(80)));
    }

    #[test]
    fn an_https_origin_is_the_daemons_own_only_when_browsers_reach_it_over_https() {
        let h = |o: &str| headers(&[(header::ORIGIN, o), (header::HOST, "127.0.0.1:7456")]);
        let plain = access(7456, &[]);
        assert!(!plain.origin_ok(&h("https://127.0.0.1:7456")));
        let tls = Access { https: true, ..access(7456, &["od.example:443"]) };
        assert!(tls.origin_ok(&h("https://127.0.0.1:7456")));
        assert!(tls.origin_ok(&h("https://od.example")), "a TLS proxy's name, port 443 implied");
        assert!(!tls.origin_ok(&h("https://127.0.0.1:7457")), "another port is another origin");
        assert!(!tls.origin_ok(&h("https://attacker.example:7456")));
    }
}
