//! `GET /api/agents`: the agents this daemon can run now and which one a run that names none uses
//! (the rule of `engine/agents.rs`). The agent catalog (issue 31) will extend this list.

use axum::Json;
use serde_json::Value;

use super::error::{ApiError, ApiResult};
use super::openapi::schemas::{AgentList, ErrorBody};
use super::table::Routes;
use crate::engine::agents::{list, AgentEnv};

pub fn routes() -> Routes {
    Routes::new().get("/api/agents", agents)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(agents))]
pub(super) struct Api;

/// The agents a run may name (`agent` / `agentId` of `POST /api/runs`), the default marked; a
/// daemon whose `OD_AGENT` names no agent od runs answers 400 naming it.
#[utoipa::path(get, path = "/api/agents", tag = "runs", responses(
    (status = 200, body = AgentList), (status = 400, body = ErrorBody)))]
async fn agents() -> ApiResult<Json<Value>> {
    list(&AgentEnv::from_env()).map(Json).map_err(ApiError::from)
}
