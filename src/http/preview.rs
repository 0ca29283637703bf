//! A plugin's read-only preview surface (spec §9.2, upstream `GET /api/plugins/:id/{preview,
//! example/:name, asset/*}`): its `od.preview.entry`, its `useCase.exampleOutputs[]` by name, and
//! any other file of its installed folder. Plugins may come from untrusted repositories, so every
//! answer carries the preview CSP (no network, no framing by others, scripts only inline or from
//! the plugin) plus `sandbox allow-scripts`, and paths must be plain relative paths below the
//! folder: no absolute path, no `..`, no hidden or credential-like file, no link, nothing over
//! [`MAX_PREVIEW_ASSET_BYTES`]. Serving a preview grants the plugin nothing.

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::io::Read;

use super::error::{ApiError, ApiResult};
use super::openapi::schemas::ErrorBody;
use super::table::Routes;
use super::{blocking, AppState};
use crate::limits::MAX_PREVIEW_ASSET_BYTES;

/// The preview CSP of spec §9.2, sandboxed.
pub const PREVIEW_CSP: &str = "default-src 'none'; img-src 'self' data: blob:; media-src 'self' data: blob:; \
style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'; connect-src 'none'; frame-ancestors 'self'; \
sandbox allow-scripts";

pub fn routes() -> Routes {
    Routes::new()
        .get("/api/plugins/{id}/preview", preview)
        .get("/api/plugins/{id}/example/{name}", example)
        .get("/api/plugins/{id}/asset/{*path}", asset)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(preview, example, asset))]
pub(super) struct Api;

fn refused(field: &str, msg: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "path-refused", msg).with_data(json!({ "field": field }))
}

/// `p` as a safe relative path below the plugin folder (a leading `./` is allowed).
pub fn safe_rel(p: &str) -> Result<String, ApiError> {
    let p = p.strip_prefix("./").unwrap_or(p);
    if p.is_empty() || p.starts_with('/') || p.contains('\\') || p.contains('\0') {
        return Err(refused("path", format!("{p:?} is not a relative path")));
    }
    for part in p.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err(refused("path", format!("{p:?} leaves the plugin folder or is not normalized")));
        }
        if part.starts_with('.') {
            return Err(refused("path", format!("{p:?} names a hidden file")));
        }
        let lower = part.to_ascii_lowercase();
        if ["id_rsa", "id_ed25519", "credentials", "secrets.json"].contains(&lower.as_str())
            || [".pem", ".key", ".p12", ".pfx", ".env"].iter().any(|x| lower.ends_with(x))
        {
            return Err(refused("path", format!("{p:?} looks like a credential")));
        }
    }
    Ok(p.to_string())
}

/// The bytes of `rel` in plugin `id`'s installed folder (links refused, bounded).
fn read_file(s: &AppState, id: &str, rel: &str) -> Result<Vec<u8>, ApiError> {
    let p = s.engine.plugin(id)?;
    let dir = s.engine.data_dir().join(&p.fs_path);
    let not_found = || {
        ApiError::new(StatusCode::NOT_FOUND, "asset-not-found", format!("plugin {id} has no file {rel}"))
            .with_data(json!({ "pluginId": id, "path": rel }))
    };
    let root = crate::engine::safe_fs::Root::open(&dir).map_err(|_| not_found())?;
    let f = root.open_file(rel).map_err(|_| not_found())?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len > MAX_PREVIEW_ASSET_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "limit-exceeded",
            format!("{rel} is larger than {MAX_PREVIEW_ASSET_BYTES} bytes"),
        )
        .with_data(json!({ "limit": "MAX_PREVIEW_ASSET_BYTES", "max": MAX_PREVIEW_ASSET_BYTES })));
    }
    let mut out = Vec::with_capacity(len as usize);
    f.take(MAX_PREVIEW_ASSET_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "storage-io", e.to_string()))?;
    Ok(out)
}

fn serve(rel: &str, bytes: Vec<u8>) -> Response {
    let mut r = (StatusCode::OK, bytes).into_response();
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&crate::mime::content_type(rel)) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(PREVIEW_CSP));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    super::file_response::with_file_headers(r, super::file_response::Disposition::Inline, rel)
}

async fn file(
    s: AppState,
    id: String,
    pick: impl FnOnce(&Value) -> Result<String, ApiError> + Send + 'static,
) -> ApiResult<Response> {
    let (rel, bytes) = blocking(move || {
        let p = s.engine.plugin(&id)?;
        let manifest: Value = serde_json::from_str(&p.manifest_json).unwrap_or(Value::Null);
        let rel = safe_rel(&pick(&manifest)?)?;
        let bytes = read_file(&s, &id, &rel)?;
        Ok((rel, bytes))
    })
    .await?;
    Ok(serve(&rel, bytes))
}

/// The plugin's preview entry (`od.preview.entry`), sandboxed.
#[utoipa::path(get, path = "/api/plugins/{id}/preview", tag = "plugins", params(("id" = String, Path, description = "Plugin id")),
    responses((status = 200, description = "The preview entry, with the preview CSP", content_type = "text/html", body = String),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn preview(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let pid = id.clone();
    file(s, id, move |m| {
        m["od"]["preview"]["entry"].as_str().map(str::to_string).ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "asset-not-found",
                format!("plugin {pid} declares no od.preview.entry"),
            )
            .with_data(json!({ "pluginId": pid }))
        })
    })
    .await
}

/// One of `useCase.exampleOutputs[]`, by its `name` or its file's name (with or without extension).
#[utoipa::path(get, path = "/api/plugins/{id}/example/{name}", tag = "plugins",
    params(("id" = String, Path, description = "Plugin id"), ("name" = String, Path, description = "Example name")),
    responses((status = 200, description = "The example", body = String), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn example(State(s): State<AppState>, Path((id, name)): Path<(String, String)>) -> ApiResult<Response> {
    let pid = id.clone();
    file(s, id, move |m| {
        let found = m["od"]["useCase"]["exampleOutputs"].as_array().into_iter().flatten().find_map(|e| {
            let path = e["path"].as_str()?;
            let file = path.rsplit('/').next().unwrap_or(path);
            let stem = file.rsplit_once('.').map_or(file, |(s, _)| s);
            (e["name"].as_str() == Some(name.as_str()) || file == name || stem == name).then(|| path.to_string())
        });
        found.ok_or_else(|| {
            ApiError::new(StatusCode::NOT_FOUND, "asset-not-found", format!("plugin {pid} has no example {name:?}"))
                .with_data(json!({ "pluginId": pid, "name": name }))
        })
    })
    .await
}

/// A file of the plugin's installed folder (what its preview loads).
#[utoipa::path(get, path = "/api/plugins/{id}/asset/{path}", tag = "plugins",
    params(("id" = String, Path, description = "Plugin id"), ("path" = String, Path, description = "A relative path in the plugin")),
    responses((status = 200, description = "The file", body = String), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 413, body = ErrorBody)))]
async fn asset(State(s): State<AppState>, Path((id, path)): Path<(String, String)>) -> ApiResult<Response> {
    file(s, id, move |_| Ok(path)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_pass() {
        assert_eq!(safe_rel("./preview/index.html").unwrap(), "preview/index.html");
        for bad in
            ["/etc/passwd", "../x", "a/../../x", "a//b", ".env", "a/.git/config", "keys/server.pem", "", "a\\b", "./"]
        {
            assert!(safe_rel(bad).is_err(), "{bad}");
        }
    }
}
