//! A run's artifacts as the designer sees them: `GET /api/runs/{id}/preview-url?path=P` (an
//! authenticated API call) answers `{url}`, an address below `/preview/runs/{id}/…` that serves
//! the files **as that run recorded them** (its blobs, never the project's current file), so an
//! old run's preview shows what it made, and an HTML page's relative stylesheets and images load
//! beside it from the same run.
//!
//! The address carries its own credential — an expiry and a keyed blake3 MAC of the run id and the
//! expiry under a key made when the process starts — because the page is framed sandboxed (an
//! opaque origin: no cookies, no token, and the API refuses its requests as another origin's). It
//! reads that run's files only, for [`PREVIEW_URL_TTL_MS`]. Every answer carries the artifact CSP:
//! its own and inline styles, images and fonts (also from https), **no script**, no connections,
//! no forms, framed only by the UI, `sandbox` — so a generated page cannot act in the app's origin.

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::OnceLock;

use super::error::{ApiError, ApiResult};
use super::openapi::schemas::ErrorBody;
use super::table::Routes;
use super::{blocking, AppState};
use crate::limits::PREVIEW_URL_TTL_MS;

/// The CSP of a previewed artifact: styles, images, fonts and media of its own (and inline, and
/// from https), nothing that runs or calls out.
pub const ARTIFACT_CSP: &str = "default-src 'none'; style-src 'self' 'unsafe-inline' https:; \
img-src 'self' data: blob: https:; font-src 'self' data: https:; media-src 'self' data: blob: https:; \
script-src 'none'; connect-src 'none'; form-action 'none'; base-uri 'none'; frame-ancestors 'self'; sandbox";

/// The API route that makes an address (in the API's table and OpenAPI document).
pub fn routes() -> Routes {
    Routes::new().get("/api/runs/{id}/preview-url", preview_url)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(preview_url))]
pub(super) struct Api;

/// This process's preview key (a restart invalidates earlier addresses; the UI asks again).
fn key() -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut k = [0u8; 32];
        getrandom::fill(&mut k).expect("the OS random source is available");
        k
    })
}

/// The MAC of a run's preview address valid until `exp` (Unix ms).
fn mac(run_id: &str, exp: i64) -> String {
    blake3::keyed_hash(key(), format!("od-preview\0{run_id}\0{exp}").as_bytes()).to_hex().to_string()
}

/// Whether `given` is the MAC for (`run_id`, `exp`) and `exp` is still ahead of `now` (constant
/// time in the MAC's bytes).
fn valid(run_id: &str, exp: i64, given: &str, now: i64) -> bool {
    let want = mac(run_id, exp);
    let same = want.len() == given.len() && want.bytes().zip(given.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
    same && now < exp
}

/// Which file the address should open.
#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct PathQuery {
    /// The file's path below the project, as the run recorded it (e.g. `index.html`).
    path: String,
}

/// An address that shows a file of the run as it recorded it, in a sandboxed frame:
/// `{runId, path, url, expiresAt}`.
#[utoipa::path(get, path = "/api/runs/{id}/preview-url", tag = "runs",
    params(("id" = String, Path, description = "Run id"), PathQuery),
    responses((status = 200, description = "`{runId, path, url, expiresAt}`", body = Object),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn preview_url(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<PathQuery>,
) -> ApiResult<Json<Value>> {
    let engine = s.engine.clone();
    let (rid, path) = (id.clone(), q.path.clone());
    // The run exists and recorded the file: a bad address is refused here, not in the frame.
    blocking(move || Ok(engine.run_file_at(&rid, &path, None).map(|_| ())?)).await?;
    let exp = s.engine.clock().now_ms().saturating_add(PREVIEW_URL_TTL_MS);
    let enc = |p: &str| p.split('/').map(crate::net::percent_encode).collect::<Vec<_>>().join("/");
    let url = format!("/preview/runs/{}/{exp}/{}/{}", enc(&id), mac(&id, exp), enc(&q.path));
    Ok(Json(json!({ "runId": id, "path": q.path, "url": url, "expiresAt": exp })))
}

/// A file of the run as it recorded it, under the artifact CSP (the address from
/// `/api/runs/{id}/preview-url`; a wrong or expired one is 403 `preview-expired`). Not part of the
/// JSON API (a page, not JSON): served beside the web UI's pages (`ui::routes`), under its own CSP.
pub(crate) async fn serve(
    State(s): State<AppState>,
    Path((id, exp, given, path)): Path<(String, String, String, String)>,
) -> ApiResult<Response> {
    let exp = exp.parse::<i64>().unwrap_or(0);
    if !valid(&id, exp, &given, s.engine.clock().now_ms()) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "preview-expired",
            "this preview address is not valid (wrong, or expired): open the artifact again",
        ));
    }
    let engine = s.engine.clone();
    let rel = path.clone();
    let bytes = blocking(move || Ok(engine.run_file_at(&id, &rel, None)?)).await?;
    let mut r = (StatusCode::OK, bytes).into_response();
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&crate::mime::content_type(&path)) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(ARTIFACT_CSP));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    Ok(super::file_response::with_file_headers(r, super::file_response::Disposition::Inline, &path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_holds_for_its_run_until_it_expires_and_no_other() {
        let m = mac("r1", 1_000);
        assert!(valid("r1", 1_000, &m, 999));
        assert!(!valid("r1", 1_000, &m, 1_000), "expired");
        assert!(!valid("r2", 1_000, &m, 0), "another run");
        assert!(!valid("r1", 2_000, &m, 0), "another expiry");
        assert!(!valid("r1", 1_000, &m[..63], 0), "cut");
    }
}
