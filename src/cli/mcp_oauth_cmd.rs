//! `od mcp oauth start|status|disconnect`: authorizing a plugin's MCP server reached over HTTP
//! (spec §10.3.1 `oauth.route: mcp`). `start` prints the authorization URL and waits until the
//! browser comes back (the daemon stores the token; it never reaches the log).

use clap::Subcommand;
use serde_json::{json, Value};

use super::conn::path_segment;
use super::{CliResult, Ctx};

#[derive(Subcommand, Debug)]
pub enum McpOauthCmd {
    /// Authorize a server: prints the URL to open, then waits for the browser.
    Start {
        /// The plugin declaring the server (optional with --run: the run's plugin).
        #[arg(long)]
        plugin: Option<String>,
        /// The server's name in the plugin's od.context.mcp[].
        #[arg(long)]
        server: String,
        /// Answer this run's oauth-prompt surface with the authorization (with --surface).
        #[arg(long)]
        run: Option<String>,
        #[arg(long)]
        surface: Option<String>,
        /// Print the URL and return without waiting.
        #[arg(long)]
        no_wait: bool,
        /// How long to wait for the browser, in seconds.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
    },
    /// Whether the server holds a token.
    Status {
        #[arg(long)]
        plugin: String,
        #[arg(long)]
        server: String,
    },
    /// Delete the server's token.
    Disconnect {
        #[arg(long)]
        plugin: String,
        #[arg(long)]
        server: String,
    },
}

fn line(v: &Value) -> String {
    let state = if v["connected"] == true { "authorized" } else { "not authorized" };
    format!(
        "{} {} ({}): {state}",
        v["pluginId"].as_str().unwrap_or(""),
        v["serverId"].as_str().unwrap_or(""),
        v["url"].as_str().unwrap_or("")
    )
}

fn status_path(plugin: &str, server: &str) -> String {
    format!("/api/mcp/oauth/status?pluginId={}&serverId={}", path_segment(plugin), path_segment(server))
}

pub fn run(ctx: &Ctx, cmd: McpOauthCmd) -> CliResult {
    match cmd {
        McpOauthCmd::Start { plugin, server, run, surface, no_wait, timeout } => {
            // The callback must find the daemon that started the authorization.
            let conn = ctx.conn_daemon()?;
            let run = ctx.resolve_opt(&conn, "run", run)?;
            let body = json!({ "serverId": server, "pluginId": plugin, "runId": run, "surfaceId": surface });
            let started = conn.post("/api/mcp/oauth/start", &body)?;
            let url = started["authorizeUrl"].as_str().unwrap_or("").to_string();
            if no_wait || ctx.json {
                ctx.print(&started, |_| format!("Open this URL to authorize {server}:\n  {url}"));
                if no_wait {
                    return Ok(());
                }
            } else {
                eprintln!("Open this URL to authorize {server}:\n  {url}\nWaiting for the browser…");
            }
            let plugin = started["pluginId"].as_str().unwrap_or("").to_string();
            let v =
                super::oauth_wait::wait_for_browser(&conn, &status_path(&plugin, &server), timeout, &server, |v| {
                    (v["connected"] == true, v["pendingAuthorizations"] != 0, &v["lastError"])
                })?;
            ctx.print(&v, line);
        }
        McpOauthCmd::Status { plugin, server } => {
            let v = ctx.conn()?.get(&status_path(&plugin, &server))?;
            ctx.print(&v, line);
        }
        McpOauthCmd::Disconnect { plugin, server } => {
            let v =
                ctx.conn()?.post("/api/mcp/oauth/disconnect", &json!({ "pluginId": plugin, "serverId": server }))?;
            ctx.print(&v, line);
        }
    }
    Ok(())
}
