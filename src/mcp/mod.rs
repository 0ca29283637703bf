//! `od mcp`: an MCP server over stdio (the official Rust SDK, `rmcp`). By default it exposes the
//! two disclosure meta-tools (`od_list`, `od_call`); with `flat` the whole catalog, one MCP tool per
//! od tool, for comparison. stdout carries only JSON-RPC (logs go to stderr); an unknown tool name
//! is a JSON-RPC error (-32602), a failing call an `isError` result. What the tools reach is a
//! [`Backend`] — the daemon over HTTP, scoped to one run for the per-run variant.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, DiscoverResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use crate::tools::disclosure::{meta_tools, Backend, Conversation, Policy, Reply, CALL_TOOL, LIST_TOOL};

/// How the server presents tools.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The whole catalog as MCP tools instead of the two meta-tools.
    pub flat: bool,
    pub policy: Policy,
}

/// The MCP handler.
pub struct OdMcp {
    backend: Arc<dyn Backend>,
    opts: Options,
    conversation: Arc<Mutex<Conversation>>,
}

fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(e.to_string(), None)
}

fn to_result(r: Reply) -> Result<CallToolResponse, McpError> {
    let text = serde_json::to_string(&r.body).map_err(internal)?;
    let v = json!({ "content": [{ "type": "text", "text": text }], "isError": r.is_error });
    let res: CallToolResult = serde_json::from_value(v).map_err(internal)?;
    Ok(res.into())
}

impl OdMcp {
    pub fn new(backend: Arc<dyn Backend>, opts: Options) -> Self {
        Self { backend, opts, conversation: Arc::new(Mutex::new(Conversation::default())) }
    }

    /// One page of the flat catalog (full descriptors as MCP tools).
    fn flat_page(&self, cursor: Option<&str>) -> Result<Value, McpError> {
        let page = self.backend.search("", cursor, crate::limits::MCP_FLAT_PAGE, true).map_err(internal)?;
        let tools: Vec<Value> = page["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| json!({ "name": d["name"], "description": d["description"], "inputSchema": d["inputSchema"] }))
            .collect();
        let mut out = json!({ "tools": tools });
        if let Some(c) = page["nextCursor"].as_str() {
            out["nextCursor"] = json!(c);
        }
        Ok(out)
    }

    fn call_blocking(&self, name: &str, args: Value) -> Result<Reply, McpError> {
        let mut conv = self.conversation.lock().map_err(internal)?;
        let b = &*self.backend;
        if !self.opts.flat {
            return match name {
                LIST_TOOL => Ok(conv.list(b, &args)),
                CALL_TOOL => Ok(conv.call(b, &self.opts.policy, &args)),
                _ => Err(McpError::invalid_params(
                    format!("unknown tool: {name} (this server has {LIST_TOOL} and {CALL_TOOL})"),
                    None,
                )),
            };
        }
        match b.describe(name).map_err(internal)? {
            Some(_) => Ok(conv.run(b, &self.opts.policy, name, &args)),
            None => Err(McpError::invalid_params(format!("unknown tool: {name}"), None)),
        }
    }
}

impl ServerHandler for OdMcp {
    fn get_info(&self) -> ServerConfig {
        let v = json!({
            "protocolVersion": ProtocolVersion::LATEST_WITH_INITIALIZE,
            "capabilities": { "tools": {} },
            "serverInfo": { "name": "od", "version": env!("CARGO_PKG_VERSION") },
            "instructions": "od's tools. od_list finds tools by keywords; od_call with describe: true shows one tool's input schema; od_call with args runs it.",
        });
        serde_json::from_value(v).expect("a valid initialize result")
    }

    /// Only the revisions that still have `initialize` (a newer client falls back to it).
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Owned(ProtocolVersion::KNOWN_VERSIONS.iter().filter(|v| v.has_initialize()).cloned().collect())
    }

    /// `server/discover` is answered "method not found" so `auto` clients fall back to `initialize`.
    async fn discover(&self, _context: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        Err(McpError::new(rmcp::model::ErrorCode::METHOD_NOT_FOUND, "server/discover", None))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let v = if self.opts.flat {
            let this = self.clone_handle();
            let cursor = request.and_then(|r| r.cursor);
            tokio::task::spawn_blocking(move || this.flat_page(cursor.as_deref())).await.map_err(internal)??
        } else {
            json!({ "tools": meta_tools() })
        };
        serde_json::from_value(v).map_err(internal)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let args = Value::Object(request.arguments.unwrap_or_default());
        let this = self.clone_handle();
        let reply = tokio::task::spawn_blocking(move || this.call_blocking(&name, args)).await.map_err(internal)??;
        to_result(reply)
    }
}

impl OdMcp {
    fn clone_handle(&self) -> Self {
        Self { backend: self.backend.clone(), opts: self.opts.clone(), conversation: self.conversation.clone() }
    }
}

/// Serves MCP on stdin/stdout until the client closes the stream.
pub async fn serve(backend: Arc<dyn Backend>, opts: Options) -> Result<(), String> {
    let running = OdMcp::new(backend, opts).serve(rmcp::transport::stdio()).await.map_err(|e| e.to_string())?;
    running.waiting().await.map_err(|e| e.to_string())?;
    Ok(())
}
