//! `/api/runs*`: start (202, idempotent by `clientRequestId`), list, show, cancel, watch (ND-JSON
//! `{"event","data"}` lines until `end`), logs, signals and responses from outside the executor,
//! devloop history, artifacts, and replay (the bundle, and `verify`).

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::Response;
use axum::Json;
use od_projections::RunInfo;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::auth::Caller;
use super::error::{ApiError, ApiQuery, ApiResult};
use super::openapi::schemas::{
    AgentCommand, ErrorBody, PagingParams, RunCanceled, RunDevloop, RunList, RunLogs, RunOk, RunShow, RunStarted,
};
use super::paging::Paging;
use super::table::Routes;
use super::{blocking, sse, AppState};
use crate::engine::agents;
use crate::engine::apply::ApplyRequest;
use crate::engine::runs::NewRun;
use od_projections::workspace_read::RunFilter;

pub fn routes() -> Routes {
    Routes::new()
        .get("/api/runs", list)
        .post("/api/runs", start)
        .get("/api/runs/{id}", show)
        .post("/api/runs/{id}/cancel", cancel)
        .get("/api/runs/{id}/watch", watch)
        .get("/api/runs/{id}/logs", logs)
        .post("/api/runs/{id}/signals", signal)
        .post("/api/runs/{id}/respond", respond)
        .get("/api/runs/{id}/devloop-iterations", devloop)
        .get("/api/runs/{id}/artifacts", artifacts)
        .post("/api/runs/{id}/replay", replay)
        .post("/api/runs/{id}/replay/verify", replay_verify)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(list, start, show, cancel, watch, logs, signal, respond, devloop, artifacts, replay, replay_verify))]
pub(super) struct Api;

use super::body::JsonBody;

/// The line a run shows about its agent: the dry-run chosen because nothing is configured says so.
fn agent_note(config: &Value) -> Value {
    match agents::source_of(config) == "default" && config["agent"] == "dry-run" {
        true => json!(agents::UNCONFIGURED_NOTE),
        false => Value::Null,
    }
}

/// The wire shape of a run.
pub fn run_json(r: &RunInfo) -> Value {
    json!({
        "id": r.run_id, "runId": r.run_id, "projectId": r.project_id, "conversationId": r.conversation_id,
        "clientRequestId": if r.client_request_id.is_empty() { Value::Null } else { json!(r.client_request_id) },
        "appliedPluginSnapshotId": r.snapshot_id, "pluginId": r.plugin_id, "agent": r.agent, "status": r.status,
        "createdAt": r.created_at, "startedAt": r.started_at, "endedAt": r.ended_at,
        "stageId": if r.stage_id.is_empty() { Value::Null } else { json!(r.stage_id) }, "iteration": r.iteration,
        "reason": if r.reason.is_empty() { Value::Null } else { json!(r.reason) },
        "failureCategory": if r.failure_category == od_events::vocab::FailureCategory::None { Value::Null } else { json!(r.failure_category) },
        "artifactCount": r.artifact_count, "lastEventId": r.last_version,
    })
}

