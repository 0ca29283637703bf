//! GenUI routes: a run's surfaces, one surface with its spec, answering, requests from the agent,
//! a project's remembered answers, revoke and (bulk) prefill.

use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::error::{ApiError, ApiResult};
use super::openapi::schemas::{
    ErrorBody, PagingParams, PrefillDone, Revoked, SurfaceAnswered, SurfaceList, SurfaceRequested, SurfaceShow,
};
use super::paging::Paging;
use super::table::Routes;
use super::{blocking, AppState};
use crate::engine::apply::ApplyRequest;
use crate::engine::genui::{row_json, Raised};
use crate::engine::WorkError;

pub fn routes() -> Routes {
    Routes::new()
        .get("/api/runs/{id}/genui", run_surfaces)
        .get("/api/runs/{id}/genui/{surface}", run_surface)
        .post("/api/runs/{id}/genui/{surface}/respond", respond)
        .post("/api/runs/{id}/genui/{surface}/request", request)
        .get("/api/projects/{id}/genui", project_surfaces)
        .post("/api/projects/{id}/genui/prefill", prefill)
        .post("/api/projects/{id}/genui/{surface}/revoke", revoke)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(run_surfaces, run_surface, respond, request, project_surfaces, prefill, revoke))]
pub(super) struct Api;

use super::body::{JsonBody, OptionalJson};

/// A run's surface rows, oldest first (by the run's stream version), paged.
#[utoipa::path(get, path = "/api/runs/{id}/genui", tag = "genui", params(("id" = String, Path, description = "Run id"), PagingParams),
    responses((status = 200, body = SurfaceList), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn run_surfaces(State(s): State<AppState>, Path(id): Path<String>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("run-genui")?;
    let v = blocking(move || {
        let mut v = s.engine.run_surfaces(&id, &req)?.map(|r| row_json(&r)).to_json("surfaces");
        v["runId"] = json!(id);
        Ok(v)
    })
    .await?;
    Ok(Json(v))
}

/// The latest row of a surface in the run, with the surface's spec from the snapshot.
#[utoipa::path(get, path = "/api/runs/{id}/genui/{surface}", tag = "genui", params(("id" = String, Path, description = "Run id"), ("surface" = String, Path, description = "Surface id (declared by the run's snapshot)")),
    responses((status = 200, body = SurfaceShow), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn run_surface(State(s): State<AppState>, Path((id, surface)): Path<(String, String)>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let run = s.engine.run_info(&id)?;
        let spec = s.engine.snapshot_surfaces(&run.snapshot_id)?.into_iter().find(|x| x["id"] == surface.as_str());
        let Some(spec) = spec else {
            return Err(
                WorkError::invalid("surfaceId", format!("the run's snapshot declares no surface {surface:?}")).into()
            );
        };
        let row = s.engine.latest_run_surface(&id, &surface)?;
        Ok(json!({ "runId": id, "surface": row.as_ref().map(row_json), "spec": spec }))
    })
    .await?;
    Ok(Json(v))
}

/// An answer to a waiting surface (checked against the surface's JSON Schema).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RespondBody {
    /// The answer; `null` (or none) is no answer and is refused — to pass on it, `skip: true`.
    #[serde(default)]
    value: Value,
    /// Pass on the surface on purpose (recorded as a `null` answer); `value` must then be absent.
    #[serde(default)]
    skip: bool,
    /// `user` (default), `agent`, `prefill`, …
    responded_by: Option<String>,
}

/// Answers a waiting surface.
#[utoipa::path(post, path = "/api/runs/{id}/genui/{surface}/respond", tag = "genui", params(("id" = String, Path, description = "Run id"), ("surface" = String, Path, description = "Surface id (declared by the run's snapshot)")),
    request_body = RespondBody, responses((status = 200, body = SurfaceAnswered), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn respond(
    State(s): State<AppState>,
    Path((id, surface)): Path<(String, String)>,
    JsonBody(b): JsonBody<RespondBody>,
) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let by = b.responded_by.as_deref().unwrap_or("user");
        let row = match b.skip {
            true if !b.value.is_null() => {
                return Err(ApiError::bad_request("skip", "skip passes on the surface: send it without a value"))
            }
            true => s.engine.skip_surface(&id, &surface, by)?,
            false => s.engine.respond_surface(&id, &surface, b.value, by)?,
        };
        Ok(json!({ "ok": true, "surface": row_json(&row) }))
    })
    .await?;
    Ok(Json(v))
}

/// How the agent asks (optional body).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RequestBody {
    kind: Option<String>,
    atom: Option<String>,
    /// A choice's options, proposed by the agent when the manifest leaves its pick open (the
    /// direction picker): strings or `{value, label?, description?}`, 2 to 12.
    #[schema(value_type = Option<Vec<Object>>)]
    options: Option<Value>,
}

