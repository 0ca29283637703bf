//! `GET /api/agents`: the agents this daemon can run — od's own (`exec`, `dry-run`) and the agent
//! catalog's, detected (`src/agents/`: bounded, cached probes) — and which one a run that names
//! none uses (the rule of `engine/agents.rs`).

use axum::extract::State;
use axum::Json;
use serde_json::Value;

use super::error::{ApiError, ApiResult};
use super::openapi::schemas::{AgentList, ErrorBody};
use super::table::Routes;
use super::{blocking, AppState};
use crate::engine::agents::list;

pub fn routes() -> Routes {
    Routes::new().get("/api/agents", agents)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(agents))]
pub(super) struct Api;

/// The agents a run may name (`agent` / `agentId` of `POST /api/runs`), the default marked, each
/// catalog agent with what detection found (path, version, auth, models, diagnostics with the
/// fix); a daemon whose `OD_AGENT` names no agent od runs, or whose `<data-dir>/agents/*.json`
/// holds a bad entry, answers 400 naming it.
#[utoipa::path(get, path = "/api/agents", tag = "runs", responses(
    (status = 200, body = AgentList), (status = 400, body = ErrorBody)))]
async fn agents(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    let (data, clock, probe) = (s.engine.data_dir().to_path_buf(), s.clock.clone(), s.engine.probe_env());
    let env = s.engine.config().agent.clone();
    blocking(move || list(&env, &data, &probe, &*clock).map_err(ApiError::from)).await.map(Json)
}