/// A run to start: in a project (or a new one), with a plugin or a pinned snapshot, and its agent.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StartBody {
    project_id: Option<String>,
    conversation_id: Option<String>,
    #[serde(default)]
    message: String,
    plugin_id: Option<String>,
    /// Also accepted as `inputs`.
    #[serde(alias = "inputs")]
    #[schema(value_type = Option<Object>)]
    plugin_inputs: Option<Map<String, Value>>,
    #[serde(default)]
    grant_caps: Vec<String>,
    locale: Option<String>,
    /// Context chips removed before the run (`<kind>:<ref>` as the apply's `contextItems` name
    /// them): the run's snapshot, prompt and staged folder go without them.
    #[serde(default)]
    exclude_context: Vec<String>,
    applied_plugin_snapshot_id: Option<String>,
    /// A repeated id returns the same run (`reused: true`).
    client_request_id: Option<String>,
    /// `exec`, `dry-run` or a catalog agent's id (`claude`, `codex`, …; see `GET /api/agents`);
    /// absent: the daemon's default (`OD_AGENT`, else `exec` when `OD_AGENT_CMD` is set, else
    /// `dry-run`).
    agent: Option<String>,
    /// Upstream's name for `agent` (same values; an agent this od cannot run is a 422).
    agent_id: Option<String>,
    /// The exec agent's command (needs the token, or a daemon with `OD_ALLOW_HTTP_EXEC=1`: else 403).
    #[schema(value_type = Option<AgentCommand>)]
    agent_command: Option<Value>,
    /// `auto` (default), `od`, `claude-stream-json`, `codex-json`, `gemini-stream-json`, `opencode-json`, `copilot-json` or `cursor-stream-json`.
    agent_protocol: Option<String>,
    #[schema(value_type = Option<u64>)]
    agent_timeout_ms: Option<Value>,
    #[schema(value_type = Option<u64>)]
    agent_idle_timeout_ms: Option<Value>,
    /// Extra environment for the exec agent (needs the token, as `agentCommand`).
    #[schema(value_type = Option<Object>)]
    agent_env: Option<Map<String, Value>>,
    /// This run's agent output bound per invocation (bytes, events), within the caps.
    #[schema(value_type = Option<u64>)]
    agent_output_max_bytes: Option<Value>,
    #[schema(value_type = Option<u64>)]
    agent_output_max_events: Option<Value>,
    /// This run's prompt budget in estimated tokens (default: the agent's, see `limits.rs`).
    #[schema(value_type = Option<u64>)]
    prompt_budget_tokens: Option<Value>,
    /// Where the acp agent's permission answers are remembered: `run` (default), `conversation`,
    /// `project`.
    permission_tier: Option<String>,
    /// The dry-run agent's script.
    #[schema(value_type = Option<Object>)]
    dry_run: Option<Value>,
    /// A catalog agent's model (one of its models when the CLI lists them: else 422).
    model: Option<String>,
    /// A catalog agent's reasoning effort (one of its `reasoningOptions`: else 422).
    reasoning: Option<String>,
    /// `accept-edits` (default), `bypass` (needs the exec right, as `agentCommand`) or `ask` (only
    /// for agents that can ask while headless — the acp agent, through GenUI: else 422).
    permission_mode: Option<String>,
    skill_id: Option<String>,
}

fn new_run(b: StartBody, caller: Caller) -> NewRun {
    let mut agent = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            agent.insert(k.into(), v);
        }
    };
    put("agent", b.agent.map(Value::String));
    put("agentId", b.agent_id.map(Value::String));
    put("command", b.agent_command);
    put("protocol", b.agent_protocol.map(Value::String));
    put("timeoutMs", b.agent_timeout_ms);
    put("idleTimeoutMs", b.agent_idle_timeout_ms);
    put("env", b.agent_env.map(Value::Object));
    put("outputMaxBytes", b.agent_output_max_bytes);
    put("outputMaxEvents", b.agent_output_max_events);
    put("promptBudgetTokens", b.prompt_budget_tokens);
    put("permissionTier", b.permission_tier.map(Value::String));
    put("dryRun", b.dry_run);
    put("model", b.model.map(Value::String));
    put("reasoning", b.reasoning.map(Value::String));
    put("permissionMode", b.permission_mode.map(Value::String));
    NewRun {
        project_id: b.project_id,
        conversation_id: b.conversation_id,
        message: b.message,
        plugin_id: b.plugin_id.or(b.skill_id),
        apply: ApplyRequest {
            inputs: b.plugin_inputs.unwrap_or_default(),
            grant_caps: b.grant_caps,
            locale: b.locale,
            partial: false,
            exclude_context: b.exclude_context,
        },
        snapshot_id: b.applied_plugin_snapshot_id,
        client_request_id: b.client_request_id,
        agent,
        exec: caller.exec_right(),
    }
}

/// 202 `{runId, conversationId, assistantMessageId, clientRequestId, reused, resumed,
/// appliedPluginSnapshotId, pluginId, projectId, status, followUp}` (`assistantMessageId`: the id the
/// agent's reply will have, `<runId>:agent`, for a run with a message; `followUp`: a follow-up's plan).
/// A request may name its own agent command (or its environment) only when the caller may
/// (`auth.rs`); its other agent options are checked by the engine (`engine/runs.rs`).
fn check_agent(b: &StartBody, caller: Caller) -> ApiResult<()> {
    if b.agent_command.is_some() {
        caller.require_exec("agentCommand")?;
    }
    if b.agent_env.is_some() {
        caller.require_exec("agentEnv")?;
    }
    Ok(())
}

