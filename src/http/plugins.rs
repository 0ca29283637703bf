//! `/api/plugins*`: list, show, install (ND-JSON progress), uninstall, doctor.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::Response;
use axum::Json;
use od_projections::InstalledPlugin;
use serde::Deserialize;
use serde_json::{json, Value};

use super::body::JsonBody;
use super::error::{ApiError, ApiQuery, ApiResult};
use super::openapi::schemas::{ErrorBody, PluginList, PluginShow, PluginTrusted, PluginUninstalled, PluginUpgraded};
use super::paging::Paging;
use super::table::Routes;
use super::{blocking, AppState};
use crate::engine::apply::{ApplyError, ApplyRequest};
use crate::engine::plugins::PluginError;
use crate::page::page_sorted;

pub fn routes() -> Routes {
    Routes::new()
        .get("/api/plugins", list)
        .post("/api/plugins/install", install)
        .post("/api/plugins/doctor", doctor_path)
        .get("/api/plugins/{id}", show)
        .post("/api/plugins/{id}/uninstall", uninstall)
        .post("/api/plugins/{id}/upgrade", upgrade)
        .post("/api/plugins/{id}/trust", trust)
        .post("/api/plugins/{id}/apply", apply)
        .get("/api/plugins/{id}/doctor", doctor_installed)
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(list, install, doctor_path, show, uninstall, upgrade, trust, apply, doctor_installed))]
pub(super) struct Api;

impl From<PluginError> for ApiError {
    fn from(e: PluginError) -> Self {
        let status = match &e {
            PluginError::NotFound(_) | PluginError::MarketplaceNotFound(_) | PluginError::SourceNotFound(_) => {
                StatusCode::NOT_FOUND
            }
            PluginError::BadMarketplace(_) => StatusCode::UNPROCESSABLE_ENTITY,
            PluginError::Invalid { .. } | PluginError::UnsupportedSource(_) | PluginError::BadArchive(_) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            PluginError::UrlRefused(_) => StatusCode::UNPROCESSABLE_ENTITY,
            PluginError::InvalidCapability(_) => StatusCode::BAD_REQUEST,
            PluginError::Bundled(_) | PluginError::BundleMember { .. } => StatusCode::CONFLICT,
            PluginError::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
            PluginError::Fetch(_) => StatusCode::BAD_GATEWAY,
            // od's own setting (OutboundError::is_local), or the server's fault (its certificate,
            // its redirect).
            PluginError::Net { code: "tls-setup" | "proxy-config", .. } => StatusCode::INTERNAL_SERVER_ERROR,
            PluginError::Net { .. } => StatusCode::BAD_GATEWAY,
            PluginError::Store(s) => return ApiError::from(s.clone()),
        };
        let data = match &e {
            PluginError::NotFound(id) | PluginError::Bundled(id) => json!({ "pluginId": id }),
            PluginError::BundleMember { id, bundle } => json!({ "pluginId": id, "bundleId": bundle }),
            PluginError::Invalid { diagnostics, .. } => json!({ "diagnostics": diagnostics }),
            PluginError::InvalidCapability(c) => json!({ "field": "capabilities", "capability": c }),
            PluginError::UrlRefused(crate::net::UrlRefused::Blocked { url, addr, rule }) => {
                json!({ "url": url, "address": addr, "rule": rule })
            }
            PluginError::Net { data, .. } => (**data).clone(),
            _ => Value::Null,
        };
        ApiError::new(status, e.code(), e.to_string()).with_data(data)
    }
}

impl From<ApplyError> for ApiError {
    fn from(e: ApplyError) -> Self {
        match e {
            ApplyError::Plugin(p) => p.into(),
            ApplyError::Invalid { ref field, .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid-input", e.to_string())
                    .with_data(json!({ "field": field }))
            }
            ApplyError::MissingInput { ref plugin_id, ref missing } => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "missing-input", e.to_string())
                    .with_data(json!({ "pluginId": plugin_id, "missing": missing }))
            }
            ApplyError::CapabilitiesRequired {
                ref plugin_id,
                ref plugin_version,
                ref required,
                ref granted,
                ref missing,
            } => {
                let remediation = [
                    format!("od plugin trust {plugin_id} --capabilities {}", missing.join(",")),
                    format!("or pass --grant-caps {} to the apply / run command", missing.join(",")),
                ];
                ApiError::new(StatusCode::CONFLICT, "capabilities-required", e.to_string()).with_data(json!({
                    "pluginId": plugin_id, "pluginVersion": plugin_version, "required": required,
                    "granted": granted, "missing": missing, "remediation": remediation,
                }))
            }
        }
    }
}

