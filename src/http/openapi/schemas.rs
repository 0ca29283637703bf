//! Schemas of the wire shapes the handlers build as JSON values (`json!`), for the document only:
//! field names exactly as the wire has them. Shapes with a Rust type of their own derive
//! `ToSchema` where they are defined.

#![allow(dead_code)]

pub use super::work_schemas::*;

use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

/// The error envelope every route returns.
#[derive(ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(ToSchema)]
pub struct ErrorDetail {
    /// Stable, kebab-case (`invalid-input`, `not-found`, …).
    pub code: String,
    pub message: String,
    /// Structured detail (e.g. `{"field": …}` for invalid input), or null.
    pub data: Value,
}

/// `limit` / `cursor` of a list route.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PagingParams {
    /// Items per page (1 up to the list's cap).
    pub limit: Option<u32>,
    /// A previous page's `nextCursor`.
    pub cursor: Option<String>,
}

/// One stored event as the wire carries it (`od log tail` prints the same line).
#[derive(ToSchema)]
pub struct EventLine {
    /// The event kind (`note_recorded`, `run_started`, …).
    pub event: String,
    pub data: EventLineData,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct EventLineData {
    pub seq: u64,
    pub stream: String,
    pub version: u64,
    pub recorded_at: i64,
    pub stored_schema: u32,
    /// The event's own fields.
    pub payload: Value,
    #[schema(required = false)]
    pub op_id: String,
}

/// `GET /api/health`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct Health {
    pub ok: bool,
    /// `ok`, `degraded` (a background verification found a damaged frame) or `failing`.
    #[schema(pattern = "^(ok|degraded|failing)$")]
    pub status: String,
    pub last_seq: u64,
    pub store: crate::store::StoreHealth,
    /// The last whole-log verification (absent until one finished).
    #[schema(required = false)]
    pub log: crate::store::LogCheck,
    /// The verification pass under way, if any.
    #[schema(required = false)]
    pub log_pass: LogPass,
    /// How clients reach the daemon: its own TLS, or plain HTTP behind a TLS-terminating proxy.
    pub tls: HealthTls,
}

/// `/api/health`'s `tls`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct HealthTls {
    /// The daemon serves TLS itself (`--tls-cert` / `--tls-key`).
    pub serving: bool,
    /// The operator declared a TLS-terminating proxy in front (`--tls-terminated-by-proxy`).
    pub terminated_by_proxy: bool,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct LogPass {
    pub through_seq: u64,
    pub next_seq: u64,
    pub started_at: i64,
}

/// `GET /api/version`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct Version {
    pub name: String,
    pub version: String,
    pub event_kinds: Vec<EventKindInfo>,
}

#[derive(ToSchema)]
pub struct EventKindInfo {
    pub kind: String,
    pub code: u32,
    pub schema: u32,
}

/// `GET /api/daemon/status`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct DaemonStatus {
    pub running: bool,
    pub pid: u32,
    /// `host:port` (null until bound).
    pub listen: Option<String>,
    pub data_dir: String,
    pub started_at: i64,
    pub embedded: bool,
    pub last_seq: u64,
    pub version: String,
    pub http: HttpGauges,
    pub log: LogLocation,
    /// This daemon's id (stable across restarts of its data dir; the holder of its run leases).
    pub daemon_id: String,
    /// Where plugins and projects live (the data dir unless `--shared-dir` says otherwise).
    pub shared_dir: String,
}

/// Which backend holds the log, and where.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct LogLocation {
    /// `embedded` or `postgres`.
    pub backend: String,
    /// The data dir, or the database URL without its password.
    pub location: String,
}

/// Open connections and streams, the connection cap, and what it shed or refused.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct HttpGauges {
    pub connections: u64,
    pub streams: u64,
    pub max_connections: u64,
    pub shed: u64,
    pub refused: u64,
}

/// `POST /api/daemon/stop`.
#[derive(ToSchema)]
pub struct Stopping {
    pub stopping: bool,
    pub pid: u32,
}

/// `GET /api/log/events`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct LogPage {
    pub events: Vec<EventLine>,
    pub last_seq: u64,
    /// Pass as `cursor` for the next page; null on the last.
    pub next_cursor: Option<String>,
}

/// `GET /api/log/stats`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct LogStatsBody {
    /// The stats read model (counts by kind and stream).
    pub stats: Value,
    pub last_seq: u64,
    pub disk_bytes: u64,
    pub segment_bytes: u64,
    pub data_dir: String,
}

/// A read model's status: name, version, kind, the seq it reflects.
pub type ProjectionStatus = Value;

/// `GET /api/projections`.
#[derive(ToSchema)]
pub struct ProjectionList {
    pub projections: Vec<ProjectionStatus>,
}

