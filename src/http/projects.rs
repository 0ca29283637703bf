//! `/api/projects*`, `/api/import/folder`, project files and artifacts, and the applied-plugin
//! snapshots (`/api/applied-plugins*`).

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use od_projections::{Project, SnapshotInfo};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::error::{ApiError, ApiQuery, ApiResult};
use super::paging::Paging;
use super::{blocking, AppState};
use crate::engine::apply::ApplyRequest;
use crate::engine::projects::NewProject;
use crate::engine::Engine;
use crate::limits::MAX_PROJECT_FILE_BYTES;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/projects", get(list).post(create))
        .route("/api/import/folder", post(import))
        .route("/api/projects/{id}", get(show).delete(delete))
        .route("/api/projects/{id}/conversations", get(conversations).post(new_conversation))
        .route("/api/projects/{id}/files", get(files))
        .route(
            "/api/projects/{id}/files/{*path}",
            limited(
                get(read_file).put(write_file).delete(delete_file),
                "MAX_PROJECT_FILE_BYTES",
                MAX_PROJECT_FILE_BYTES,
            ),
        )
        .route("/api/projects/{id}/artifacts", get(artifacts))
        .route("/api/projects/{id}/applied-plugins", get(project_snapshots))
        .route("/api/applied-plugins", get(snapshots).post(record_snapshot))
        .route("/api/applied-plugins/prune", post(prune))
        .route("/api/applied-plugins/{id}", get(snapshot))
}

use super::body::{limited, JsonBody, OptionalJson, RawBody};

/// The wire shape of a project.
pub fn project_json(e: &Engine, p: &Project) -> Value {
    json!({
        "id": p.id, "name": p.name, "dir": e.project_dir(p).to_string_lossy(),
        "appliedPluginSnapshotId": if p.snapshot_id.is_empty() { Value::Null } else { json!(p.snapshot_id) },
        "metadata": serde_json::from_str::<Value>(&p.metadata_json).unwrap_or(json!({})),
        "importedFrom": if p.imported_from.is_empty() { Value::Null } else { json!(p.imported_from) },
        "createdAt": p.created_at, "conversations": p.conversations, "runCount": p.run_count,
    })
}

/// The wire shape of a snapshot's bookkeeping.
pub fn snapshot_info_json(s: &SnapshotInfo) -> Value {
    json!({
        "snapshotId": s.snapshot_id, "pluginId": s.plugin_id, "pluginVersion": s.plugin_version,
        "manifestSourceDigest": s.manifest_source_digest, "appliedAt": s.applied_at, "status": s.status,
        "referencedBy": s.referenced_by, "refCount": s.ref_count, "unreferencedSince": s.unreferenced_since,
    })
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateBody {
    id: Option<String>,
    #[serde(default)]
    name: String,
    plugin_id: Option<String>,
    #[serde(alias = "inputs")]
    plugin_inputs: Option<Map<String, Value>>,
    #[serde(default)]
    grant_caps: Vec<String>,
    locale: Option<String>,
    applied_plugin_snapshot_id: Option<String>,
    #[serde(default)]
    metadata: Map<String, Value>,
    /// Only for `/api/import/folder`.
    path: Option<String>,
}

fn new_project(b: CreateBody) -> NewProject {
    NewProject {
        id: b.id,
        name: b.name,
        plugin_id: b.plugin_id,
        apply: ApplyRequest { inputs: b.plugin_inputs.unwrap_or_default(), grant_caps: b.grant_caps, locale: b.locale },
        snapshot_id: b.applied_plugin_snapshot_id,
        metadata: b.metadata,
        import_from: b.path.map(Into::into),
    }
}

async fn do_create(s: AppState, req: NewProject) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let c = s.engine.create_project(req)?;
        Ok(json!({ "project": project_json(&s.engine, &c.project), "conversationId": c.conversation_id,
            "appliedPluginSnapshotId": c.snapshot_id }))
    })
    .await?;
    Ok(Json(v))
}

async fn create(State(s): State<AppState>, JsonBody(b): JsonBody<CreateBody>) -> ApiResult<Json<Value>> {
    if b.path.is_some() {
        return Err(ApiError::bad_request("path", "use POST /api/import/folder to adopt a folder"));
    }
    do_create(s, new_project(b)).await
}

async fn import(State(s): State<AppState>, JsonBody(b): JsonBody<CreateBody>) -> ApiResult<Json<Value>> {
    if b.path.as_deref().is_none_or(str::is_empty) {
        return Err(ApiError::bad_request("path", "the folder to import is required"));
    }
    do_create(s, new_project(b)).await
}

/// Projects, oldest first (by creation), paged.
async fn list(State(s): State<AppState>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("projects")?;
    let v =
        blocking(move || Ok(s.engine.projects_page(&req)?.map(|p| project_json(&s.engine, &p)).to_json("projects")))
            .await?;
    Ok(Json(v))
}

async fn show(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let v = blocking(move || Ok(json!({ "project": project_json(&s.engine, &s.engine.project(&id)?) }))).await?;
    Ok(Json(v))
}

async fn delete(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let p = s.engine.delete_project(&id)?;
        Ok(json!({ "ok": true, "projectId": p.id }))
    })
    .await?;
    Ok(Json(v))
}

