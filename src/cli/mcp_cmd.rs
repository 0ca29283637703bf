//! `od mcp [--flat] [--run <runId>] [--allow <tool|prefix.*|*>]…`: an MCP server over stdio that
//! reaches this data dir's engine (the daemon, or an embedded one) over its HTTP API. By default
//! it offers the two disclosure meta-tools; `--flat` offers the whole catalog. With `--run` a
//! local CLI agent also reaches that run's live browser tools. stdout carries only JSON-RPC.

use clap::Args;
use serde_json::{json, Value};
use std::sync::Arc;

use super::conn::{path_segment, Conn};
use super::{CliError, CliResult, Ctx};
use crate::tools::disclosure::{Backend, Policy};
use crate::tools::ToolError;

#[derive(Args, Debug)]
pub struct McpArgs {
    /// Offer every tool as its own MCP tool (for comparison) instead of od_list / od_call.
    #[arg(long)]
    pub flat: bool,
    /// Scope to a run: its live browser tools are listed and callable too.
    #[arg(long, env = "OD_RUN_ID")]
    pub run: Option<String>,
    /// Tools that may change state without asking (names, `prefix.*`, or `*`); read-only tools
    /// and view-state-only browser tools never need it. Also OD_MCP_ALLOW (comma-separated).
    #[arg(long, env = "OD_MCP_ALLOW", value_delimiter = ',')]
    pub allow: Vec<String>,
    #[command(subcommand)]
    pub cmd: Option<McpSub>,
}

/// What `od mcp` does besides serving.
#[derive(clap::Subcommand, Debug)]
pub enum McpSub {
    /// Authorize a plugin's MCP server reached over HTTP (OAuth 2.1 + PKCE).
    #[command(subcommand)]
    Oauth(super::mcp_oauth_cmd::McpOauthCmd),
}

/// The daemon over HTTP.
struct HttpBackend {
    conn: Arc<Conn>,
    run: Option<String>,
}

fn failed(name: &str, e: CliError) -> ToolError {
    if e.code == "invalid-input" {
        return ToolError::invalid("input", e.message);
    }
    ToolError::Failed { name: name.to_string(), message: format!("{}: {}", e.code, e.message), status: 0 }
}

impl Backend for HttpBackend {
    fn search(&self, query: &str, cursor: Option<&str>, limit: usize, full: bool) -> Result<Value, ToolError> {
        let mut q = format!("/api/tools/search?query={}&limit={limit}", path_segment(query));
        if !full {
            q.push_str("&fields=summary");
        }
        if let Some(c) = cursor {
            q.push_str(&format!("&cursor={}", path_segment(c)));
        }
        if let Some(r) = &self.run {
            q.push_str(&format!("&surface=all&runId={}", path_segment(r)));
        }
        self.conn.get(&q).map_err(|e| failed("od_list", e))
    }

    fn describe(&self, name: &str) -> Result<Option<Value>, ToolError> {
        if let Some(r) = &self.run {
            let m =
                self.conn.get(&format!("/api/runs/{}/tools/manifest", path_segment(r))).map_err(|e| failed(name, e))?;
            if let Some(d) = m["tools"].as_array().into_iter().flatten().find(|d| d["name"] == name) {
                return Ok(Some(d.clone()));
            }
        }
        match self.conn.get(&format!("/api/tools/{}", path_segment(name))) {
            Ok(v) => Ok(Some(v["tool"].clone())),
            Err(e) if e.code == "tool-not-found" => Ok(None),
            Err(e) => Err(failed(name, e)),
        }
    }

    fn call(&self, d: &Value, input: &Value) -> Result<Value, ToolError> {
        let name = d["name"].as_str().unwrap_or("");
        let v = self
            .conn
            .post("/api/tools/call", &json!({ "name": name, "input": input, "runId": self.run }))
            .map_err(|e| failed(name, e))?;
        Ok(if v.get("invocationId").is_some() { v } else { v["result"].clone() })
    }
}

pub fn run(ctx: &Ctx, args: McpArgs) -> CliResult {
    if let Some(McpSub::Oauth(cmd)) = args.cmd {
        return super::mcp_oauth_cmd::run(ctx, cmd);
    }
    // Serves for as long as its client runs: through the daemon, never holding the data dir.
    let conn = Arc::new(ctx.conn_daemon()?);
    if let Some(r) = &args.run {
        conn.get(&format!("/api/runs/{}", path_segment(r)))?;
    }
    let backend: Arc<dyn Backend> = Arc::new(HttpBackend { conn: conn.clone(), run: args.run.clone() });
    let opts = crate::mcp::Options { flat: args.flat, policy: Policy { allow: args.allow } };
    eprintln!("od mcp: serving {} over stdio", if opts.flat { "the flat catalog" } else { "od_list and od_call" });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::new("error", format!("starting the runtime: {e}")))?;
    let served = rt.block_on(crate::mcp::serve(backend, opts));
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    if let Ok(conn) = Arc::try_unwrap(conn) {
        conn.close();
    }
    served.map_err(|e| CliError::new("mcp", e))
}
