//! `GET /api/resolve/{kind}/{prefix}`: the one run, project, conversation or snapshot id that is
//! `prefix` or starts with it (`{kind, prefix, id}`), so the CLI and HTTP clients accept the same
//! short ids. Several → 400 `ambiguous-id` naming the candidates; none → the kind's 404.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiResult;
use super::openapi::schemas::ErrorBody;
use super::table::Routes;
use super::{blocking, AppState};

pub fn routes() -> Routes {
    Routes::new().get("/api/resolve/{kind}/{prefix}", resolve)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(resolve))]
pub(super) struct Api;

/// What a prefix resolved to.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // describes the wire shape for the OpenAPI document
struct Resolved {
    /// `run`, `project`, `conversation` or `snapshot`.
    kind: String,
    /// The prefix asked for.
    prefix: String,
    /// The full id.
    id: String,
}

#[utoipa::path(get, path = "/api/resolve/{kind}/{prefix}", tag = "ids",
    params(("kind" = String, Path, description = "run, project, conversation or snapshot"),
        ("prefix" = String, Path, description = "An id or the start of exactly one id")),
    responses((status = 200, body = Resolved), (status = 400, body = ErrorBody, description = "ambiguous-id (candidates in data) or an unknown kind"),
        (status = 404, body = ErrorBody)))]
async fn resolve(State(s): State<AppState>, Path((kind, prefix)): Path<(String, String)>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let id = s.engine.resolve_id(&kind, &prefix)?;
        Ok(json!({ "kind": kind, "prefix": prefix, "id": id }))
    })
    .await?;
    Ok(Json(v))
}
