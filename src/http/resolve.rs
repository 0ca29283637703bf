//! `GET /api/resolve/{kind}/{prefix}`: the one run, project, conversation or snapshot id that is
//! `prefix` or starts with it (`{kind, prefix, id}`), so the CLI and HTTP clients accept the same
//! short ids. Several → 400 `ambiguous-id` naming the candidates; none → the kind's 404.

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::error::ApiResult;
use super::{blocking, AppState};

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/resolve/{kind}/{prefix}", get(resolve))
}

async fn resolve(State(s): State<AppState>, Path((kind, prefix)): Path<(String, String)>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let id = s.engine.resolve_id(&kind, &prefix)?;
        Ok(json!({ "kind": kind, "prefix": prefix, "id": id }))
    })
    .await?;
    Ok(Json(v))
}
