//! `od run start`: the request body from the flags, the project, conversation and snapshot it names
//! resolved from their prefixes, and what it prints — the run's ids, or (with `--follow`) its events
//! until it ends.

use serde_json::{json, Map, Value};

use super::args::PluginArgs;
use super::conn::Conn;
use super::follow::{end_result, follow, on_wait, show_for};
use super::{s, CliError, CliResult, Ctx};

/// The flags of `od run start` (the command's help is the `RunCmd::Start` variant's).
#[derive(clap::Args, Debug)]
pub struct StartArgs {
    /// Project to run in (default: a new project).
    #[arg(long, env = "OD_PROJECT_ID")]
    pub project: Option<String>,
    #[arg(long)]
    pub conversation: Option<String>,
    /// The brief (default: the plugin's templated example query).
    #[arg(long, default_value = "")]
    pub message: String,
    #[command(flatten)]
    pub plugin: PluginArgs,
    /// `dry-run` (no model, deterministic), `exec` (runs --agent-cmd) or a catalog agent
    /// (`claude`, `codex`, … see `od agents list`); default: the daemon's (OD_AGENT, else exec
    /// when OD_AGENT_CMD is set, else dry-run).
    #[arg(long)]
    pub agent: Option<String>,
    /// A catalog agent's model (one it lists, when it lists them).
    #[arg(long)]
    pub model: Option<String>,
    /// A catalog agent's reasoning effort (see `od agents info <id>`).
    #[arg(long)]
    pub reasoning: Option<String>,
    /// accept-edits (default), bypass (the agent may run anything) or ask (agents that can
    /// ask while headless: acp).
    #[arg(long)]
    pub permission_mode: Option<String>,
    /// The exec agent's command line (run with `sh -c`; default OD_AGENT_CMD).
    #[arg(long)]
    pub agent_cmd: Option<String>,
    /// How to read the exec agent's stdout: auto, od, claude-stream-json, codex-json, gemini-stream-json, opencode-json, copilot-json, cursor-stream-json.
    #[arg(long)]
    pub agent_protocol: Option<String>,
    /// Exec agent timeout per stage iteration, ms.
    #[arg(long)]
    pub agent_timeout_ms: Option<u64>,
    /// The prompt's token budget (default: the agent's; see the README's prompt stack).
    #[arg(long)]
    pub prompt_budget_tokens: Option<u64>,
    /// Dry-run agent script (JSON: critiqueScores, fail, crash, signals, waitForCancel).
    #[arg(long)]
    pub dry_run: Option<String>,
    /// Idempotency key: a repeated start returns the same run.
    #[arg(long)]
    pub client_request_id: Option<String>,
    /// Show the run until it ends: a live progress view on a terminal, ND-JSON events with
    /// --json or when stdout is not a terminal.
    #[arg(long)]
    pub follow: bool,
    /// With --follow: when a GenUI surface waits for an answer, exit 73 naming it instead of
    /// asking in the terminal (answer with `od ui respond`, then `od run watch`). Without a
    /// terminal on stdin it exits 73 anyway.
    #[arg(long)]
    pub no_wait: bool,
}

pub fn start(ctx: &Ctx, args: StartArgs) -> CliResult {
    let (follow_it, no_wait) = (args.follow, args.no_wait);
    let mut body = body(args)?;
    let conn = ctx.conn_daemon()?;
    resolve_ids(ctx, &conn, &mut body)?;
    let v = post_asking_inputs(ctx, &conn, body)?;
    let run_id = s(&v["runId"]).to_string();
    if let (Some(note), false) = (v["agentNote"].as_str(), ctx.json) {
        eprintln!("{note}");
    }
    if follow_it {
        let show = show_for(&conn, &run_id, ctx.json, true);
        let end = follow(&conn, &run_id, None, show, on_wait(no_wait))?;
        return end_result(&end);
    }
    ctx.print(&v, started_text);
    Ok(())
}