/// `POST /api/projections/rebuild`.
#[derive(ToSchema)]
pub struct Rebuilt {
    pub ok: bool,
    pub rebuilt: Vec<ProjectionStatus>,
}

/// An atom: `{id, label, description, status, taskKinds}`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct Atom {
    pub id: String,
    pub label: String,
    pub description: Value,
    pub status: String,
    pub task_kinds: Vec<String>,
    /// `GET /api/atoms/{id}` only.
    #[schema(required = false)]
    pub skill_body: String,
    /// `GET /api/atoms/{id}` only.
    #[schema(required = false)]
    pub manifest: Value,
}

/// `GET /api/atoms`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct AtomList {
    pub atoms: Vec<Atom>,
    pub next_cursor: Option<String>,
    /// The bundled scenarios' reference pipelines (whole on every page).
    pub pipelines: Vec<Value>,
}

/// `GET /api/atoms/{id}`.
#[derive(ToSchema)]
pub struct AtomShow {
    pub atom: Atom,
}

/// Any JSON object (its fields are described where the route is).
pub type Object = serde_json::Map<String, Value>;

/// An installed (or bundled) plugin.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct Plugin {
    pub id: String,
    pub title: String,
    pub version: String,
    pub source_kind: String,
    pub source: String,
    pub source_digest: String,
    pub trust: String,
    pub capabilities_granted: Vec<String>,
    pub manifest: Value,
    pub fs_path: String,
    pub installed_at: i64,
    pub updated_at: i64,
}

/// `GET /api/plugins`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct PluginList {
    pub plugins: Vec<Plugin>,
    pub next_cursor: Option<String>,
}

/// `GET /api/plugins/{id}`.
#[derive(ToSchema)]
pub struct PluginShow {
    pub plugin: Plugin,
}

#[derive(ToSchema)]
pub struct PluginUninstalled {
    pub ok: bool,
    pub id: String,
    pub version: String,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct PluginTrusted {
    pub ok: bool,
    pub id: String,
    /// `grant` or `revoke`.
    pub action: String,
    pub capabilities_granted: Vec<String>,
    pub plugin: Plugin,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct PluginUpgraded {
    pub plugin: Plugin,
    pub warnings: Vec<Value>,
    pub unchanged: bool,
    pub previous_version: String,
}

/// A marketplace: its index and where it came from.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct Marketplace {
    pub id: String,
    pub url: String,
    pub trust: String,
    pub name: Value,
    pub version: Value,
    pub spec_version: String,
    pub plugin_count: u64,
    /// The index as fetched.
    pub manifest: Value,
    pub added_at: i64,
    pub refreshed_at: Value,
}

#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct MarketplaceList {
    pub marketplaces: Vec<Marketplace>,
    pub next_cursor: Option<String>,
}

#[derive(ToSchema)]
pub struct MarketplaceShow {
    pub marketplace: Marketplace,
}

#[derive(ToSchema)]
pub struct MarketplaceRefreshed {
    pub marketplace: Marketplace,
    pub changed: bool,
}

/// A marketplace's entries as its index lists them.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct MarketplaceEntries {
    pub plugins: Vec<Value>,
    pub next_cursor: Option<String>,
}

/// Matching entries, each with its `marketplaceId`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct MarketplaceSearch {
    pub results: Vec<Value>,
    pub next_cursor: Option<String>,
}

/// `{ok, id}` of what was removed.
#[derive(ToSchema)]
pub struct Removed {
    pub ok: bool,
    pub id: String,
}

/// One server-sent event as a client parses it (`id:`, `event:`, `data:` lines; `data` is a JSON
/// text: the event's payload, or for AG-UI the whole AG-UI event).
#[derive(ToSchema)]
pub struct SseEvent {
    #[schema(required = false)]
    pub id: String,
    #[schema(required = false)]
    pub event: String,
    #[schema(content_media_type = "application/json")]
    pub data: String,
}

/// `POST /api/auth/login` and `/api/auth/logout`.
#[derive(ToSchema)]
pub struct LoggedIn {
    pub ok: bool,
}

/// `GET /api/auth/sessions`: the live login sessions (never their secrets).
#[derive(ToSchema)]
pub struct SessionList {
    pub sessions: Vec<crate::http::sessions::SessionInfo>,
}

/// `DELETE /api/auth/sessions[/{id}]`.
#[derive(ToSchema)]
pub struct SessionsRevoked {
    /// How many sessions were ended.
    pub revoked: usize,
}

/// `GET /api/auth/session`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct Session {
    /// The request carries a valid token (bearer) or a live login session (cookie).
    pub authenticated: bool,
    /// The daemon requires a token on `/api/*` (it runs with `OD_API_TOKEN`).
    pub token_required: bool,
}
