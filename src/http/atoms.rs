//! `/api/atoms`: the bundled atoms plus the reference pipelines of the bundled scenarios.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::openapi::schemas::{AtomList, AtomShow, ErrorBody, PagingParams};
use super::paging::Paging;
use super::table::Routes;
use super::AppState;
use crate::page::page_sorted;

pub fn routes() -> Routes {
    Routes::new().get("/api/atoms", list).get("/api/atoms/{id}", show)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(list, show))]
pub(super) struct Api;

fn manifest(p: &od_projections::InstalledPlugin) -> Value {
    serde_json::from_str(&p.manifest_json).unwrap_or(Value::Null)
}

/// Scenarios whose pipeline uses `atom` name the task kinds it serves.
fn atom_json(p: &od_projections::InstalledPlugin, scenarios: &[Value]) -> Value {
    let m = manifest(p);
    let mut task_kinds: Vec<String> = scenarios
        .iter()
        .filter(|s| {
            s["od"]["pipeline"]["stages"].as_array().is_some_and(|st| {
                st.iter().any(|x| x["atoms"].as_array().is_some_and(|a| a.iter().any(|i| i == &p.id)))
            })
        })
        .filter_map(|s| s["od"]["taskKind"].as_str().map(str::to_string))
        .collect();
    task_kinds.sort();
    task_kinds.dedup();
    json!({ "id": p.id, "label": p.title, "description": m["description"], "status": "implemented", "taskKinds": task_kinds })
}

fn split(s: &AppState) -> (Vec<od_projections::InstalledPlugin>, Vec<Value>) {
    let b: Vec<_> = s.engine.bundled().values().cloned().collect();
    let scenarios = b.iter().map(manifest).filter(|m| m["od"]["kind"] == "scenario").collect();
    let atoms = b.into_iter().filter(|p| manifest(p)["od"]["kind"] == "atom").collect();
    (atoms, scenarios)
}

/// Atoms by id, paged (`limit`, `cursor` → `nextCursor`); `pipelines` (the bundled scenarios'
/// reference pipelines, a short fixed list) comes whole with every page.
#[utoipa::path(get, path = "/api/atoms", tag = "atoms", params(PagingParams),
    responses((status = 200, body = AtomList), (status = 400, body = ErrorBody)))]
async fn list(State(s): State<AppState>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("atoms")?;
    let (atoms, scenarios) = split(&s);
    let pipelines: Vec<Value> = scenarios
        .iter()
        .map(|m| json!({ "id": m["name"], "title": m["title"], "taskKind": m["od"]["taskKind"], "pipeline": m["od"]["pipeline"] }))
        .collect();
    let page = page_sorted("atoms", &req, atoms, |a| a.id.as_bytes().to_vec());
    let mut v = page.map(|a| atom_json(&a, &scenarios)).to_json("atoms");
    v["pipelines"] = Value::Array(pipelines);
    Ok(Json(v))
}

/// One atom with its SKILL.md body and manifest.
#[utoipa::path(get, path = "/api/atoms/{id}", tag = "atoms", params(("id" = String, Path)),
    responses((status = 200, body = AtomShow), (status = 404, body = ErrorBody)))]
async fn show(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let (atoms, scenarios) = split(&s);
    let atom = atoms.iter().find(|a| a.id == id).ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "atom-not-found", format!("no atom {id}"))
            .with_data(json!({ "atomId": id }))
    })?;
    let body = crate::plugins::bundled::find(&id)
        .and_then(|b| b.files.iter().find(|(p, _)| *p == "SKILL.md").map(|(_, c)| c.to_string()))
        .unwrap_or_default();
    let mut v = atom_json(atom, &scenarios);
    v["skillBody"] = json!(body);
    v["manifest"] = manifest(atom);
    Ok(Json(json!({ "atom": v })))
}
