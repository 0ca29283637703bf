//! `/api/projects*`, `/api/import/folder`, project files and artifacts, and the applied-plugin
//! snapshots (`/api/applied-plugins*`).

use axum::extract::{Path, State};
use axum::http::Method;
use axum::response::Response;
use axum::Json;
use od_projections::{Project, SnapshotInfo};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::auth::Caller;
use super::error::{ApiError, ApiQuery, ApiResult};
use super::file_response::{self, Disposition};
use super::openapi::schemas::{
    ConversationMessages, Conversations, ErrorBody, FileChanged, NewConversation, PagingParams, ProjectCreated,
    ProjectDeleted, ProjectFiles, ProjectList, ProjectShow, Pruned, SnapshotList, SnapshotRecorded, SnapshotShow,
};
use super::paging::Paging;
use super::table::Routes;
use super::{blocking, AppState};
use crate::engine::apply::ApplyRequest;
use crate::engine::projects::NewProject;
use crate::engine::Engine;
use crate::limits::MAX_PROJECT_FILE_BYTES;

pub fn routes() -> Routes {
    const FILE: &str = "/api/projects/{id}/files/{*path}";
    const LIMIT: &str = "MAX_PROJECT_FILE_BYTES";
    Routes::new()
        .get("/api/projects", list)
        .post("/api/projects", create)
        .post("/api/import/folder", import)
        .get("/api/projects/{id}", show)
        .delete("/api/projects/{id}", delete)
        .get("/api/projects/{id}/conversations", conversations)
        .post("/api/projects/{id}/conversations", new_conversation)
        .get("/api/projects/{id}/conversations/{cid}/messages", conversation_messages)
        .get("/api/projects/{id}/files", files)
        .get("/api/files/diff", files_diff)
        .limited(Method::GET, FILE, read_file, LIMIT, MAX_PROJECT_FILE_BYTES)
        .limited(Method::PUT, FILE, write_file, LIMIT, MAX_PROJECT_FILE_BYTES)
        .limited(Method::DELETE, FILE, delete_file, LIMIT, MAX_PROJECT_FILE_BYTES)
        .limited(Method::GET, "/api/runs/{id}/files/{*path}", run_file, LIMIT, MAX_PROJECT_FILE_BYTES)
        .get("/api/projects/{id}/artifacts", artifacts)
        .get("/api/projects/{id}/applied-plugins", project_snapshots)
        .get("/api/applied-plugins", snapshots)
        .post("/api/applied-plugins", record_snapshot)
        .post("/api/applied-plugins/prune", prune)
        .get("/api/applied-plugins/{id}", snapshot)
        .get("/api/applied-plugins/{id}/export", snapshot_export)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(
    snapshot_export,
    files_diff,
    list,
    create,
    import,
    show,
    delete,
    conversations,
    new_conversation,
    conversation_messages,
    files,
    read_file,
    write_file,
    delete_file,
    run_file,
    artifacts,
    project_snapshots,
    snapshots,
    record_snapshot,
    prune,
    snapshot
))]
pub(super) struct Api;

use super::body::{JsonBody, OptionalJson, RawBody};

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

/// A new project (`POST /api/projects`), or a folder adopted as one (`POST /api/import/folder`,
/// which needs `path`). With `pluginId`, the plugin is applied and its snapshot pinned.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateBody {
    id: Option<String>,
    #[serde(default)]
    name: String,
    plugin_id: Option<String>,
    /// Also accepted as `inputs`.
    #[serde(alias = "inputs")]
    #[schema(value_type = Option<Object>)]
    plugin_inputs: Option<Map<String, Value>>,
    #[serde(default)]
    grant_caps: Vec<String>,
    locale: Option<String>,
    /// Context chips removed before the project's snapshot (as on `POST /api/runs`).
    #[serde(default)]
    exclude_context: Vec<String>,
    applied_plugin_snapshot_id: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    metadata: Map<String, Value>,
    /// Only for `/api/import/folder`.
    path: Option<String>,
    /// Upstream's skill: the plugin to apply when `pluginId` is not given (kept in metadata).
    skill_id: Option<String>,
    /// Upstream's design system (kept in metadata).
    design_system_id: Option<String>,
}

