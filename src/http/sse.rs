//! Server-sent events over the log: the framing (`id:`, `event:`, `data:` lines with LF endings and
//! a blank line after each event; `:` keep-alive comments; a `retry:` hint), and the two SSE routes:
//!
//! - `GET /api/runs/{id}/events`: the run's events; `id` = the event's version in `run:<id>` (the
//!   run's event id, as `od run watch` and `lastEventId` use), `event` = its wire name, `data` = its
//!   wire payload. Resume with `Last-Event-ID: N` (wins) or `?after=N`: every event with id > N, no
//!   gap, no duplicate. The stream ends after `end`; a finished run with nothing after N answers 204.
//! - `GET /api/projects/{id}/events`: the events of `project:<id>` and of every run of the project,
//!   in log order; `id` = the event's global log sequence number, so resume is exact across streams.
//!   Run events carry their wire name and payload (plus `runId`); a run's creation is `run_created`;
//!   project events carry their kind name and payload. Ends when the project is deleted.
//!
//! The ND-JSON `GET /api/runs/{id}/watch` body is built here too (same tail, same resume; an empty
//! line is its keep-alive). Every stream is counted in the open-streams gauge while it lives.
//! The tails themselves are in `tail.rs`.

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use od_events::{Event, Stored};
use serde::Deserialize;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::time::Duration;
use tokio::sync::watch;

use super::error::{ApiError, ApiQuery, ApiResult};
use super::openapi::schemas::{ErrorBody, SseEvent};
use super::table::Routes;
use super::tail::{ProjectTail, RunTail};
use super::{blocking, AppState};
use crate::runner::wire;
use crate::store::{RawFrame, StoreError};

/// The reconnection delay advertised to EventSource clients (`retry:`), in ms.
pub const RETRY_MS: u64 = 1000;
/// Most events coalesced into one body chunk (one write) when several are ready at once.
const COALESCE_EVENTS: usize = 256;
/// Most bytes coalesced into one body chunk.
const COALESCE_BYTES: usize = 256 * 1024;

pub fn routes() -> Routes {
    Routes::new().get("/api/runs/{id}/events", run_events).get("/api/projects/{id}/events", project_events)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(run_events, project_events))]
pub(super) struct Api;

/// One SSE event: `id: <id>\nevent: <name>\ndata: <json>\n\n` (JSON has no raw newlines).
pub fn frame(out: &mut String, id: u64, event: &str, data: &Value) {
    let _ = write!(out, "id: {id}\nevent: {event}\ndata: {data}\n\n");
}

/// A data-only SSE event (`data: <json>\n\n`), as the AG-UI encoder writes them.
pub fn data_frame(out: &mut String, data: &Value) {
    let _ = write!(out, "data: {data}\n\n");
}

/// The keep-alive comment, sent after each silence of the keep-alive period
/// (`HttpConfig::stream_keepalive`, `OD_SSE_KEEPALIVE_MS`): proxies keep the connection, and a
/// peer that is gone is written to, so its stream ends and its subscription is freed.
pub const KEEPALIVE_FRAME: &str = ":keepalive\n\n";

/// The ND-JSON keep-alive: an empty line (readers skip empty lines).
pub const NDJSON_KEEPALIVE: &str = "\n";

/// Ties a streaming body to the open-streams gauge: counted until the body is dropped.
pub fn counted<S: futures_util::Stream + Send + 'static>(
    body: S,
    g: &std::sync::Arc<super::serve::Gauges>,
) -> impl futures_util::Stream<Item = S::Item> + Send + 'static {
    use futures_util::StreamExt;
    let count = super::serve::StreamCount::new(g);
    body.map(move |item| {
        let _counted = &count;
        item
    })
}

/// A streaming `text/event-stream` response (no buffering, no transform).
pub fn sse_response(body: Body) -> Response {
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .header("x-accel-buffering", "no")
        .body(body)
        .expect("static response parts")
}

