//! `/api/marketplaces*`: add, list, show, entries, refresh, trust, remove, search.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use od_projections::Marketplace;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiQuery, ApiResult};
use super::paging::Paging;
use super::{blocking, AppState};
use crate::page::{page_sorted, Pager};

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

/// Marketplaces by id, paged.
async fn list(State(s): State<AppState>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("marketplaces")?;
    let ms = blocking(move || Ok(s.engine.marketplaces()?)).await?;
    let page = page_sorted("marketplaces", &req, ms, |m| m.id.as_bytes().to_vec());
    Ok(Json(page.map(|m| market_json(&m)).to_json("marketplaces")))
}

async fn show(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let m = blocking(move || Ok(s.engine.marketplace(&id)?)).await?;
    Ok(Json(json!({ "marketplace": market_json(&m) })))
}

/// A marketplace's entries in its index's order, paged by position in the index (an index only
/// changes on `refresh`; a refresh between two pages can shift positions).
async fn entries(State(s): State<AppState>, Path(id): Path<String>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("marketplace-plugins")?;
    let m = blocking(move || Ok(s.engine.marketplace(&id)?)).await?;
    let index: Value = serde_json::from_str(&m.manifest_json).unwrap_or(Value::Null);
    let mut pager = Pager::new("marketplace-plugins", &req, false);
    for (i, e) in index["plugins"].as_array().into_iter().flatten().enumerate() {
        if !pager.push(&(i as u32).to_be_bytes(), e) {
            break;
        }
    }
    Ok(Json(pager.finish().to_json("plugins")))
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
    /// Paging (read by [`Paging`]).
    #[allow(dead_code)]
    limit: Option<String>,
    #[allow(dead_code)]
    cursor: Option<String>,
}

/// Matching entries, by marketplace id then position in its index, paged: a marketplace added
/// meanwhile lands in its place by id and never shifts a later page.
async fn search(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<SearchQuery>,
    paging: Paging,
) -> ApiResult<Json<Value>> {
    let req = paging.req("marketplace-search")?;
    let hits = blocking(move || Ok(s.engine.search_marketplaces(&q.q)?)).await?;
    let mut pager = Pager::new("marketplace-search", &req, false);
    for (pos, h) in hits {
        let mut key = h["marketplaceId"].as_str().unwrap_or("").as_bytes().to_vec();
        key.push(0);
        key.extend_from_slice(&(pos as u64).to_be_bytes());
        if !pager.push(&key, h) {
            break;
        }
    }
    Ok(Json(pager.finish().to_json("results")))
}
