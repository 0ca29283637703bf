//! `/api/auth/*`: how a browser logs in to a daemon that requires a token. `POST /api/auth/login`
//! checks a token (the API token or the daemon's local token) and mints a login session
//! (`sessions.rs`) whose secret — never the token — an `HttpOnly; SameSite=Strict; Path=/` cookie
//! carries, with the session's `Max-Age`, and `Secure` when browsers reach the daemon over HTTPS
//! (a TLS listener, `--tls-terminated-by-proxy`, or `OD_SECURE_COOKIES`); `auth.rs` accepts it
//! wherever it accepts the bearer token (page scripts cannot read it; other sites' requests do not
//! carry it). `POST /api/auth/logout` ends the
//! session and clears the cookie; `GET /api/auth/session` says whether the request is
//! authenticated and whether a token is required, so the app knows to show the login page. These
//! three answer without a token (`auth::OPEN_API_PATHS`); the gate's Origin and `Sec-Fetch-Site`
//! rules apply to them as to every `/api/*` route. `GET /api/auth/sessions` lists the live
//! sessions and `DELETE /api/auth/sessions[/{id}]` revokes them (`od daemon sessions`): these
//! need the token.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::auth::{cookie_name, cookie_value, presented, token_valid, Caller, Presented};
use super::body::JsonBody;
use super::error::{ApiError, ApiResult};
use super::openapi::schemas::{ErrorBody, LoggedIn, Session, SessionList, SessionsRevoked};
use super::table::Routes;
use super::AppState;

pub fn routes() -> Routes {
    Routes::new()
        .post("/api/auth/login", login)
        .post("/api/auth/logout", logout)
        .get("/api/auth/session", session)
        .get("/api/auth/sessions", list)
        .delete("/api/auth/sessions", revoke_all)
        .delete("/api/auth/sessions/{id}", revoke)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(login, logout, session, list, revoke_all, revoke))]
pub(super) struct Api;

/// The token a person types on the login page.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct LoginBody {
    /// `OD_API_TOKEN`, or the daemon's local token (its discovery file).
    token: String,
}

fn with_cookie(mut res: Response, cookie: String) -> Response {
    res.headers_mut().insert(header::SET_COOKIE, HeaderValue::from_str(&cookie).expect("an encoded cookie"));
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// The login cookie's attributes: `Secure` when browsers reach the daemon over HTTPS.
fn attributes(s: &AppState) -> &'static str {
    if s.http.config.cookies_secure() {
        "HttpOnly; SameSite=Strict; Path=/; Secure"
    } else {
        "HttpOnly; SameSite=Strict; Path=/"
    }
}

/// Checks the token; a correct one mints a login session, whose secret an `HttpOnly;
/// SameSite=Strict; Path=/` cookie (`Set-Cookie`, with `Max-Age`, and `Secure` under TLS, a
/// TLS-terminating proxy or `OD_SECURE_COOKIES`) carries: it authenticates this browser's later
/// requests until it expires or is revoked. A wrong token is 401 `unauthorized` naming `token`,
/// and sets nothing.
#[utoipa::path(post, path = "/api/auth/login", tag = "auth", request_body = LoginBody, security(()), responses(
    (status = 200, description = "Logged in: the response sets the session cookie", body = LoggedIn),
    (status = 400, description = "A malformed body", body = ErrorBody),
    (status = 401, description = "Not the daemon's token (data: `{\"field\":\"token\"}`)", body = ErrorBody),
    (status = 429, description = "Too many wrong tokens from this address: `too-many-attempts`, `Retry-After`", body = ErrorBody)))]
async fn login(State(s): State<AppState>, JsonBody(b): JsonBody<LoginBody>) -> ApiResult<Response> {
    let access = &s.http.access;
    if !token_valid(access, &b.token) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "token: not this daemon's token (OD_API_TOKEN, or the local token of its daemon.json)",
        )
        .with_data(json!({ "field": "token" })));
    }
    let minted = s.http.sessions.mint();
    let max_age = (minted.info.expires_at - minted.info.created_at) / 1000;
    let cookie =
        format!("{}={}; {}; Max-Age={max_age}", cookie_name(access), cookie_value(&minted.secret), attributes(&s));
    Ok(with_cookie(Json(json!({ "ok": true })).into_response(), cookie))
}

/// Ends this browser's session (if its cookie names one) and clears the cookie (an expired,
/// empty one). Needs no token.
#[utoipa::path(post, path = "/api/auth/logout", tag = "auth", security(()), responses(
    (status = 200, description = "The session is ended and the response clears its cookie", body = LoggedIn)))]
async fn logout(State(s): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(Presented::Session(secret)) = presented(&s.http.access, &headers) {
        s.http.sessions.revoke_secret(&secret);
    }
    let cookie = format!("{}=; {}; Max-Age=0", cookie_name(&s.http.access), attributes(&s));
    with_cookie(Json(json!({ "ok": true })).into_response(), cookie)
}

/// Whether this request carries a valid token (bearer) or a live session (cookie), and whether
/// the daemon requires one (`OD_API_TOKEN`): the web app shows the login page when it is required
/// and missing. Needs no token.
#[utoipa::path(get, path = "/api/auth/session", tag = "auth", security(()), responses(
    (status = 200, body = Session)))]
async fn session(State(s): State<AppState>, caller: Caller) -> Json<serde_json::Value> {
    Json(json!({ "authenticated": caller.authenticated, "tokenRequired": s.http.access.api_token.is_some() }))
}

/// The live login sessions, oldest first: ids and times, never secrets.
#[utoipa::path(get, path = "/api/auth/sessions", tag = "auth", responses(
    (status = 200, body = SessionList), (status = 401, body = ErrorBody)))]
async fn list(State(s): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({ "sessions": s.http.sessions.list() }))
}

/// Ends every login session: every browser logs in again.
#[utoipa::path(delete, path = "/api/auth/sessions", tag = "auth", responses(
    (status = 200, body = SessionsRevoked), (status = 401, body = ErrorBody)))]
async fn revoke_all(State(s): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({ "revoked": s.http.sessions.revoke_all() }))
}

/// Ends one login session, by the id `GET /api/auth/sessions` lists.
#[utoipa::path(delete, path = "/api/auth/sessions/{id}", tag = "auth",
    params(("id" = String, Path, description = "The session's id")),
    responses((status = 200, body = SessionsRevoked), (status = 401, body = ErrorBody),
        (status = 404, description = "No live session has this id (`session-not-found`)", body = ErrorBody)))]
async fn revoke(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<serde_json::Value>> {
    if !s.http.sessions.revoke(&id) {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "session-not-found", format!("id: no live session {id:?}"))
            .with_data(json!({ "field": "id", "id": id })));
    }
    Ok(Json(json!({ "revoked": 1 })))
}
