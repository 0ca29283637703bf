//! `od connectors list|info|connect|disconnect|cancel|tools|execute`: the connector catalog and
//! accounts (spec §5, §9). `connect` prints the provider's URL and waits until the browser comes
//! back through the daemon's callback; `tools` and `execute` are the agent's side, authorized by
//! the run's `OD_TOOL_TOKEN` instead of the user's token.

use clap::Subcommand;
use serde_json::{json, Value};

use super::conn::path_segment;
use super::error::CliError;
use super::{CliResult, Ctx};

#[derive(Subcommand, Debug)]
pub enum ConnectorsCmd {
    /// The connector catalog: each connector's status (connected, pending, unavailable) and account.
    List,
    /// One connector: status, account, scopes and tools.
    Info { id: String },
    /// Connect an account: prints the provider's authorization URL to open, then waits for the
    /// browser to come back (the daemon stores the token; it never reaches the log).
    Connect {
        id: String,
        /// Answer this run's oauth-prompt surface with the connection (with --surface).
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
    /// Disconnect the account: its tokens are deleted.
    Disconnect { id: String },
    /// Forget authorizations still waiting for the browser.
    Cancel { id: String },
    /// (Agent side, OD_TOOL_TOKEN) the connectors this run's plugin may call.
    Tools,
    /// (Agent side, OD_TOOL_TOKEN) call a connector tool for this run.
    Execute {
        connector: String,
        tool: String,
        /// The tool's input, a JSON object.
        #[arg(long, default_value = "{}")]
        input: String,
    },
}

fn s(v: &Value) -> String {
    v.as_str().map_or_else(|| if v.is_null() { String::new() } else { v.to_string() }, str::to_string)
}

fn line(c: &Value) -> String {
    let account = s(&c["accountLabel"]);
    let mut out = format!(
        "{:<10} {:<12} {}",
        s(&c["id"]),
        s(&c["status"]),
        if account.is_empty() { "-".into() } else { account }
    );
    out.push_str(&format!("  tools: {}", c["allowedToolNames"].as_array().map_or(0, Vec::len)));
    if let Some(r) = c["reason"].as_str() {
        out.push_str(&format!("  ({r})"));
    }
    out
}

fn tool_token() -> CliResult<String> {
    std::env::var("OD_TOOL_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| CliError::new("tool-token-missing", "OD_TOOL_TOKEN is not set: od gives it to a run's agent"))
}

pub fn run(ctx: &Ctx, cmd: ConnectorsCmd) -> CliResult {
    match cmd {
        ConnectorsCmd::List => {
            let v = ctx.conn()?.get("/api/connectors")?;
            ctx.print(&v, |v| {
                let rows: Vec<String> = v["connectors"].as_array().into_iter().flatten().map(line).collect();
                if rows.is_empty() {
                    "no connectors".into()
                } else {
                    rows.join("\n")
                }
            });
        }
        ConnectorsCmd::Info { id } => {
            let v = ctx.conn()?.get(&format!("/api/connectors/{}", path_segment(&id)))?;
            ctx.print(&v, |v| {
                let c = &v["connector"];
                let mut out = line(c);
                for t in c["tools"].as_array().into_iter().flatten() {
                    out.push_str(&format!("\n  {:<22} {:<6} {}", s(&t["name"]), s(&t["method"]), s(&t["description"])));
                }
                out
            });
        }
        ConnectorsCmd::Connect { id, run, surface, no_wait, timeout } => {
            return connect(ctx, &id, run, surface, no_wait, timeout)
        }
        ConnectorsCmd::Disconnect { id } => {
            let v = ctx.conn()?.delete(&format!("/api/connectors/{}/connection", path_segment(&id)))?;
            ctx.print(&v, |v| format!("disconnected: {}", line(&v["connector"])));
        }
        ConnectorsCmd::Cancel { id } => {
            let v =
                ctx.conn()?.post(&format!("/api/connectors/{}/authorization/cancel", path_segment(&id)), &json!({}))?;
            ctx.print(&v, |v| line(&v["connector"]));
        }
        ConnectorsCmd::Tools => {
            let conn = ctx.conn()?.with_bearer(tool_token()?);
            let v = conn.get("/api/tools/connectors/list")?;
            ctx.print(&v, declared_text);
        }
        ConnectorsCmd::Execute { connector, tool, input } => {
            let input: Value = serde_json::from_str(&input)
                .map_err(|e| CliError::new("invalid-input", format!("--input: not JSON: {e}")))?;
            let conn = ctx.conn()?.with_bearer(tool_token()?);
            let v = conn.post(
                "/api/tools/connectors/execute",
                &json!({ "connectorId": connector, "toolName": tool, "input": input }),
            )?;
            ctx.print(&v, |v| serde_json::to_string_pretty(&v["output"]).unwrap_or_default());
        }
    }
    Ok(())
}

/// `od connectors connect`: starts the authorization, prints its URL and (unless `--no-wait`) waits
/// for the browser to finish it.
fn connect(
    ctx: &Ctx,
    id: &str,
    run: Option<String>,
    surface: Option<String>,
    no_wait: bool,
    timeout: u64,
) -> CliResult {
    // The callback must find the daemon that started the authorization.
    let conn = ctx.conn_daemon()?;
    let run = ctx.resolve_opt(&conn, "run", run)?;
    let path = format!("/api/connectors/{}/connect/start", path_segment(id));
    let started = conn.post(&path, &json!({ "runId": run, "surfaceId": surface }))?;
    let url = s(&started["authorizeUrl"]);
    if no_wait || ctx.json {
        ctx.print(&started, |_| format!("Open this URL to connect {id}:\n  {url}"));
        if no_wait {
            return Ok(());
        }
    } else {
        eprintln!("Open this URL to connect {id}:\n  {url}\nWaiting for the browser…");
    }
    let info = format!("/api/connectors/{}", path_segment(id));
    let v = super::oauth_wait::wait_for_browser(&conn, &info, timeout, id, |v| {
        let c = &v["connector"];
        (c["status"] == "connected", c["pendingAuthorizations"] != 0, &c["lastError"])
    })?;
    ctx.print(&v, |v| format!("connected: {}", line(&v["connector"])));
    Ok(())
}

/// The connectors a run's plugin may call, for people.
fn declared_text(v: &Value) -> String {
    let rows: Vec<String> = v["connectors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| format!("{:<10} {:<12} {}", s(&c["id"]), s(&c["status"]), s(&c["tools"])))
        .collect();
    if rows.is_empty() {
        "no connectors declared".into()
    } else {
        rows.join("\n")
    }
}