/// Inputs and grants to resolve a plugin with.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ApplyBody {
    #[serde(default)]
    #[schema(value_type = Object)]
    inputs: serde_json::Map<String, Value>,
    #[serde(default)]
    grant_caps: Vec<String>,
    locale: Option<String>,
    /// Apply in this project: it must exist, and surfaces it already answered (`persist:
    /// project`) are marked `remembered`.
    project_id: Option<String>,
    /// For a form being filled in (the web UI's Home): blank required inputs are listed in
    /// `missingInputs` and keep their `{{placeholder}}` in `query`, instead of a 422. Starting a
    /// run still refuses them.
    #[serde(default)]
    partial: bool,
    /// Context chips to go without (`<kind>:<ref>` as `contextItems` name them: `skill:…`,
    /// `design-system:…`, `craft:…`, `asset:…`, `mcp:…`, `claude-plugin:…`); one the plugin
    /// does not have is a 400 naming `excludeContext/<i>`.
    #[serde(default)]
    exclude_context: Vec<String>,
}

/// Pure: resolves the plugin with these inputs; writes nothing.
#[utoipa::path(post, path = "/api/plugins/{id}/apply", tag = "plugins", params(("id" = String, Path, description = "Plugin id")), request_body = ApplyBody, responses(
    (status = 200, description = "The resolved plugin (prompt, stages, inputs, digests)", body = Object),
    (status = 400, description = "`invalid-input`: an `excludeContext` entry the plugin has no removable chip for", body = ErrorBody),
    (status = 404, body = ErrorBody), (status = 409, description = "`capabilities-required`", body = ErrorBody),
    (status = 422, description = "`missing-input`", body = ErrorBody)))]
async fn apply(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<ApplyBody>,
) -> ApiResult<Json<Value>> {
    let req = ApplyRequest {
        inputs: b.inputs,
        grant_caps: b.grant_caps,
        locale: b.locale,
        partial: b.partial,
        exclude_context: b.exclude_context,
    };
    let project = b.project_id.filter(|p| !p.is_empty());
    let v = blocking(move || {
        let mut v = s.engine.apply(&id, &req)?;
        if let Some(project) = project {
            s.engine.mark_remembered(&project, &mut v)?;
        }
        Ok(v)
    })
    .await?;
    Ok(Json(v))
}

/// The wire shape of an installed plugin (the reference's InstalledPluginRecord names).
pub fn plugin_json(p: &InstalledPlugin) -> Value {
    json!({
        "id": p.id,
        "title": p.title,
        "version": p.version,
        "sourceKind": p.source_kind,
        // A source recorded with a password (before the URL rule refused them) never shows it.
        "source": crate::net::redact(&p.source),
        "sourceDigest": p.source_digest,
        "trust": p.trust,
        "capabilitiesGranted": p.capabilities_granted,
        "manifest": serde_json::from_str::<Value>(&p.manifest_json).unwrap_or(Value::Null),
        "fsPath": p.fs_path,
        "installedAt": p.installed_at,
        "updatedAt": p.updated_at,
    })
}

/// Plugins, bundled ones first, then installed ones, each by id; paged (`limit`, `cursor` →
/// `nextCursor`). The key is (bundled?, id), so a plugin installed meanwhile lands in its place and
/// never shifts a later page.
/// A plugin as listed in `locale`: `title` and `description` chosen from `title_i18n` /
/// `description_i18n` in the spec's order (the locale, its base language, `en`, the plain value,
/// the first translation).
pub fn plugin_json_in(p: &InstalledPlugin, locale: Option<&str>) -> Value {
    let mut v = plugin_json(p);
    let m = &v["manifest"];
    let mut texts = json!({ "title": m["title"], "title_i18n": m["title_i18n"], "description": m["description"],
                            "description_i18n": m["description_i18n"] });
    crate::engine::locale::localize(&mut texts, locale);
    if let Some(t) = texts["title"].as_str() {
        v["title"] = json!(t);
    }
    v["description"] = texts["description"].clone();
    v
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Paging (read by [`Paging`]).
    #[allow(dead_code)]
    #[param(value_type = Option<u32>)]
    limit: Option<String>,
    #[allow(dead_code)]
    cursor: Option<String>,
    /// Titles and descriptions in this locale (`zh-CN`, `ko`; falls back to the base language,
    /// `en`, then the first available).
    locale: Option<String>,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct LocaleQuery {
    locale: Option<String>,
}

#[utoipa::path(get, path = "/api/plugins", tag = "plugins", params(ListQuery),
    responses((status = 200, body = PluginList), (status = 400, body = ErrorBody)))]
