//! Connector routes (spec §5, §9, §10.3.1): the catalog with status (`GET /api/connectors`,
//! `/api/connectors/{id}`), connecting an account (`POST /api/connectors/{id}/connect/start`, also
//! upstream's `/connect`; the provider sends the browser back to
//! `GET /api/connectors/oauth/callback/{id}`), cancelling and disconnecting, and the agent side:
//! `GET /api/tools/connectors/list` and `POST /api/tools/connectors/execute`, authorized by the
//! run's tool token (`Authorization: Bearer $OD_TOOL_TOKEN`), never by the API token.
//!
//! The callback is the one state-changing GET: it is reached by a cross-site redirect from the
//! provider, so it carries no od token; what authorizes it is the single-use `state` (256 bits)
//! the start handed out, bound to this connector (see `guard.rs` and `auth.rs`).

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::body::{JsonBody, OptionalJson};
use super::error::{ApiError, ApiResult};
use super::openapi::schemas::ErrorBody;
use super::table::Routes;
use super::{blocking, AppState};
use crate::connectors::oauth::OAuthError;
use crate::connectors::tool_token::TokenError;
use crate::engine::connectors::ConnectorError;

/// The callback's path prefix (open: authorized by its `state`).
pub const CALLBACK_PREFIX: &str = "/api/connectors/oauth/callback/";
/// Whether `path` is an OAuth callback (a connector's, or a plugin MCP server's): a provider's
/// cross-site redirect, authorized by its single-use `state` rather than od's token.
pub fn is_oauth_callback(path: &str) -> bool {
    path.starts_with(CALLBACK_PREFIX) || path == crate::engine::mcp_oauth::MCP_CALLBACK_PATH
}

/// Routes a tool token (not the API token) authorizes.
pub const TOOL_TOKEN_PATHS: [&str; 2] = ["/api/tools/connectors/list", "/api/tools/connectors/execute"];

pub fn routes() -> Routes {
    Routes::new()
        .get("/api/connectors", list)
        .get("/api/connectors/{id}", show)
        .post("/api/connectors/{id}/connect/start", connect_start)
        .post("/api/connectors/{id}/connect", connect_start_upstream)
        .post("/api/connectors/{id}/authorization/cancel", cancel)
        .delete("/api/connectors/{id}/connection", disconnect)
        .get("/api/connectors/oauth/callback/{id}", callback)
        .get("/api/tools/connectors/list", tools_list)
        .post("/api/tools/connectors/execute", execute)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(list, show, connect_start, connect_start_upstream, cancel, disconnect, callback, tools_list, execute))]
pub(super) struct Api;

impl From<ConnectorError> for ApiError {
    fn from(e: ConnectorError) -> Self {
        let msg = e.to_string();
        let (status, code, data) = match &e {
            ConnectorError::Work(_) => {
                let ConnectorError::Work(w) = e else { unreachable!("matched above") };
                return w.into();
            }
            ConnectorError::NotFound(id) => {
                (StatusCode::NOT_FOUND, "connector-not-found", json!({ "connectorId": id }))
            }
            ConnectorError::Unavailable { id, .. } => {
                (StatusCode::CONFLICT, "connector-unavailable", json!({ "connectorId": id }))
            }
            ConnectorError::NotConnected(id) => {
                (StatusCode::CONFLICT, "connector-not-connected", json!({ "connectorId": id }))
            }
            ConnectorError::Catalog(_) => (StatusCode::INTERNAL_SERVER_ERROR, "connector-catalog-invalid", Value::Null),
            ConnectorError::OAuth(OAuthError::UnknownState) => {
                (StatusCode::BAD_REQUEST, "oauth-state-unknown", json!({ "field": "state" }))
            }
            ConnectorError::OAuth(OAuthError::TooMany(n)) => {
                (StatusCode::TOO_MANY_REQUESTS, "too-many-authorizations", json!({ "limit": n }))
            }
            ConnectorError::OAuth(OAuthError::Config(_)) => {
                (StatusCode::CONFLICT, "connector-unavailable", Value::Null)
            }
            ConnectorError::OAuth(OAuthError::Provider(_)) => {
                (StatusCode::BAD_GATEWAY, "oauth-provider-refused", Value::Null)
            }
            // A refused certificate or downgrade by its `tls-*` code; anything else as the
            // provider's failure.
            ConnectorError::OAuth(OAuthError::Unreachable(u)) => {
                (StatusCode::BAD_GATEWAY, u.code.unwrap_or("oauth-provider-refused"), json!({ "url": u.url }))
            }
            ConnectorError::Token(t) => {
                let code = match t {
                    TokenError::Missing => "tool-token-missing",
                    TokenError::Invalid => "tool-token-invalid",
                    TokenError::Expired => "tool-token-expired",
                };
                (StatusCode::UNAUTHORIZED, code, Value::Null)
            }
            ConnectorError::NotGranted { connector_id, .. } => {
                (StatusCode::FORBIDDEN, "connector-not-granted", json!({ "connectorId": connector_id }))
            }
            ConnectorError::ToolNotAllowed { connector_id, tool, .. } => (
                StatusCode::FORBIDDEN,
                "connector-tool-not-allowed",
                json!({ "connectorId": connector_id, "toolName": tool }),
            ),
            ConnectorError::Gated(g) => return gated(g),
            ConnectorError::Call(c) => match c {
                crate::connectors::call::CallError::MissingParam(p)
                | crate::connectors::call::CallError::NotASegment(p) => {
                    (StatusCode::BAD_REQUEST, "invalid-input", json!({ "field": format!("input.{p}") }))
                }
                crate::connectors::call::CallError::NotObject => {
                    (StatusCode::BAD_REQUEST, "invalid-input", json!({ "field": "input" }))
                }
                crate::connectors::call::CallError::Unreachable(u) => {
                    (StatusCode::BAD_GATEWAY, u.code.unwrap_or("connector-call-failed"), json!({ "url": u.url }))
                }
                _ => (StatusCode::BAD_GATEWAY, "connector-call-failed", Value::Null),
            },
            ConnectorError::Provider { status, body } => (
                StatusCode::BAD_GATEWAY,
                "connector-call-failed",
                json!({ "providerStatus": status, "providerBody": body }),
            ),
        };
        ApiError::new(status, code, msg).with_data(data)
    }
}

