//! `/api/projections`: every projection's name, version, kind and the seq it reflects, and
//! `POST /api/projections/rebuild` (`{"name"?}`): fold one projection — or all — from the log again.

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

use super::body::OptionalJson;
use super::error::{ApiError, ApiResult};
use super::{blocking, AppState};
use crate::projector::Managed;

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/projections", get(list)).route("/api/projections/rebuild", post(rebuild))
}

fn all(s: &AppState) -> Vec<Arc<dyn Managed>> {
    let mut v = s.engine.projections();
    v.push(s.stats.clone());
    v
}

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

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RebuildBody {
    name: Option<String>,
}

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