/// Starts a run (202); the runner drives it in the background.
#[utoipa::path(post, path = "/api/runs", tag = "runs", request_body = StartBody, responses(
    (status = 202, body = RunStarted), (status = 400, body = ErrorBody),
    (status = 403, description = "`exec-forbidden`: an agent command without the right to supply one", body = ErrorBody),
    (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn start(
    State(s): State<AppState>,
    caller: Caller,
    JsonBody(b): JsonBody<StartBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    check_agent(&b, caller)?;
    let req = new_run(b, caller);
    let (engine, runner) = (s.engine.clone(), s.runner.clone());
    let (started, config) = blocking(move || {
        let started = engine.create_run(req)?;
        // The executor starts now, while the answer is put together: the run's first event is what
        // the caller waits for next. (A blocking thread is inside the runtime: it can spawn.)
        if !started.reused {
            runner.start(started.run.run_id.clone());
        }
        // Before the answer: a queued run's folder is there for `write_file` too.
        engine.make_started_folder(&started);
        let created = engine.run_created(&started.run.run_id)?;
        let config: Value = serde_json::from_str(&created.agent_config_json).unwrap_or(Value::Null);
        let history = engine.run_events(&started.run.run_id, 0)?;
        let follow_up = crate::engine::conversations::plan_in(&history).map(|p| json!(p));
        // The agent's reply gets this id when it lands (a run with a message).
        let reply_id = (!created.message.is_empty()).then(|| format!("{}:agent", created.run_id));
        Ok((started, (config, follow_up, reply_id)))
    })
    .await?;
    let (config, follow_up, reply_id) = config;
    let r = &started.run;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({
            "runId": r.run_id, "conversationId": r.conversation_id, "assistantMessageId": reply_id,
            "clientRequestId": if r.client_request_id.is_empty() { Value::Null } else { json!(r.client_request_id) },
            "reused": started.reused, "resumed": false, "appliedPluginSnapshotId": r.snapshot_id,
            "pluginId": r.plugin_id, "projectId": r.project_id, "status": r.status,
            "agent": r.agent, "agentSource": agents::source_of(&config), "agentNote": agent_note(&config),
            "followUp": follow_up,
        })),
    ))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Paging (read by [`Paging`]).
    #[allow(dead_code)]
    #[param(value_type = Option<u32>)]
    limit: Option<String>,
    #[allow(dead_code)]
    cursor: Option<String>,
    project_id: Option<String>,
    conversation_id: Option<String>,
    /// `queued`, `running`, `awaiting-input`, `succeeded` (also `done`), `failed`, `canceled` or
    /// `active`.
    #[param(pattern = "^(queued|running|awaiting-input|succeeded|failed|canceled|active|done)$")]
    status: Option<String>,
}

/// What `status` may filter runs by: a run's statuses, `active` (not ended), or the spec's `done`
/// (§12.2 `--status running|done|failed`: a run that ended well, i.e. `succeeded`).
const RUN_STATUS_FILTERS: [&str; 8] =
    ["queued", "running", "awaiting-input", "succeeded", "failed", "canceled", "active", "done"];

/// Runs, newest first (by creation), paged (`limit`, `cursor` → `nextCursor`), filtered by
/// `projectId`, `conversationId`, `status` (or `active`) from the runs indexes.
#[utoipa::path(get, path = "/api/runs", tag = "runs", params(ListQuery),
    responses((status = 200, body = RunList), (status = 400, body = ErrorBody)))]
async fn list(State(s): State<AppState>, ApiQuery(q): ApiQuery<ListQuery>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("runs")?;
    if let Some(st) = q.status.as_deref().filter(|st| !RUN_STATUS_FILTERS.contains(st)) {
        return Err(ApiError::bad_request("status", format!("{st:?} is not one of {}", RUN_STATUS_FILTERS.join(", "))));
    }
    let v = blocking(move || {
        let status = q.status.map(|st| if st == "done" { "succeeded".to_string() } else { st });
        let filter = RunFilter { project_id: q.project_id, conversation_id: q.conversation_id, status };
        Ok(s.engine.runs_page(&filter, &req)?.map(|r| run_json(&r)).to_json("runs"))
    })
    .await?;
    Ok(Json(v))
}

#[utoipa::path(get, path = "/api/runs/{id}", tag = "runs", params(("id" = String, Path, description = "Run id")),
    responses((status = 200, body = RunShow), (status = 404, body = ErrorBody)))]
