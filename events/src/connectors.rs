//! Connector facts: an account connected to, or disconnected from, a connector of the catalog
//! (stream `connector:<id>`). Only that it happened, who the account is and which scopes it holds:
//! the tokens themselves live in the daemon's credential storage, never in the log.

use serde::{Deserialize, Serialize};

/// An account was connected through the connector's OAuth 2.0 flow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectorConnected {
    pub connector_id: String,
    /// What the provider says the account is (its login or name), or the connector's name.
    pub account_label: String,
    /// The scopes the provider granted.
    pub scopes: Vec<String>,
    /// The run and surface the connection answered, when it was started from an `oauth-prompt`.
    pub run_id: String,
    pub surface_id: String,
    pub connected_at: i64,
}

/// The connector's account was disconnected (`reason`: `user`, or `refused` when the provider
/// stopped accepting its token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectorDisconnected {
    pub connector_id: String,
    pub reason: String,
    pub disconnected_at: i64,
}

/// A plugin MCP server reached over HTTP was authorized through its OAuth 2.1 flow (stream
/// `mcp-oauth:<key>`). Like a connector's, the token stays in the daemon's credential storage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerAuthorized {
    pub plugin_id: String,
    /// The server's `name` in the plugin's `od.context.mcp[]` (the surface's `mcpServerId`).
    pub server: String,
    /// The server's URL (the OAuth resource).
    pub url: String,
    /// The origin of the authorization server's endpoint that issued the token.
    pub issuer: String,
    pub scopes: Vec<String>,
    /// The run and surface the authorization answered, when it was started from an `oauth-prompt`.
    pub run_id: String,
    pub surface_id: String,
    pub authorized_at: i64,
}

/// A plugin MCP server's authorization was removed (`reason`: `user`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerDeauthorized {
    pub plugin_id: String,
    pub server: String,
    pub reason: String,
    pub deauthorized_at: i64,
}