/// Where a client resumes: `Last-Event-ID` (what EventSource sends when it reconnects) wins over
/// `?after=N`. None: from the start.
pub fn resume_point(headers: &HeaderMap, after: Option<u64>) -> ApiResult<Option<u64>> {
    let Some(v) = headers.get("last-event-id") else { return Ok(after) };
    let s = v.to_str().map_err(|_| ApiError::bad_request("Last-Event-ID", "not ASCII"))?.trim();
    if s.is_empty() {
        return Ok(after);
    }
    s.parse::<u64>().map(Some).map_err(|_| ApiError::bad_request("Last-Event-ID", format!("{s:?} is not an event id")))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct EventsQuery {
    /// Only events with an id greater than this.
    after: Option<u64>,
    /// Adds the reference daemon's derived frames (`message_chunk`, `genui_state_synced`,
    /// `critique.round_end`) after their event, without an id.
    #[serde(default)]
    derived: bool,
}

/// A run's tail, opened and checked.
pub struct OpenedRun {
    pub info: od_projections::RunInfo,
    pub tail: RunTail,
    /// The run had ended when it was opened: the stream ends once the tail runs dry.
    pub ended: bool,
    /// Nothing after the resume point and the run is over.
    pub exhausted: bool,
}

/// Opens `run:<id>` after `after` (404 for an unknown run; 400 for an id the run never had).
pub async fn open_run(s: &AppState, id: &str, after: Option<u64>) -> ApiResult<OpenedRun> {
    let (engine, store, id) = (s.engine.clone(), s.store.clone(), id.to_string());
    blocking(move || {
        let info = engine.run_info(&id)?;
        let stream = format!("run:{id}");
        let last = store.stream_version(&stream)?;
        if let Some(a) = after {
            if last.is_none_or(|l| a > l) {
                return Err(ApiError::bad_request(
                    "after",
                    format!("run {id} has no event {a} (its last event id is {})", last.unwrap_or(0)),
                ));
            }
        }
        // `a <= last < u64::MAX` here, so `a + 1` cannot wrap.
        let tail = RunTail::new(&store, stream.clone(), after.map_or(0, |a| a + 1));
        let ended = info.is_terminal();
        let exhausted = ended && after.is_some_and(|a| last.is_some_and(|l| a >= l));
        Ok(OpenedRun { info, tail, ended, exhausted })
    })
    .await
}

/// How a run tail is printed.
#[derive(Clone, Copy)]
pub enum RunFormat {
    /// SSE frames with `id`, `event`, `data`; with `derived`, the reference's derived frames too.
    Sse { derived: bool },
    /// ND-JSON `{"event","data"}` lines; `{"id","event","data"}` with `ids`.
    Ndjson { ids: bool, derived: bool },
}

/// One event's frames: its own (with `id` = its version), then — when asked for (`derived=true`) —
/// the reference daemon's derived frames (`message_chunk`, `genui_state_synced`,
/// `critique.round_end`) without an id, so an id still names exactly one log event and a client
/// resuming from it is not sent the event twice. (One that drops right between the two loses the
/// derived frame; its event carries the same facts.)
fn encode_run(out: &mut String, stored: &Stored, format: RunFormat) {
    let Some((name, data)) = wire::encode(stored) else { return };
    let id = stored.envelope.version;
    match format {
        RunFormat::Sse { .. } => frame(out, id, name, &data),
        RunFormat::Ndjson { ids: false, .. } => {
            let _ = writeln!(out, "{}", json!({ "event": name, "data": data }));
        }
        RunFormat::Ndjson { ids: true, .. } => {
            let _ = writeln!(out, "{}", json!({ "id": id, "event": name, "data": data }));
        }
    }
    let derived = matches!(format, RunFormat::Sse { derived: true } | RunFormat::Ndjson { derived: true, .. });
    for (name, data) in if derived { wire::extras(stored) } else { Vec::new() } {
        match format {
            RunFormat::Sse { .. } => {
                let _ = write!(out, "event: {name}\ndata: {data}\n\n");
            }
            RunFormat::Ndjson { .. } => {
                let _ = writeln!(out, "{}", json!({ "event": name, "data": data }));
            }
        }
    }
}

fn error_text(e: &StoreError, format: RunFormat) -> String {
    let err = json!({ "error": { "code": e.code(), "message": e.to_string() } });
    match format {
        RunFormat::Sse { .. } => format!("event: error\ndata: {err}\n\n"),
        RunFormat::Ndjson { .. } => format!("{}\n", json!({ "event": "error", "data": err })),
    }
}

/// What one step of a streaming body produced.
enum Step {
    Chunk(String),
    /// A chunk, then the end of the stream.
    Last(String),
    Done,
}

/// Waits for the next frame; `Ok(None)` = keep-alive due, `Err(())` = end (shutdown or closed log).
async fn wait_frame<F>(
    next: F,
    shutdown: &mut watch::Receiver<bool>,
    keepalive: Option<Duration>,
) -> Result<Option<Result<RawFrame, StoreError>>, ()>
where
    F: std::future::Future<Output = Option<Result<RawFrame, StoreError>>>,
{
    let timer = async {
        match keepalive {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        f = next => f.map(Some).ok_or(()),
        _ = shutdown.wait_for(|v| *v) => Err(()),
        _ = timer => Ok(None),
    }
}

/// One step of a run body: every frame ready now (at least one, waiting for it), encoded.
async fn run_step(
    tail: &mut RunTail,
    ended: bool,
    format: RunFormat,
    shutdown: &mut watch::Receiver<bool>,
    keepalive: Duration,
) -> Step {
    let first = if ended {
        match tail.try_next() {
            Some(f) => f,
            None => return Step::Done,
        }
    } else {
        match wait_frame(tail.next(), shutdown, Some(keepalive)).await {
            Ok(Some(f)) => f,
            Ok(None) if matches!(format, RunFormat::Sse { .. }) => return Step::Chunk(KEEPALIVE_FRAME.into()),
            Ok(None) => return Step::Chunk(NDJSON_KEEPALIVE.into()),
            Err(()) => return Step::Done,
        }
    };
    let mut out = String::new();
    let mut next = Some(first);
    let mut n = 0;
    while let Some(f) = next.take() {
        let stored = match f.and_then(|f| f.decode()) {
            Ok(s) => s,
            Err(e) => {
                out.push_str(&error_text(&e, format));
                return Step::Last(out);
            }
        };
        encode_run(&mut out, &stored, format);
        if matches!(stored.event, Event::RunEnded(_)) {
            return Step::Last(out);
        }
        n += 1;
        if n < COALESCE_EVENTS && out.len() < COALESCE_BYTES {
            next = tail.try_next();
        }
    }
    // (Empty when only events that are not on the wire came: the caller looks again.)
    Step::Chunk(out)
}

/// The streaming body of a run tail: backlog then live, ending after `end` (or, for a run that had
/// already ended, when the backlog runs dry), or when the daemon shuts down.
pub fn run_body(opened: OpenedRun, format: RunFormat, s: &AppState) -> Body {
    let (shutdown, keepalive) = (s.shutdown.clone(), s.http.config.stream_keepalive);
    let prelude = match format {
        RunFormat::Sse { .. } => format!("retry: {RETRY_MS}\n\n"),
        RunFormat::Ndjson { .. } => String::new(),
    };
    let state = (opened.tail, opened.ended, shutdown, false);
    let events = stream::unfold(state, move |(mut tail, ended, mut shutdown, done)| async move {
        if done {
            return None;
        }
        loop {
            match run_step(&mut tail, ended, format, &mut shutdown, keepalive).await {
                Step::Chunk(c) if c.is_empty() => continue,
                Step::Chunk(c) => return Some((Ok(Bytes::from(c)), (tail, ended, shutdown, false))),
                Step::Last(c) => return Some((Ok(Bytes::from(c)), (tail, ended, shutdown, true))),
                Step::Done => return None,
            }
        }
    });
    let first = stream::iter((!prelude.is_empty()).then(|| Ok::<_, std::convert::Infallible>(Bytes::from(prelude))));
    use futures_util::StreamExt;
    Body::from_stream(counted(first.chain(events), &s.http.gauges))
}

/// The run's events as SSE (`id:` = the event's version in `run:<id>`); ends after `end`.
#[utoipa::path(get, path = "/api/runs/{id}/events", tag = "streams",
    params(("id" = String, Path, description = "Run id"), EventsQuery,
        ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this event id (wins over `after`)")),
    responses(
        (status = 200, description = "`id:`/`event:`/`data:` frames, `:keepalive` comments", content_type = "text/event-stream", body = SseEvent),
        (status = 204, description = "The run is over and nothing follows the resume point"),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn run_events(
    State(s): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> ApiResult<Response> {
    let after = resume_point(&headers, q.after)?;
    let opened = open_run(&s, &id, after).await?;
    if opened.exhausted {
        // EventSource stops reconnecting on 204.
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    Ok(sse_response(run_body(opened, RunFormat::Sse { derived: q.derived }, &s)))
}

/// A project event's name and payload; None for frames that are not shown.
fn project_event(stored: &Stored) -> Option<(&'static str, Value)> {
    if stored.envelope.stream.starts_with("run:") {
        if let Event::RunCreated(e) = &stored.event {
            return Some((
                "run_created",
                json!({ "runId": e.run_id, "projectId": e.project_id, "conversationId": e.conversation_id,
                        "pluginId": e.plugin_id, "appliedPluginSnapshotId": e.snapshot_id, "agent": e.agent,
                        "createdAt": e.created_at }),
            ));
        }
        let (name, mut data) = wire::encode(stored)?;
        if let Some(o) = data.as_object_mut() {
            let run_id = stored.envelope.stream.trim_start_matches("run:");
            o.entry("runId").or_insert_with(|| json!(run_id));
        }
        return Some((name, data));
    }
    let data = match serde_json::to_value(&stored.event) {
        Ok(Value::Object(mut m)) => m.remove("data").unwrap_or(Value::Null),
        _ => Value::Null,
    };
    Some((stored.event.kind().name(), data))
}

async fn project_step(tail: &mut ProjectTail, shutdown: &mut watch::Receiver<bool>, keepalive: Duration) -> Step {
    let first = match wait_frame(tail.next(), shutdown, Some(keepalive)).await {
        Ok(Some(f)) => f,
        Ok(None) => return Step::Chunk(KEEPALIVE_FRAME.into()),
        Err(()) => return Step::Done,
    };
    let mut out = String::new();
    let mut next = Some(first);
    let mut n = 0;
    while let Some(f) = next.take() {
        let stored = match f.and_then(|f| f.decode()) {
            Ok(s) => s,
            Err(e) => {
                out.push_str(&error_text(&e, RunFormat::Sse { derived: false }));
                return Step::Last(out);
            }
        };
        if let Some((name, data)) = project_event(&stored) {
            frame(&mut out, stored.envelope.seq, name, &data);
        }
        if matches!(stored.event, Event::ProjectDeleted(_)) {
            return Step::Last(out);
        }
        n += 1;
        if n < COALESCE_EVENTS && out.len() < COALESCE_BYTES {
            next = tail.try_next();
        }
    }
    Step::Chunk(out)
}

/// The events of `project:<id>` and of all its runs as SSE (`id:` = the global seq); ends when
/// the project is deleted.
#[utoipa::path(get, path = "/api/projects/{id}/events", tag = "streams",
    params(("id" = String, Path, description = "Project id"), EventsQuery,
        ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this seq (wins over `after`)")),
    responses(
        (status = 200, description = "`id:`/`event:`/`data:` frames, `:keepalive` comments", content_type = "text/event-stream", body = SseEvent),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn project_events(
    State(s): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> ApiResult<Response> {
    let after = resume_point(&headers, q.after)?.unwrap_or(0);
    let (engine, store) = (s.engine.clone(), s.store.clone());
    let tail = blocking(move || {
        engine.project(&id)?;
        if after > store.last_seq() {
            return Err(ApiError::bad_request("after", format!("the log has no event {after}")));
        }
        let runs = engine.project_run_ids(&id)?;
        Ok(ProjectTail::open(&store, &id, runs, after)?)
    })
    .await?;
    let state = (tail, s.shutdown.clone(), false);
    let keepalive = s.http.config.stream_keepalive;
    let events = stream::unfold(state, move |(mut tail, mut shutdown, done)| async move {
        if done {
            return None;
        }
        loop {
            match project_step(&mut tail, &mut shutdown, keepalive).await {
                Step::Chunk(c) if c.is_empty() => continue,
                Step::Chunk(c) => {
                    return Some((Ok::<_, std::convert::Infallible>(Bytes::from(c)), (tail, shutdown, false)))
                }
                Step::Last(c) => return Some((Ok(Bytes::from(c)), (tail, shutdown, true))),
                Step::Done => return None,
            }
        }
    });
    let first = stream::once(async { Ok(Bytes::from(format!("retry: {RETRY_MS}\n\n"))) });
    use futures_util::StreamExt;
    Ok(sse_response(Body::from_stream(counted(first.chain(events), &s.http.gauges))))
}
