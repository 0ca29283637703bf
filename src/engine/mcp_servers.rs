//! The MCP servers installed plugins declare (`od.context.mcp[]`) and the one gate for one of
//! them: what indexing and calling their tools (`tools/plugin_servers.rs`) and authorizing one
//! (`mcp_oauth.rs`) pass first.

use od_projections::InstalledPlugin;
use serde_json::{json, Value};
use std::collections::BTreeSet;

use super::apply::required_capabilities;
use super::gate::{self, Capability, ExecRight, Reach};
use super::WorkError;

/// The MCP servers a plugin declares.
pub fn servers_of(p: &InstalledPlugin) -> Vec<Value> {
    let m: Value = serde_json::from_str(&p.manifest_json).unwrap_or(Value::Null);
    m["od"]["context"]["mcp"].as_array().cloned().unwrap_or_default()
}

/// The one gate (`gate.rs`) for one server of `p`: a stdio server starts a program, so the
/// caller needs the exec right; either kind needs the plugin's `mcp:<server>` and what the server
/// implies (a trusted plugin holds what it requires). Also passed by starting a server's OAuth
/// authorization (`mcp_oauth.rs`).
pub fn gate(p: &InstalledPlugin, server: &Value, right: ExecRight) -> Result<(), WorkError> {
    let mut required = required_capabilities(&json!({ "context": { "mcp": [server] } }));
    required.remove("prompt:inject");
    let mut granted: BTreeSet<String> = p.capabilities_granted.iter().cloned().collect();
    if p.trust != od_events::vocab::Trust::Restricted {
        granted.extend(required.iter().cloned());
    }
    let cap = Capability { plugin_id: p.id.clone(), plugin_version: p.version.clone(), required, granted };
    let sname = server["name"].as_str().unwrap_or("");
    let stdio = server["url"].as_str().is_none_or(str::is_empty);
    // A URL server starts no program here: only the capability applies to it.
    let right = if stdio { right } else { ExecRight::Granted };
    gate::pass(right, Reach::McpStdio { plugin_id: &p.id, server: sname }, Some(&cap))
}
