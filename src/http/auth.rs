//! Tokens: who may call the API, and who may supply an agent command.
//!
//! - With `OD_API_TOKEN` set (required for a non-loopback bind), every `/api/*` request needs
//!   `Authorization: Bearer <token>` (the scheme in any case) or a login session's cookie (else
//!   401 `unauthorized`), except the login routes themselves ([`OPEN_API_PATHS`]).
//! - Browsers log in once (`POST /api/auth/login`, `session.rs`): the login mints a session of its
//!   own (`sessions.rs`: a random secret, kept hashed, expiring, revocable), whose secret an
//!   `HttpOnly; SameSite=Strict` cookie ([`cookie_name`]) carries — never the token itself. The
//!   cookie is accepted wherever the bearer token is; a request with an `Authorization: Bearer`
//!   header is judged by that header alone, and a session secret is no bearer token.
//! - Every daemon also mints a random local token at start and writes it to its discovery file
//!   (`daemon.json`, or `engine.json` for the CLI's embedded engine; mode 0600, so only the user
//!   can read it). The CLI sends it. It is accepted wherever the API token is.
//! - A request may supply an agent command (`agentCommand`, `agentEnv` of `POST /api/runs`) only
//!   with a token or a session, or when the daemon runs with `OD_ALLOW_HTTP_EXEC=1`:
//!   [`Caller::may_exec`]. The daemon's own `OD_AGENT_CMD` needs neither.
//!
//! Every secret is compared in constant time (the API and local tokens) or looked up by its hash
//! (sessions).

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use std::convert::Infallible;

/// Minted from the OS random source (`ids.rs`, beside the other sources of fresh values).
pub use crate::ids::mint_token;

use super::error::ApiError;
use super::guard::Access;
use super::HttpShared;

/// What the gate established about a request (a request extension; absent = nothing).
#[derive(Clone, Copy, Debug, Default)]
pub struct Caller {
    /// The request carried a valid token.
    pub authenticated: bool,
    /// The request may supply an agent command.
    pub may_exec: bool,
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = Infallible;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        Ok(parts.extensions.get::<Caller>().copied().unwrap_or_default())
    }
}

impl Caller {
    /// The caller's exec right, as the one gate (`engine/gate.rs`) judges it.
    pub fn exec_right(&self) -> crate::engine::gate::ExecRight {
        crate::engine::gate::ExecRight::from_bool(self.may_exec)
    }

    /// The 403 `exec-forbidden` for a request that supplies an agent command (`field`) without the
    /// right to: the one gate's answer.
    pub fn require_exec(&self, field: &str) -> Result<(), ApiError> {
        use crate::engine::gate::{pass, Reach};
        Ok(pass(self.exec_right(), Reach::AgentCommand { field }, None)?)
    }
}

/// Equality that takes the same time wherever the inputs differ, and whatever their lengths: the
/// digests are compared (`blake3::Hash`'s `==` is constant-time).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    blake3::hash(a) == blake3::hash(b)
}

/// Whether `t` is the API token or the daemon's local token (constant-time compares).
pub fn token_valid(access: &Access, t: &str) -> bool {
    let local = constant_time_eq(t.as_bytes(), access.local_token.as_bytes());
    let api = access.api_token.as_ref().is_some_and(|a| constant_time_eq(t.as_bytes(), a.as_bytes()));
    local | api
}

/// `/api/*` routes served without a token: logging in, out, and asking whether one is needed.
pub const OPEN_API_PATHS: [&str; 3] = ["/api/auth/login", "/api/auth/logout", "/api/auth/session"];

/// The login cookie's name: one per port, so two daemons on one host (whose cookies a browser
/// keeps together: cookies ignore ports) do not overwrite each other's.
pub fn cookie_name(access: &Access) -> String {
    match access.port {
        Some(p) => format!("od_session_{p}"),
        None => "od_session".to_string(),
    }
}

