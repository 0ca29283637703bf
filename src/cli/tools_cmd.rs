//! `od tools search|show|import|remove|index|call|manifest|actions|advertise|result`: the agent
//! tool catalog, calls, a run's manifest and browser actions, and the browser side's two legs
//! (advertise a session's tools, post an action's result) for scripts and tests.

use clap::Subcommand;
use serde_json::{json, Value};

use super::conn::{path_segment, Conn};
use super::paging::{print_list, PageArgs};
use super::{s, CliError, CliResult, Ctx};

#[derive(Subcommand, Debug)]
pub enum ToolsCmd {
    /// Keyword search over names, descriptions and parameters (no query: every tool by name).
    Search {
        query: Option<String>,
        /// api (default), browser or all.
        #[arg(long)]
        surface: Option<String>,
        #[arg(long)]
        limit: Option<usize>,
        /// The nextCursor of the previous page.
        #[arg(long, conflicts_with = "all")]
        cursor: Option<String>,
        /// Walk every page, printing tools as they arrive (one JSON object per line with --json).
        #[arg(long)]
        all: bool,
        /// Also the browser tools live in this run (listed first).
        #[arg(long, env = "OD_RUN_ID")]
        run: Option<String>,
    },
    /// One tool's descriptor (--schema: its input schema only).
    Show {
        name: String,
        #[arg(long)]
        schema: bool,
    },
    /// Add external api tools from a JSON file: an array of tools, {tools: [...]}, or an MCP
    /// tools/list response; named <namespace>.<name>.
    Import {
        file: std::path::PathBuf,
        #[arg(long)]
        namespace: Option<String>,
        /// A label for where they came from (default: the file's name).
        #[arg(long)]
        source: Option<String>,
    },
    /// Remove an imported or indexed tool.
    Remove { name: String },
    /// Index the tools of MCP servers declared by installed plugins (the capability gate applies).
    Index {
        #[arg(long)]
        plugin: Option<String>,
    },
    /// Call a tool: an api tool through its route; a browser tool in --run's live session
    /// (waits for the browser's result).
    Call {
        name: String,
        /// The input as a JSON object.
        #[arg(long)]
        input: Option<String>,
        #[arg(long, env = "OD_RUN_ID")]
        run: Option<String>,
        #[arg(long)]
        timeout_ms: Option<i64>,
    },
    /// A run's tool manifest: od's own tools and the browser tools live in the run now.
    Manifest {
        #[arg(long, env = "OD_RUN_ID")]
        run: String,
    },
    /// A run's browser actions and their status.
    Actions {
        #[arg(long, env = "OD_RUN_ID")]
        run: String,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Advertise a browser session's mounted tools (a JSON array of browser descriptors; `[]`
    /// with no --run closes the session).
    Advertise {
        #[arg(long)]
        session: String,
        #[arg(long)]
        run: Option<String>,
        /// The descriptors, as JSON.
        #[arg(long)]
        tools: String,
    },
    /// Post a browser action's result: --result JSON, or --error CODE --message TEXT.
    Result {
        run_id: String,
        invocation_id: String,
        #[arg(long, conflicts_with = "error")]
        result: Option<String>,
        /// TOOL_NOT_AVAILABLE, INVALID_INPUT, EXECUTION_FAILED, TIMEOUT, SUPERSEDED or USER_DENIED.
        #[arg(long, requires = "message")]
        error: Option<String>,
        #[arg(long)]
        message: Option<String>,
    },
}

fn parse_json(flag: &str, raw: &str) -> CliResult<Value> {
    serde_json::from_str(raw).map_err(|e| CliError::new("usage", format!("{flag}: {e}")))
}

fn query_string(pairs: &[(&str, Option<String>)]) -> String {
    let q: Vec<String> =
        pairs.iter().filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", path_segment(v)))).collect();
    if q.is_empty() {
        String::new()
    } else {
        format!("?{}", q.join("&"))
    }
}

/// A search page for people: a table of the tools, then how many of how many, and the next cursor.
fn tool_lines(look: &super::human::Look, v: &Value) -> String {
    use super::human::{col, keep};
    let tools = v["tools"].as_array().map_or(&[][..], Vec::as_slice);
    let rows: Vec<Vec<String>> = tools
        .iter()
        .map(|t| vec![s(&t["name"]).to_string(), s(&t["surface"]).to_string(), s(&t["description"]).to_string()])
        .collect();
    let mut lines = Vec::new();
    if !rows.is_empty() {
        lines.push(super::human::table(look, &[keep("TOOL"), keep("SURFACE"), col("DESCRIPTION")], rows));
    }
    lines.push(format!(
        "({} shown of {}{})",
        tools.len(),
        v["total"],
        match v["nextCursor"].as_str() {
            Some(c) => format!("; next page: --cursor {c}"),
            None => String::new(),
        }
    ));
    lines.join("\n")
}

pub fn run(ctx: &Ctx, cmd: ToolsCmd) -> CliResult {
    let conn = ctx.conn()?;
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    match cmd {
        ToolsCmd::Search { query, surface, limit, cursor, all, run } => {
            let run = ctx.resolve_opt(&conn, "run", run)?;
            let surface = surface.or_else(|| run.as_ref().map(|_| "all".to_string()));
            let filters =
                [("query", query), ("surface", surface), ("limit", limit.map(|l| l.to_string())), ("runId", run)];
            return search(ctx, &conn, filters, cursor, all);
        }
        ToolsCmd::Show { name, schema } => {
            let v = conn.get(&format!("/api/tools/{}", path_segment(&name)))?;
            let v = if schema { v["tool"]["inputSchema"].clone() } else { v };
            ctx.print(&v, pretty);
        }
        ToolsCmd::Import { file, namespace, source } => import(ctx, &conn, &file, namespace, source)?,
        ToolsCmd::Remove { name } => {
            let v = conn.delete(&format!("/api/tools/{}", path_segment(&name)))?;
            ctx.print(&v, |v| format!("removed {}", s(&v["name"])));
        }
        ToolsCmd::Index { plugin } => {
            let v = conn.post("/api/tools/index", &json!({ "pluginId": plugin }))?;
            ctx.print(&v, index_text);
        }
        ToolsCmd::Call { name, input, run, timeout_ms } => call(ctx, &conn, &name, input, run, timeout_ms)?,
        ToolsCmd::Manifest { run } => {
            let v = conn.get(&format!("/api/runs/{}/tools/manifest", path_segment(&run)))?;
            ctx.print(&v, |v| tool_lines(&ctx.look, v));
        }
        ToolsCmd::Actions { run, page } => {
            let row = |a: &Value| {
                format!("{}  {}  {}  {}", s(&a["invocationId"]), s(&a["tool"]), s(&a["status"]), s(&a["errorCode"]))
            };
            let human =
                |v: &Value| v["actions"].as_array().into_iter().flatten().map(row).collect::<Vec<_>>().join("\n");
            let path = format!("/api/runs/{}/actions", path_segment(&run));
            print_list(ctx, &conn, &path, "actions", &page, human, row)?;
        }
        ToolsCmd::Advertise { session, run, tools } => {
            let tools = parse_json("--tools", &tools)?;
            let v = conn.post(
                &format!("/api/browser-sessions/{}", path_segment(&session)),
                &json!({ "runId": run, "tools": tools }),
            )?;
            ctx.print(&v, |v| format!("session {} advertises {}", s(&v["sessionId"]), v["tools"]));
        }
        ToolsCmd::Result { run_id, invocation_id, result, error, message } => {
            let body = result_body(result, error, message)?;
            let path = format!("/api/runs/{}/actions/{}/result", path_segment(&run_id), path_segment(&invocation_id));
            ctx.print(&conn.post(&path, &body)?, pretty);
        }
    }
    Ok(())
}

/// `od tools search`: one page of the matching tools, or (`--all`) every page, one tool a line.
fn search(
    ctx: &Ctx,
    conn: &Conn,
    filters: [(&str, Option<String>); 4],
    cursor: Option<String>,
    all: bool,
) -> CliResult {
    let path = |cursor: Option<String>| {
        let mut q = filters.to_vec();
        q.insert(3, ("cursor", cursor));
        format!("/api/tools/search{}", query_string(&q))
    };
    if !all {
        ctx.print(&conn.get(&path(cursor))?, |v| tool_lines(&ctx.look, v));
        return Ok(());
    }
    let mut next: Option<String> = None;
    loop {
        let v = conn.get(&path(next.take()))?;
        for t in v["tools"].as_array().into_iter().flatten() {
            let line = if ctx.json {
                t.to_string()
            } else {
                format!("{}  [{}]  {}", s(&t["name"]), s(&t["surface"]), s(&t["description"]))
            };
            if !super::paging::emit(&line) {
                return Ok(());
            }
        }
        match v["nextCursor"].as_str() {
            Some(c) if !c.is_empty() => next = Some(c.to_string()),
            _ => return Ok(()),
        }
    }
}

/// `od tools index`'s answer for people: each plugin's MCP server, its status and tools.
fn index_text(v: &Value) -> String {
    let rows = v["servers"].as_array().into_iter().flatten();
    let lines: Vec<String> = rows
        .map(|r| {
            format!(
                "{}/{}  {}  {}",
                s(&r["pluginId"]),
                s(&r["server"]),
                s(&r["status"]),
                if r["tools"].is_array() { r["tools"].to_string() } else { s(&r["reason"]).to_string() }
            )
        })
        .collect();
    if lines.is_empty() {
        "no plugin declares an MCP server".into()
    } else {
        lines.join("\n")
    }
}

/// A browser action's result: the error code and message, else the result (JSON).
fn result_body(result: Option<String>, error: Option<String>, message: Option<String>) -> CliResult<Value> {
    Ok(match (result, error) {
        (_, Some(code)) => {
            json!({ "ok": false, "error": { "code": code, "message": message.unwrap_or_default() } })
        }
        (Some(r), None) => json!({ "ok": true, "result": parse_json("--result", &r)? }),
        (None, None) => json!({ "ok": true, "result": null }),
    })
}

/// `od tools import`: the tools of a JSON file added to the catalog (under `namespace`).
fn import(
    ctx: &Ctx,
    conn: &Conn,
    file: &std::path::Path,
    namespace: Option<String>,
    source: Option<String>,
) -> CliResult {
    let raw = std::fs::read_to_string(file).map_err(|e| CliError::new("usage", format!("{}: {e}", file.display())))?;
    let tools = parse_json(&file.display().to_string(), &raw)?;
    let label = source.unwrap_or_else(|| file.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default());
    let v = conn.post("/api/tools/import", &json!({ "tools": tools, "namespace": namespace, "source": label }))?;
    ctx.print(&v, |v| {
        format!(
            "{} added, {} changed, {} unchanged",
            v["added"].as_array().map_or(0, Vec::len),
            v["changed"].as_array().map_or(0, Vec::len),
            v["unchanged"]
        )
    });
    Ok(())
}

/// `od tools call`: one tool called (a browser action that fails is `browser-action-failed`).
fn call(
    ctx: &Ctx,
    conn: &Conn,
    name: &str,
    input: Option<String>,
    run: Option<String>,
    timeout_ms: Option<i64>,
) -> CliResult {
    let input = match input {
        Some(raw) => parse_json("--input", &raw)?,
        None => json!({}),
    };
    let v =
        conn.post("/api/tools/call", &json!({ "name": name, "input": input, "runId": run, "timeoutMs": timeout_ms }))?;
    ctx.print(&v, |v| serde_json::to_string_pretty(v).unwrap_or_default());
    if v["ok"] == false {
        let e = &v["error"];
        return Err(CliError {
            code: "browser-action-failed".into(),
            message: format!("{}: {}", s(&e["code"]), s(&e["message"])),
            data: v.clone(),
        });
    }
    Ok(())
}