async fn list(State(s): State<AppState>, ApiQuery(q): ApiQuery<ListQuery>, paging: Paging) -> ApiResult<Json<Value>> {
    let req = paging.req("plugins")?;
    let v = blocking(move || {
        let plugins = s.engine.plugins()?;
        let bundled = &s.engine.bundled();
        let page = page_sorted("plugins", &req, plugins, |p| {
            let mut k = vec![u8::from(!bundled.contains_key(&p.id))];
            k.extend_from_slice(p.id.as_bytes());
            k
        });
        Ok(page.map(|p| plugin_json_in(&p, q.locale.as_deref())).to_json("plugins"))
    })
    .await?;
    Ok(Json(v))
}

#[utoipa::path(get, path = "/api/plugins/{id}", tag = "plugins", params(("id" = String, Path, description = "Plugin id"), LocaleQuery),
    responses((status = 200, body = PluginShow), (status = 404, body = ErrorBody)))]
async fn show(
    State(s): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<LocaleQuery>,
) -> ApiResult<Json<Value>> {
    let p = blocking(move || Ok(s.engine.plugin(&id)?)).await?;
    Ok(Json(json!({ "plugin": plugin_json_in(&p, q.locale.as_deref()) })))
}

/// Removes an installed plugin (bundled ones cannot be: 409).
#[utoipa::path(post, path = "/api/plugins/{id}/uninstall", tag = "plugins", params(("id" = String, Path, description = "Plugin id")),
    responses((status = 200, body = PluginUninstalled), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn uninstall(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let p = blocking(move || Ok(s.engine.uninstall(&id)?)).await?;
    Ok(Json(json!({ "ok": true, "id": p.id, "version": p.version })))
}

/// Capabilities to grant or revoke.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct TrustBody {
    capabilities: Vec<String>,
    /// `grant` (default) or `revoke`.
    #[serde(default)]
    #[schema(pattern = "^(grant|revoke)$")]
    action: Option<String>,
}

/// `{capabilities[], action?: grant|revoke}` → 201 (grant) / 200 (revoke)
/// `{ok, id, action, capabilitiesGranted, plugin}`.
#[utoipa::path(post, path = "/api/plugins/{id}/trust", tag = "plugins", params(("id" = String, Path, description = "Plugin id")), request_body = TrustBody, responses(
    (status = 201, description = "Granted", body = PluginTrusted), (status = 200, description = "Revoked", body = PluginTrusted),
    (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn trust(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<TrustBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let revoke = match b.action.as_deref() {
        None | Some("grant") => false,
        Some("revoke") => true,
        Some(other) => return Err(ApiError::bad_request("action", format!("{other:?} is not grant or revoke"))),
    };
    let p = blocking(move || Ok(s.engine.trust(&id, &b.capabilities, revoke)?)).await?;
    let (status, action) = if revoke { (StatusCode::OK, "revoke") } else { (StatusCode::CREATED, "grant") };
    let body = json!({
        "ok": true, "id": p.id, "action": action,
        "capabilitiesGranted": p.capabilities_granted, "plugin": plugin_json(&p),
    });
    Ok((status, Json(body)))
}

/// Where to install from: a local folder or archive, a URL, or `marketplace/plugin`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct InstallBody {
    source: String,
    /// `trusted` (default for a local folder) or `restricted`.
    #[schema(pattern = "^(trusted|restricted)$")]
    trust: Option<String>,
    /// Link a local folder: the daemon watches it and loads it again when it changes (hot reload,
    /// `plugin_reloaded`).
    link: Option<bool>,
}

fn line(event: &str, data: Value) -> String {
    json!({ "event": event, "data": data }).to_string() + "\n"
}

/// ND-JSON: `progress{phase, message}`… then `success{plugin, warnings, unchanged}` or
/// `error{error:{code, message, data}}`.
#[utoipa::path(post, path = "/api/plugins/install", tag = "plugins", request_body = InstallBody, responses(
    (status = 200, description = "ND-JSON lines `{event, data}`: `progress`…, then `success` or `error`",
        content_type = "application/x-ndjson", body = String),
    (status = 400, body = ErrorBody)))]
async fn install(State(s): State<AppState>, JsonBody(b): JsonBody<InstallBody>) -> ApiResult<Response> {
    let restricted = match b.trust.as_deref() {
        None | Some("trusted") => false,
        Some("restricted") => true,
        Some(other) => return Err(ApiError::bad_request("trust", format!("{other:?} is not trusted or restricted"))),
    };
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::task::spawn_blocking(move || {
        let progress_tx = tx.clone();
        let mut progress = |phase: &str, message: &str| {
            drop(progress_tx.send(line("progress", json!({ "phase": phase, "message": message }))))
        };
        let done = if b.link == Some(true) {
            s.engine.install_linked(&b.source, restricted, &mut progress)
        } else {
            s.engine.install(&b.source, restricted, &mut progress)
        };
        let last = match done {
            Ok(done) => line(
                "success",
                json!({ "plugin": plugin_json(&done.plugin), "warnings": done.warnings, "unchanged": done.unchanged,
                    "members": done.members }),
            ),
            Err(e) => {
                let api = ApiError::from(e);
                line("error", json!({ "error": { "code": api.code, "message": api.message, "data": api.data } }))
            }
        };
        let _ = tx.send(last);
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|l| (Ok::<_, std::convert::Infallible>(l), rx))
    });
    Ok(Response::builder()
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .body(Body::from_stream(stream))
        .expect("static response parts"))
}

