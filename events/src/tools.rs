//! Agent tool events: the catalog (stream `tools`: a tool registered or changed, a tool removed),
//! what a live browser session advertises (stream `browser-session:<id>`, reconciled into its
//! active run), and browser-action round trips (stream `run:<id>`: a request, then exactly one
//! result — from the browser, a timeout, a newer request for the same view, or the daemon).

use crate::vocab::{ResolvedBy, ToolRemovedReason, ToolSurface};
use serde::{Deserialize, Serialize};

/// A tool was added to the catalog, or its definition changed (same name, new digest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolRegistered {
    /// Stable, dot-namespaced name.
    pub name: String,
    /// `api` or `browser`.
    pub surface: ToolSurface,
    /// The model- and catalog-facing description.
    pub description: String,
    /// The whole descriptor (the contract's `AgentToolDescriptor` plus od's fields), compact JSON.
    pub descriptor_json: String,
    /// Extra searchable text: the input schema's parameter names and descriptions.
    pub keywords: String,
    /// blake3 of the descriptor's canonical JSON.
    pub digest: String,
    /// The digest this registration replaces ("" for a new tool).
    pub replaces_digest: String,
    /// Who registered it: `builtin`, `import:<label>`, `plugin:<pluginId>/<server>`.
    pub source: String,
    pub registered_at: i64,
}

/// A tool left the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolRemoved {
    pub name: String,
    pub source: String,
    /// `removed` (asked for), `builtin-retired`, `reindexed` (its server no longer lists it).
    pub reason: ToolRemovedReason,
    pub removed_at: i64,
}

/// A browser session PUSHed the browser tools it has mounted now (the whole set; empty when the
/// session closed or unmounted everything).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsAdvertised {
    pub session_id: String,
    /// The run the session is attached to ("" when none).
    pub run_id: String,
    /// The advertised names, in order.
    pub tool_names: Vec<String>,
    /// The advertised `browser` descriptors, a compact JSON array.
    pub tools_json: String,
    pub advertised_at: i64,
}

/// A browser tool was dispatched toward a live session; the caller waits for its result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrowserActionRequested {
    pub run_id: String,
    /// Daemon-minted; the contract's only action identity.
    pub invocation_id: String,
    pub session_id: String,
    pub tool: String,
    /// The input, compact JSON.
    pub input_json: String,
    /// What the action moves (a newer request for the same view supersedes a pending one).
    pub view: String,
    pub requested_at: i64,
    /// Unix ms at which the daemon answers `TIMEOUT` if no result came.
    pub timeout_at: i64,
}

/// A browser action got its one result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrowserActionResulted {
    pub run_id: String,
    pub invocation_id: String,
    pub tool: String,
    pub ok: bool,
    /// The result when `ok`, compact JSON (`null` otherwise).
    pub result_json: String,
    /// One of the contract's codes when not `ok` (`TOOL_NOT_AVAILABLE`, `INVALID_INPUT`,
    /// `EXECUTION_FAILED`, `TIMEOUT`, `SUPERSEDED`, `USER_DENIED`); "" when `ok`.
    pub error_code: String,
    pub error_message: String,
    /// `details`, compact JSON ("" when absent).
    pub error_details_json: String,
    /// `browser`, `timeout`, `superseded` or `daemon-restart`.
    pub resolved_by: ResolvedBy,
    /// The invocation that superseded this one ("" otherwise).
    pub superseded_by: String,
    pub resulted_at: i64,
}
