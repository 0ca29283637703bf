//! The URLs a plugin's manifest names for od to connect to (its HTTP MCP servers,
//! `od.context.mcp[].url`), held against the address policy (`net/policy.rs`) at the earliest
//! point: at install (before anything is written) and at apply. A literal address or a name the
//! policy refuses (`http://169.254.169.254/…`, `metadata.google.internal`, a deny-list entry) is
//! refused there; a name is resolved only at connect time, where it is checked again
//! (`net/url_rule.rs`'s resolver), since a name can resolve differently later.
//!
//! Only the policy's refusals stop an install: a URL of another bad form (plain http to another
//! host, od's own port) fails when the server is indexed, as before, naming the server.

use serde_json::Value;

use super::plugins::PluginError;

/// The plugin's declared MCP server URLs (non-empty ones).
fn mcp_urls(manifest: &Value) -> impl Iterator<Item = &str> {
    let servers = manifest["od"]["context"]["mcp"].as_array().into_iter().flatten();
    servers.filter_map(|s| s["url"].as_str()).filter(|u| !u.is_empty())
}

/// Refuses a manifest naming a server URL the address policy refuses.
pub(crate) fn check_manifest(manifest: &Value) -> Result<(), PluginError> {
    for url in mcp_urls(manifest) {
        match crate::net::check_url(url) {
            Err(r) if r.is_blocked() => return Err(PluginError::UrlRefused(r)),
            _ => {}
        }
    }
    Ok(())
}