/// Re-installs from the recorded source: `{plugin, warnings, unchanged, previousVersion}`.
#[utoipa::path(post, path = "/api/plugins/{id}/upgrade", tag = "plugins", params(("id" = String, Path, description = "Plugin id")),
    responses((status = 200, body = PluginUpgraded), (status = 404, body = ErrorBody)))]
async fn upgrade(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let (before, done) = blocking(move || {
        let before = s.engine.plugin(&id)?;
        Ok((before, s.engine.upgrade(&id, &mut |_, _| {})?))
    })
    .await?;
    Ok(Json(json!({
        "plugin": plugin_json(&done.plugin), "warnings": done.warnings, "unchanged": done.unchanged,
        "members": done.members, "previousVersion": before.version,
    })))
}

/// A plugin folder to check.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct DoctorBody {
    path: String,
}

/// Checks a plugin folder: `{ok, diagnostics, …}`.
#[utoipa::path(post, path = "/api/plugins/doctor", tag = "plugins", request_body = DoctorBody,
    responses((status = 200, body = Object), (status = 400, body = ErrorBody)))]
async fn doctor_path(State(s): State<AppState>, JsonBody(b): JsonBody<DoctorBody>) -> ApiResult<Json<Value>> {
    let report = blocking(move || Ok(s.engine.doctor_folder(std::path::Path::new(&b.path)))).await?;
    Ok(Json(serde_json::to_value(report).expect("plain data")))
}

/// Checks an installed plugin; marks snapshots of its older versions stale (`staleSnapshotsMarked`).
#[utoipa::path(get, path = "/api/plugins/{id}/doctor", tag = "plugins", params(("id" = String, Path, description = "Plugin id")),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody)))]
async fn doctor_installed(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let (report, stale) = blocking(move || {
        let p = s.engine.plugin(&id)?;
        let report = s.engine.doctor_installed(&p);
        // Snapshots of an older version of this plugin are marked stale (never rewritten).
        let stale = s.engine.mark_stale_snapshots(&id).map_err(ApiError::from)?;
        Ok((report, stale))
    })
    .await?;
    let mut v = serde_json::to_value(report).expect("plain data");
    v["staleSnapshotsMarked"] = json!(stale);
    Ok(Json(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::tls::{CertProblem, TlsSetupError};
    use crate::net::{OutboundError, UrlRefused};

    fn api(e: OutboundError) -> ApiError {
        PluginError::from_outbound(e).into()
    }

    #[test]
    fn outbound_failures_keep_their_names_in_the_envelope() {
        let url = "https://h.example/x.tgz".to_string();
        let e = api(OutboundError::Tls { url: url.clone(), problem: CertProblem::Expired });
        assert_eq!((e.status, e.code), (StatusCode::BAD_GATEWAY, "tls-expired"));
        assert!(e.message.contains(&url) && e.data["url"] == url.as_str(), "{} {}", e.message, e.data);
        let e =
            api(OutboundError::Refused(UrlRefused::Downgrade { from: url.clone(), to: "http://h.example/".into() }));
        assert_eq!((e.status, e.code), (StatusCode::BAD_GATEWAY, "tls-downgrade"));
        let setup = TlsSetupError::CaFile { setting: "OD_CA_FILE", path: "/x.pem".into(), message: "gone".into() };
        let e = api(OutboundError::TlsSetup(setup));
        assert_eq!(
            (e.status, e.code, &e.data["setting"]),
            (StatusCode::INTERNAL_SERVER_ERROR, "tls-setup", &json!("OD_CA_FILE"))
        );
        // Non-TLS failures keep their codes; a redirect elsewhere is the URL rule's refusal.
        let e = api(OutboundError::Status { url: url.clone(), status: 404 });
        assert_eq!((e.status, e.code), (StatusCode::BAD_GATEWAY, "fetch-failed"));
        let e =
            api(OutboundError::Refused(UrlRefused::Redirect { from: url.clone(), to: "https://o.example/".into() }));
        assert_eq!((e.status, e.code), (StatusCode::UNPROCESSABLE_ENTITY, "url-refused"));
    }
}
