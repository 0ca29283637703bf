//! `/api/auth/*`: how a browser logs in to a daemon that requires a token. `POST /api/auth/login`
//! checks a token (the API token or the daemon's local token) and keeps it in an `HttpOnly;
//! SameSite=Strict; Path=/` cookie that `auth.rs` accepts wherever it accepts the bearer token
//! (page scripts cannot read it; other sites' requests do not carry it); `POST /api/auth/logout`
//! clears it; `GET /api/auth/session` says whether the request is authenticated and whether a
//! token is required, so the app knows to show the login page. These three answer without a token
//! (`auth::OPEN_API_PATHS`); the gate's Origin and `Sec-Fetch-Site` rules apply to them as to
//! every `/api/*` route.

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::auth::{cookie_name, cookie_value, token_valid, Caller};
use super::body::JsonBody;
use super::error::{ApiError, ApiResult};
use super::openapi::schemas::{ErrorBody, LoggedIn, Session};
use super::table::Routes;
use super::AppState;

pub fn routes() -> Routes {
    Routes::new().post("/api/auth/login", login).post("/api/auth/logout", logout).get("/api/auth/session", session)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(login, logout, session))]
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

/// Checks the token; a correct one is kept in an `HttpOnly; SameSite=Strict; Path=/` cookie
/// (`Set-Cookie`) that authenticates this browser's later requests. A wrong one is 401
/// `unauthorized` naming `token`, and sets nothing.
#[utoipa::path(post, path = "/api/auth/login", tag = "auth", request_body = LoginBody, security(()), responses(
    (status = 200, description = "Logged in: the response sets the login cookie", body = LoggedIn),
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
    let cookie = format!("{}={}; HttpOnly; SameSite=Strict; Path=/", cookie_name(access), cookie_value(&b.token));
    Ok(with_cookie(Json(json!({ "ok": true })).into_response(), cookie))
}

/// Clears the login cookie (an expired, empty one). Needs no token.
#[utoipa::path(post, path = "/api/auth/logout", tag = "auth", security(()), responses(
    (status = 200, description = "The response clears the login cookie", body = LoggedIn)))]
async fn logout(State(s): State<AppState>) -> Response {
    let cookie = format!("{}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0", cookie_name(&s.http.access));
    with_cookie(Json(json!({ "ok": true })).into_response(), cookie)
}

/// Whether this request carries a valid token (bearer or login cookie), and whether the daemon
/// requires one (`OD_API_TOKEN`): the web app shows the login page when it is required and
/// missing. Needs no token.
#[utoipa::path(get, path = "/api/auth/session", tag = "auth", security(()), responses(
    (status = 200, body = Session)))]
async fn session(State(s): State<AppState>, caller: Caller) -> Json<serde_json::Value> {
    Json(json!({ "authenticated": caller.authenticated, "tokenRequired": s.http.access.api_token.is_some() }))
}