fn new_project(b: CreateBody, caller: Caller) -> NewProject {
    let mut metadata = b.metadata;
    if let Some(s) = &b.skill_id {
        metadata.insert("skillId".into(), json!(s));
    }
    if let Some(d) = &b.design_system_id {
        metadata.insert("designSystemId".into(), json!(d));
    }
    NewProject {
        id: b.id,
        name: b.name,
        plugin_id: b.plugin_id.or(b.skill_id),
        apply: ApplyRequest {
            inputs: b.plugin_inputs.unwrap_or_default(),
            grant_caps: b.grant_caps,
            locale: b.locale,
            partial: false,
            exclude_context: b.exclude_context,
        },
        snapshot_id: b.applied_plugin_snapshot_id,
        metadata,
        import_from: b.path.map(Into::into),
        exec: caller.exec_right(),
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

#[utoipa::path(post, path = "/api/projects", tag = "projects", request_body = CreateBody, responses(
    (status = 200, body = ProjectCreated), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
    (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn create(
    State(s): State<AppState>,
    caller: Caller,
    JsonBody(b): JsonBody<CreateBody>,
) -> ApiResult<Json<Value>> {
    if b.path.is_some() {
        return Err(ApiError::bad_request("path", "use POST /api/import/folder to adopt a folder"));
    }
    do_create(s, new_project(b, caller)).await
}

/// Adopts an existing folder as a project (`path` required).
#[utoipa::path(post, path = "/api/import/folder", tag = "projects", request_body = CreateBody, responses(
    (status = 200, body = ProjectCreated), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
    (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn import(
    State(s): State<AppState>,
    caller: Caller,
    JsonBody(b): JsonBody<CreateBody>,
) -> ApiResult<Json<Value>> {
    if b.path.as_deref().is_none_or(str::is_empty) {
        return Err(ApiError::bad_request("path", "the folder to import is required"));
    }
    do_create(s, new_project(b, caller)).await
}

/// Projects, oldest first (by creation), paged.
#[utoipa::path(get, path = "/api/projects", tag = "projects", params(PagingParams),
    responses((status = 200, body = ProjectList), (status = 400, body = ErrorBody)))]
async fn list(State(s): State<AppState>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("projects")?;
    let v =
        blocking(move || Ok(s.engine.projects_page(&req)?.map(|p| project_json(&s.engine, &p)).to_json("projects")))
            .await?;
    Ok(Json(v))
}

#[utoipa::path(get, path = "/api/projects/{id}", tag = "projects", params(("id" = String, Path, description = "Project id")),
    responses((status = 200, body = ProjectShow), (status = 404, body = ErrorBody)))]
async fn show(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let p = project_json(&s.engine, &s.engine.project(&id)?);
        // `cwd`: where the project's files are, at the top as spec §21.5 reads it
        // (`od project info <id> --json | jq -r .cwd`).
        Ok(json!({ "cwd": p["dir"], "project": p }))
    })
    .await?;
    Ok(Json(v))
}

/// Forgets a project (its folder stays on disk).
#[utoipa::path(delete, path = "/api/projects/{id}", tag = "projects", params(("id" = String, Path, description = "Project id")),
    responses((status = 200, body = ProjectDeleted), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn delete(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let p = s.engine.delete_project(&id)?;
        Ok(json!({ "ok": true, "projectId": p.id }))
    })
    .await?;
    Ok(Json(v))
}

