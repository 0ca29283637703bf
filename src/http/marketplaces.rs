//! `/api/marketplaces*`: add, list, show, entries, refresh, trust, remove, search.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use od_projections::Marketplace;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiQuery, ApiResult};
use super::{blocking, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/marketplaces", get(list).post(add))
        .route("/api/marketplaces/search", get(search))
        .route("/api/marketplaces/{id}", get(show).delete(remove))
        .route("/api/marketplaces/{id}/plugins", get(entries))
        .route("/api/marketplaces/{id}/refresh", post(refresh))
        .route("/api/marketplaces/{id}/trust", post(trust))
}

fn market_json(m: &Marketplace) -> Value {
    let index: Value = serde_json::from_str(&m.manifest_json).unwrap_or(Value::Null);
    json!({
        "id": m.id, "url": m.url, "trust": m.trust, "name": index["name"], "version": index["version"],
        "specVersion": index["specVersion"].as_str().unwrap_or("1.0.0"), "pluginCount": index["plugins"].as_array().map_or(0, Vec::len),
        "manifest": index, "addedAt": m.added_at, "refreshedAt": m.refreshed_at,
    })
}

use super::body::JsonBody;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddBody {
    url: String,
    trust: Option<String>,
}

async fn add(State(s): State<AppState>, JsonBody(b): JsonBody<AddBody>) -> ApiResult<(StatusCode, Json<Value>)> {
    let m = blocking(move || Ok(s.engine.add_marketplace(&b.url, b.trust.as_deref())?)).await?;
    Ok((StatusCode::CREATED, Json(json!({ "marketplace": market_json(&m) }))))
}

async fn list(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    let ms = blocking(move || Ok(s.engine.marketplaces()?)).await?;
    Ok(Json(json!({ "marketplaces": ms.iter().map(market_json).collect::<Vec<_>>() })))
}

async fn show(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let m = blocking(move || Ok(s.engine.marketplace(&id)?)).await?;
    Ok(Json(json!({ "marketplace": market_json(&m) })))
}

async fn entries(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let m = blocking(move || Ok(s.engine.marketplace(&id)?)).await?;
    let index: Value = serde_json::from_str(&m.manifest_json).unwrap_or(Value::Null);
    Ok(Json(json!({ "plugins": index["plugins"] })))
}

async fn refresh(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let (m, changed) = blocking(move || Ok(s.engine.refresh_marketplace(&id)?)).await?;
    Ok(Json(json!({ "marketplace": market_json(&m), "changed": changed })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustBody {
    trust: String,
}

async fn trust(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<TrustBody>,
) -> ApiResult<Json<Value>> {
    let m = blocking(move || Ok(s.engine.trust_marketplace(&id, &b.trust)?)).await?;
    Ok(Json(json!({ "marketplace": market_json(&m) })))
}

async fn remove(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let m = blocking(move || Ok(s.engine.remove_marketplace(&id)?)).await?;
    Ok(Json(json!({ "ok": true, "id": m.id })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchQuery {
    #[serde(default)]
    q: String,
}

async fn search(State(s): State<AppState>, ApiQuery(q): ApiQuery<SearchQuery>) -> ApiResult<Json<Value>> {
    let hits = blocking(move || Ok(s.engine.search_marketplaces(&q.q)?)).await?;
    Ok(Json(json!({ "results": hits })))
}
