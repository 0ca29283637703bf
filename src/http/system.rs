//! `/api/health`, `/api/version`, `/api/daemon/status` (with the HTTP gauges), `/api/daemon/stop`,
//! `/api/doctor` (derived copies checked and rebuilt, issue 38).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use std::sync::Arc;

use super::openapi::schemas::{DaemonStatus, Health, Stopping, Version};
use super::table::Routes;
use super::AppState;
use crate::store::StoreState;

pub fn routes() -> Routes {
    Routes::new()
        .get("/api/health", health)
        .get("/api/version", version)
        .get("/api/daemon/status", status)
        .post("/api/daemon/stop", stop)
        .post("/api/doctor", doctor)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(health, version, status, stop, doctor))]
pub(super) struct Api;

/// 200 `{"ok": true, …}` while the store commits; 503 `{"ok": false, …}` when it is full, failing,
/// or poisoned, with `store` saying which, why, and whether only a restart helps. `status` is
/// `ok`, `degraded` (commits work, but the background verification found a damaged frame, named
/// in `log.firstBad`; still 200) or `failing`. `log` is what the last whole-log verification
/// found (absent until one finished: opening verifies only the log's tail; kept across restarts);
/// `logPass` is the pass under way, if any (`nextSeq`: the next frame of the global order it
/// checks; past `throughSeq` once it walks the stream index). `tls` says how clients reach the
/// daemon: `serving` (its own TLS listener) and `terminatedByProxy` (plain HTTP behind a proxy
/// the operator declared to terminate TLS).
#[utoipa::path(get, path = "/api/health", tag = "system", responses(
    (status = 200, description = "The store commits", body = Health),
    (status = 503, description = "The store is full, failing or poisoned", body = Health)))]
async fn health(State(s): State<AppState>) -> (StatusCode, Json<Value>) {
    let store = s.store.health();
    let log = s.store.log_check();
    let ok = store.state == StoreState::Ok;
    let damaged = log.as_ref().is_some_and(|c| c.first_bad.is_some());
    let status = match (ok, damaged) {
        (true, false) => "ok",
        (true, true) => "degraded",
        (false, _) => "failing",
    };
    let code = if ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let tls =
        json!({ "serving": s.http.config.tls.is_some(), "terminatedByProxy": s.http.config.tls_terminated_by_proxy });
    let mut body = json!({ "ok": ok, "status": status, "lastSeq": s.store.last_seq(), "store": store, "tls": tls });
    if let Some(log) = log {
        body["log"] = json!(log);
    }
    if let Some(crate::store::SavedPass::Running { pass, started_at }) = s.store.saved_verify() {
        body["logPass"] = json!({ "throughSeq": pass.upto(), "nextSeq": pass.next_seq(), "startedAt": started_at });
    }
    (code, Json(body))
}

/// Checks every derived copy od can rebuild (bundled plugin copies, installed plugin trees,
/// projects' copies of artifacts) against its digest and rebuilds those that do not match:
/// `{ok, found: [repair], rebuiltSinceStart: [repair]}`, a repair being `{kind, id, path, reason,
/// rebuilt, at}`. `ok` is false when something found could not be rebuilt.
#[utoipa::path(post, path = "/api/doctor", tag = "system", responses((status = 200, body = Object)))]
async fn doctor(State(s): State<AppState>) -> super::error::ApiResult<Json<Value>> {
    let engine = s.engine.clone();
    let v = super::blocking(move || Ok(engine.doctor(true)?)).await?;
    Ok(Json(v))
}

/// The daemon's version and the event kinds it knows (name, code, current schema).
#[utoipa::path(get, path = "/api/version", tag = "system", responses((status = 200, body = Version)))]
async fn version() -> Json<Value> {
    Json(json!({
        "name": "od",
        "version": env!("CARGO_PKG_VERSION"),
        "eventKinds": od_events::EventKind::ALL.iter()
            .map(|k| json!({ "kind": k.name(), "code": k.code(), "schema": k.current_schema() }))
            .collect::<Vec<_>>(),
    }))
}

/// The daemon: pid, listen address, data dir, and its HTTP gauges.
#[utoipa::path(get, path = "/api/daemon/status", tag = "system", responses((status = 200, body = DaemonStatus)))]
async fn status(State(s): State<AppState>) -> Json<Value> {
    Json(json!({
        "running": true,
        "pid": std::process::id(),
        "listen": s.listen.get(),
        "dataDir": s.data_dir,
        "startedAt": s.started_at,
        "embedded": s.embedded,
        "lastSeq": s.store.last_seq(),
        "version": env!("CARGO_PKG_VERSION"),
        "http": http_gauges(&s.http.gauges),
        "log": { "backend": s.store.backend(), "location": s.store.location() },
        "daemonId": s.engine.leases().daemon_id(),
        "sharedDir": s.engine.data_dir(),
    }))
}

/// Open connections and streams, the connection cap, and what the cap shed or refused.
fn http_gauges(g: &super::serve::Gauges) -> Value {
    use std::sync::atomic::Ordering::Relaxed;
    json!({
        "connections": g.connections.load(Relaxed), "streams": g.streams.load(Relaxed),
        "maxConnections": g.max_connections.load(Relaxed), "shed": g.shed.load(Relaxed),
        "refused": g.refused.load(Relaxed),
    })
}

/// Asks the daemon to shut down (streams end, then the process exits).
#[utoipa::path(post, path = "/api/daemon/stop", tag = "system", responses((status = 200, body = Stopping)))]
async fn stop(State(s): State<AppState>) -> Json<Value> {
    let stop: Arc<_> = s.stop.clone();
    stop.send_replace(true);
    Json(json!({ "stopping": true, "pid": std::process::id() }))
}