/// A project's conversations, oldest first (by creation), paged.
async fn conversations(State(s): State<AppState>, Path(id): Path<String>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("conversations")?;
    let v = blocking(move || {
        let mut v = s.engine.conversations_page(&id, &req)?.to_json("conversations");
        v["projectId"] = json!(id);
        Ok(v)
    })
    .await?;
    Ok(Json(v))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConversationBody {
    #[serde(default)]
    title: String,
    applied_plugin_snapshot_id: Option<String>,
}

async fn new_conversation(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<ConversationBody>,
) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let title = if b.title.is_empty() { "conversation" } else { &b.title };
        let cid = s.engine.create_conversation(&id, title, b.applied_plugin_snapshot_id.as_deref())?;
        Ok(json!({ "projectId": id, "conversationId": cid }))
    })
    .await?;
    Ok(Json(v))
}

/// The project's files by path, paged (`limit`, `cursor` → `nextCursor`): a file written meanwhile
/// lands in its place by path and never shifts a later page.
async fn files(
    State(s): State<AppState>,
    Path(id): Path<String>,
    paging: super::paging::Paging,
) -> ApiResult<Json<Value>> {
    let req = paging.req("files")?;
    let v = blocking(move || {
        let files = s.engine.list_files(&id)?;
        let page =
            crate::page::page_sorted("files", &req, files, |f| f["path"].as_str().unwrap_or("").as_bytes().to_vec());
        let mut v = page.to_json("files");
        v["projectId"] = json!(id);
        Ok(v)
    })
    .await?;
    Ok(Json(v))
}

async fn read_file(State(s): State<AppState>, Path((id, path)): Path<(String, String)>) -> ApiResult<Response> {
    let bytes = blocking(move || Ok(s.engine.read_file(&id, &path)?)).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
}

async fn write_file(
    State(s): State<AppState>,
    Path((id, path)): Path<(String, String)>,
    RawBody(bytes): RawBody,
) -> ApiResult<Json<Value>> {
    let v = blocking(move || Ok(json!({ "ok": true, "file": s.engine.write_file(&id, &path, &bytes)? }))).await?;
    Ok(Json(v))
}

async fn delete_file(State(s): State<AppState>, Path((id, path)): Path<(String, String)>) -> ApiResult<Json<Value>> {
    let v = blocking(move || Ok(json!({ "ok": true, "file": s.engine.delete_file(&id, &path)? }))).await?;
    Ok(Json(v))
}

/// A project's artifacts, oldest first (by the seq that recorded each), paged.
async fn artifacts(State(s): State<AppState>, Path(id): Path<String>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("artifacts")?;
    let v = blocking(move || {
        s.engine.project(&id)?;
        let seqs = s
            .engine
            .workspace
            .read(|w| od_projections::workspace_read::project_artifacts(w, &id, req.after.as_deref(), req.limit + 1))?;
        let items = s.engine.artifacts_at(seqs)?;
        let mut v = crate::page::page_keyed("artifacts", &req, items, false).to_json("artifacts");
        v["projectId"] = json!(id);
        Ok(v)
    })
    .await?;
    Ok(Json(v))
}

/// The snapshots a project or one of its runs references, oldest first (by recording), paged.
async fn project_snapshots(
    State(s): State<AppState>,
    Path(id): Path<String>,
    paging: Paging,
) -> ApiResult<Json<Value>> {
    let req = paging.req("project-snapshots")?;
    let v = blocking(move || {
        let mut v = s.engine.project_snapshots_page(&id, &req)?.map(|x| snapshot_info_json(&x)).to_json("snapshots");
        v["projectId"] = json!(id);
        Ok(v)
    })
    .await?;
    Ok(Json(v))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SnapshotQuery {
    plugin_id: Option<String>,
}

/// Snapshots, oldest first (by recording), optionally of one plugin (`pluginId`), paged.
async fn snapshots(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<SnapshotQuery>,
    paging: Paging,
) -> ApiResult<Json<Value>> {
    let req = paging.req("snapshots")?;
    let v = blocking(move || {
        let page = s.engine.snapshots_page(q.plugin_id.as_deref(), &req)?;
        Ok(page.map(|x| snapshot_info_json(&x)).to_json("snapshots"))
    })
    .await?;
    Ok(Json(v))
}

async fn snapshot(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let v = blocking(move || Ok(json!({ "snapshot": s.engine.snapshot(&id)? }))).await?;
    Ok(Json(v))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RecordBody {
    plugin_id: String,
    #[serde(default, alias = "pluginInputs")]
    inputs: Map<String, Value>,
    #[serde(default)]
    grant_caps: Vec<String>,
    locale: Option<String>,
}

/// Records an unreferenced snapshot (pinned later by a project or run; expires after the TTL).
async fn record_snapshot(State(s): State<AppState>, JsonBody(b): JsonBody<RecordBody>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let req = ApplyRequest { inputs: b.inputs, grant_caps: b.grant_caps, locale: b.locale };
        let id = s.engine.record_snapshot(&b.plugin_id, &req, "", "")?;
        Ok(json!({ "snapshotId": id, "snapshot": s.engine.snapshot(&id)? }))
    })
    .await?;
    Ok(Json(v))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PruneBody {
    /// Unix ms: expire every unreferenced snapshot applied before this (forced cleanup).
    before: Option<i64>,
}

async fn prune(State(s): State<AppState>, OptionalJson(b): OptionalJson<PruneBody>) -> ApiResult<Json<Value>> {
    let before = b.and_then(|b| b.before);
    let v = blocking(move || {
        let expired = s.engine.prune_snapshots(before)?;
        Ok(json!({ "ok": true, "expired": expired, "ttlDays": crate::engine::snapshots::unreferenced_ttl_days() }))
    })
    .await?;
    Ok(Json(v))
}
