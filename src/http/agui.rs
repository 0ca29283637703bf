//! `GET|POST /api/runs/{id}/agui`: the run projected onto canonical AG-UI 1.0 events
//! (`agui_encode.rs`), as SSE `data: <json>` frames with LF framing.
//!
//! POST takes a RunAgentInput (what the stock `@ag-ui/client` `HttpAgent` sends): it must be a JSON
//! object; od uses only `resume`, and ignores the rest (threadId/runId are the run's own:
//! its conversation and its id). Each response is one AG-UI run (a "segment" of the od run): from the
//! run's start, or — when `resume` names interrupts (`<surfaceId>@<eventId>`, as RUN_FINISHED's
//! interrupt outcome gave them; GET: `?resume=<id>`) — from just after the latest of them. It ends
//! at the segment's terminal event: RUN_FINISHED (success, cancelled, or an interrupt while a GenUI
//! surface waits for its answer) or RUN_ERROR. A resume entry `{"status":"resolved","payload":…}`
//! for a surface that still waits answers it (respondedBy `user`) before the stream starts.
//! `Last-Event-ID` is not used here: a request replays its segment from the segment's start, because
//! AG-UI clients reject a stream that starts mid-run.

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::response::Response;
use futures_util::stream;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::agui_encode::Encoder;
use super::body::{is_json, RawBody};
use super::error::{ApiError, ApiQuery, ApiResult};
use super::openapi::schemas::{ErrorBody, SseEvent};
use super::sse::{counted, data_frame, open_run, sse_response, KEEPALIVE_FRAME};
use super::table::Routes;
use super::tail::RunTail;
use super::{blocking, AppState};
use crate::runner::wire;
use crate::store::StoreError;

pub fn routes() -> Routes {
    Routes::new().get("/api/runs/{id}/agui", get_agui).post("/api/runs/{id}/agui", post_agui)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(get_agui, post_agui))]
pub(super) struct Api;

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct AguiQuery {
    /// An interrupt id to continue after.
    resume: Option<String>,
}