/// The 403 of a call the run's current stage does not allow (`tool-gated`).
pub fn gated(g: &crate::engine::tool_gating::ToolGated) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "tool-gated", g.to_string()).with_data(json!({
        "runId": g.run_id, "stageId": g.stage_id, "tool": g.tool, "kind": g.kind, "allowed": g.allowed }))
}

/// The connector catalog with each connector's status and account.
#[utoipa::path(get, path = "/api/connectors", tag = "connectors",
    responses((status = 200, body = Object), (status = 500, body = ErrorBody)))]
async fn list(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    let v = blocking(move || Ok(s.engine.connectors_list()?)).await?;
    Ok(Json(json!({ "connectors": v })))
}

/// One connector.
#[utoipa::path(get, path = "/api/connectors/{id}", tag = "connectors", params(("id" = String, Path, description = "Connector id")),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody)))]
async fn show(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let v = blocking(move || Ok(s.engine.connector_info(&id)?)).await?;
    Ok(Json(json!({ "connector": v })))
}

/// What a connection answers, when it was asked for by an `oauth-prompt` surface.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StartBody {
    run_id: Option<String>,
    surface_id: Option<String>,
}

async fn start(s: AppState, id: String, b: StartBody) -> ApiResult<Json<Value>> {
    let base =
        format!("{}://{}", s.http.config.scheme(), s.listen.get().cloned().unwrap_or_else(|| "127.0.0.1".into()));
    let (run, surface) = (b.run_id.unwrap_or_default(), b.surface_id.unwrap_or_default());
    let v = blocking(move || Ok(s.engine.connect_start(&id, &base, &run, &surface)?)).await?;
    Ok(Json(v))
}

/// Starts connecting an account: the provider's authorization URL (PKCE S256, single-use
/// `state`) to open in a browser; the provider sends the browser back to the callback.
#[utoipa::path(post, path = "/api/connectors/{id}/connect/start", tag = "connectors",
    params(("id" = String, Path, description = "Connector id")), request_body(content = Option<StartBody>, content_type = "application/json"),
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 429, body = ErrorBody)))]
async fn connect_start(
    State(s): State<AppState>,
    Path(id): Path<String>,
    OptionalJson(b): OptionalJson<StartBody>,
) -> ApiResult<Json<Value>> {
    start(s, id, b.unwrap_or_default()).await
}

/// Upstream's name for [`connect_start`].
#[utoipa::path(post, path = "/api/connectors/{id}/connect", tag = "connectors",
    params(("id" = String, Path, description = "Connector id")), request_body(content = Option<StartBody>, content_type = "application/json"),
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 429, body = ErrorBody)))]
async fn connect_start_upstream(
    State(s): State<AppState>,
    Path(id): Path<String>,
    OptionalJson(b): OptionalJson<StartBody>,
) -> ApiResult<Json<Value>> {
    start(s, id, b.unwrap_or_default()).await
}

/// Forgets the connector's authorizations still waiting for their callback.
#[utoipa::path(post, path = "/api/connectors/{id}/authorization/cancel", tag = "connectors",
    params(("id" = String, Path, description = "Connector id")),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody)))]
async fn cancel(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        s.engine.connectors().pending.cancel(&id);
        Ok(s.engine.connector_info(&id)?)
    })
    .await?;
    Ok(Json(json!({ "connector": v })))
}

/// Disconnects the account: its tokens are deleted, `connector_disconnected` recorded.
#[utoipa::path(delete, path = "/api/connectors/{id}/connection", tag = "connectors",
    params(("id" = String, Path, description = "Connector id")),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn disconnect(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let v = blocking(move || Ok(s.engine.disconnect(&id)?)).await?;
    Ok(Json(json!({ "connector": v })))
}

/// An authorization server's redirect back (a connector's or an MCP server's).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct CallbackQuery {
    pub state: Option<String>,
    pub code: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