async fn show(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let mut run = run_json(&s.engine.run_info(&id)?);
        // A forked run's agent options are in its `RunForked`: chosen by its request or inherited.
        let config: Value = match s.engine.run_created(&id) {
            Ok(created) => serde_json::from_str(&created.agent_config_json).unwrap_or(Value::Null),
            Err(_) => Value::Null,
        };
        run["agentSource"] = json!(agents::source_of(&config));
        run["agentNote"] = agent_note(&config);
        for k in [crate::agents::PERMISSION_KEY, "model", "reasoning"] {
            if let Some(v) = config[k].as_str() {
                run[k] = json!(v);
            }
        }
        Ok(json!({ "run": run }))
    })
    .await?;
    Ok(Json(v))
}

/// Cancels a run: an executing one is stopped (its agent killed) and ends `canceled`; a queued one
/// ends at once. Waits briefly for the end to be recorded; an ended run is returned as it is.
#[utoipa::path(post, path = "/api/runs/{id}/cancel", tag = "runs", params(("id" = String, Path, description = "Run id")),
    responses((status = 200, body = RunCanceled), (status = 404, body = ErrorBody)))]
async fn cancel(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let engine = s.engine.clone();
    let rid = id.clone();
    let run = blocking(move || Ok(engine.run_info(&rid)?)).await?;
    if run.is_terminal() {
        return Ok(Json(json!({ "ok": true, "run": run_json(&run), "alreadyEnded": true })));
    }
    let here = s.runner.cancel(&id);
    // Not executing here: if a live daemon holds the run (shared log), ask it through the log;
    // otherwise nobody executes it, and holding its lease, this daemon ends it.
    let elsewhere = !here && {
        let engine = s.engine.clone();
        let rid = id.clone();
        blocking(move || {
            if engine.leases().take(&rid)?.is_some() {
                return Ok(false);
            }
            engine.request_cancel(&rid)?;
            Ok(true)
        })
        .await?
    };
    if here || elsewhere {
        let mut live = s.store.subscribe(s.store.last_seq());
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let engine = s.engine.clone();
            let rid = id.clone();
            let r = blocking(move || Ok(engine.run_info(&rid)?)).await?;
            if r.is_terminal() {
                return Ok(Json(json!({ "ok": true, "run": run_json(&r) })));
            }
            match tokio::time::timeout_at(deadline, live.next()).await {
                Ok(Some(_)) => {}
                _ => return Ok(Json(json!({ "ok": true, "run": run_json(&r) }))),
            }
        }
    }
    let engine = s.engine.clone();
    let r = blocking(move || {
        let r = engine.end_run(
            &id,
            od_events::vocab::RunStatus::Canceled,
            od_events::vocab::FailureCategory::Canceled,
            "canceled by the user",
        );
        engine.leases().release(&id);
        Ok(r?)
    })
    .await?;
    Ok(Json(json!({ "ok": true, "run": run_json(&r) })))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct WatchQuery {
    /// Only events with a run event id (stream version) greater than this (`Last-Event-ID` wins).
    after: Option<u64>,
    /// Adds each event's id: `{"id","event","data"}` lines.
    #[serde(default)]
    ids: bool,
    /// Adds the reference daemon's derived lines (`message_chunk`, `genui_state_synced`,
    /// `critique.round_end`) after their event (without an id).
    #[serde(default)]
    derived: bool,
}

/// ND-JSON: the run's events (`{"event","data"}`, or `{"id","event","data"}` with `ids=true`;
/// an empty line after each silence of the keep-alive period)
/// from the start (or after `after` / `Last-Event-ID`), then live, ending after `end`; a run that
/// already ended ends when its events after the resume point are printed (none: an empty body).
/// The run's events as ND-JSON lines, from the start (or `after`) until it ends.
#[utoipa::path(get, path = "/api/runs/{id}/watch", tag = "runs", params(("id" = String, Path, description = "Run id"), WatchQuery), responses(
    (status = 200, description = "ND-JSON event lines", content_type = "application/x-ndjson", body = String),
    (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn watch(
    State(s): State<AppState>,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
    ApiQuery(q): ApiQuery<WatchQuery>,
) -> ApiResult<Response> {
    let after = sse::resume_point(&headers, q.after)?;
    let opened = sse::open_run(&s, &id, after).await?;
    let body = sse::run_body(opened, sse::RunFormat::Ndjson { ids: q.ids, derived: q.derived }, &s);
    Ok(Response::builder()
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .body(body)
        .expect("static response parts"))
}

/// What the agent said, as lines: text, status, stdout/stderr, failures, the end; paged by stream
/// position (see `run_pages.rs`).
/// The agent's output lines, paged.
#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
struct LogsQuery {
    /// Paging (read by [`Paging`]).
    #[allow(dead_code)]
    #[param(value_type = Option<u32>)]
    limit: Option<String>,
    #[allow(dead_code)]
    cursor: Option<String>,
    /// Only lines recorded at or after this time (unix ms).
    #[param(value_type = Option<i64>)]
    since: Option<String>,
}

#[utoipa::path(get, path = "/api/runs/{id}/logs", tag = "runs", params(("id" = String, Path, description = "Run id"), LogsQuery),
    responses((status = 200, body = RunLogs), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn logs(
    State(s): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<LogsQuery>,
    paging: Paging,
) -> ApiResult<Json<Value>> {
    let since = match q.since.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
        None => None,
        Some(v) => Some(
            v.parse::<i64>().map_err(|_| ApiError::bad_request("since", format!("{v:?} is not a time in unix ms")))?,
        ),
    };
    super::run_pages::logs(s, id, paging, since).await
}

/// A named signal recorded on the run (what its devloop `until` reads).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct SignalBody {
    name: String,
    value: Value,
}

