//! Agent-tool routes: the catalog (`GET /api/tools`, `/api/tools/search` (GET query or POST body),
//! `GET|DELETE /api/tools/:name`, `POST /api/tools/import`, `POST /api/tools/index`), calls
//! (`POST /api/tools/call`, `POST /api/tools/:name/call`), a run's manifest and browser actions
//! (`GET /api/runs/:id/tools/manifest`, `GET /api/runs/:id/actions`,
//! `POST /api/runs/:runId/actions/:invocationId/result`) and browser sessions' advertisements
//! (`PUT|POST|GET|DELETE /api/browser-sessions/:id`).

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, Method, Request, StatusCode};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use tower::ServiceExt;

use super::auth::Caller;
use super::body::{JsonBody, OptionalJson};
use super::error::{ApiError, ApiQuery, ApiResult};
use super::openapi::schemas::{
    BrowserSession, ErrorBody, PagingParams, RunActions, ToolCalled, ToolRemoved, ToolSearchResult,
};
use super::paging::Paging;
use super::table::Routes;
use super::{blocking, AppState};
use crate::tools::browser::Outcome;
use crate::tools::catalog::SearchQuery;
use crate::tools::exec::{interpret, plan, Body as CallBody};
use crate::tools::ToolError;

pub fn routes() -> Routes {
    Routes::new()
        .get("/api/tools", list_get)
        .get("/api/tools/search", search_get)
        .post("/api/tools/search", search_post)
        .limited(
            Method::POST,
            "/api/tools/import",
            import,
            "MAX_TOOL_IMPORT_BYTES",
            crate::limits::MAX_TOOL_IMPORT_BYTES,
        )
        .post("/api/tools/index", index)
        .post("/api/tools/call", call)
        .get("/api/tools/{name}", show)
        .delete("/api/tools/{name}", remove)
        .post("/api/tools/{name}/call", call_named)
        .get("/api/runs/{id}/tools/manifest", manifest)
        .get("/api/runs/{id}/actions", actions)
        .post("/api/runs/{id}/actions/{invocation}/result", result)
        .get("/api/browser-sessions/{id}", session)
        .put("/api/browser-sessions/{id}", advertise)
        .post("/api/browser-sessions/{id}", advertise)
        .delete("/api/browser-sessions/{id}", close)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(
    list_get,
    search_get,
    search_post,
    import,
    index,
    call,
    show,
    remove,
    call_named,
    manifest,
    actions,
    result,
    session,
    advertise,
    close
))]
pub(super) struct Api;

impl From<ToolError> for ApiError {
    fn from(e: ToolError) -> Self {
        let (status, data) = match &e {
            ToolError::Work(_) | ToolError::Apply(_) | ToolError::Store(_) => {
                return match e {
                    ToolError::Work(w) => w.into(),
                    ToolError::Apply(a) => a.into(),
                    ToolError::Store(s) => s.into(),
                    _ => unreachable!("matched above"),
                }
            }
            ToolError::Invalid { field, .. } => (StatusCode::BAD_REQUEST, json!({ "field": field })),
            ToolError::NotFound(n) => (StatusCode::NOT_FOUND, json!({ "name": n })),
            ToolError::InvocationNotFound { run_id, invocation_id } => {
                (StatusCode::NOT_FOUND, json!({ "runId": run_id, "invocationId": invocation_id }))
            }
            ToolError::InvocationResolved { invocation_id, status } => {
                (StatusCode::CONFLICT, json!({ "invocationId": invocation_id, "status": status }))
            }
            ToolError::NotExecutable { name, .. } => (StatusCode::UNPROCESSABLE_ENTITY, json!({ "name": name })),
            ToolError::Failed { name, status, .. } => {
                (StatusCode::BAD_GATEWAY, json!({ "name": name, "status": status }))
            }
            ToolError::Server { plugin_id, server, .. } | ToolError::ServerTls { plugin_id, server, .. } => {
                (StatusCode::BAD_GATEWAY, json!({ "pluginId": plugin_id, "server": server }))
            }
            ToolError::McpNotAuthorized { plugin_id, server } => {
                (StatusCode::CONFLICT, json!({ "pluginId": plugin_id, "serverId": server }))
            }
            ToolError::Limit { limit, value, max } => {
                (StatusCode::PAYLOAD_TOO_LARGE, json!({ "limit": limit, "value": value, "max": max }))
            }
        };
        ApiError::new(status, e.code(), e.to_string()).with_data(data)
    }
}

