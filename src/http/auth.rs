//! Bearer-token auth for `/api/*`, on when the daemon has `OD_API_TOKEN`.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

use super::error::ApiError;

/// Rejects `/api/*` requests without `Authorization: Bearer <token>`.
pub async fn require_bearer(State(token): State<Arc<String>>, req: Request, next: Next) -> Response {
    let ok = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| constant_time_eq(t.as_bytes(), token.as_bytes()));
    if ok || !req.uri().path().starts_with("/api/") {
        next.run(req).await
    } else {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "missing or wrong bearer token (OD_API_TOKEN)")
            .into_response()
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
