//! The OAuth 2.0 authorization-code flow with PKCE (S256), through the `oauth2` crate over ureq:
//! starting an authorization (the URL to send the user to, and what the callback will need, kept
//! in memory only) and completing it (the code exchanged for tokens at the provider's token
//! endpoint), and refreshing an expired access token.
//!
//! A pending authorization is found by its `state` (256 bits from the OS, single use) and lives
//! [`PENDING_AUTH_TTL_MS`](crate::limits::PENDING_AUTH_TTL_MS); the PKCE verifier never leaves
//! this process and never reaches the log.

use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet, EndpointSet, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, RefreshToken, Scope, TokenResponse, TokenUrl,
};
use std::collections::HashMap;
use std::sync::Mutex;

use super::catalog::ConnectorDef;
use super::credentials::Credential;
use super::outbound::{self, Unreachable};
use crate::limits::{MAX_PENDING_AUTHORIZATIONS, MAX_TOKEN_LIFETIME_MS, PENDING_AUTH_TTL_MS};
use crate::net::redact;

type Client = BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// Why an authorization could not start or complete.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("{0}")]
    Config(String),
    /// No pending authorization has this state (never started, used, or expired).
    #[error("no authorization is waiting for this state (it expired, was used, or was never started)")]
    UnknownState,
    #[error("the provider refused: {0}")]
    Provider(String),
    #[error("too many authorizations are waiting (at most {0}); finish or let them expire")]
    TooMany(usize),
    /// An endpoint gave no answer od accepts: its certificate was refused, it redirected to plain
    /// http, or it could not be reached (the message names the URL; `code` a TLS refusal).
    #[error("{0}")]
    Unreachable(Unreachable),
}

/// What the callback needs to finish an authorization.
pub struct Pending {
    pub connector_id: String,
    /// The definition the authorization started with (an MCP server's is discovered, not in
    /// the catalog, so the callback finishes with this one).
    pub def: ConnectorDef,
    verifier: PkceCodeVerifier,
    pub redirect_uri: String,
    /// The run and `oauth-prompt` surface the connection answers (empty: none).
    pub run_id: String,
    pub surface_id: String,
    pub created_at: i64,
}

/// The authorizations waiting for their callback.
#[derive(Default)]
pub struct PendingAuths {
    by_state: Mutex<HashMap<String, Pending>>,
    /// By connector (or MCP server) id: the last authorization that ended without a connection
    /// since the last start (memory only, like the pending ones), for whoever waits on it.
    failed: Mutex<HashMap<String, Failure>>,
}

/// Why an authorization's callback did not connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// A TLS refusal's code (`tls-untrusted`, `tls-downgrade`, …); `None` for anything else.
    pub code: Option<&'static str>,
    pub message: String,
    pub at: i64,
}

fn client(d: &ConnectorDef, redirect_uri: &str) -> Result<Client, OAuthError> {
    let bad = |what: &str, e: String| OAuthError::Config(format!("connector {:?}: {what}: {e}", d.id));
    let mut c = BasicClient::new(ClientId::new(d.client_id.clone()))
        .set_auth_uri(AuthUrl::new(d.authorize_url.clone()).map_err(|e| bad("authorizeUrl", e.to_string()))?)
        .set_token_uri(TokenUrl::new(d.token_url.clone()).map_err(|e| bad("tokenUrl", e.to_string()))?)
        .set_redirect_uri(RedirectUrl::new(redirect_uri.to_string()).map_err(|e| bad("redirect", e.to_string()))?);
    if let Some(secret) = d.client_secret() {
        c = c.set_client_secret(ClientSecret::new(secret));
    }
    Ok(c)
}

/// Sends one token request through od's outbound client (`outbound.rs`: the URL rule, od's TLS
/// config, the deadline, the answer bound), never following a redirect (a token endpoint that
/// redirects is refused rather than sent the code elsewhere; one to plain http by name). An
/// error status is returned as a response, so the provider's error body reaches the OAuth client.
pub(crate) fn http(req: oauth2::HttpRequest) -> Result<oauth2::HttpResponse, Unreachable> {
    let url = req.uri().to_string();
    let out = outbound::client();
    let start = std::time::Instant::now();
    let mut r = outbound::request(&out, req.method().as_str(), &url)?;
    for (name, value) in req.headers() {
        let v = value.to_str().map_err(|e| Unreachable {
            url: redact(&url),
            code: None,
            message: format!("{}: header {name}: {e}", redact(&url)),
        })?;
        r = r.set(name.as_str(), v);
    }
    let sent = if req.body().is_empty() && req.method() == axum::http::Method::GET {
        r.call()
    } else {
        r.send_bytes(req.body())
    };
    let res = outbound::answer(&out, &url, start, sent)?;
    let mut b = axum::http::Response::builder().status(res.status());
    if let Some(ct) = res.header("content-type") {
        b = b.header("content-type", ct);
    }
    let body = outbound::read(&out, &url, start, res).map_err(|e| outbound::named(&url, e))?;
    b.body(body).map_err(|e| Unreachable { url: redact(&url), code: None, message: e.to_string() })
}