/// A catalog search: words, surface, paging, and a run whose live browser tools count too.
#[derive(Deserialize, Default, utoipa::ToSchema, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct SearchIn {
    /// Words to match (also accepted as `q`).
    #[serde(alias = "q")]
    query: Option<String>,
    /// `api`, `browser` or `all`.
    surface: Option<String>,
    /// A number (POST body) or its digits (query string); checked by the search.
    #[schema(value_type = Option<u32>)]
    #[param(value_type = Option<u32>)]
    limit: Option<Value>,
    cursor: Option<String>,
    run_id: Option<String>,
    fields: Option<String>,
}

async fn do_search(s: AppState, q: SearchIn) -> ApiResult<Json<Value>> {
    let limit = match &q.limit {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| ApiError::bad_request("limit", format!("{v} is not a page size")))?,
        ),
    };
    let q = SearchQuery {
        query: q.query.unwrap_or_default(),
        surface: q.surface,
        limit,
        cursor: q.cursor,
        run_id: q.run_id.filter(|r| !r.is_empty()),
        fields: q.fields,
    };
    Ok(Json(blocking(move || Ok(s.tools.search_tools(&q)?)).await?))
}

/// The catalog by name (a search without words).
#[utoipa::path(get, path = "/api/tools", tag = "tools", params(SearchIn),
    responses((status = 200, body = ToolSearchResult), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn list_get(State(s): State<AppState>, ApiQuery(q): ApiQuery<SearchIn>) -> ApiResult<Json<Value>> {
    do_search(s, q).await
}

/// `AgentToolSearchResult`: `{tools, nextCursor?, total, truncated}`.
#[utoipa::path(get, path = "/api/tools/search", tag = "tools", params(SearchIn),
    responses((status = 200, body = ToolSearchResult), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn search_get(State(s): State<AppState>, ApiQuery(q): ApiQuery<SearchIn>) -> ApiResult<Json<Value>> {
    do_search(s, q).await
}

/// The search of `GET /api/tools/search`, with the query as a JSON body.
#[utoipa::path(post, path = "/api/tools/search", tag = "tools", request_body = SearchIn,
    responses((status = 200, body = ToolSearchResult), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn search_post(State(s): State<AppState>, JsonBody(b): JsonBody<SearchIn>) -> ApiResult<Json<Value>> {
    do_search(s, b).await
}

/// One tool: its descriptor, source and digest.
#[utoipa::path(get, path = "/api/tools/{name}", tag = "tools", params(("name" = String, Path, description = "Tool name")),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody)))]
async fn show(State(s): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(blocking(move || Ok(s.tools.tool_json(&name)?)).await?))
}

/// Removes an imported or indexed tool (od's own cannot be: 409).
#[utoipa::path(delete, path = "/api/tools/{name}", tag = "tools", params(("name" = String, Path, description = "Tool name")),
    responses((status = 200, body = ToolRemoved), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn remove(State(s): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let t = s.tools.remove_tool(&name)?;
        Ok(json!({ "ok": true, "name": t.name, "source": t.source }))
    })
    .await?;
    Ok(Json(v))
}

/// External `api` tools to add to the catalog.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ImportIn {
    /// An array of tools, `{tools: [...]}` or a JSON-RPC `tools/list` response.
    tools: Value,
    namespace: Option<String>,
    /// A label for the source (default `file`).
    source: Option<String>,
}

/// `{added, changed, unchanged, registered}`.
#[utoipa::path(post, path = "/api/tools/import", tag = "tools", request_body = ImportIn,
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
async fn import(State(s): State<AppState>, JsonBody(b): JsonBody<ImportIn>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let label = b.source.unwrap_or_else(|| "file".into());
        Ok(s.tools.import_tools(&b.tools, b.namespace.as_deref(), &label)?.json())
    })
    .await?;
    Ok(Json(v))
}

/// Which plugin's MCP servers to index (optional body; none: every plugin's).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IndexIn {
    plugin_id: Option<String>,
}

/// Indexes plugin MCP servers' tools: `{servers: [{pluginId, server, status, tools|reason}]}`.
#[utoipa::path(post, path = "/api/tools/index", tag = "tools",
    request_body(content = Option<IndexIn>, content_type = "application/json"),
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn index(
    State(s): State<AppState>,
    caller: Caller,
    OptionalJson(b): OptionalJson<IndexIn>,
) -> ApiResult<Json<Value>> {
    let pid = b.and_then(|b| b.plugin_id);
    let right = caller.exec_right();
    Ok(Json(blocking(move || Ok(s.tools.index_plugin_tools(pid.as_deref(), right)?)).await?))
}

