//! Request bodies as handlers take them — [`JsonBody`] (415 unless `application/json`),
//! [`OptionalJson`] (no body at all is None) and [`RawBody`] — each bounded by its route's named
//! limit (413 `payload-too-large` naming it, see [`limited`]) and by the body-read deadline the
//! gate sets (408 `request-timeout`, see [`with_deadline`]). Every failure is the one envelope.

use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, FailedToBufferBody, JsonRejection};
use axum::extract::{DefaultBodyLimit, FromRequest, OptionalFromRequest, Request};
use axum::http::StatusCode;
use axum::routing::MethodRouter;
use axum::{Extension, Json};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::time::Duration;

use super::error::ApiError;
use crate::limits::MAX_REQUEST_BODY_BYTES;

/// A route's body limit: the bytes, and the name of the constant in `limits.rs` a 413 reports.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimit {
    pub name: &'static str,
    pub max: usize,
}

/// The limit of a route that names none.
pub const DEFAULT_LIMIT: BodyLimit = BodyLimit { name: "MAX_REQUEST_BODY_BYTES", max: MAX_REQUEST_BODY_BYTES };

/// Gives a route its own body limit (axum's, and the name a 413 reports).
pub fn limited<S: Clone + Send + Sync + 'static>(
    route: MethodRouter<S>,
    name: &'static str,
    max: usize,
) -> MethodRouter<S> {
    route
        .layer::<_, std::convert::Infallible>(DefaultBodyLimit::max(max))
        .layer::<_, std::convert::Infallible>(Extension(BodyLimit { name, max }))
}

/// The error a body stream yields when its deadline passes.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct BodyTimeout(Duration);

/// Wraps a request body (if it has one) so it fails with [`BodyTimeout`] unless it is complete
/// within `limit` of the handler's first read.
pub fn with_deadline(req: Request, limit: Duration) -> Request {
    if !super::guard::has_body(req.headers()) {
        return req;
    }
    req.map(|body| {
        let state = (body.into_data_stream(), None::<tokio::time::Instant>, false);
        let timed = futures_util::stream::unfold(state, move |(mut s, deadline, done)| async move {
            if done {
                return None;
            }
            let deadline = deadline.unwrap_or_else(|| tokio::time::Instant::now() + limit);
            match tokio::time::timeout_at(deadline, s.next()).await {
                Ok(Some(Ok(chunk))) => Some((Ok(chunk), (s, Some(deadline), false))),
                Ok(Some(Err(e))) => Some((Err(axum::BoxError::from(e)), (s, Some(deadline), true))),
                Ok(None) => None,
                Err(_) => Some((Err(BodyTimeout(limit).into()), (s, Some(deadline), true))),
            }
        });
        Body::from_stream(timed)
    })
}

fn too_large(limit: BodyLimit) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload-too-large",
        format!("the request body is larger than {} ({} bytes)", limit.name, limit.max),
    )
    .with_data(json!({ "limit": limit.name, "max": limit.max }))
}

fn is_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err.is::<BodyTimeout>() {
            return true;
        }
        cur = err.source();
    }
    false
}

fn bytes_rejection(e: BytesRejection, limit: BodyLimit) -> ApiError {
    match e {
        BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_)) => too_large(limit),
        BytesRejection::FailedToBufferBody(FailedToBufferBody::UnknownBodyError(u)) if is_timeout(&u) => {
            ApiError::new(StatusCode::REQUEST_TIMEOUT, "request-timeout", u.body_text())
        }
        other => ApiError::bad_request("body", other.body_text()),
    }
}

fn json_rejection(e: JsonRejection, limit: BodyLimit, ct: Option<&str>) -> ApiError {
    match e {
        JsonRejection::MissingJsonContentType(_) => super::guard::unsupported_media_type(ct, "application/json"),
        JsonRejection::BytesRejection(b) => bytes_rejection(b, limit),
        other => ApiError::bad_request("body", other.body_text()),
    }
}

fn limit_of(req: &Request) -> BodyLimit {
    req.extensions().get::<BodyLimit>().copied().unwrap_or(DEFAULT_LIMIT)
}

fn content_type(req: &Request) -> Option<String> {
    req.headers().get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string)
}

/// A JSON request body (`Content-Type: application/json`, or `+json`).
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let (limit, ct) = (limit_of(&req), content_type(&req));
        <Json<T> as FromRequest<S>>::from_request(req, state)
            .await
            .map(|Json(v)| JsonBody(v))
            .map_err(|e| json_rejection(e, limit, ct.as_deref()))
    }
}

/// A JSON body that may be left out entirely (no `Content-Type`, no body): None.
pub struct OptionalJson<T>(pub Option<T>);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let (limit, ct) = (limit_of(&req), content_type(&req));
        <Json<T> as OptionalFromRequest<S>>::from_request(req, state)
            .await
            .map(|v| OptionalJson(v.map(|Json(v)| v)))
            .map_err(|e| json_rejection(e, limit, ct.as_deref()))
    }
}

/// The body's bytes, whatever their type (the gate already refused the types a form can send).
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let limit = limit_of(&req);
        Bytes::from_request(req, state).await.map(RawBody).map_err(|e| bytes_rejection(e, limit))
    }
}

fn spool_error(e: std::io::Error) -> ApiError {
    crate::engine::WorkError::io("spooling the request body", e).into()
}

/// Streams the request's body into a new file at `path` (never whole in memory: chunks go to a
/// blocking writer through a short queue), bounded by the route's limit (413 naming it) and the
/// body deadline (408); the file is removed on a failure.
pub async fn spool_to_file(req: Request, path: &std::path::Path) -> Result<u64, ApiError> {
    let limit = limit_of(&req);
    let mut stream = req.into_body().into_data_stream();
    let f = std::fs::File::create_new(path).map_err(spool_error)?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Bytes>(4);
    let writer = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(f);
        for chunk in rx {
            f.write_all(&chunk)?;
        }
        f.flush()
    });
    let read = async {
        let mut n = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| match is_timeout(&e as &(dyn std::error::Error + 'static)) {
                true => ApiError::new(StatusCode::REQUEST_TIMEOUT, "request-timeout", e.to_string()),
                false => ApiError::bad_request("body", e.to_string()),
            })?;
            n += chunk.len() as u64;
            if n > limit.max as u64 {
                return Err(too_large(limit));
            }
            let sent = match tx.try_send(chunk) {
                Ok(()) => true,
                // The queue is short: a full one is waited on off the async threads.
                Err(std::sync::mpsc::TrySendError::Full(chunk)) => {
                    let tx = tx.clone();
                    tokio::task::spawn_blocking(move || tx.send(chunk)).await.is_ok_and(|r| r.is_ok())
                }
                Err(std::sync::mpsc::TrySendError::Disconnected(_)) => false,
            };
            if !sent {
                break; // the writer failed: its error is reported below
            }
        }
        Ok(n)
    }
    .await;
    drop(tx);
    let wrote = writer.await.map_err(|e| spool_error(std::io::Error::other(e)))?.map_err(spool_error);
    let out = read.and_then(|n| wrote.map(|_| n));
    if out.is_err() {
        let _ = std::fs::remove_file(path);
    }
    out
}

/// Whether the request's type is JSON (`application/json` or `application/*+json`).
pub fn is_json(ct: Option<&str>) -> bool {
    let Some(t) = ct.map(|c| c.split(';').next().unwrap_or("").trim().to_ascii_lowercase()) else { return false };
    t == "application/json" || (t.starts_with("application/") && t.ends_with("+json"))
}
