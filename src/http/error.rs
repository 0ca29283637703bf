//! The one error envelope every route returns: `{"error":{"code","message","data"}}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::store::StoreError;

/// An API error: HTTP status, stable code, human message, structured data.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub data: Value,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), data: Value::Null }
    }
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = data;
        self
    }
    pub fn bad_request(field: &str, message: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid-input", format!("{field}: {message}"))
            .with_data(json!({ "field": field }))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": { "code": self.code, "message": self.message, "data": self.data } });
        (self.status, Json(body)).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let status = match &e {
            StoreError::Conflict { .. } | StoreError::LeaseLost { .. } | StoreError::RunEnded { .. } => {
                StatusCode::CONFLICT
            }
            StoreError::DaemonIdInUse { .. } => StatusCode::SERVICE_UNAVAILABLE,
            StoreError::LimitExceeded { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            StoreError::Invalid { .. } => StatusCode::BAD_REQUEST,
            StoreError::Closed | StoreError::Unreachable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            StoreError::Config { .. } => StatusCode::BAD_REQUEST,
            StoreError::Full { .. } => StatusCode::INSUFFICIENT_STORAGE,
            StoreError::Corrupt { .. } | StoreError::Io { .. } | StoreError::Poisoned(_) | StoreError::Locked(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        let data = match &e {
            StoreError::Conflict { stream, expected, actual } => {
                json!({ "stream": stream, "expected": expected, "actual": actual })
            }
            StoreError::LimitExceeded { limit, value, max } => {
                json!({ "limit": limit, "value": value, "max": max })
            }
            StoreError::Invalid { field, .. } => json!({ "field": field }),
            StoreError::Corrupt { seq, .. } => json!({ "seq": seq }),
            StoreError::LeaseLost { run_id, epoch } => json!({ "runId": run_id, "epoch": epoch }),
            StoreError::RunEnded { stream } => json!({ "stream": stream }),
            StoreError::DaemonIdInUse { id, listen } => json!({ "daemonId": id, "listen": listen }),
            StoreError::Config { setting, .. } | StoreError::Unreachable { setting, .. } => {
                json!({ "setting": setting })
            }
            StoreError::Io { .. }
            | StoreError::Full { .. }
            | StoreError::Poisoned(_)
            | StoreError::Closed
            | StoreError::Locked(_) => Value::Null,
        };
        ApiError { status, code: e.code(), message: e.to_string(), data }
    }
}

/// Result type of handlers.
pub type ApiResult<T> = Result<T, ApiError>;

/// A query string as a handler takes it: a malformed one (an integer out of range, an unknown
/// field) is a 400 `invalid-input` envelope naming `query`, not axum's plain-text rejection.
pub struct ApiQuery<T>(pub T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> axum::extract::FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(q)| ApiQuery(q))
            .map_err(|e| ApiError::bad_request("query", e.body_text()))
    }
}
