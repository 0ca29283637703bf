//! `/api/projections`: every projection's name, version, kind and the seq it reflects, and
//! `POST /api/projections/rebuild` (`{"name"?}`): fold one projection — or all — from the log again.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

use super::body::OptionalJson;
use super::error::{ApiError, ApiResult};
use super::openapi::schemas::{ErrorBody, ProjectionList, Rebuilt};
use super::table::Routes;
use super::{blocking, AppState};
use crate::projector::Managed;

pub fn routes() -> Routes {
    Routes::new().get("/api/projections", list).post("/api/projections/rebuild", rebuild)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(list, rebuild))]
pub(super) struct Api;

fn all(s: &AppState) -> Vec<Arc<dyn Managed>> {
    let mut v = s.engine.projections();
    v.extend(s.tools.projections());
    v.push(s.stats.clone());
    v
}

/// Every read model: name, version, kind and the seq it reflects (each caught up first).
#[utoipa::path(get, path = "/api/projections", tag = "projections", responses((status = 200, body = ProjectionList)))]
async fn list(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    let v = blocking(move || {
        let mut out = Vec::new();
        for p in all(&s) {
            p.catch_up()?;
            out.push(p.status());
        }
        Ok(json!({ "projections": out }))
    })
    .await?;
    Ok(Json(v))
}

/// Which projection to rebuild (none: all).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct RebuildBody {
    name: Option<String>,
}

/// Folds one projection (or all) from the log again. The body is optional.
#[utoipa::path(post, path = "/api/projections/rebuild", tag = "projections",
    request_body(content = Option<RebuildBody>, content_type = "application/json"),
    responses((status = 200, body = Rebuilt), (status = 400, description = "No such projection", body = ErrorBody)))]
async fn rebuild(State(s): State<AppState>, OptionalJson(b): OptionalJson<RebuildBody>) -> ApiResult<Json<Value>> {
    let name = b.unwrap_or_default().name;
    let v = blocking(move || {
        let chosen: Vec<_> =
            all(&s).into_iter().filter(|p| name.as_deref().is_none_or(|n| p.status().name == n)).collect();
        if chosen.is_empty() {
            let known: Vec<&str> = all(&s).iter().map(|p| p.status().name).collect();
            return Err(ApiError::bad_request(
                "name",
                format!("no projection {:?} (known: {})", name.unwrap_or_default(), known.join(", ")),
            ));
        }
        let mut out = Vec::new();
        for p in chosen {
            p.rebuild()?;
            out.push(p.status());
        }
        Ok(json!({ "ok": true, "rebuilt": out }))
    })
    .await?;
    Ok(Json(v))
}