/// When a token given at `now` with `expires_in` expires (0: never said), its lifetime clamped
/// to [`MAX_TOKEN_LIFETIME_MS`].
fn expiry(now: i64, expires_in: Option<std::time::Duration>) -> i64 {
    expires_in.map_or(0, |e| {
        let ms = e.as_millis().min(MAX_TOKEN_LIFETIME_MS as u128) as i64;
        now.saturating_add(ms.max(1))
    })
}

/// Whether `token` can travel as a bearer token: visible ASCII only (RFC 6750's `b64token` and
/// RFC 6749's VSCHAR), so never a CR, LF, NUL or space that would break or inject a header.
pub fn token_ok(token: &str) -> bool {
    token.bytes().all(|b| b.is_ascii_graphic())
}

fn to_credential(t: &oauth2::basic::BasicTokenResponse, d: &ConnectorDef, now: i64) -> Result<Credential, OAuthError> {
    let scopes = match t.scopes() {
        Some(s) => s.iter().map(|s| s.to_string()).collect(),
        None => d.scopes.clone(),
    };
    let access_token = t.access_token().secret().clone();
    let refresh_token = t.refresh_token().map(|r| r.secret().clone()).unwrap_or_default();
    // Never quoted: the message says which token is wrong, not what it holds.
    for (what, token) in [("access_token", &access_token), ("refresh_token", &refresh_token)] {
        if !token_ok(token) {
            return Err(OAuthError::Provider(format!(
                "its {what} holds a character a token cannot (a control character, a space or non-ASCII); nothing was stored"
            )));
        }
    }
    if access_token.is_empty() {
        return Err(OAuthError::Provider("its access_token is empty; nothing was stored".into()));
    }
    Ok(Credential {
        access_token,
        refresh_token,
        token_type: t.token_type().as_ref().to_string(),
        expires_at: expiry(now, t.expires_in()),
        scopes,
        account_label: String::new(),
        connected_at: now,
        ..Default::default()
    })
}

type TokenRequestError = oauth2::RequestTokenError<Unreachable, oauth2::basic::BasicErrorResponse>;

/// A failed token request: unreachable (named), or what the provider said.
fn token_error(e: TokenRequestError) -> OAuthError {
    match e {
        oauth2::RequestTokenError::Request(u) => OAuthError::Unreachable(u),
        other => OAuthError::Provider(other.to_string()),
    }
}

impl PendingAuths {
    /// Starts an authorization: the URL to open (with `state` and the S256 challenge).
    pub fn start(
        &self,
        d: &ConnectorDef,
        redirect_uri: &str,
        run_id: &str,
        surface_id: &str,
        now: i64,
    ) -> Result<(String, String), OAuthError> {
        if let Some(reason) = d.unavailable_reason() {
            return Err(OAuthError::Config(reason));
        }
        let c = client(d, redirect_uri)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut req = c
            .authorize_url(CsrfToken::new_random)
            .add_scopes(d.scopes.iter().map(|s| Scope::new(s.clone())))
            .set_pkce_challenge(challenge);
        if !d.resource.is_empty() {
            // RFC 8707: the token is for this resource only.
            req = req.add_extra_param("resource", d.resource.clone());
        }
        let (url, state) = req.url();
        let mut map = self.by_state.lock().expect("pending authorizations");
        map.retain(|_, p| now.saturating_sub(p.created_at) < PENDING_AUTH_TTL_MS);
        if map.len() >= MAX_PENDING_AUTHORIZATIONS {
            return Err(OAuthError::TooMany(MAX_PENDING_AUTHORIZATIONS));
        }
        let state = state.secret().clone();
        self.failed.lock().expect("failed authorizations").remove(&d.id);
        map.insert(
            state.clone(),
            Pending {
                connector_id: d.id.clone(),
                def: d.clone(),
                verifier,
                redirect_uri: redirect_uri.to_string(),
                run_id: run_id.into(),
                surface_id: surface_id.into(),
                created_at: now,
            },
        );
        Ok((url.to_string(), state))
    }

    /// Takes the pending authorization `state` names, if it is `connector_id`'s and not expired
    /// (single use: a second callback with the same state finds nothing).
    pub fn take(&self, connector_id: &str, state: &str, now: i64) -> Result<Pending, OAuthError> {
        self.take_if(state, now, |id| id == connector_id)
    }

    /// Takes the pending authorization `state` names if `owned` accepts its id.
    pub fn take_if(&self, state: &str, now: i64, owned: impl Fn(&str) -> bool) -> Result<Pending, OAuthError> {
        let mut map = self.by_state.lock().expect("pending authorizations");
        let found = map.get(state).is_some_and(|p| owned(&p.connector_id));
        let p = found.then(|| map.remove(state)).flatten().ok_or(OAuthError::UnknownState)?;
        if now.saturating_sub(p.created_at) >= PENDING_AUTH_TTL_MS {
            return Err(OAuthError::UnknownState);
        }
        Ok(p)
    }