/// A secret as a cookie value: bytes a cookie value cannot hold (and `%`) percent-encoded.
pub fn cookie_value(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    for b in token.bytes() {
        let plain = matches!(b, 0x21 | 0x23..=0x24 | 0x26..=0x2B | 0x2D..=0x3A | 0x3C..=0x5B | 0x5D..=0x7E);
        if plain {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn cookie_decode(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The credential a request presents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presented {
    /// `Authorization: Bearer <token>` (the scheme matched in any case, RFC 9110 §11.1).
    Bearer(String),
    /// The login cookie's session secret.
    Session(String),
}

/// The token of an `Authorization` value whose scheme is `Bearer` (any case).
fn bearer(v: &str) -> Option<&str> {
    let (scheme, rest) = v.trim_start().split_once([' ', '\t'])?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

/// What a request presents: its bearer token when it sends `Authorization: Bearer`, else the
/// login cookie's secret.
pub fn presented(access: &Access, headers: &axum::http::HeaderMap) -> Option<Presented> {
    if let Some(t) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer) {
        return Some(Presented::Bearer(t.to_string()));
    }
    let name = cookie_name(access);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| cookie_decode(v.trim().trim_matches('"')))
        .map(Presented::Session)
}

/// A bearer token that the throttle watches (`throttle.rs`): one the token rule checks (not a
/// run's tool token on the routes it authorizes) and not the daemon's local token, whose 256
/// random bits no rate of guessing finds. Session cookies are never throttled, for the same
/// reason.
pub fn guessable_bearer(shared: &HttpShared, req: &Request) -> bool {
    let path = req.uri().path();
    match presented(&shared.access, req.headers()) {
        Some(Presented::Bearer(t)) => {
            let tool_call = crate::http::connectors::TOOL_TOKEN_PATHS.contains(&path)
                && t.starts_with(crate::connectors::tool_token::PREFIX);
            !tool_call && !constant_time_eq(t.as_bytes(), shared.access.local_token.as_bytes())
        }
        _ => false,
    }
}

/// Applies the token rule and records the [`Caller`]; `Err` is the 401 to send.
pub fn authorize(shared: &HttpShared, mut req: Request) -> Result<Request, ApiError> {
    let access = &shared.access;
    let presented = presented(access, req.headers());
    let authenticated = match &presented {
        Some(Presented::Bearer(t)) => token_valid(access, t),
        Some(Presented::Session(secret)) => shared.sessions.valid(secret),
        None => false,
    };
    let path = req.uri().path();
    // A run's tool token authorizes the connector tool routes (their handler verifies it), and the
    // OAuth callback is authorized by its single-use `state` (`connectors.rs`).
    let tool_call = crate::http::connectors::TOOL_TOKEN_PATHS.contains(&path)
        && matches!(&presented, Some(Presented::Bearer(t)) if t.starts_with(crate::connectors::tool_token::PREFIX));
    let open = OPEN_API_PATHS.contains(&path) || crate::http::connectors::is_oauth_callback(path) || tool_call;
    if access.api_token.is_some() && !authenticated && path.starts_with("/api/") && !open {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong bearer token (OD_API_TOKEN), or an expired or revoked login session; a browser logs in at /login",
        ));
    }
    req.extensions_mut().insert(Caller { authenticated, may_exec: authenticated || access.allow_http_exec });
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_values_round_trip_any_token() {
        for t in ["abc123", "a b;c,d\"e%f\\g", "ünï", ""] {
            let v = cookie_value(t);
            assert!(v.bytes().all(|b| b.is_ascii_graphic() && !b";,\"\\".contains(&b)), "{v}");
            assert_eq!(cookie_decode(&v).as_deref(), Some(t));
        }
    }

    #[test]
    fn bearer_wins_over_the_cookie_and_its_scheme_is_any_case() {
        let access = Access { port: Some(9), api_token: Some("s3cret".into()), ..Access::default() };
        let mut h = axum::http::HeaderMap::new();
        h.insert(header::COOKIE, "a=b; od_session_9=abc".parse().unwrap());
        assert_eq!(presented(&access, &h), Some(Presented::Session("abc".into())));
        for v in ["Bearer wrong", "bearer wrong", "BEARER  wrong ", "bEaReR\twrong"] {
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            assert_eq!(presented(&access, &h), Some(Presented::Bearer("wrong".into())), "{v}");
        }
        for v in ["Basic d3Jvbmc=", "Bearerwrong", "Token wrong"] {
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            assert_eq!(presented(&access, &h), Some(Presented::Session("abc".into())), "{v}");
        }
    }
}
