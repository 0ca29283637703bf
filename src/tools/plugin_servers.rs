//! Tools of MCP servers declared by installed plugins (`od.context.mcp[]`): indexing asks each
//! server — a stdio `command`, or a `url` over Streamable HTTP with the bearer token its OAuth
//! authorization stored — for its `tools/list` and registers every tool as an `api` tool named
//! `<plugin>.<server>.<tool>` (source `plugin:<id>/<server>`; tools it no longer lists are
//! removed), and calling one starts its server and forwards `tools/call`. Both pass the one gate
//! first (`engine/gate.rs`): a stdio server needs the caller's exec right, and the target tool's
//! plugin must hold `mcp:<server>` and what the server implies (`subprocess`, `network` for
//! npx-style commands).

use od_events::tools::ToolRemoved;
use od_events::{Event, StreamId};
use od_projections::InstalledPlugin;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;

use super::catalog::TOOLS_STREAM;
use super::mcp_client::{timeout, McpChild, McpSession};
use super::mcp_http::{HttpMcpError, McpHttp};
use super::{descriptor, ToolError};
use crate::connectors::oauth::OAuthError;
use crate::connectors::outbound::Unreachable;
use crate::engine::apply::required_capabilities;
use crate::engine::connectors::ConnectorError;
use crate::engine::gate::{self, Capability, ExecRight, Reach};
use crate::engine::Engine;
use crate::store::Append;

fn segment(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' }).collect()
}

/// The MCP servers a plugin declares.
pub fn servers_of(p: &InstalledPlugin) -> Vec<Value> {
    let m: Value = serde_json::from_str(&p.manifest_json).unwrap_or(Value::Null);
    m["od"]["context"]["mcp"].as_array().cloned().unwrap_or_default()
}

/// The one gate (`engine/gate.rs`) for one server of `p`: a stdio server starts a program, so the
/// caller needs the exec right; either kind needs the plugin's `mcp:<server>` and what the server
/// implies (a trusted plugin holds what it requires). Also passed by starting a server's OAuth
/// authorization (`engine/mcp_oauth.rs`).
pub(crate) fn gate(p: &InstalledPlugin, server: &Value, right: ExecRight) -> Result<(), ToolError> {
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
    gate::pass(right, Reach::McpStdio { plugin_id: &p.id, server: sname }, Some(&cap)).map_err(|e| match e {
        crate::engine::WorkError::Apply(a) => ToolError::Apply(a),
        other => ToolError::Work(other),
    })
}

impl Engine {
    fn start_server(&self, p: &InstalledPlugin, server: &Value) -> Result<Box<dyn McpSession>, ToolError> {
        let name = server["name"].as_str().unwrap_or("").to_string();
        let fail = |message: String| ToolError::Server { plugin_id: p.id.clone(), server: name.clone(), message };
        if let Some(url) = server["url"].as_str().filter(|u| !u.is_empty()) {
            let not_authorized = || ToolError::McpNotAuthorized { plugin_id: p.id.clone(), server: name.clone() };
            let unreachable = |u: Unreachable| match u.code {
                Some(code) => {
                    ToolError::ServerTls { plugin_id: p.id.clone(), server: name.clone(), code, message: u.message }
                }
                None => fail(u.message),
            };
            // A refresh of the stored token goes to the server's token endpoint first.
            let bearer = self.mcp_bearer(&p.id, &name).map_err(|e| match e {
                ConnectorError::OAuth(OAuthError::Unreachable(u)) => unreachable(u),
                other => fail(other.to_string()),
            })?;
            return match McpHttp::connect(url, bearer, timeout()) {
                Ok(s) => Ok(Box::new(s)),
                Err(HttpMcpError::Unauthorized) => Err(not_authorized()),
                Err(HttpMcpError::Unreachable(u)) => Err(unreachable(u)),
                Err(HttpMcpError::Other(m)) => Err(fail(m)),
            };
        }
        let command = server["command"]
            .as_str()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| fail("the server has neither a command (stdio) nor a url (HTTP)".into()))?;
        let args: Vec<String> =
            server["args"].as_array().into_iter().flatten().filter_map(|a| a.as_str().map(str::to_string)).collect();
        let env: Vec<(String, String)> = server["env"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
            .collect();
        let cwd = Some(PathBuf::from(&p.fs_path)).filter(|d| d.is_dir()).unwrap_or_else(|| self.data_dir.clone());
        Ok(Box::new(McpChild::start(command, &args, &env, &cwd, timeout()).map_err(fail)?))
    }