    /// Forgets every pending authorization of `connector_id`; how many there were.
    pub fn cancel(&self, connector_id: &str) -> usize {
        let mut map = self.by_state.lock().expect("pending authorizations");
        let before = map.len();
        map.retain(|_, p| p.connector_id != connector_id);
        before - map.len()
    }

    /// Records that an authorization of `id` ended without a connection (the callback failed),
    /// keeping at most [`MAX_PENDING_AUTHORIZATIONS`] ids (the oldest go first).
    pub fn record_failure(&self, id: &str, code: Option<&'static str>, message: String, now: i64) {
        let mut map = self.failed.lock().expect("failed authorizations");
        map.retain(|_, f| now.saturating_sub(f.at) < PENDING_AUTH_TTL_MS);
        while map.len() >= MAX_PENDING_AUTHORIZATIONS && !map.contains_key(id) {
            let Some(oldest) = map.iter().min_by_key(|(_, f)| f.at).map(|(k, _)| k.clone()) else { break };
            map.remove(&oldest);
        }
        map.insert(id.to_string(), Failure { code, message, at: now });
    }

    /// Forgets `id`'s failure (it connected).
    pub fn clear_failure(&self, id: &str) {
        self.failed.lock().expect("failed authorizations").remove(id);
    }

    /// The last failed authorization of `id` since its last start, if recent.
    pub fn failure(&self, id: &str, now: i64) -> Option<Failure> {
        let map = self.failed.lock().expect("failed authorizations");
        map.get(id).filter(|f| now.saturating_sub(f.at) < PENDING_AUTH_TTL_MS).cloned()
    }

    /// How many authorizations of `connector_id` wait.
    pub fn waiting(&self, connector_id: &str, now: i64) -> usize {
        let map = self.by_state.lock().expect("pending authorizations");
        map.values().filter(|p| p.connector_id == connector_id && now - p.created_at < PENDING_AUTH_TTL_MS).count()
    }
}

/// Exchanges `code` (with the pending authorization's verifier) for tokens. Blocking.
pub fn exchange(d: &ConnectorDef, p: Pending, code: &str, now: i64) -> Result<Credential, OAuthError> {
    let c = client(d, &p.redirect_uri)?;
    let mut req = c.exchange_code(AuthorizationCode::new(code.to_string())).set_pkce_verifier(p.verifier);
    if !d.resource.is_empty() {
        req = req.add_extra_param("resource", d.resource.clone());
    }
    let t = req.request(&http).map_err(token_error)?;
    to_credential(&t, d, now)
}

/// Refreshes `cred` with its refresh token. Blocking.
pub fn refresh(d: &ConnectorDef, cred: &Credential, now: i64) -> Result<Credential, OAuthError> {
    let c = client(d, "http://127.0.0.1/")?;
    let rt = RefreshToken::new(cred.refresh_token.clone());
    let mut req = c.exchange_refresh_token(&rt);
    if !d.resource.is_empty() {
        req = req.add_extra_param("resource", d.resource.clone());
    }
    let t = req.request(&http).map_err(token_error)?;
    let mut next = to_credential(&t, d, now)?;
    if next.refresh_token.is_empty() {
        next.refresh_token = cred.refresh_token.clone();
    }
    next.account_label = cred.account_label.clone();
    next.connected_at = cred.connected_at;
    next.token_url = cred.token_url.clone();
    next.client_id = cred.client_id.clone();
    next.resource = cred.resource.clone();
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn expires_in_is_clamped_never_wrapped() {
        let now = 1_800_000_000_000;
        assert_eq!(expiry(now, None), 0);
        assert_eq!(expiry(now, Some(Duration::from_secs(3600))), now + 3_600_000);
        // 2^64 - 1 seconds: a year on, not "expired a second ago".
        assert_eq!(expiry(now, Some(Duration::from_secs(u64::MAX))), now + MAX_TOKEN_LIFETIME_MS);
        assert_eq!(expiry(i64::MAX - 5, Some(Duration::from_secs(u64::MAX))), i64::MAX);
    }

    #[test]
    fn a_token_with_cr_lf_is_refused_without_being_quoted() {
        let def: ConnectorDef = serde_json::from_value(serde_json::json!({
            "id": "x", "name": "X", "authorizeUrl": "http://127.0.0.1/a", "tokenUrl": "http://127.0.0.1/t",
            "apiBaseUrl": "http://127.0.0.1/api", "tools": {} }))
        .unwrap();
        let t: oauth2::basic::BasicTokenResponse = serde_json::from_value(serde_json::json!({
            "access_token": "sekret-part\r\nX-Injected: 1", "token_type": "bearer", "expires_in": u64::MAX }))
        .unwrap();
        let e = to_credential(&t, &def, 0).expect_err("refused").to_string();
        assert!(e.contains("access_token") && !e.contains("sekret") && !e.contains("Injected"), "{e}");
        let t: oauth2::basic::BasicTokenResponse = serde_json::from_value(serde_json::json!({
            "access_token": "ok-token", "token_type": "bearer", "expires_in": u64::MAX }))
        .unwrap();
        assert_eq!(to_credential(&t, &def, 7).unwrap().expires_at, 7 + MAX_TOKEN_LIFETIME_MS);
    }
}
