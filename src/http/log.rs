//! `/api/log/*`: read pages, follow as ND-JSON, append notes, verify, stats.

use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::Response;
use axum::Json;
use futures_util::stream;
use od_events::system::NoteRecorded;
use od_events::{Event, StreamId};
use serde::Deserialize;
use serde_json::{json, Value};

use super::body::JsonBody;
use super::error::{ApiError, ApiQuery, ApiResult};
use super::openapi::schemas::{ErrorBody, LogPage, LogStatsBody};
use super::paging::page_error;
use super::table::Routes;
use super::wire::event_line;
use super::AppState;
use crate::limits::{MAX_OP_ID_BYTES, MAX_READ_PAGE};
use crate::page::{decode_cursor, encode_cursor, PageError};
use crate::store::{check_ident, Append, Expected};

pub fn routes() -> Routes {
    Routes::new()
        .get("/api/log/events", read_page)
        .get("/api/log/tail", tail)
        .post("/api/log/notes", append_note)
        .get("/api/log/verify", verify)
        .get("/api/log/stats", stats)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(read_page, tail, append_note, verify, stats))]
pub(super) struct Api;

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct PageQuery {
    /// Exclusive: events after this global seq, or with `stream`, after this stream version.
    after: Option<u64>,
    /// A previous page's `nextCursor` (instead of `after`).
    cursor: Option<String>,
    /// Events per page (default 1000).
    #[param(minimum = 1)]
    limit: Option<usize>,
    /// One stream's events (then `after` is a stream version).
    stream: Option<String>,
}

/// Cursor scopes: the whole log (key: a seq) and one stream (key: a version, then the stream's
/// name, so a cursor of one stream is refused for another).
const LOG_SCOPE: &str = "log";
const STREAM_SCOPE: &str = "log-stream";

/// The exclusive `after` a request names, by `after` or by `cursor` (not both).
fn after_of(q: &PageQuery) -> Result<Option<u64>, ApiError> {
    let Some(c) = q.cursor.as_deref().filter(|c| !c.is_empty()) else { return Ok(q.after) };
    if q.after.is_some() {
        return Err(ApiError::bad_request("cursor", "give `after` or `cursor`, not both"));
    }
    let scope = if q.stream.is_some() { STREAM_SCOPE } else { LOG_SCOPE };
    let key = decode_cursor(scope, c).map_err(page_error)?;
    let (n, rest) = key.split_at_checked(8).ok_or_else(|| page_error(PageError::Cursor("too short".into())))?;
    if rest != q.stream.as_deref().unwrap_or("").as_bytes() {
        return Err(page_error(PageError::Cursor("a cursor of another stream".into())));
    }
    Ok(Some(u64::from_be_bytes(n.try_into().expect("8 bytes"))))
}

/// A page of the log (`after` = a seq) or of one stream (`after` = a version); `after` is exclusive
/// in both, so a client resumes after the last event it has — or passes the page's `nextCursor`
/// as `cursor` (null once the page reached what the log held when it was read; the log only grows
/// at its end, so later events come after every cursor). Past the end: an empty page.
#[utoipa::path(get, path = "/api/log/events", tag = "log", params(PageQuery), responses(
    (status = 200, body = LogPage), (status = 400, description = "A bad query field", body = ErrorBody)))]