    /// Indexes the tools of the MCP servers of one installed plugin (or of all): per server
    /// `{pluginId, server, status: indexed|skipped|failed, tools|reason}`.
    pub fn index_plugin_tools(&self, plugin_id: Option<&str>, right: ExecRight) -> Result<Value, ToolError> {
        let plugins: Vec<InstalledPlugin> = match plugin_id {
            Some(id) => vec![self.plugin(id).map_err(|e| ToolError::Apply(e.into()))?],
            None => self.plugins().map_err(|e| ToolError::Apply(e.into()))?,
        };
        let mut report = Vec::new();
        for p in plugins {
            for server in servers_of(&p) {
                let sname = server["name"].as_str().unwrap_or("").to_string();
                let row = |status: &str, extra: Value| {
                    let mut v = json!({ "pluginId": p.id, "server": sname, "status": status });
                    v.as_object_mut().expect("object").extend(extra.as_object().cloned().unwrap_or_default());
                    v
                };
                if let Err(e) = gate(&p, &server, right) {
                    if plugin_id.is_some() {
                        return Err(e);
                    }
                    report.push(row("skipped", json!({ "reason": e.to_string() })));
                    continue;
                }
                match self.index_server(&p, &server) {
                    Ok(names) => report.push(row("indexed", json!({ "tools": names }))),
                    Err(e) => report.push(row("failed", json!({ "reason": e.to_string(), "code": e.code() }))),
                }
            }
        }
        Ok(json!({ "servers": report }))
    }

    fn index_server(&self, p: &InstalledPlugin, server: &Value) -> Result<Vec<String>, ToolError> {
        let sname = server["name"].as_str().unwrap_or("");
        let listed = self.start_server(p, server)?.list_tools().map_err(|message| ToolError::Server {
            plugin_id: p.id.clone(),
            server: sname.into(),
            message,
        })?;
        let ns = format!("{}.{}", segment(&p.id), segment(sname));
        let source = format!("plugin:{}/{sname}", p.id);
        let mut descs = Vec::new();
        for t in &listed {
            let own = t["name"].as_str().unwrap_or("");
            let origin = json!({ "kind": "mcp", "pluginId": p.id, "server": sname, "tool": own });
            let mut renamed = t.clone();
            renamed["name"] = json!(segment(own));
            descs.push(descriptor::from_external(&renamed, Some(&ns), origin)?);
        }
        self.register_tools(&descs, &source)?;
        let keep: BTreeSet<&str> = descs.iter().filter_map(|d| d["name"].as_str()).collect();
        let stale: Vec<String> = self.tools.catalog.read(|c| {
            c.data
                .tools
                .values()
                .filter(|t| t.source == source && !keep.contains(t.name.as_str()))
                .map(|t| t.name.clone())
                .collect()
        })?;
        if !stale.is_empty() {
            let now = self.clock.now_ms();
            let events = stale
                .iter()
                .map(|n| {
                    Event::ToolRemoved(ToolRemoved {
                        name: n.clone(),
                        source: source.clone(),
                        reason: "reindexed".into(),
                        removed_at: now,
                    })
                })
                .collect();
            self.store.append(Append::new(StreamId::new(TOOLS_STREAM)?, events))?;
        }
        Ok(keep.into_iter().map(str::to_string).collect())
    }

    /// Calls a plugin MCP tool (descriptor `d`, origin `mcp`): gate, start, `tools/call`.
    pub fn call_plugin_tool(&self, d: &Value, input: &Value, right: ExecRight) -> Result<Value, ToolError> {
        let name = d["name"].as_str().unwrap_or("").to_string();
        let o = &d["origin"];
        let (pid, sname, tool) = (
            o["pluginId"].as_str().unwrap_or(""),
            o["server"].as_str().unwrap_or(""),
            o["tool"].as_str().unwrap_or(""),
        );
        let p = self.plugin(pid).map_err(|_| ToolError::NotExecutable {
            name: name.clone(),
            reason: format!("plugin {pid} is not installed"),
        })?;
        let server =
            servers_of(&p).into_iter().find(|s| s["name"] == sname).ok_or_else(|| ToolError::NotExecutable {
                name: name.clone(),
                reason: format!("plugin {pid} no longer declares MCP server {sname}"),
            })?;
        gate(&p, &server, right)?;
        let r = self.start_server(&p, &server)?.call_tool(tool, input).map_err(|message| ToolError::Server {
            plugin_id: pid.into(),
            server: sname.into(),
            message,
        })?;
        if r["isError"] == true {
            let text: Vec<&str> =
                r["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect();
            return Err(ToolError::Failed { name, message: text.join("\n"), status: 502 });
        }
        Ok(r)
    }
}