/// A tool call.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CallIn {
    name: String,
    #[serde(default)]
    input: Value,
    run_id: Option<String>,
    timeout_ms: Option<i64>,
}

/// Sends an `api` tool's request to this daemon's own routes (the gate was passed on the way in;
/// the caller's rights travel with the request, so a tool cannot do what its caller may not).
async fn via_router(s: &AppState, caller: Caller, d: &Value, input: &Value) -> Result<Value, ApiError> {
    let name = d["name"].as_str().unwrap_or("");
    let c = plan(d, input)?;
    let req = Request::builder().method(c.method.as_str()).uri(&c.path);
    let req = match c.body {
        CallBody::None => req.body(Body::empty()),
        CallBody::Json(v) => req.header(header::CONTENT_TYPE, "application/json").body(Body::from(v.to_string())),
        CallBody::Raw(b) => req.header(header::CONTENT_TYPE, "application/octet-stream").body(Body::from(b)),
    }
    .map_err(|e| ApiError::bad_request("input", e))?;
    let mut req = req;
    req.extensions_mut().insert(caller);
    let res = super::routes(s.clone()).oneshot(req).await.map_err(|e| ApiError::bad_request("call", e))?;
    let status = res.status().as_u16();
    let ct = res.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let bytes =
        axum::body::to_bytes(res.into_body(), 64 * 1024 * 1024).await.map_err(|e| ApiError::bad_request("call", e))?;
    Ok(interpret(name, status, &ct, &bytes)?)
}

async fn do_call(s: AppState, caller: Caller, c: CallIn) -> ApiResult<Json<Value>> {
    let tools = s.tools.clone();
    let (name, run) = (c.name.clone(), c.run_id.clone().filter(|r| !r.is_empty()));
    let (d, source) = blocking(move || {
        if let Some(run) = &run {
            if let Some((_, d)) = tools.live_browser_tools(run)?.into_iter().find(|(_, d)| d["name"] == name.as_str()) {
                return Ok((d, "session".to_string()));
            }
        }
        let t = tools.tool_entry(&name)?;
        Ok((serde_json::from_str::<Value>(&t.descriptor_json).unwrap_or_default(), t.source))
    })
    .await?;
    if let (Some(run), Some(kind)) =
        (c.run_id.as_deref().filter(|r| !r.is_empty()), crate::engine::tool_gating::tool_kind(&d))
    {
        let (engine, run, name, kind) = (s.engine.clone(), run.to_string(), c.name.clone(), kind.to_string());
        blocking(move || Ok(engine.check_gating(&run, &name, &kind)?))
            .await?
            .map_err(|g| super::connectors::gated(&g))?;
    }
    if d["surface"] == "browser" {
        let run = c
            .run_id
            .filter(|r| !r.is_empty())
            .ok_or_else(|| ApiError::bad_request("runId", "a browser tool runs in a run's live session"))?;
        let r = crate::tools::browser::call(s.tools.clone(), run, c.name, c.input, c.timeout_ms, s.shutdown.clone())
            .await?;
        return Ok(Json(r));
    }
    let result = match d["origin"]["kind"].as_str() {
        Some("import") => {
            let reason = "it was imported as a catalog entry only; tools of a plugin's MCP server (od tools index) can be called".into();
            return Err(ToolError::NotExecutable { name: c.name, reason }.into());
        }
        Some("mcp") => {
            let (tools, input) = (s.tools.clone(), c.input.clone());
            let violations = crate::plugins::validator::validate_value(&d["inputSchema"], &input);
            if !violations.is_empty() {
                return Err(ApiError::bad_request("input", violations.join("; ")));
            }
            let right = caller.exec_right();
            blocking(move || Ok(tools.call_plugin_tool(&d, &input, right)?)).await?
        }
        // Only od's own tools are sent to a route of this daemon.
        _ if source == "builtin" => via_router(&s, caller, &d, &c.input).await?,
        _ => {
            let reason = format!("it comes from {source} and names no way to run it");
            return Err(ToolError::NotExecutable { name: c.name, reason }.into());
        }
    };
    Ok(Json(json!({ "ok": true, "tool": c.name, "result": result })))
}

/// Calls a tool: an `api` tool through its route (`{ok, tool, result}`), a browser tool in
/// `runId`'s live session (the `BrowserActionResult`, after its round trip).
#[utoipa::path(post, path = "/api/tools/call", tag = "tools", request_body = CallIn, responses(
    (status = 200, description = "`{ok, tool, result}`, or a browser tool's BrowserActionResult", body = ToolCalled),
    (status = 400, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    (status = 422, body = ErrorBody)))]