async fn read_page(State(s): State<AppState>, ApiQuery(q): ApiQuery<PageQuery>) -> ApiResult<Json<Value>> {
    let limit = q.limit.unwrap_or(1000);
    if limit == 0 || limit > MAX_READ_PAGE {
        return Err(ApiError::bad_request("limit", format!("must be 1..={MAX_READ_PAGE}")));
    }
    let after = after_of(&q)?;
    // The first seq (from 1) or version (from 0) wanted; None: past anything that can exist.
    let from = match after {
        None => Some(if q.stream.is_some() { 0 } else { 1 }),
        Some(a) => a.checked_add(1),
    };
    let frames = match (&q.stream, from) {
        (_, None) => Vec::new(),
        (Some(st), Some(from)) => {
            StreamId::new(st.as_str()).map_err(|e| ApiError::bad_request("stream", e))?;
            s.store.read_stream(st, from, limit)?
        }
        (None, Some(from)) => s.store.read_from(from, limit)?,
    };
    let mut events = Vec::with_capacity(frames.len());
    let mut last = None;
    for f in &frames {
        let stored = f.decode()?;
        last = Some(if q.stream.is_some() { stored.envelope.version } else { stored.envelope.seq });
        events.push(event_line(&stored));
    }
    let head = match &q.stream {
        Some(st) => s.store.stream_version(st)?,
        None => Some(s.store.last_seq()),
    };
    let next = match (last, head) {
        (Some(l), Some(h)) if l < h => {
            let mut key = l.to_be_bytes().to_vec();
            key.extend_from_slice(q.stream.as_deref().unwrap_or("").as_bytes());
            let scope = if q.stream.is_some() { STREAM_SCOPE } else { LOG_SCOPE };
            Some(encode_cursor(scope, &key))
        }
        _ => None,
    };
    Ok(Json(json!({ "events": events, "lastSeq": s.store.last_seq(), "nextCursor": next })))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct TailQuery {
    /// Exclusive: events after this global seq.
    #[serde(default)]
    after: u64,
    /// A `nextCursor` of `GET /api/log/events` (instead of `after`): tail on from that page.
    cursor: Option<String>,
    /// Keep streaming new events.
    #[serde(default)]
    follow: bool,
}

/// ND-JSON: every event after `after` (past the end: nothing); with `follow`, keeps streaming
/// until the client leaves or the daemon stops, with an empty line after each silence of the
/// keep-alive period (so a dead peer is written to and found). Following from past the end waits
/// for the events after `after` (a follower may start before the events it wants, e.g. the
/// daemon's own start event, committed behind the API); the subscription never wraps.
#[utoipa::path(get, path = "/api/log/tail", tag = "log", params(TailQuery), responses(
    (status = 200, description = "One event line (`EventLine`) per line; an `{\"event\":\"error\"}` line ends a broken stream",
        content_type = "application/x-ndjson", body = String),
    (status = 400, description = "A bad query field", body = ErrorBody)))]
async fn tail(State(s): State<AppState>, ApiQuery(q): ApiQuery<TailQuery>) -> ApiResult<Response> {
    let after = match q.cursor.as_deref().filter(|c| !c.is_empty()) {
        None => q.after,
        Some(_) if q.after != 0 => return Err(ApiError::bad_request("cursor", "give `after` or `cursor`, not both")),
        Some(c) => {
            let key = decode_cursor(LOG_SCOPE, c).map_err(page_error)?;
            let n: [u8; 8] = key.try_into().map_err(|_| page_error(PageError::Cursor("not a log cursor".into())))?;
            u64::from_be_bytes(n)
        }
    };
    let sub = s.store.subscribe(after);
    let keepalive = s.http.config.stream_keepalive;
    let state = (sub, s.shutdown.clone(), q.follow, false);
    let body = stream::unfold(state, move |(mut sub, mut shutdown, follow, done)| async move {
        if done {
            return None;
        }
        let next = if follow {
            let waited = tokio::select! {
                n = tokio::time::timeout(keepalive, sub.next()) => n.ok(),
                _ = shutdown.wait_for(|v| *v) => Some(None),
            };
            match waited {
                Some(n) => n,
                None => return Some((Ok("\n".to_string()), (sub, shutdown, follow, false))),
            }
        } else {
            sub.try_next()
        };
        let line = match next? {
            Ok(f) => match f.decode() {
                Ok(stored) => (event_line(&stored).to_string() + "\n", false),
                Err(e) => (error_line(&e.into()), true),
            },
            Err(e) => (error_line(&e.into()), true),
        };
        Some((Ok::<_, std::convert::Infallible>(line.0), (sub, shutdown, follow, line.1)))
    });
    let body = super::sse::counted(body, &s.http.gauges);
    Ok(Response::builder()
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .body(Body::from_stream(body))
        .expect("static response parts"))
}

fn error_line(e: &ApiError) -> String {
    json!({ "event": "error", "data": { "error": { "code": e.code, "message": e.message, "data": e.data } } })
        .to_string()
        + "\n"
}

