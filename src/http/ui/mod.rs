//! The web UI the daemon serves beside its API (same port, same gate, same tokens): `GET /` is
//! `assets/index.html`, `GET /login` is `assets/login.html`, `GET /ui/<path>` is any file under
//! `src/http/ui/assets/` — all embedded in the binary (`assets.rs`) and answered with a strict CSP,
//! ETags and gzip (`respond.rs`). The app itself talks only to `/api/*`.
//!
//! These routes are not part of the JSON API: they are added to the router beside the route table
//! (`http/table.rs`, which the OpenAPI document mirrors), and pass through the same gate
//! (`http/guard.rs`, `http/auth.rs`). When the daemon requires a token (`OD_API_TOKEN`) and the
//! request carries none (no bearer, no login cookie: `http/session.rs`), `GET /` answers a 303 to
//! `/login`, and the app's files a 401; the login page and its own files (`login.*`) are served to
//! anyone.

pub mod assets;
pub mod respond;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use axum::Router;

use super::auth::Caller;
use super::AppState;

/// The UI's routes (outside the API's route table; behind the same gate once served).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/login", get(login))
        .route("/ui/{*path}", get(file))
        .layer(axum::middleware::map_response(respond::secure_layer))
        // A run's artifact previews, under their own CSP (not the UI's): `artifact_preview.rs`.
        .route("/preview/runs/{id}/{exp}/{mac}/{*path}", get(super::artifact_preview::serve))
}

/// Whether a request must log in first: the daemon wants a token and the request has none.
fn must_log_in(s: &AppState, caller: Caller) -> bool {
    s.http.access.api_token.is_some() && !caller.authenticated
}

/// The files served without a token: the login page's own.
fn public(path: &str) -> bool {
    path.starts_with("login.")
}

fn embedded(path: &str, headers: &HeaderMap) -> Response {
    match assets::get(path) {
        Some(a) => respond::file(a, headers),
        None => respond::plain(StatusCode::NOT_FOUND, "no such file"),
    }
}

async fn index(State(s): State<AppState>, caller: Caller, headers: HeaderMap) -> Response {
    if must_log_in(&s, caller) {
        return respond::see_other("/login");
    }
    embedded("index.html", &headers)
}

async fn login(headers: HeaderMap) -> Response {
    embedded("login.html", &headers)
}

/// A file under `/ui/`. Only names in the embedded table exist, so no path reaches the disk; a
/// path with `..`, `.` or empty segments (or a backslash) is refused outright.
async fn file(State(s): State<AppState>, caller: Caller, Path(path): Path<String>, headers: HeaderMap) -> Response {
    let bad = path.contains('\\') || path.contains('\0') || path.split('/').any(|seg| matches!(seg, "" | "." | ".."));
    if bad {
        return respond::plain(StatusCode::BAD_REQUEST, "bad path");
    }
    if !public(&path) && must_log_in(&s, caller) {
        return respond::plain(StatusCode::UNAUTHORIZED, "log in first: /login");
    }
    embedded(&path, &headers)
}
