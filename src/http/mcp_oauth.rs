//! OAuth for plugin MCP servers reached over HTTP (spec §10.3.1 `oauth.route: mcp`, upstream's
//! routes): `POST /api/mcp/oauth/start` (the authorization URL), `GET /api/mcp/oauth/callback`
//! (the authorization server's redirect back: authorized by its single-use `state`, like the
//! connector callback), `GET /api/mcp/oauth/status` and `POST /api/mcp/oauth/disconnect`.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use serde_json::Value;

use super::body::JsonBody;
use super::connectors::{failed_page, page, CallbackQuery};
use super::error::ApiResult;
use super::openapi::schemas::ErrorBody;
use super::table::Routes;
use super::{blocking, AppState};

pub fn routes() -> Routes {
    Routes::new()
        .post("/api/mcp/oauth/start", start)
        .get("/api/mcp/oauth/callback", callback)
        .get("/api/mcp/oauth/status", status)
        .post("/api/mcp/oauth/disconnect", disconnect)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(start, callback, status, disconnect))]
pub(super) struct Api;

/// Which server to authorize, and the surface the authorization answers.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StartBody {
    /// The server's `name` in the plugin's `od.context.mcp[]` (a surface's `mcpServerId`).
    server_id: String,
    /// The plugin (optional with a run: the run's).
    plugin_id: Option<String>,
    run_id: Option<String>,
    surface_id: Option<String>,
}

/// Starts authorizing a plugin's MCP server: discovers its authorization server (RFC 9728, RFC
/// 8414), registers od as a client if needed (RFC 7591), and returns the URL to open (PKCE S256,
/// single-use `state`, the server's URL as the RFC 8707 resource).
#[utoipa::path(post, path = "/api/mcp/oauth/start", tag = "connectors", request_body = StartBody,
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 429, body = ErrorBody), (status = 502, body = ErrorBody)))]
async fn start(State(s): State<AppState>, JsonBody(b): JsonBody<StartBody>) -> ApiResult<Json<Value>> {
    let base =
        format!("{}://{}", s.http.config.scheme(), s.listen.get().cloned().unwrap_or_else(|| "127.0.0.1".into()));
    let (run, surface) = (b.run_id.unwrap_or_default(), b.surface_id.unwrap_or_default());
    let v =
        blocking(move || Ok(s.engine.mcp_oauth_start(b.plugin_id.as_deref(), &b.server_id, &base, &run, &surface)?))
            .await?;
    Ok(Json(v))
}

/// Exchanges the code (with the PKCE verifier) for the server's token, stores it, and answers
/// the `oauth-prompt` surface that asked. An HTML page says how it went.
#[utoipa::path(get, path = "/api/mcp/oauth/callback", tag = "connectors", params(CallbackQuery),
    responses((status = 200, description = "Authorized", content_type = "text/html", body = String),
        (status = 400, description = "Unknown state, or the server reported an error", content_type = "text/html", body = String),
        (status = 502, description = "The token exchange failed", content_type = "text/html", body = String)))]
async fn callback(State(s): State<AppState>, Query(q): Query<CallbackQuery>) -> Response {
    let Some(state) = q.state.filter(|s| !s.is_empty()) else {
        return page(StatusCode::BAD_REQUEST, "Not authorized", "the answer has no state");
    };
    if let Some(err) = q.error {
        let _ = s.engine.connectors().pending.take_if(&state, s.clock.now_ms(), |id| id.starts_with("mcp:"));
        let detail = format!("{err}: {}", q.error_description.unwrap_or_default());
        return page(StatusCode::BAD_REQUEST, "Not authorized", &detail);
    }
    let Some(code) = q.code.filter(|c| !c.is_empty()) else {
        return page(StatusCode::BAD_REQUEST, "Not authorized", "the answer has no code");
    };
    let engine = s.engine.clone();
    match tokio::task::spawn_blocking(move || engine.mcp_oauth_complete(&state, &code)).await {
        Ok(Ok(v)) => page(
            StatusCode::OK,
            &format!("Authorized MCP server {}", v["serverId"].as_str().unwrap_or("")),
            &format!("Plugin {}: {}", v["pluginId"].as_str().unwrap_or(""), v["url"].as_str().unwrap_or("")),
        ),
        Ok(Err(e)) => failed_page(e, "Not authorized"),
        Err(_) => page(StatusCode::INTERNAL_SERVER_ERROR, "Not authorized", "internal error"),
    }
}

/// One server of one plugin.
#[derive(Deserialize, utoipa::ToSchema, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ServerRef {
    plugin_id: String,
    server_id: String,
}

/// Whether the server holds a token: `{connected, expiresAt, scope, savedAt, …}`.
#[utoipa::path(get, path = "/api/mcp/oauth/status", tag = "connectors", params(ServerRef),
    responses((status = 200, body = Object), (status = 400, body = ErrorBody)))]
async fn status(State(s): State<AppState>, Query(q): Query<ServerRef>) -> ApiResult<Json<Value>> {
    Ok(Json(blocking(move || Ok(s.engine.mcp_oauth_status(&q.plugin_id, &q.server_id)?)).await?))
}

/// Deletes the server's token (`mcp_server_deauthorized`).
#[utoipa::path(post, path = "/api/mcp/oauth/disconnect", tag = "connectors", request_body = ServerRef,
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn disconnect(State(s): State<AppState>, JsonBody(b): JsonBody<ServerRef>) -> ApiResult<Json<Value>> {
    Ok(Json(blocking(move || Ok(s.engine.mcp_oauth_disconnect(&b.plugin_id, &b.server_id)?)).await?))
}