/// The run (or its segment after an interrupt) as AG-UI events.
#[utoipa::path(get, path = "/api/runs/{id}/agui", tag = "streams",
    params(("id" = String, Path, description = "Run id"), AguiQuery), responses((status = 200, description = "AG-UI 1.0 events as `data: <json>` frames, ending at RUN_FINISHED or RUN_ERROR",
        content_type = "text/event-stream", body = SseEvent),
    (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn get_agui(
    State(s): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<AguiQuery>,
) -> ApiResult<Response> {
    let ids: Vec<(String, String)> = q.resume.into_iter().map(|r| ("resume".to_string(), r)).collect();
    let boundary = boundary(&s, &id, &ids).await?;
    stream_from(s, id, boundary).await
}

/// The resume entries of a RunAgentInput.
#[derive(Default)]
struct Resume {
    /// `(field, interruptId)`, the field named in errors.
    ids: Vec<(String, String)>,
    /// `(interruptId, payload)` of the entries `resolved` with a payload.
    answers: Vec<(String, Value)>,
}

fn resume_entries(input: &Value) -> ApiResult<Resume> {
    let mut r = Resume::default();
    let Some(resume) = input.get("resume").filter(|r| !r.is_null()) else { return Ok(r) };
    let entries = resume.as_array().ok_or_else(|| ApiError::bad_request("resume", "must be an array"))?;
    for (i, e) in entries.iter().enumerate() {
        let field = format!("resume[{i}].interruptId");
        let id = e["interruptId"].as_str().ok_or_else(|| ApiError::bad_request(&field, "must be a string"))?;
        if e["status"] == "resolved" && !e["payload"].is_null() {
            r.answers.push((id.to_string(), e["payload"].clone()));
        }
        r.ids.push((field, id.to_string()));
    }
    Ok(r)
}

/// A RunAgentInput (a JSON object; only `resume` is read): answers resolved interrupts, then
/// streams the segment after them.
#[utoipa::path(post, path = "/api/runs/{id}/agui", tag = "streams",
    params(("id" = String, Path, description = "Run id")), request_body = Object, responses((status = 200, description = "AG-UI 1.0 events as `data: <json>` frames, ending at RUN_FINISHED or RUN_ERROR",
        content_type = "text/event-stream", body = SseEvent),
    (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn post_agui(
    State(s): State<AppState>,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
    RawBody(body): RawBody,
) -> ApiResult<Response> {
    let input: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        let ct = headers.get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
        if !is_json(ct) {
            return Err(super::guard::unsupported_media_type(ct, "application/json"));
        }
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request("body", format!("not JSON: {e}")))?
    };
    if !input.is_object() {
        return Err(ApiError::bad_request("body", "a RunAgentInput object is expected"));
    }
    let resume = resume_entries(&input)?;
    let boundary = boundary(&s, &id, &resume.ids).await?;
    if !resume.answers.is_empty() {
        answer(&s, &id, resume.answers).await?;
    }
    stream_from(s, id, boundary).await
}

/// The event id a resume continues after: the latest request the interrupt ids name. Each must
/// be `<surfaceId>@<eventId>` of a GenUI request of this run.
async fn boundary(s: &AppState, run_id: &str, ids: &[(String, String)]) -> ApiResult<Option<u64>> {
    if ids.is_empty() {
        return Ok(None);
    }
    let (engine, store, run_id, ids) = (s.engine.clone(), s.store.clone(), run_id.to_string(), ids.to_vec());
    blocking(move || {
        engine.run_info(&run_id)?;
        let mut at = None;
        for (field, iid) in ids {
            let unknown = || ApiError::bad_request(&field, format!("{iid:?} is not an interrupt of run {run_id}"));
            let (sid, v) = iid.rsplit_once('@').ok_or_else(unknown)?;
            let v: u64 = v.parse().map_err(|_| unknown())?;
            let frames = store.read_stream(&format!("run:{run_id}"), v, 1)?;
            let stored = frames.first().filter(|f| f.view().version() == v).ok_or_else(unknown)?.decode()?;
            match wire::encode(&stored) {
                Some(("genui_surface_request", d)) if d["surfaceId"] == sid => {}
                _ => return Err(unknown()),
            }
            at = at.max(Some(v));
        }
        Ok(at)
    })
    .await
}

/// Records the answers a resume carries, for surfaces that still wait (others are left alone).
async fn answer(s: &AppState, run_id: &str, answers: Vec<(String, Value)>) -> ApiResult<()> {
    let (engine, run_id) = (s.engine.clone(), run_id.to_string());
    blocking(move || {
        for (iid, value) in answers {
            let sid = iid.rsplit_once('@').map_or(iid.as_str(), |(s, _)| s);
            match engine.respond_surface(&run_id, sid, value, "user") {
                Ok(_) | Err(crate::engine::WorkError::SurfaceNotPending { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    })
    .await
}

/// The streaming state of one AG-UI response.
struct Agui {
    tail: RunTail,
    enc: Encoder,
    /// Events up to this id are folded silently (the segments before the resume point).
    boundary: Option<u64>,
    emitting: bool,
    /// The run had ended when the response started: stop once the log runs dry.
    ended: bool,
    created_at: i64,
    shutdown: watch::Receiver<bool>,
    keepalive: std::time::Duration,
    done: bool,
}

enum Next {
    Chunk(String),
    Last(String),
    Done,
}

impl Agui {
    /// Folds one stored frame; returns the frames to send and whether the segment ended.
    fn fold(&mut self, f: Result<crate::store::RawFrame, StoreError>, out: &mut String) -> Result<bool, StoreError> {
        let stored = f?.decode()?;
        let Some((name, data)) = wire::encode(&stored) else { return Ok(false) };
        let (version, ts) = (stored.envelope.version, stored.envelope.recorded_at);
        let events = self.enc.push(version, ts, name, &data);
        if !self.emitting {
            if self.boundary.is_some_and(|b| version >= b) {
                self.emitting = true;
                for e in self.enc.open(ts) {
                    data_frame(out, &e);
                }
            }
            return Ok(self.enc.is_finished() && self.emitting);
        }
        let mut last = false;
        for e in &events {
            data_frame(out, e);
            last |= matches!(e["type"].as_str(), Some("RUN_FINISHED" | "RUN_ERROR"));
        }
        Ok(last)
    }

    async fn step(&mut self) -> Next {
        let mut out = String::new();
        if !self.emitting && self.boundary.is_none() {
            self.emitting = true;
            for e in self.enc.open(self.created_at) {
                data_frame(&mut out, &e);
            }
            return Next::Chunk(out);
        }
        loop {
            let f = match self.tail.try_next() {
                Some(f) => f,
                None if self.ended => return if out.is_empty() { Next::Done } else { Next::Last(out) },
                None if !out.is_empty() => return Next::Chunk(out),
                None => {
                    let wait = tokio::time::timeout(self.keepalive, self.tail.next());
                    tokio::select! {
                        r = wait => match r {
                            Ok(Some(f)) => f,
                            Ok(None) => return Next::Done,
                            Err(_) if self.emitting => return Next::Chunk(KEEPALIVE_FRAME.into()),
                            Err(_) => continue,
                        },
                        _ = self.shutdown.wait_for(|v| *v) => return Next::Done,
                    }
                }
            };
            match self.fold(f, &mut out) {
                Ok(true) => return Next::Last(out),
                Ok(false) => {}
                Err(e) => {
                    let err = json!({ "type": "RUN_ERROR", "message": format!("reading the run failed: {e}"),
                                      "code": e.code() });
                    data_frame(&mut out, &err);
                    return Next::Last(out);
                }
            }
        }
    }
}

async fn stream_from(s: AppState, id: String, boundary: Option<u64>) -> ApiResult<Response> {
    let opened = open_run(&s, &id, None).await?;
    let info = &opened.info;
    let agui = Agui {
        enc: Encoder::new(&info.conversation_id, &info.run_id),
        created_at: info.created_at,
        tail: opened.tail,
        boundary,
        emitting: false,
        ended: opened.ended,
        shutdown: s.shutdown.clone(),
        keepalive: s.http.config.stream_keepalive,
        done: false,
    };
    let body = stream::unfold(agui, |mut a| async move {
        if a.done {
            return None;
        }
        loop {
            match a.step().await {
                Next::Chunk(c) if c.is_empty() => continue,
                Next::Chunk(c) => return Some((Ok::<_, std::convert::Infallible>(Bytes::from(c)), a)),
                Next::Last(c) => {
                    a.done = true;
                    return Some((Ok(Bytes::from(c)), a));
                }
                Next::Done => return None,
            }
        }
    });
    Ok(sse_response(Body::from_stream(counted(body, &s.http.gauges))))
}