/// A project's conversations, oldest first (by creation), paged.
#[utoipa::path(get, path = "/api/projects/{id}/conversations", tag = "projects", params(("id" = String, Path, description = "Project id"), PagingParams),
    responses((status = 200, body = Conversations), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
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

/// A conversation's messages, oldest first: each run's user message and agent reply
/// (`conversation_message`), with the follow-up plans of its runs.
#[utoipa::path(get, path = "/api/projects/{id}/conversations/{cid}/messages", tag = "projects",
    params(("id" = String, Path, description = "Project id"), ("cid" = String, Path, description = "Conversation id")),
    responses((status = 200, body = ConversationMessages), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn conversation_messages(
    State(s): State<AppState>,
    Path((id, cid)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    Ok(Json(blocking(move || Ok(s.engine.conversation_messages(&id, &cid)?)).await?))
}

/// A new conversation in a project.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConversationBody {
    #[serde(default)]
    title: String,
    applied_plugin_snapshot_id: Option<String>,
}

#[utoipa::path(post, path = "/api/projects/{id}/conversations", tag = "projects", params(("id" = String, Path, description = "Project id")),
    request_body = ConversationBody,
    responses((status = 200, body = NewConversation), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
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
#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
struct FilesQuery {
    /// Paging (read by [`Paging`](super::paging::Paging)).
    #[allow(dead_code)]
    #[param(value_type = Option<u32>)]
    limit: Option<String>,
    #[allow(dead_code)]
    cursor: Option<String>,
    /// Only this file, or the files below this folder.
    path: Option<String>,
}

/// The two sides of a file diff.
#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct DiffQuery {
    /// The file, relative to the project.
    path: String,
    /// A run's recorded file: `<runId>` (at its end) or `<runId>@<eventId>`.
    from: String,
    /// Another run's (same forms); without it, the project's current file.
    to: Option<String>,
}

/// A file as one run recorded it against another run's, or the project's current one: digests,
/// sizes, `same`, and a unified diff for UTF-8 text.
#[utoipa::path(get, path = "/api/files/diff", tag = "projects", params(DiffQuery),
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn files_diff(State(s): State<AppState>, ApiQuery(q): ApiQuery<DiffQuery>) -> ApiResult<Json<Value>> {
    Ok(Json(blocking(move || Ok(s.engine.diff_file(&q.path, &q.from, q.to.as_deref())?)).await?))
}

/// Whether project file `p` is `prefix` or below it.
pub fn under(p: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_start_matches("./").trim_end_matches('/');
    prefix.is_empty() || p == prefix || p.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'))
}

#[utoipa::path(get, path = "/api/projects/{id}/files", tag = "projects", params(("id" = String, Path, description = "Project id"), FilesQuery),
    responses((status = 200, body = ProjectFiles), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn files(
    State(s): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<FilesQuery>,
    paging: super::paging::Paging,
) -> ApiResult<Json<Value>> {
    let req = paging.req("files")?;
    let v = blocking(move || {
        let mut files = s.engine.list_files(&id)?;
        if let Some(prefix) = q.path.as_deref() {
            files.retain(|f| under(f["path"].as_str().unwrap_or(""), prefix));
        }
        let page =
            crate::page::page_sorted("files", &req, files, |f| f["path"].as_str().unwrap_or("").as_bytes().to_vec());
        let mut v = page.to_json("files");
        v["projectId"] = json!(id);
        Ok(v)
    })
    .await?;
    Ok(Json(v))
}

/// A file's bytes.
#[utoipa::path(get, path = "/api/projects/{id}/files/{path}", tag = "projects", params(("id" = String, Path, description = "Project id"), ("path" = String, Path, description = "The file's path below the project (may contain `/`)")), responses(
    (status = 200, content_type = "application/octet-stream", body = String),
    (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn read_file(State(s): State<AppState>, Path((id, path)): Path<(String, String)>) -> ApiResult<Response> {
    let name = path.clone();
    let bytes = blocking(move || Ok(s.engine.read_file(&id, &path)?)).await?;
    Ok(file_response::file(bytes, "application/octet-stream", Disposition::Attachment, &name))
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct AtQuery {
    /// The run's event id (stream version) to read the file at; absent: the run's last event.
    at: Option<u64>,
}

/// A file as a run recorded it — at its end, or at one of its events (`at`) — from the blob store,
/// whatever later runs did to the project's folder.
#[utoipa::path(get, path = "/api/runs/{id}/files/{path}", tag = "runs", params(("id" = String, Path, description = "Run id"), ("path" = String, Path, description = "The file's path below the project (may contain `/`)"), AtQuery), responses(
    (status = 200, content_type = "application/octet-stream", body = String),
    (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn run_file(
    State(s): State<AppState>,
    Path((id, path)): Path<(String, String)>,
    ApiQuery(q): ApiQuery<AtQuery>,
) -> ApiResult<Response> {
    let name = path.clone();
    let bytes = blocking(move || Ok(s.engine.run_file_at(&id, &path, q.at)?)).await?;
    Ok(file_response::file(bytes, "application/octet-stream", Disposition::Attachment, &name))
}

/// Writes a file (creating folders); the body is its bytes.
#[utoipa::path(put, path = "/api/projects/{id}/files/{path}", tag = "projects", params(("id" = String, Path, description = "Project id"), ("path" = String, Path, description = "The file's path below the project (may contain `/`)")),
    request_body(content = String, content_type = "application/octet-stream"), responses(
    (status = 200, body = FileChanged), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
    (status = 413, body = ErrorBody)))]
async fn write_file(
    State(s): State<AppState>,
    Path((id, path)): Path<(String, String)>,
    RawBody(bytes): RawBody,
) -> ApiResult<Json<Value>> {
    let v = blocking(move || Ok(json!({ "ok": true, "file": s.engine.write_file(&id, &path, &bytes)? }))).await?;
    Ok(Json(v))
}

#[utoipa::path(delete, path = "/api/projects/{id}/files/{path}", tag = "projects", params(("id" = String, Path, description = "Project id"), ("path" = String, Path, description = "The file's path below the project (may contain `/`)")),
    responses((status = 200, body = FileChanged), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn delete_file(State(s): State<AppState>, Path((id, path)): Path<(String, String)>) -> ApiResult<Json<Value>> {
    let v = blocking(move || Ok(json!({ "ok": true, "file": s.engine.delete_file(&id, &path)? }))).await?;
    Ok(Json(v))
}

/// A project's artifacts, oldest first (by the seq that recorded each), paged.
#[utoipa::path(get, path = "/api/projects/{id}/artifacts", tag = "projects", params(("id" = String, Path, description = "Project id"), PagingParams),
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn artifacts(State(s): State<AppState>, Path(id): Path<String>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("artifacts")?;
    let v = blocking(move || {
        s.engine.project(&id)?;
        let seqs = s
            .engine
            .workspace()
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
#[utoipa::path(get, path = "/api/projects/{id}/applied-plugins", tag = "snapshots", params(("id" = String, Path, description = "Project id"), PagingParams),
    responses((status = 200, body = SnapshotList), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
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

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
struct SnapshotQuery {
    /// Only this plugin's snapshots.
    plugin_id: Option<String>,
}

/// Snapshots, oldest first (by recording), optionally of one plugin (`pluginId`), paged.
#[utoipa::path(get, path = "/api/applied-plugins", tag = "snapshots", params(SnapshotQuery, PagingParams),
    responses((status = 200, body = SnapshotList), (status = 400, body = ErrorBody)))]
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

#[utoipa::path(get, path = "/api/applied-plugins/{id}", tag = "snapshots", params(("id" = String, Path, description = "Snapshot id")),
    responses((status = 200, body = SnapshotShow), (status = 404, body = ErrorBody)))]
async fn snapshot(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let v = blocking(move || Ok(json!({ "snapshot": s.engine.snapshot(&id)? }))).await?;
    Ok(Json(v))
}

/// What to export a snapshot as.
#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ExportQuery {
    /// `od` (a plugin folder: manifest, SKILL.md, provenance; the default) or `skill` (SKILL.md).
    #[serde(rename = "as")]
    target: Option<String>,
}

/// Exactly what a snapshot used, as a reproducible tar (spec §8.2.1): resolved from the immutable
/// snapshot, not from the plugin as installed now.
#[utoipa::path(get, path = "/api/applied-plugins/{id}/export", tag = "snapshots",
    params(("id" = String, Path, description = "Snapshot id"), ExportQuery),
    responses((status = 200, description = "The export", content_type = "application/x-tar", body = Vec<u8>),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn snapshot_export(
    State(s): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<ExportQuery>,
) -> ApiResult<Response> {
    let target = q.target.unwrap_or_else(|| "od".into());
    let name =
        format!("od-snapshot-{}.tar", id.chars().filter(char::is_ascii_alphanumeric).take(40).collect::<String>());
    let bytes = blocking(move || Ok(s.engine.export_snapshot(&id, &target)?)).await?;
    Ok(file_response::file(bytes, "application/x-tar", Disposition::Attachment, &name))
}

/// A plugin applied with these inputs, recorded as a snapshot.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RecordBody {
    plugin_id: String,
    /// Also accepted as `pluginInputs`.
    #[serde(default, alias = "pluginInputs")]
    #[schema(value_type = Object)]
    inputs: Map<String, Value>,
    #[serde(default)]
    grant_caps: Vec<String>,
    locale: Option<String>,
}

/// Records an unreferenced snapshot (pinned later by a project or run; expires after the TTL).
#[utoipa::path(post, path = "/api/applied-plugins", tag = "snapshots", request_body = RecordBody, responses(
    (status = 200, body = SnapshotRecorded), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
    (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn record_snapshot(State(s): State<AppState>, JsonBody(b): JsonBody<RecordBody>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let req = ApplyRequest { inputs: b.inputs, grant_caps: b.grant_caps, locale: b.locale, ..Default::default() };
        let id = s.engine.record_snapshot(&b.plugin_id, &req, "", "")?;
        Ok(json!({ "snapshotId": id, "snapshot": s.engine.snapshot(&id)? }))
    })
    .await?;
    Ok(Json(v))
}

/// What to prune (optional body).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PruneBody {
    /// Unix ms: expire every unreferenced snapshot applied before this (forced cleanup).
    before: Option<i64>,
}

/// Expires unreferenced snapshots past the TTL (or applied before `before`).
#[utoipa::path(post, path = "/api/applied-plugins/prune", tag = "snapshots",
    request_body(content = Option<PruneBody>, content_type = "application/json"),
    responses((status = 200, body = Pruned), (status = 400, body = ErrorBody)))]
async fn prune(State(s): State<AppState>, OptionalJson(b): OptionalJson<PruneBody>) -> ApiResult<Json<Value>> {
    let before = b.and_then(|b| b.before);
    let v = blocking(move || {
        let expired = s.engine.prune_snapshots(before)?;
        Ok(json!({ "ok": true, "expired": expired, "ttlDays": s.engine.config().snapshot_unreferenced_ttl_days }))
    })
    .await?;
    Ok(Json(v))
}