async fn call(State(s): State<AppState>, caller: Caller, JsonBody(b): JsonBody<CallIn>) -> ApiResult<Json<Value>> {
    do_call(s, caller, b).await
}

#[derive(Deserialize, Default, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct CallQuery {
    run_id: Option<String>,
    timeout_ms: Option<i64>,
}

/// `POST /api/tools/:name/call` with the input as the body (`?runId=` for browser tools).
#[utoipa::path(post, path = "/api/tools/{name}/call", tag = "tools", params(("name" = String, Path, description = "Tool name"), CallQuery),
    request_body(content = Option<Object>, description = "The tool's input", content_type = "application/json"),
    responses((status = 200, body = ToolCalled), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn call_named(
    State(s): State<AppState>,
    Path(name): Path<String>,
    caller: Caller,
    ApiQuery(q): ApiQuery<CallQuery>,
    OptionalJson(b): OptionalJson<Value>,
) -> ApiResult<Json<Value>> {
    let input = b.unwrap_or_else(|| json!({}));
    do_call(s, caller, CallIn { name, input, run_id: q.run_id, timeout_ms: q.timeout_ms }).await
}

/// The tools a run's agent sees.
#[utoipa::path(get, path = "/api/runs/{id}/tools/manifest", tag = "tools", params(("id" = String, Path, description = "Run id")),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody)))]
async fn manifest(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(blocking(move || Ok(s.tools.manifest(&id)?)).await?))
}

/// A run's browser actions, oldest first (by request seq), paged.
#[utoipa::path(get, path = "/api/runs/{id}/actions", tag = "tools", params(("id" = String, Path, description = "Run id"), PagingParams),
    responses((status = 200, body = RunActions), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn actions(State(s): State<AppState>, Path(id): Path<String>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("actions")?;
    let v = blocking(move || {
        let mut v = s.tools.run_actions(&id, &req)?.to_json("actions");
        v["runId"] = json!(id);
        Ok(v)
    })
    .await?;
    Ok(Json(v))
}

/// The browser's `BrowserActionResult` for a pending invocation; 404 for an unknown one, 409 for
/// one that already has its result.
#[utoipa::path(post, path = "/api/runs/{id}/actions/{invocation}/result", tag = "tools",
    params(("id" = String, Path, description = "Run id"), ("invocation" = String, Path, description = "Invocation id")),
    request_body(content = Object, description = "A BrowserActionResult: `ok` + `result`, or `error`"),
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
async fn result(
    State(s): State<AppState>,
    Path((id, inv)): Path<(String, String)>,
    JsonBody(b): JsonBody<Value>,
) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let tool = s.tools.action_tool(&id, &inv)?;
        let outcome = Outcome::from_body(&b, &inv, &tool)?;
        Ok(json!({ "ok": true, "result": s.tools.resolve_action(&id, &inv, outcome, "browser")? }))
    })
    .await?;
    Ok(Json(v))
}

/// The browser tools a session has mounted now.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AdvertiseIn {
    run_id: Option<String>,
    tools: Value,
}

/// PUSH: the browser tools the session has mounted now (the whole set), attached to `runId`.
#[utoipa::path(method(put, post), path = "/api/browser-sessions/{id}", tag = "tools", params(("id" = String, Path, description = "Browser session id")),
    request_body = AdvertiseIn, responses((status = 200, body = Object), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
async fn advertise(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<AdvertiseIn>,
) -> ApiResult<Json<Value>> {
    let v = blocking(move || Ok(s.tools.advertise(&id, b.run_id.as_deref().unwrap_or(""), &b.tools)?)).await?;
    Ok(Json(v))
}

#[utoipa::path(get, path = "/api/browser-sessions/{id}", tag = "tools", params(("id" = String, Path, description = "Browser session id")),
    responses((status = 200, body = BrowserSession), (status = 404, body = ErrorBody)))]
async fn session(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let found = s.tools.browser().read(|r| od_projections::browser::session(r, &id))?;
        let sess = found.ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "session-not-found", format!("no live browser session {id}")))?;
        let tools: Value = serde_json::from_str(&sess.tools_json).unwrap_or(Value::Null);
        Ok(json!({ "sessionId": sess.session_id, "runId": sess.run_id, "tools": tools, "advertisedAt": sess.advertised_at }))
    })
    .await?;
    Ok(Json(v))
}

#[utoipa::path(delete, path = "/api/browser-sessions/{id}", tag = "tools", params(("id" = String, Path, description = "Browser session id")),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody)))]
async fn close(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(blocking(move || Ok(s.tools.close_session(&id)?)).await?))
}