pub(super) fn page(status: StatusCode, title: &str, detail: &str) -> Response {
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t}</title></head><body>\
         <h1>{t}</h1><p>{d}</p><p>You can close this window.</p></body></html>",
        t = escape(title),
        d = escape(detail)
    );
    let headers = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CONTENT_SECURITY_POLICY, "default-src 'none'; frame-ancestors 'none'"),
        (header::CACHE_CONTROL, "no-store"),
        (header::REFERRER_POLICY, "no-referrer"),
    ];
    (status, headers, html).into_response()
}

/// The provider sends the browser here after the user approved (or refused): the code is
/// exchanged for tokens with the PKCE verifier, the account is stored, and the `oauth-prompt`
/// surface that asked is answered. An HTML page says how it went.
#[utoipa::path(get, path = "/api/connectors/oauth/callback/{id}", tag = "connectors",
    params(("id" = String, Path, description = "Connector id"), CallbackQuery),
    responses((status = 200, description = "Connected", content_type = "text/html", body = String),
        (status = 400, description = "Unknown state, or the provider reported an error", content_type = "text/html", body = String),
        (status = 502, description = "The token exchange failed", content_type = "text/html", body = String)))]
async fn callback(State(s): State<AppState>, Path(id): Path<String>, Query(q): Query<CallbackQuery>) -> Response {
    let Some(state) = q.state.filter(|s| !s.is_empty()) else {
        return page(StatusCode::BAD_REQUEST, "Not connected", "the provider's answer has no state");
    };
    if let Some(err) = q.error {
        // The user refused (or the provider failed): the authorization is over.
        let _ = s.engine.connectors().pending.take(&id, &state, s.clock.now_ms());
        let detail = format!("{err}: {}", q.error_description.unwrap_or_default());
        return page(StatusCode::BAD_REQUEST, "Not connected", &detail);
    }
    let Some(code) = q.code.filter(|c| !c.is_empty()) else {
        return page(StatusCode::BAD_REQUEST, "Not connected", "the provider's answer has no code");
    };
    let engine = s.engine.clone();
    let id2 = id.clone();
    let done = tokio::task::spawn_blocking(move || engine.connect_complete(&id2, &state, &code)).await;
    match done {
        Ok(Ok(v)) => {
            let label = v["accountLabel"].as_str().unwrap_or("").to_string();
            page(
                StatusCode::OK,
                &format!("Connected to {}", v["name"].as_str().unwrap_or(&id)),
                &format!("Account: {label}"),
            )
        }
        Ok(Err(e)) => failed_page(e, "Not connected"),
        Err(_) => page(StatusCode::INTERNAL_SERVER_ERROR, "Not connected", "internal error"),
    }
}

/// The callback's page for a completion that failed: a refused certificate or downgrade is named
/// (its code and the URL: the user must fix trust, not retry); anything else says to start again.
pub(super) fn failed_page(e: ConnectorError, title: &str) -> Response {
    let detail = match &e {
        ConnectorError::OAuth(OAuthError::Unreachable(u)) if u.code.is_some() => {
            format!("{}: {}", u.code.unwrap_or_default(), u.message)
        }
        _ => "the authorization could not be completed; start again from od".to_string(),
    };
    let status = ApiError::from(e).status;
    let status = if status.is_server_error() { StatusCode::BAD_GATEWAY } else { status };
    page(status, title, &detail)
}

fn bearer(h: &HeaderMap) -> Option<String> {
    let v = h.get(header::AUTHORIZATION)?.to_str().ok()?;
    v.strip_prefix("Bearer ").map(|t| t.trim().to_string()).filter(|t| !t.is_empty())
}

/// The connectors the tool token's run may call (its plugin's `od.connectors`, with status).
#[utoipa::path(get, path = "/api/tools/connectors/list", tag = "connectors",
    responses((status = 200, body = Object), (status = 401, body = ErrorBody)))]
async fn tools_list(State(s): State<AppState>, headers: HeaderMap) -> ApiResult<Json<Value>> {
    let token = bearer(&headers);
    Ok(Json(blocking(move || Ok(s.engine.connector_tools_for(token.as_deref())?)).await?))
}

/// A connector tool call.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExecuteBody {
    connector_id: String,
    tool_name: String,
    #[schema(value_type = Option<Object>)]
    input: Option<Value>,
}

/// Calls a connector tool for the tool token's run. The gate is re-checked on every call: the
/// run is live, its plugin (restricted ones) holds `connector:<id>` (403 `connector-not-granted`),
/// the tool is the connector's and declared by the plugin (403 `connector-tool-not-allowed`).
#[utoipa::path(post, path = "/api/tools/connectors/execute", tag = "connectors", request_body = ExecuteBody,
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 502, body = ErrorBody)))]
async fn execute(
    State(s): State<AppState>,
    headers: HeaderMap,
    JsonBody(b): JsonBody<ExecuteBody>,
) -> ApiResult<Json<Value>> {
    let token = bearer(&headers);
    let input = b.input.unwrap_or_else(|| json!({}));
    let v =
        blocking(move || Ok(s.engine.connector_execute(token.as_deref(), &b.connector_id, &b.tool_name, &input)?))
            .await?;
    Ok(Json(v))
}