/// A note appended to a stream.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NoteBody {
    stream: String,
    text: String,
    #[serde(default)]
    tags: Vec<String>,
    /// `"any"` (default), `"none"` (the stream must not exist) or the stream's current version.
    #[schema(value_type = Option<ExpectedDoc>)]
    expected_version: Option<ExpectedIn>,
    op_id: Option<String>,
}

/// `"any"`, `"none"` or a version number.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(as = ExpectedVersion)]
enum ExpectedDoc {
    Version(u64),
    /// `any` or `none`.
    Word(String),
}

/// `"any"`, `"none"` or a version number.
#[derive(Deserialize)]
#[serde(untagged)]
enum ExpectedIn {
    Version(u64),
    Word(String),
}

fn parse_expected(e: Option<ExpectedIn>) -> ApiResult<Expected> {
    match e {
        None => Ok(Expected::Any),
        Some(ExpectedIn::Version(v)) => Ok(Expected::Exactly(v)),
        Some(ExpectedIn::Word(w)) if w == "any" => Ok(Expected::Any),
        Some(ExpectedIn::Word(w)) if w == "none" => Ok(Expected::NoStream),
        Some(ExpectedIn::Word(w)) => {
            Err(ApiError::bad_request("expectedVersion", format!("{w:?} is not a version, \"any\" or \"none\"")))
        }
    }
}

/// Appends a `note_recorded` event.
#[utoipa::path(post, path = "/api/log/notes", tag = "log", request_body = NoteBody, responses(
    (status = 200, body = crate::store::AppendResult),
    (status = 400, body = ErrorBody), (status = 409, description = "`expectedVersion` did not match", body = ErrorBody)))]
async fn append_note(State(s): State<AppState>, JsonBody(b): JsonBody<NoteBody>) -> ApiResult<Json<Value>> {
    let stream = StreamId::new(b.stream).map_err(|e| ApiError::bad_request("stream", e))?;
    if let Some(op) = &b.op_id {
        check_ident(op, MAX_OP_ID_BYTES).map_err(|e| ApiError::bad_request("opId", e))?;
    }
    check_note_stream(stream.as_str())?;
    let append = Append {
        stream,
        expected: parse_expected(b.expected_version)?,
        events: vec![Event::NoteRecorded(NoteRecorded { text: b.text, tags: b.tags })],
        op_id: b.op_id,
        fence: None,
    };
    let r = s.store.append_async(append).await?;
    Ok(Json(serde_json::to_value(r).expect("plain data")))
}

/// Notes live in a namespace of their own (`note:<name>`): every other stream — `run:`,
/// `plugin:`, `snapshot-body:<digest>`, … — is the engine's, and a note there could squat or
/// confuse what the engine reads back.
pub const NOTE_STREAM_PREFIX: &str = "note:";

fn check_note_stream(stream: &str) -> Result<(), ApiError> {
    if stream.len() > NOTE_STREAM_PREFIX.len() && stream.starts_with(NOTE_STREAM_PREFIX) {
        return Ok(());
    }
    Err(ApiError::bad_request(
        "stream",
        format!(
            "{stream:?}: notes are written only to {NOTE_STREAM_PREFIX}<name> streams; the others are the engine's"
        ),
    ))
}

/// Verifies the whole log (hashes, chain, positions, payloads); names the first bad frame.
#[utoipa::path(get, path = "/api/log/verify", tag = "log", responses((status = 200, body = crate::store::VerifyReport)))]
async fn verify(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    let store = s.store.clone();
    let report = tokio::task::spawn_blocking(move || store.verify())
        .await
        .map_err(|e| ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))??;
    Ok(Json(serde_json::to_value(report).expect("plain data")))
}

/// Counts by event kind and stream, and the log's size on disk.
#[utoipa::path(get, path = "/api/log/stats", tag = "log", responses((status = 200, body = LogStatsBody)))]
async fn stats(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    let (stats, _) = s.stats.get()?;
    Ok(Json(json!({
        "stats": stats,
        "lastSeq": s.store.last_seq(),
        "diskBytes": s.store.disk_bytes(),
        "segmentBytes": s.store.segment_bytes(),
        "dataDir": s.data_dir,
    })))
}
