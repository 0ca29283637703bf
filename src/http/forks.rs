//! `/api/runs/{id}/fork`, `/api/runs/{id}/tree`, `/api/runs/{a}/diff/{b}`, `/api/runs/{id}/export`
//! and `/api/runs/import` (issue 16): forking a run at one of its events with other answers,
//! inputs, snapshot or agent; a run's family; where two runs diverge; and a run as a verifiable
//! bundle, out and in.

use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::auth::Caller;
use super::body::JsonBody;
use super::error::{ApiError, ApiResult};
use super::openapi::schemas::ErrorBody;
use super::table::Routes;
use super::{blocking, AppState};
use crate::engine::forks::ForkRequest;
use crate::engine::WorkError;
use crate::limits::MAX_RUN_BUNDLE_BYTES;

pub fn routes() -> Routes {
    Routes::new()
        .post("/api/runs/{id}/fork", fork)
        .get("/api/runs/{id}/tree", tree)
        .get("/api/runs/{id}/diff/{other}", diff)
        .get("/api/runs/{id}/export", export)
        .post("/api/blobs/gc", blob_gc)
        .limited(Method::POST, "/api/runs/import", import, "MAX_RUN_BUNDLE_BYTES", MAX_RUN_BUNDLE_BYTES as usize)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(fork, tree, diff, export, import, blob_gc))]
pub(super) struct Api;

/// A fork: where, and what changes from there on.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ForkBody {
    /// `<eventId>`, `<stage>` or `<stage>:<iteration>` (1-based: the fork redoes that iteration), or
    /// `end`.
    at: String,
    /// GenUI answers by surface id.
    #[schema(value_type = Option<Object>)]
    answers: Option<Map<String, Value>>,
    /// Inputs to change (the plugin is applied again: a new snapshot).
    #[schema(value_type = Option<Object>)]
    inputs: Option<Map<String, Value>>,
    snapshot_id: Option<String>,
    plugin_version: Option<String>,
    /// `dry-run` or `exec` (default: the parent's agent options).
    agent: Option<String>,
    /// The exec agent's command (needs the right to supply one, as for `POST /api/runs`).
    #[schema(value_type = Option<crate::http::openapi::schemas::AgentCommand>)]
    agent_command: Option<Value>,
    /// The dry-run agent's script.
    #[schema(value_type = Option<Object>)]
    dry_run: Option<Value>,
}

/// Forks the run (202): the new run starts from the parent's recorded state at `at` and goes on
/// live; the parent is not touched.
#[utoipa::path(post, path = "/api/runs/{id}/fork", tag = "runs", params(("id" = String, Path, description = "Run id")),
    request_body = ForkBody, responses((status = 202, body = Object), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn fork(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<ForkBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    if b.agent_command.is_some() {
        caller.require_exec("agentCommand")?;
    }
    let mut agent = Map::new();
    if let Some(a) = b.agent {
        agent.insert("agent".into(), Value::String(a));
    }
    if let Some(c) = b.agent_command {
        agent.insert("command".into(), c);
    }
    if let Some(d) = b.dry_run {
        agent.insert("dryRun".into(), d);
        agent.entry("agent").or_insert_with(|| json!("dry-run"));
    }
    let req = ForkRequest {
        at: b.at,
        answers: b.answers.unwrap_or_default(),
        inputs: b.inputs.unwrap_or_default(),
        snapshot_id: b.snapshot_id,
        plugin_version: b.plugin_version,
        agent,
        exec: caller.exec_right(),
    };
    let engine = s.engine.clone();
    let started = blocking(move || Ok(engine.fork_run(&id, req)?)).await?;
    s.runner.start(started.run.run_id.clone());
    let r = &started.run;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "runId": r.run_id, "parentRunId": r.parent_run_id, "forkEventId": r.fork_event_id,
            "projectId": r.project_id, "conversationId": r.conversation_id, "appliedPluginSnapshotId": r.snapshot_id,
            "pluginId": r.plugin_id, "status": r.status, "stageId": r.stage_id, "iteration": r.iteration })),
    ))
}

/// The run's ancestors and the forks below it.
#[utoipa::path(get, path = "/api/runs/{id}/tree", tag = "runs", params(("id" = String, Path, description = "Run id")),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody)))]
async fn tree(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(blocking(move || Ok(s.engine.run_tree(&id)?)).await?))
}

/// Where two runs diverge: inputs, answers, prompts, signals, devloop rows and files.
#[utoipa::path(get, path = "/api/runs/{id}/diff/{other}", tag = "runs",
    params(("id" = String, Path, description = "Run A"), ("other" = String, Path, description = "Run B")),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody)))]
async fn diff(State(s): State<AppState>, Path((id, other)): Path<(String, String)>) -> ApiResult<Json<Value>> {
    Ok(Json(blocking(move || Ok(s.engine.diff_runs(&id, &other)?)).await?))
}

/// The run (with the runs it was forked from) as a bundle: a tar of its streams' frames, its
/// snapshots and its blobs, with a manifest.
#[utoipa::path(get, path = "/api/runs/{id}/export", tag = "runs", params(("id" = String, Path, description = "Run id")),
    responses((status = 200, description = "The bundle", content_type = "application/x-tar", body = Vec<u8>),
        (status = 404, body = ErrorBody)))]
async fn export(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let name = format!("od-run-{}.tar", id.chars().filter(char::is_ascii_alphanumeric).take(40).collect::<String>());
    let bytes = blocking(move || Ok(s.engine.export_run(&id)?)).await?;
    Ok(super::file_response::file(bytes, "application/x-tar", super::file_response::Disposition::Attachment, &name))
}

/// Imports a bundle `od run export` wrote; every check passes before anything is written (400
/// `bundle` names what failed; 409 when the run exists here).
#[utoipa::path(post, path = "/api/runs/import", tag = "runs",
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The bundle (a tar, as `od run export` writes it)"),
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody)))]
async fn import(State(s): State<AppState>, req: axum::extract::Request) -> ApiResult<Json<Value>> {
    // Spooled to a file beside the log, so a large bundle is never whole in memory (`run_import.rs`).
    let dir = s.engine.data_dir().join("tmp");
    std::fs::create_dir_all(&dir).map_err(|e| ApiError::from(WorkError::io("making the spool folder", e)))?;
    let path = dir.join(format!("import-{}.tar", crate::engine::safe_fs::temp_tag()));
    super::body::spool_to_file(req, &path).await?;
    let engine = s.engine.clone();
    let done = blocking(move || {
        let r = engine.import_run_file(&path);
        let _ = std::fs::remove_file(&path);
        Ok(r?)
    })
    .await?;
    Ok(Json(done))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GcBody {
    /// Unix ms: remove every blob unreferenced since before this (forced cleanup).
    before: Option<i64>,
}

/// One pass of artifact blob collection (each step an event).
#[utoipa::path(post, path = "/api/blobs/gc", tag = "runs",
    request_body(content = Option<GcBody>, content_type = "application/json"),
    responses((status = 200, body = Object), (status = 400, body = ErrorBody)))]
async fn blob_gc(
    State(s): State<AppState>,
    super::body::OptionalJson(b): super::body::OptionalJson<GcBody>,
) -> ApiResult<Json<Value>> {
    let before = b.and_then(|b| b.before);
    Ok(Json(blocking(move || Ok(s.engine.gc_blobs(before)?)).await?))
}