/// Starts the run; on a terminal, a start refused for missing plugin inputs (`missing-input`) asks
/// for each (the plugin's label and placeholder as the prompt) and starts again, instead of
/// exiting 67 — programs (`--json`, a pipe, no terminal on stdin) get the error.
fn post_asking_inputs(ctx: &Ctx, conn: &Conn, mut body: Map<String, Value>) -> CliResult<Value> {
    use std::io::IsTerminal;
    let interactive = !ctx.json && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    for _ in 0..crate::limits::ASK_RETRIES {
        let e = match conn.post("/api/runs", &Value::Object(body.clone())) {
            Err(e) if interactive && e.code == "missing-input" => e,
            other => return other,
        };
        let declared = declared_inputs(conn, s(&e.data["pluginId"]));
        let mut inputs = body.get("pluginInputs").and_then(Value::as_object).cloned().unwrap_or_default();
        for name in e.data["missing"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            let spec = declared.iter().find(|d| d["name"] == name).cloned().unwrap_or(Value::Null);
            let label = spec["label"].as_str().map_or_else(|| name.to_string(), |l| format!("{l} ({name})"));
            let Some(answer) = super::ask::ask_line(&label, spec["placeholder"].as_str()) else { return Err(e) };
            inputs.insert(name.to_string(), json!(answer));
        }
        body.insert("pluginInputs".into(), Value::Object(inputs));
    }
    conn.post("/api/runs", &Value::Object(body))
}

/// The inputs plugin `id` declares (`od.inputs`), or none when it cannot be read.
fn declared_inputs(conn: &Conn, id: &str) -> Vec<Value> {
    let v = conn.get(&format!("/api/plugins/{}", super::conn::path_segment(id))).unwrap_or(Value::Null);
    v["plugin"]["manifest"]["od"]["inputs"].as_array().cloned().unwrap_or_default()
}

/// The `POST /api/runs` body: the flags given (those not given left out).
fn body(a: StartArgs) -> CliResult<Map<String, Value>> {
    let mut body = Map::new();
    body.insert("projectId".into(), json!(a.project));
    body.insert("conversationId".into(), json!(a.conversation));
    body.insert("message".into(), json!(a.message));
    a.plugin.fill(&mut body)?;
    body.insert("agent".into(), json!(a.agent));
    body.insert("model".into(), json!(a.model));
    body.insert("reasoning".into(), json!(a.reasoning));
    body.insert("permissionMode".into(), json!(a.permission_mode));
    body.insert("agentCommand".into(), json!(a.agent_cmd));
    body.insert("agentProtocol".into(), json!(a.agent_protocol));
    body.insert("agentTimeoutMs".into(), json!(a.agent_timeout_ms));
    body.insert("promptBudgetTokens".into(), json!(a.prompt_budget_tokens));
    body.insert("clientRequestId".into(), json!(a.client_request_id));
    if let Some(raw) = a.dry_run {
        let v: Value = serde_json::from_str(&raw).map_err(|e| CliError::new("usage", format!("--dry-run: {e}")))?;
        body.insert("dryRun".into(), v);
    }
    body.retain(|_, v| !v.is_null());
    Ok(body)
}

/// A project, conversation or snapshot named by a prefix is resolved first; an id that names none
/// is passed on as typed (the engine says what it does with it); an ambiguous one is refused.
fn resolve_ids(ctx: &Ctx, conn: &Conn, body: &mut Map<String, Value>) -> CliResult {
    for (field, kind) in
        [("projectId", "project"), ("conversationId", "conversation"), ("appliedPluginSnapshotId", "snapshot")]
    {
        if let Some(given) = body.get(field).and_then(Value::as_str).map(str::to_string) {
            match ctx.resolve(conn, kind, &given) {
                Ok(id) => {
                    body.insert(field.into(), json!(id));
                }
                Err(e) if e.code == "ambiguous-id" => return Err(e),
                Err(_) => {}
            }
        }
    }
    Ok(())
}

/// The started run for people: its ids, how to follow it, and a follow-up's stages.
fn started_text(v: &Value) -> String {
    let mut out = format!(
        "run {} started ({}, agent {} from {})\nproject {}\nconversation {}\nfollow it: od run watch {}",
        s(&v["runId"]),
        s(&v["pluginId"]),
        s(&v["agent"]),
        s(&v["agentSource"]),
        s(&v["projectId"]),
        s(&v["conversationId"]),
        s(&v["runId"])
    );
    if let Some(f) = v["followUp"].as_object() {
        let stages: Vec<&str> = f["stages"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let on = f["buildsOn"].as_array().map_or(0, Vec::len);
        out.push_str(&format!(
            "\nfollow-up: runs {} ({}), with the conversation's {on} earlier run(s)",
            stages.join(", "),
            s(&f["rule"])
        ));
    }
    out
}