#[utoipa::path(post, path = "/api/runs/{id}/signals", tag = "runs", params(("id" = String, Path, description = "Run id")), request_body = SignalBody,
    responses((status = 200, body = RunOk), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
async fn signal(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<SignalBody>,
) -> ApiResult<Json<Value>> {
    let v =
        blocking(move || Ok(json!({ "ok": true, "run": run_json(&s.engine.record_signal(&id, &b.name, b.value)?) })))
            .await?;
    Ok(Json(v))
}

/// Answers what the run waits on (its pending question).
#[utoipa::path(post, path = "/api/runs/{id}/respond", tag = "runs", params(("id" = String, Path, description = "Run id")), request_body = Object,
    responses((status = 200, body = RunOk), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
async fn respond(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<Value>,
) -> ApiResult<Json<Value>> {
    let v = blocking(move || Ok(json!({ "ok": true, "run": run_json(&s.engine.respond(&id, &b)?) }))).await?;
    Ok(Json(v))
}

/// The run's devloop rows, paged by stream position (see `run_pages.rs`).
/// The run's devloop iterations, paged.
#[utoipa::path(get, path = "/api/runs/{id}/devloop-iterations", tag = "runs", params(("id" = String, Path, description = "Run id"), PagingParams),
    responses((status = 200, body = RunDevloop), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn devloop(State(s): State<AppState>, Path(id): Path<String>, paging: Paging) -> ApiResult<Json<Value>> {
    super::run_pages::devloop(s, id, paging).await
}

/// The run's artifacts, oldest first (by the seq that recorded each), paged like a project's.
#[utoipa::path(get, path = "/api/runs/{id}/artifacts", tag = "runs", params(("id" = String, Path, description = "Run id"), PagingParams),
    responses((status = 200, body = Object, description = "`{runId, artifacts: [artifact…], nextCursor}`"),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn artifacts(State(s): State<AppState>, Path(id): Path<String>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("run-artifacts")?;
    let v = blocking(move || {
        s.engine.run_info(&id)?;
        let after = req.after.as_deref();
        let seqs = s
            .engine
            .workspace()
            .read(|w| od_projections::workspace_read::run_artifacts(w, &id, after, req.limit + 1))?;
        let items = s.engine.artifacts_at(seqs)?;
        let mut v = crate::page::page_keyed("run-artifacts", &req, items, false).to_json("artifacts");
        v["runId"] = json!(id);
        Ok(v)
    })
    .await?;
    Ok(Json(v))
}

/// The snapshot the run pinned.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReplayBody {
    snapshot_id: String,
}

/// The identical snapshot and rerun bundle of a run; read-only.
#[utoipa::path(post, path = "/api/runs/{id}/replay", tag = "runs", params(("id" = String, Path, description = "Run id")), request_body = ReplayBody,
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
async fn replay(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<ReplayBody>,
) -> ApiResult<Json<Value>> {
    let v = blocking(move || Ok(s.engine.replay_bundle(&id, &b.snapshot_id)?)).await?;
    Ok(Json(v))
}

/// Recomposes every prompt of the run and compares digests.
#[utoipa::path(post, path = "/api/runs/{id}/replay/verify", tag = "runs", params(("id" = String, Path, description = "Run id")),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn replay_verify(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let v = blocking(move || Ok(s.engine.verify_replay(&id)?)).await?;
    Ok(Json(v))
}
