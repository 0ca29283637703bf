//! `/api/marketplaces*`: add, list, show, entries, refresh, trust, remove, search.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use od_projections::Marketplace;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiQuery, ApiResult};
use super::openapi::schemas::{
    ErrorBody, MarketplaceEntries, MarketplaceList, MarketplaceRefreshed, MarketplaceSearch, MarketplaceShow,
    PagingParams, Removed,
};
use super::paging::Paging;
use super::table::Routes;
use super::{blocking, AppState};
use crate::page::{page_sorted, Pager};

pub fn routes() -> Routes {
    Routes::new()
        .get("/api/marketplaces", list)
        .post("/api/marketplaces", add)
        .get("/api/marketplaces/search", search)
        .get("/api/marketplaces/{id}", show)
        .delete("/api/marketplaces/{id}", remove)
        .get("/api/marketplaces/{id}/plugins", entries)
        .post("/api/marketplaces/{id}/refresh", refresh)
        .post("/api/marketplaces/{id}/trust", trust)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(list, add, search, show, remove, entries, refresh, trust))]
pub(super) struct Api;

fn market_json(m: &Marketplace) -> Value {
    let index: Value = serde_json::from_str(&m.manifest_json).unwrap_or(Value::Null);
    json!({
        "id": m.id, "url": m.url, "trust": m.trust, "name": index["name"], "version": index["version"],
        "specVersion": index["specVersion"].as_str().unwrap_or("1.0.0"), "pluginCount": index["plugins"].as_array().map_or(0, Vec::len),
        "manifest": index, "addedAt": m.added_at, "refreshedAt": m.refreshed_at,
    })
}

use super::body::JsonBody;

/// A marketplace index to add.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct AddBody {
    /// The index's URL, or a local path to it.
    url: String,
    /// `official`, `trusted` or `restricted` (default).
    trust: Option<String>,
}

/// Fetches and records a marketplace index.
#[utoipa::path(post, path = "/api/marketplaces", tag = "marketplaces", request_body = AddBody, responses(
    (status = 201, body = MarketplaceShow), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
    (status = 422, description = "Not a marketplace index", body = ErrorBody)))]
async fn add(State(s): State<AppState>, JsonBody(b): JsonBody<AddBody>) -> ApiResult<(StatusCode, Json<Value>)> {
    if b.url.trim().is_empty() {
        return Err(super::error::ApiError::bad_request("url", "the index's URL or path is required"));
    }
    let m = blocking(move || Ok(s.engine.add_marketplace(&b.url, b.trust.as_deref())?)).await?;
    Ok((StatusCode::CREATED, Json(json!({ "marketplace": market_json(&m) }))))
}

/// Marketplaces by id, paged.
#[utoipa::path(get, path = "/api/marketplaces", tag = "marketplaces", params(PagingParams),
    responses((status = 200, body = MarketplaceList), (status = 400, body = ErrorBody)))]
async fn list(State(s): State<AppState>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("marketplaces")?;
    let ms = blocking(move || Ok(s.engine.marketplaces()?)).await?;
    let page = page_sorted("marketplaces", &req, ms, |m| m.id.as_bytes().to_vec());
    Ok(Json(page.map(|m| market_json(&m)).to_json("marketplaces")))
}

#[utoipa::path(get, path = "/api/marketplaces/{id}", tag = "marketplaces", params(("id" = String, Path, description = "Marketplace id")),
    responses((status = 200, body = MarketplaceShow), (status = 404, body = ErrorBody)))]
async fn show(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let m = blocking(move || Ok(s.engine.marketplace(&id)?)).await?;
    Ok(Json(json!({ "marketplace": market_json(&m) })))
}

/// A marketplace's entries in its index's order, paged by position in the index (an index only
/// changes on `refresh`; a refresh between two pages can shift positions).
#[utoipa::path(get, path = "/api/marketplaces/{id}/plugins", tag = "marketplaces", params(("id" = String, Path, description = "Marketplace id"), PagingParams),
    responses((status = 200, body = MarketplaceEntries), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
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

/// Fetches the index again; `changed` says whether it differs.
#[utoipa::path(post, path = "/api/marketplaces/{id}/refresh", tag = "marketplaces", params(("id" = String, Path, description = "Marketplace id")),
    responses((status = 200, body = MarketplaceRefreshed), (status = 404, body = ErrorBody)))]
async fn refresh(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let (m, changed) = blocking(move || Ok(s.engine.refresh_marketplace(&id)?)).await?;
    Ok(Json(json!({ "marketplace": market_json(&m), "changed": changed })))
}

/// The marketplace's new trust level.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct TrustBody {
    /// `official`, `trusted` or `restricted`.
    trust: String,
}

#[utoipa::path(post, path = "/api/marketplaces/{id}/trust", tag = "marketplaces", params(("id" = String, Path, description = "Marketplace id")), request_body = TrustBody,
    responses((status = 200, body = MarketplaceShow), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn trust(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<TrustBody>,
) -> ApiResult<Json<Value>> {
    let m = blocking(move || Ok(s.engine.trust_marketplace(&id, &b.trust)?)).await?;
    Ok(Json(json!({ "marketplace": market_json(&m) })))
}

#[utoipa::path(delete, path = "/api/marketplaces/{id}", tag = "marketplaces", params(("id" = String, Path, description = "Marketplace id")),
    responses((status = 200, body = Removed), (status = 404, body = ErrorBody)))]
async fn remove(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let m = blocking(move || Ok(s.engine.remove_marketplace(&id)?)).await?;
    Ok(Json(json!({ "ok": true, "id": m.id })))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct SearchQuery {
    /// Words to match in entries' names, titles, descriptions and tags.
    #[serde(default)]
    q: String,
    /// Paging (read by [`Paging`]).
    #[allow(dead_code)]
    #[param(value_type = Option<u32>)]
    limit: Option<String>,
    #[allow(dead_code)]
    cursor: Option<String>,
}

/// Matching entries, by marketplace id then position in its index, paged: a marketplace added
/// meanwhile lands in its place by id and never shifts a later page.
#[utoipa::path(get, path = "/api/marketplaces/search", tag = "marketplaces", params(SearchQuery),
    responses((status = 200, body = MarketplaceSearch), (status = 400, body = ErrorBody)))]
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
