//! The HTTP API (axum): state shared by handlers, the router, and the bearer-auth layer.
//!
//! Routes live one file per area: `system.rs` (health, version, daemon status/stop), `log.rs`
//! (read, tail/follow, append notes, verify, stats). Every error is the envelope in `error.rs`.

mod agui;
pub mod agui_encode;
mod atoms;
mod auth;
pub mod error;
mod genui;
mod log;
mod marketplaces;
pub mod plugins;
mod projects;
mod runs;
pub mod sse;
mod system;
pub mod tail;
pub mod tools;
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
}

/// The full router, with auth when `token` is set.
pub fn router(state: AppState, token: Option<String>) -> Router {
    let api = Router::new()
        .merge(system::routes())
        .merge(log::routes())
        .merge(plugins::routes())
        .merge(atoms::routes())
        .merge(marketplaces::routes())
        .merge(projects::routes())
        .merge(runs::routes())
        .merge(sse::routes())
        .merge(agui::routes())
        .merge(genui::routes())
        .merge(tools::routes())
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not-found", "no such route") })
        .with_state(state);
    match token {
        Some(t) => api.layer(axum::middleware::from_fn_with_state(Arc::new(t), auth::require_bearer)),
        None => api,
    }
}

/// Runs blocking engine work (sled reads, fsyncs, file copies) off the async workers.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> error::ApiResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?
}
