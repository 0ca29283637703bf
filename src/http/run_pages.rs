//! Lists read from one run's own stream, paged by stream position: `GET /api/runs/:id/logs` (what
//! the agent said, as lines) and `GET /api/runs/:id/devloop-iterations` (a fork's first page adds
//! the rows it inherited). A cursor is the stream
//! version of the last item returned; a run's stream only grows at its end, so events recorded
//! while a client pages (a run still going) land after every cursor already handed out, and a
//! page reads the stream from the cursor on, in chunks, only until it is full.

use axum::Json;
use od_events::{Event, Stored};
use serde_json::{json, Value};

use super::error::ApiResult;
use super::paging::Paging;
use super::{blocking, AppState};
use crate::engine::errors::WorkError;
use crate::page::{Page, PageReq, Pager};
use crate::runner::wire;
use crate::store::decode_frame;

use crate::limits::RUN_PAGE_READ_CHUNK as CHUNK;

/// Walks run `id`'s events from the cursor on, offering each mapped item to a pager keyed by the
/// event's stream version; stops once the page is full.
fn page_run(
    s: &AppState,
    scope: &str,
    id: &str,
    req: &PageReq,
    mut item: impl FnMut(&Stored) -> Option<Value>,
) -> Result<Page<Value>, WorkError> {
    s.engine.run_info(id)?;
    let stream = format!("run:{id}");
    let mut at = match req.after.as_deref() {
        None => 0,
        Some(k) => version_of(k).map_or(u64::MAX, |v| v.saturating_add(1)),
    };
    let mut pager = Pager::new(scope, req, false);
    'read: loop {
        let frames = s.store.read_stream(&stream, at, CHUNK)?;
        if frames.is_empty() {
            break;
        }
        for f in &frames {
            let st = decode_frame(f.view())?;
            at = st.envelope.version + 1;
            if let Some(v) = item(&st) {
                if !pager.push(&st.envelope.version.to_be_bytes(), v) {
                    break 'read;
                }
            }
        }
    }
    Ok(pager.finish())
}

/// The stream version inside a cursor key (8 bytes, big-endian); None for a key of another shape.
fn version_of(k: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(k.try_into().ok()?))
}

/// A logs line of one event, or None for events that say nothing to read.
fn log_line(st: &Stored) -> Option<Value> {
    let (name, data) = wire::encode(st)?;
    let text = match name {
        "agent" => match data["type"].as_str() {
            Some("text_delta") | Some("thinking_delta") => data["delta"].as_str().map(String::from),
            Some("status") => {
                Some(format!("[{}] {}", data["label"].as_str().unwrap_or(""), data["detail"].as_str().unwrap_or("")))
            }
            Some("raw") => data["line"].as_str().map(String::from),
            _ => None,
        },
        "stdout" | "stderr" => data["chunk"].as_str().map(String::from),
        "pipeline_stage_failed" => data["message"].as_str().map(|m| format!("stage failed: {m}")),
        "end" => Some(format!("end: {}", data["status"].as_str().unwrap_or(""))),
        _ => None,
    }?;
    Some(json!({ "id": st.envelope.version, "channel": name, "stageId": data["stageId"], "text": text,
        "at": st.envelope.recorded_at }))
}

/// `{runId, entries, nextCursor}`.
pub async fn logs(s: AppState, id: String, paging: Paging, since: Option<i64>) -> ApiResult<Json<Value>> {
    let req = paging.req("run-logs")?;
    let v = blocking(move || {
        let since = since.unwrap_or(i64::MIN);
        let page = page_run(&s, "run-logs", &id, &req, |st| {
            (st.envelope.recorded_at >= since).then(|| log_line(st)).flatten()
        })?;
        let mut v = page.to_json("entries");
        v["runId"] = json!(id);
        Ok(v)
    })
    .await?;
    Ok(Json(v))
}

/// `{runId, iterations, nextCursor}`.
pub async fn devloop(s: AppState, id: String, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("devloop")?;
    let v = blocking(move || {
        let page = page_run(&s, "devloop", &id, &req, |st| match &st.event {
            Event::DevloopIteration(e) => Some(wire::devloop_row(st, e)),
            _ => None,
        })?;
        let mut v = page.to_json("iterations");
        v["runId"] = json!(id);
        // A fork's first page also carries the rows it inherited (its ancestors', up to each fork
        // point): few, as a devloop's rounds are capped.
        if req.after.is_none() && s.engine.fork_link(&id)?.is_some() {
            let mut segments = s.engine.lineage(&id)?;
            segments.pop();
            let rows: Vec<Value> = segments
                .iter()
                .flat_map(|seg| seg.events.iter().map(move |st| (seg, st)))
                .filter_map(|(seg, st)| match &st.event {
                    Event::DevloopIteration(e) => {
                        let mut row = wire::devloop_row(st, e);
                        row["runId"] = json!(seg.run_id);
                        Some(row)
                    }
                    _ => None,
                })
                .collect();
            v["inherited"] = json!(rows);
        }
        Ok(v)
    })
    .await?;
    Ok(Json(v))
}
