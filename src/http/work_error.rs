//! How project/run/snapshot/file errors become the error envelope.

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::error::ApiError;
use crate::engine::WorkError;

impl From<WorkError> for ApiError {
    fn from(e: WorkError) -> Self {
        let (status, data) = match &e {
            WorkError::Apply(_) | WorkError::Plugin(_) | WorkError::Store(_) => {
                return match e {
                    WorkError::Apply(a) => a.into(),
                    WorkError::Plugin(p) => p.into(),
                    WorkError::Store(s) => s.into(),
                    _ => unreachable!("matched above"),
                }
            }
            WorkError::ProjectNotFound(id) => (StatusCode::NOT_FOUND, json!({ "projectId": id })),
            WorkError::ConversationNotFound(id) => (StatusCode::NOT_FOUND, json!({ "conversationId": id })),
            WorkError::RunNotFound(id) => (StatusCode::NOT_FOUND, json!({ "runId": id })),
            WorkError::SnapshotNotFound(id) => (StatusCode::NOT_FOUND, json!({ "snapshotId": id })),
            WorkError::SnapshotStale { snapshot_id, plugin_id, snapshot_version } => (
                StatusCode::CONFLICT,
                json!({ "snapshotId": snapshot_id, "pluginId": plugin_id, "snapshotVersion": snapshot_version }),
            ),
            WorkError::Exists { what, id } => (StatusCode::CONFLICT, json!({ "kind": what, "id": id })),
            WorkError::Invalid { field, .. } => (StatusCode::BAD_REQUEST, json!({ "field": field })),
            WorkError::RunState { run_id, status, .. } => {
                (StatusCode::CONFLICT, json!({ "runId": run_id, "status": status }))
            }
            WorkError::PathEscapes(p) => (StatusCode::BAD_REQUEST, json!({ "field": "path", "path": p })),
            WorkError::FileNotFound(p) => (StatusCode::NOT_FOUND, json!({ "path": p })),
            WorkError::Io { .. } => (StatusCode::INTERNAL_SERVER_ERROR, Value::Null),
            WorkError::InvalidAnswer { surface_id, violations } => (
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({ "field": "value", "surfaceId": surface_id, "violations": violations }),
            ),
            WorkError::SurfaceRefused { surface_id, reason } => {
                (StatusCode::FORBIDDEN, json!({ "surfaceId": surface_id, "reason": reason }))
            }
            WorkError::AmbiguousId { kind, prefix, candidates, more } => (
                StatusCode::BAD_REQUEST,
                json!({ "kind": kind, "prefix": prefix, "candidates": candidates, "more": more }),
            ),
            WorkError::UnknownAgent { field, id, runnable } => {
                (StatusCode::UNPROCESSABLE_ENTITY, json!({ "field": field, "agentId": id, "runnable": runnable }))
            }
            WorkError::ExecForbidden { field, .. } => (StatusCode::FORBIDDEN, json!({ "field": field })),
            WorkError::AgentRefused { field, .. } => (StatusCode::UNPROCESSABLE_ENTITY, json!({ "field": field })),
            WorkError::SurfaceNotPending { run_id, surface_id } => {
                (StatusCode::NOT_FOUND, json!({ "runId": run_id, "surfaceId": surface_id }))
            }
        };
        ApiError::new(status, e.code(), e.to_string()).with_data(data)
    }
}