/// The agent asks through a declared surface; 403 `genui-surface-refused` (recorded) otherwise.
#[utoipa::path(post, path = "/api/runs/{id}/genui/{surface}/request", tag = "genui", params(("id" = String, Path, description = "Run id"), ("surface" = String, Path, description = "Surface id (declared by the run's snapshot)")),
    request_body(content = Option<RequestBody>, content_type = "application/json"),
    responses((status = 200, body = SurfaceRequested), (status = 400, body = ErrorBody),
        (status = 403, description = "`genui-surface-refused` (recorded)", body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn request(
    State(s): State<AppState>,
    Path((id, surface)): Path<(String, String)>,
    OptionalJson(b): OptionalJson<RequestBody>,
) -> ApiResult<Json<Value>> {
    let b = b.unwrap_or_default();
    let v = blocking(move || {
        let raised =
            s.engine.request_surface(&id, &surface, b.kind.as_deref(), b.atom.as_deref(), b.options.as_ref())?;
        let row = s.engine.latest_run_surface(&id, &surface)?;
        let cached = matches!(raised, Raised::Cached);
        Ok(json!({ "ok": true, "cached": cached, "surface": row.as_ref().map(row_json) }))
    })
    .await?;
    Ok(Json(v))
}

/// A project's surface rows (remembered answers included), oldest first, paged.
#[utoipa::path(get, path = "/api/projects/{id}/genui", tag = "genui", params(("id" = String, Path, description = "Project id"), PagingParams),
    responses((status = 200, body = SurfaceList), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn project_surfaces(State(s): State<AppState>, Path(id): Path<String>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("project-genui")?;
    let v = blocking(move || {
        let mut v = s.engine.project_surfaces(&id, &req)?.map(|r| row_json(&r)).to_json("surfaces");
        v["projectId"] = json!(id);
        Ok(v)
    })
    .await?;
    Ok(Json(v))
}

/// Forgets a project's remembered answers of a surface.
#[utoipa::path(post, path = "/api/projects/{id}/genui/{surface}/revoke", tag = "genui",
    params(("id" = String, Path, description = "Project id"), ("surface" = String, Path, description = "Surface id")),
    responses((status = 200, body = Revoked), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn revoke(State(s): State<AppState>, Path((id, surface)): Path<(String, String)>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let n = s.engine.revoke_surface(&id, &surface)?;
        Ok(json!({ "ok": true, "projectId": id, "surfaceId": surface, "invalidated": n }))
    })
    .await?;
    Ok(Json(v))
}

/// Answers given ahead, for a snapshot's (or a plugin's) surfaces.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PrefillBody {
    /// The snapshot whose surfaces are answered …
    snapshot_id: Option<String>,
    /// … or a plugin (applied with `pluginInputs`, nothing recorded) whose surfaces are answered.
    plugin_id: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    plugin_inputs: Map<String, Value>,
    /// Bulk: surface id → answer.
    #[serde(default)]
    #[schema(value_type = Object)]
    values: Map<String, Value>,
    /// Single (the reference's form): one surface and its value.
    surface_id: Option<String>,
    value: Option<Value>,
    conversation_id: Option<String>,
    expires_at: Option<i64>,
}

#[utoipa::path(post, path = "/api/projects/{id}/genui/prefill", tag = "genui", params(("id" = String, Path, description = "Project id")),
    request_body = PrefillBody, responses((status = 200, body = PrefillDone), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn prefill(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(mut b): JsonBody<PrefillBody>,
) -> ApiResult<Json<Value>> {
    if let (Some(sid), Some(v)) = (b.surface_id.take(), b.value.take()) {
        b.values.insert(sid, v);
    }
    let v = blocking(move || {
        let (snapshot_id, surfaces) = match (&b.snapshot_id, &b.plugin_id) {
            (Some(sid), _) => (sid.clone(), s.engine.snapshot_surfaces(sid)?),
            (None, Some(pid)) => {
                let req = ApplyRequest { inputs: b.plugin_inputs.clone(), ..Default::default() };
                let applied = s.engine.apply(pid, &req).map_err(WorkError::from)?;
                (String::new(), applied["genuiSurfaces"].as_array().cloned().unwrap_or_default())
            }
            (None, None) => return Err(ApiError::bad_request("snapshotId", "give snapshotId or pluginId")),
        };
        let rows = s.engine.prefill(
            &id,
            &snapshot_id,
            &surfaces,
            &b.values,
            b.conversation_id.as_deref(),
            b.expires_at.unwrap_or(0),
        )?;
        Ok(json!({ "ok": true, "projectId": id, "surfaces": rows.iter().map(row_json).collect::<Vec<_>>() }))
    })
    .await?;
    Ok(Json(v))
}
