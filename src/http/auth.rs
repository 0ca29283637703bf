//! Tokens: who may call the API, and who may supply an agent command.
//!
//! - With `OD_API_TOKEN` set (required for a non-loopback bind), every `/api/*` request needs
//!   `Authorization: Bearer <token>` (else 401 `unauthorized`).
//! - Every daemon also mints a random local token at start and writes it to its discovery file
//!   (`daemon.json`, or `engine.json` for the CLI's embedded engine; mode 0600, so only the user
//!   can read it). The CLI sends it. It is accepted wherever the API token is.
//! - A request may supply an agent command (`agentCommand`, `agentEnv` of `POST /api/runs`) only
//!   with either token, or when the daemon runs with `OD_ALLOW_HTTP_EXEC=1`: [`Caller::may_exec`].
//!   The daemon's own `OD_AGENT_CMD` needs neither.

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use std::convert::Infallible;

use super::error::ApiError;
use super::guard::Access;

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
    /// The 403 for a request that supplies an agent command without the right to.
    pub fn require_exec(&self, field: &str) -> Result<(), ApiError> {
        if self.may_exec {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "exec-forbidden",
            format!(
                "{field}: a request may supply an agent command only with the daemon's token (the od CLI sends it) \
                 or when the daemon runs with OD_ALLOW_HTTP_EXEC=1; the daemon's own OD_AGENT_CMD needs neither"
            ),
        )
        .with_data(serde_json::json!({ "field": field })))
    }
}

/// A fresh random token (256 bits, hex). Secrets come from the OS, never from the injected ids.
pub fn mint_token() -> String {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).expect("the OS random source is available");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Applies the token rule and records the [`Caller`]; `Err` is the 401 to send.
pub fn authorize(access: &Access, mut req: Request) -> Result<Request, ApiError> {
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let authenticated = bearer.is_some_and(|t| {
        constant_time_eq(t.as_bytes(), access.local_token.as_bytes())
            || access.api_token.as_ref().is_some_and(|a| constant_time_eq(t.as_bytes(), a.as_bytes()))
    });
    if access.api_token.is_some() && !authenticated && req.uri().path().starts_with("/api/") {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong bearer token (OD_API_TOKEN)",
        ));
    }
    req.extensions_mut().insert(Caller { authenticated, may_exec: authenticated || access.allow_http_exec });
    Ok(req)
}
