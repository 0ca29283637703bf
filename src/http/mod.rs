//! The HTTP API (axum): state shared by handlers, and the router with its gate.
//!
//! Routes live one file per area: `system.rs` (health, version, daemon status/stop), `log.rs`
//! (read, tail/follow, append notes, verify, stats), … Every error is the envelope in `error.rs`.
//! In front of every route, `guard.rs` (Host, Origin, content types), `auth.rs` (tokens, who may
//! supply an agent command) and `body.rs` (body limits and deadline); `serve.rs` serves the router
//! on a listener with timeouts and a connection cap (`config.rs`), over TLS when the daemon has a
//! certificate (`tls.rs`). Every route is registered through
//! `table.rs`, and documented in `openapi/` (served at `/api/openapi.json`). `session.rs` is the
//! browser's login (`/api/auth/*`, sessions in `sessions.rs`); the web UI itself (`ui`) is served beside the table.

mod agents;
mod agui;
pub mod agui_encode;
mod artifact_preview;
mod atoms;
pub mod auth;
pub mod body;
pub mod config;
pub mod connectors;
pub mod error;
pub mod file_response;
mod forks;
mod genui;
pub mod guard;
mod log;
mod marketplaces;
pub mod mcp_oauth;
pub mod openapi;
pub mod paging;
pub mod plugins;
mod preview;
mod projections;
mod projects;
mod resolve;
mod run_pages;
mod runs;
pub mod serve;
mod session;
pub mod sessions;
pub mod sse;
mod system;
pub mod table;
pub mod tail;
pub mod throttle;
pub mod tls;
pub mod tools;
pub mod ui;
pub mod wire;
mod work_error;

use axum::http::StatusCode;
use axum::Router;
use od_projections::LogStats;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::watch;

use crate::clock::SharedClock;
use crate::projector::Projector;
use crate::store::Store;
use error::ApiError;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub engine: Arc<crate::engine::Engine>,
    /// The agent tool catalog and the browser actions waiting in this process.
    pub tools: Arc<crate::tools::Tools>,
    /// Drives runs.
    pub runner: Arc<crate::runner::Runner>,
    pub stats: Arc<Projector<LogStats>>,
    pub clock: SharedClock,
    pub data_dir: PathBuf,
    /// `host:port` the API listens on (set once bound).
    pub listen: Arc<std::sync::OnceLock<String>>,
    pub started_at: i64,
    /// Flips to true when the daemon is shutting down; streaming responses end on it.
    pub shutdown: watch::Receiver<bool>,
    /// Asks the daemon to shut down (`POST /api/daemon/stop`).
    pub stop: Arc<watch::Sender<bool>>,
    /// True when this server runs inside a CLI process (embedded mode).
    pub embedded: bool,
    /// The server's settings, who may reach it, and its gauges.
    pub http: Arc<HttpShared>,
}

/// What the HTTP layer shares: settings, access rules, live counts.
#[derive(Default)]
pub struct HttpShared {
    pub config: config::HttpConfig,
    pub access: guard::Access,
    pub gauges: Arc<serve::Gauges>,
    /// Wrong tokens by client address (shared by a daemon's listeners).
    pub throttle: Arc<throttle::Throttle>,
    /// Browser login sessions (shared by a daemon's listeners).
    pub sessions: Arc<sessions::Sessions>,
}

/// Every area's routes, in one table (`table.rs`).
fn table() -> table::Routes {
    table::Routes::new()
        .merge(system::routes())
        .merge(session::routes())
        .merge(openapi::routes())
        .merge(log::routes())
        .merge(projections::routes())
        .merge(plugins::routes())
        .merge(atoms::routes())
        .merge(marketplaces::routes())
        .merge(projects::routes())
        .merge(runs::routes())
        .merge(agents::routes())
        .merge(forks::routes())
        .merge(connectors::routes())
        .merge(mcp_oauth::routes())
        .merge(preview::routes())
        .merge(artifact_preview::routes())
        .merge(resolve::routes())
        .merge(sse::routes())
        .merge(agui::routes())
        .merge(genui::routes())
        .merge(tools::routes())
}

/// Every area's operations, for the OpenAPI document (`openapi.rs` merges them).
fn api_parts() -> Vec<utoipa::openapi::OpenApi> {
    use utoipa::OpenApi;
    vec![
        system::Api::openapi(),
        session::Api::openapi(),
        log::Api::openapi(),
        projections::Api::openapi(),
        plugins::Api::openapi(),
        atoms::Api::openapi(),
        marketplaces::Api::openapi(),
        projects::Api::openapi(),
        runs::Api::openapi(),
        agents::Api::openapi(),
        forks::Api::openapi(),
        connectors::Api::openapi(),
        mcp_oauth::Api::openapi(),
        preview::Api::openapi(),
        artifact_preview::Api::openapi(),
        resolve::Api::openapi(),
        sse::Api::openapi(),
        agui::Api::openapi(),
        genui::Api::openapi(),
        tools::Api::openapi(),
    ]
}

/// Every (method, path) the API serves, as registered (axum's `{param}` / `{*tail}` syntax).
pub fn route_table() -> Vec<table::Route> {
    table().into_parts().1
}

/// The routes alone (no gate): for requests the daemon makes to itself (`api` tools). The web
/// UI's routes (`ui`) join the table's here: they are not part of the JSON API (nor of its
/// OpenAPI document), but are served by the same router behind the same gate.
pub fn routes(state: AppState) -> Router {
    let (router, _) = table().into_parts();
    let router = if state.http.config.headless { router } else { router.merge(ui::routes()) };
    router
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not-found", "no such route") })
        .method_not_allowed_fallback(|method: axum::http::Method, uri: axum::http::Uri| async move {
            let message = format!("{method} is not served on {}", uri.path());
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed", message)
        })
        .layer(axum::extract::DefaultBodyLimit::max(crate::limits::MAX_REQUEST_BODY_BYTES))
        .with_state(state)
}

/// The router as served: every route behind the gate (`guard.rs`), with the state's access rules.
pub fn router(state: AppState) -> Router {
    let shared = state.http.clone();
    routes(state).layer(axum::middleware::from_fn_with_state(shared, guard::gate))
}

/// Runs blocking engine work (sled reads, fsyncs, file copies) off the async workers.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> error::ApiResult<T> {
    tokio::task::spawn_blocking(move || {
        let r = f();
        // The work may have folded records into sled (a read catches up): free what sled retired.
        crate::reclaim::flush_deferred();
        r
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?
}

/// Whether project file `p` is `prefix` or below it (`od files list|watch --path`).
pub fn projects_under(p: &str, prefix: &str) -> bool {
    projects::under(p, prefix)
}
