//! `od run start|watch|list|info|cancel|logs|signal|respond|devloop|replay` (and `fork|diff|tree`,
//! handled in `fork_cmd.rs`).
//!
//! A run belongs to the data dir's daemon: `od run start` (and `watch`, `respond`) start one in the
//! background when none runs (`cli/autostart.rs`). `run start` returns once the run is accepted,
//! or with `--follow` prints its events until it ends.

use clap::Subcommand;
use serde_json::{json, Map, Value};

use super::conn::path_segment;
use super::follow::{follow, on_wait, show_for};
use super::human::{col, keep};
use super::paging::{print_table, PageArgs, TableView};
use super::project_cmd::PluginArgs;
use super::{s, CliError, CliResult, Ctx};

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once per process
pub enum RunCmd {
    /// Start a run: the plugin's pipeline, stage by stage (default agent: OD_AGENT, else exec when
    /// OD_AGENT_CMD is set, else dry-run — the daemon's rule, see `GET /api/agents`).
    Start {
        /// Project to run in (default: a new project).
        #[arg(long, env = "OD_PROJECT_ID")]
        project: Option<String>,
        #[arg(long)]
        conversation: Option<String>,
        /// The brief (default: the plugin's templated example query).
        #[arg(long, default_value = "")]
        message: String,
        #[command(flatten)]
        plugin: PluginArgs,
        /// `dry-run` (no model, deterministic), `exec` (runs --agent-cmd) or a catalog agent
        /// (`claude`, `codex`, … see `od agents list`); default: the daemon's (OD_AGENT, else exec
        /// when OD_AGENT_CMD is set, else dry-run).
        #[arg(long)]
        agent: Option<String>,
        /// A catalog agent's model (one it lists, when it lists them).
        #[arg(long)]
        model: Option<String>,
        /// A catalog agent's reasoning effort (see `od agents info <id>`).
        #[arg(long)]
        reasoning: Option<String>,
        /// accept-edits (default), bypass (the agent may run anything) or ask (agents that can
        /// ask while headless: acp).
        #[arg(long)]
        permission_mode: Option<String>,
        /// The exec agent's command line (run with `sh -c`; default OD_AGENT_CMD).
        #[arg(long)]
        agent_cmd: Option<String>,
        /// How to read the exec agent's stdout: auto, od, claude-stream-json, codex-json, gemini-stream-json, opencode-json, copilot-json, cursor-stream-json.
        #[arg(long)]
        agent_protocol: Option<String>,
        /// Exec agent timeout per stage iteration, ms.
        #[arg(long)]
        agent_timeout_ms: Option<u64>,
        /// The prompt's token budget (default: the agent's; see the README's prompt stack).
        #[arg(long)]
        prompt_budget_tokens: Option<u64>,
        /// Dry-run agent script (JSON: critiqueScores, fail, crash, signals, waitForCancel).
        #[arg(long)]
        dry_run: Option<String>,
        /// Idempotency key: a repeated start returns the same run.
        #[arg(long)]
        client_request_id: Option<String>,
        /// Show the run until it ends: a live progress view on a terminal, ND-JSON events with
        /// --json or when stdout is not a terminal.
        #[arg(long)]
        follow: bool,
        /// With --follow: when a GenUI surface waits for an answer, exit 73 naming it instead of
        /// asking in the terminal (answer with `od ui respond`, then `od run watch`). Without a
        /// terminal on stdin it exits 73 anyway.
        #[arg(long)]
        no_wait: bool,
    },
    /// Show a run until it ends: the live progress view on a terminal, else ND-JSON
    /// (`{"event","data"}`) lines.
    Watch {
        run_id: String,
        /// Only events after this run event id.
        #[arg(long)]
        after: Option<u64>,
        /// Exit 73 when a GenUI surface waits for an answer instead of asking in the terminal.
        #[arg(long)]
        no_wait: bool,
        /// Also print the reference daemon's derived lines: `message_chunk` (agent text),
        /// `genui_state_synced` (an answer kept beyond the run), `critique.round_end`.
        #[arg(long)]
        derived: bool,
    },
    List {
        #[arg(long)]
        project: Option<String>,
        #[arg(long)]
        conversation: Option<String>,
        /// queued, running, awaiting-input, succeeded (or done), failed, canceled, or active.
        #[arg(long)]
        status: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
    Info {
        run_id: String,
    },
    Cancel {
        run_id: String,
    },
    /// What the agent said (text, status, stdout/stderr), in order.
    Logs {
        run_id: String,
        #[command(flatten)]
        page: PageArgs,
        /// Only what was said since: a duration back from now (`30s`, `10m`, `2h`, `1d`) or a
        /// time in unix ms.
        #[arg(long)]
        since: Option<String>,
    },
    /// Report a devloop signal from inside the run (e.g. `critique.score 4`, `tests.passing true`).
    Signal {
        run_id: String,
        name: String,
        value: String,
    },
    /// Respond to a run: `--json '{"action":"break-loop"}'` leaves the current devloop.
    Respond {
        run_id: String,
        /// The response object (also accepted as `--json '{…}'`).
        #[arg(long)]
        body: String,
    },
    /// The files the run recorded as artifacts: path, kind, size, digest, time (paged).
    Artifacts {
        run_id: String,
        #[command(flatten)]
        page: PageArgs,
    },
    /// The run's devloop iterations (paged).
    Devloop {
        run_id: String,
        #[command(flatten)]
        page: PageArgs,
    },
    /// The run's snapshot and rerun bundle; with --verify, recompose every stage prompt from the
    /// snapshot and compare with the recorded digests.
    Replay {
        run_id: String,
        #[arg(long)]
        verify: bool,
    },
    /// Start a new run from this run's recorded state at one of its events, and go on live with
    /// other answers, inputs, snapshot or agent. The parent is not touched.
    Fork {
        run_id: String,
        #[command(flatten)]
        args: super::fork_cmd::ForkArgs,
        /// Show the fork until it ends (as `run start --follow`).
        #[arg(long)]
        follow: bool,
        /// With --follow: exit 73 when a surface waits instead of asking.
        #[arg(long)]
        no_wait: bool,
    },
    /// Where two runs diverge: inputs, answers, prompts, signals, devloop rows, files (with a
    /// unified diff for text).
    Diff {
        a: String,
        b: String,
    },
    /// A run's ancestors and the forks below it.
    Tree {
        run_id: String,
    },
    /// Write the run (with the runs it was forked from) as a self-contained, verifiable bundle.
    Export {
        run_id: String,
        /// The bundle file to write.
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Check a bundle `od run export` wrote and record it here (nothing is written if any check
    /// fails).
    Import {
        file: std::path::PathBuf,
    },
}

pub(super) fn run_path(id: &str, rest: &str) -> String {
    format!("/api/runs/{}{rest}", path_segment(id))
}

fn end_result(end: &Value) -> CliResult {
    match end["status"].as_str() {
        Some("succeeded") => Ok(()),
        Some(other) => {
            let mut e = CliError::new("run-failed", format!("the run ended {other}: {}", s(&end["failureDetail"])));
            e.data = end.clone();
            Err(e)
        }
        None => Err(CliError::new("daemon-unreachable", "the event stream ended before the run did")),
    }
}

pub(super) fn parse_value(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| json!(raw))
}

/// One line per recomposed prompt the token budget trimmed: its stage, tokens against the budget,
/// and each part trimmed or dropped (nothing when every part went in whole).
fn budget_lines(v: &Value) -> String {
    let mut out = String::new();
    for p in v["prompts"].as_array().into_iter().flatten() {
        let cut: Vec<String> = p["sections"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|x| x["status"] != "included")
            .map(|x| format!("{} {} ({} of {} tokens)", s(&x["name"]), s(&x["status"]), x["tokensKept"], x["tokens"]))
            .collect();
        if !cut.is_empty() {
            out.push_str(&format!(
                "\n  {} #{}: ~{} of {} tokens; {}",
                s(&p["stageId"]),
                p["iteration"].as_u64().unwrap_or(0) + 1,
                p["totalTokens"],
                p["budgetTokens"],
                cut.join(", ")
            ));
        }
    }
    out
}

pub fn run(ctx: &Ctx, cmd: RunCmd) -> CliResult {
    match cmd {
        RunCmd::Fork { run_id, args, follow: f, no_wait } => {
            let end = super::fork_cmd::fork(ctx, &run_id, args, f, no_wait)?;
            end.map_or(Ok(()), |e| end_result(&e))
        }
        RunCmd::Diff { a, b } => super::fork_cmd::diff(ctx, &a, &b),
        RunCmd::Tree { run_id } => super::fork_cmd::tree(ctx, &run_id),
        RunCmd::Export { run_id, out } => super::fork_cmd::export(ctx, &run_id, &out),
        RunCmd::Import { file } => super::fork_cmd::import(ctx, &file),
        RunCmd::Start {
            project,
            conversation,
            message,
            plugin,
            agent,
            model,
            reasoning,
            permission_mode,
            agent_cmd,
            agent_protocol,
            agent_timeout_ms,
            prompt_budget_tokens,
            dry_run,
            client_request_id,
            follow: follow_it,
            no_wait,
        } => {
            let mut body = Map::new();
            body.insert("projectId".into(), json!(project));
            body.insert("conversationId".into(), json!(conversation));
            body.insert("message".into(), json!(message));
            plugin.fill(&mut body)?;
            body.insert("agent".into(), json!(agent));
            body.insert("model".into(), json!(model));
            body.insert("reasoning".into(), json!(reasoning));
            body.insert("permissionMode".into(), json!(permission_mode));
            body.insert("agentCommand".into(), json!(agent_cmd));
            body.insert("agentProtocol".into(), json!(agent_protocol));
            body.insert("agentTimeoutMs".into(), json!(agent_timeout_ms));
            body.insert("promptBudgetTokens".into(), json!(prompt_budget_tokens));
            body.insert("clientRequestId".into(), json!(client_request_id));
            if let Some(raw) = dry_run {
                let v: Value =
                    serde_json::from_str(&raw).map_err(|e| CliError::new("usage", format!("--dry-run: {e}")))?;
                body.insert("dryRun".into(), v);
            }
            body.retain(|_, v| !v.is_null());
            let conn = ctx.conn_daemon()?;
            // A project or conversation named by a prefix is resolved first; a project id that
            // names none is passed on as typed (the engine says what it does with it).
            for (field, kind) in
                [("projectId", "project"), ("conversationId", "conversation"), ("appliedPluginSnapshotId", "snapshot")]
            {
                if let Some(given) = body.get(field).and_then(Value::as_str).map(str::to_string) {
                    match ctx.resolve(&conn, kind, &given) {
                        Ok(id) => {
                            body.insert(field.into(), json!(id));
                        }
                        Err(e) if e.code == "ambiguous-id" => return Err(e),
                        Err(_) => {}
                    }
                }
            }
            let v = conn.post("/api/runs", &Value::Object(body))?;
            let run_id = s(&v["runId"]).to_string();
            if let (Some(note), false) = (v["agentNote"].as_str(), ctx.json) {
                eprintln!("{note}");
            }
            if follow_it {
                let show = show_for(&conn, &run_id, ctx.json, true);
                let end = follow(&conn, &run_id, None, show, on_wait(no_wait))?;
                return end_result(&end);
            }
            ctx.print(&v, |v| {
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
                    let stages: Vec<&str> =
                        f["stages"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                    let on = f["buildsOn"].as_array().map_or(0, Vec::len);
                    out.push_str(&format!(
                        "\nfollow-up: runs {} ({}), with the conversation's {on} earlier run(s)",
                        stages.join(", "),
                        s(&f["rule"])
                    ));
                }
                out
            });
            Ok(())
        }
        RunCmd::Watch { run_id, after, no_wait, derived } => {
            let conn = ctx.conn_daemon()?;
            let run_id = ctx.resolve(&conn, "run", &run_id)?;
            let show = show_for(&conn, &run_id, ctx.json, true);
            let end = super::follow::follow_with(&conn, &run_id, after, show, on_wait(no_wait), derived)?;
            end_result(&end)
        }
        RunCmd::List { project, conversation, status, page } => {
            let conn = ctx.conn()?;
            let project = ctx.resolve_opt(&conn, "project", project)?;
            let conversation = ctx.resolve_opt(&conn, "conversation", conversation)?;
            let mut q = Vec::new();
            for (k, v) in [("projectId", project), ("conversationId", conversation), ("status", status)] {
                if let Some(v) = v {
                    q.push(format!("{k}={}", path_segment(&v)));
                }
            }
            let qs = if q.is_empty() { String::new() } else { format!("?{}", q.join("&")) };
            let row = |look: &super::human::Look, r: &Value| {
                let created = r["createdAt"].as_i64();
                vec![
                    s(&r["runId"]).to_string(),
                    s(&r["status"]).to_string(),
                    s(&r["pluginId"]).to_string(),
                    s(&r["projectId"]).to_string(),
                    created.map(super::human::local_time).unwrap_or_default(),
                    created.map(|ms| super::human::ago(ms, look.now_ms)).unwrap_or_default(),
                    s(&r["stageId"]).to_string(),
                ]
            };
            let cols = [
                keep("RUN"),
                keep("STATUS"),
                col("PLUGIN"),
                keep("PROJECT"),
                keep("CREATED"),
                keep("AGE"),
                col("STAGE"),
            ];
            let view = TableView { cols: &cols, ids: &[0, 3], empty: "no runs", row: &row };
            print_table(ctx, &conn, &format!("/api/runs{qs}"), "runs", &page, &view)
        }
        RunCmd::Info { run_id } => {
            let conn = ctx.conn()?;
            let v = conn.get(&run_path(&ctx.resolve(&conn, "run", &run_id)?, ""))?;
            ctx.print(&v, |v| super::info_lines(&ctx.look, &v["run"]));
            Ok(())
        }
        RunCmd::Artifacts { run_id, page } => {
            let conn = ctx.conn()?;
            let path = run_path(&ctx.resolve(&conn, "run", &run_id)?, "/artifacts");
            print_table(ctx, &conn, &path, "artifacts", &page, &artifacts_view(false))
        }
        RunCmd::Cancel { run_id } => {
            let conn = ctx.conn()?;
            let run_id = ctx.resolve(&conn, "run", &run_id)?;
            let v = conn.post(&run_path(&run_id, "/cancel"), &json!({}))?;
            ctx.print(&v, |v| format!("run {} {}", s(&v["run"]["runId"]), ctx.look.status(s(&v["run"]["status"]))));
            Ok(())
        }
        RunCmd::Logs { run_id, page, since } => {
            let conn = ctx.conn()?;
            let run_id = ctx.resolve(&conn, "run", &run_id)?;
            let row = |e: &Value| format!("[{}] {}", s(&e["channel"]), s(&e["text"]));
            let path = match since {
                Some(v) => format!("{}?since={}", run_path(&run_id, "/logs"), since_ms(&v)?),
                None => run_path(&run_id, "/logs"),
            };
            super::paging::print_rows(ctx, &conn, &path, "entries", &page, "", row)
        }
        RunCmd::Signal { run_id, name, value } => {
            let body = json!({ "name": name, "value": parse_value(&value) });
            let conn = ctx.conn()?;
            let run_id = ctx.resolve(&conn, "run", &run_id)?;
            let v = conn.post(&run_path(&run_id, "/signals"), &body)?;
            ctx.print(&v, |_| format!("recorded {name}={value}"));
            Ok(())
        }
        RunCmd::Respond { run_id, body } => {
            let b: Value = serde_json::from_str(&body).map_err(|e| CliError::new("usage", format!("--json: {e}")))?;
            let conn = ctx.conn_daemon()?;
            let v = conn.post(&run_path(&ctx.resolve(&conn, "run", &run_id)?, "/respond"), &b)?;
            ctx.print(&v, |v| format!("run {}: response recorded", s(&v["run"]["runId"])));
            Ok(())
        }
        RunCmd::Devloop { run_id, page } => {
            let row = |r: &Value| {
                format!(
                    "{} #{} {} {}",
                    s(&r["stageId"]),
                    r["iteration"],
                    s(&r["critiqueSummary"]),
                    s(&r["termination"])
                )
            };
            let conn = ctx.conn()?;
            let path = run_path(&ctx.resolve(&conn, "run", &run_id)?, "/devloop-iterations");
            super::paging::print_rows(ctx, &conn, &path, "iterations", &page, "", row)
        }
        RunCmd::Replay { run_id, verify } => {
            let conn = ctx.conn()?;
            let run_id = ctx.resolve(&conn, "run", &run_id)?;
            if verify {
                let v = conn.post(&run_path(&run_id, "/replay/verify"), &json!({}))?;
                ctx.print(&v, |v| {
                    let n = v["prompts"].as_array().map_or(0, Vec::len);
                    let inherited = v["inherited"]["prompts"].as_array().map_or(0, Vec::len);
                    match v["ok"] == true {
                        true if v["inherited"].is_object() => format!(
                            "replay verified: {n} stage prompt(s) of its own and {inherited} inherited from {} \
                             recomposed byte-identical",
                            s(&v["inherited"]["parentRunId"])
                        ),
                        true => {
                            format!("replay verified: {n} stage prompt(s) recomposed byte-identical{}", budget_lines(v))
                        }
                        false => format!(
                            "replay differs: {}",
                            serde_json::to_string_pretty(&v["prompts"]).unwrap_or_default()
                        ),
                    }
                });
                if v["ok"] != true {
                    let mut e =
                        CliError::new("replay-mismatch", "a recomposed prompt differs from the recorded digest");
                    e.data = v;
                    return Err(e);
                }
                return Ok(());
            }
            let info = conn.get(&run_path(&run_id, ""))?;
            let sid = s(&info["run"]["appliedPluginSnapshotId"]).to_string();
            let v = conn.post(&run_path(&run_id, "/replay"), &json!({ "snapshotId": sid }))?;
            ctx.print(&v, |v| serde_json::to_string_pretty(v).unwrap_or_default());
            Ok(())
        }
    }
}

/// Artifacts as a table (`with_run`: a project's, so each names its run).
pub(crate) fn artifacts_view(with_run: bool) -> TableView<'static> {
    fn row(a: &Value, with_run: bool) -> Vec<String> {
        let mut r = vec![s(&a["path"]).to_string(), s(&a["artifactKind"]).to_string(), a["bytes"].to_string()];
        r.push(s(&a["digest"]).chars().take(12).collect());
        r.push(a["recordedAt"].as_i64().map(super::human::local_time).unwrap_or_default());
        if with_run {
            r.push(s(&a["runId"]).to_string());
        }
        r
    }
    const RUN: [super::human::Col; 5] = [col("PATH"), keep("KIND"), keep("BYTES"), keep("DIGEST"), keep("RECORDED")];
    const PROJECT: [super::human::Col; 6] =
        [col("PATH"), keep("KIND"), keep("BYTES"), keep("DIGEST"), keep("RECORDED"), keep("RUN")];
    match with_run {
        false => TableView { cols: &RUN, ids: &[], empty: "no artifacts", row: &|_, a| row(a, false) },
        true => TableView { cols: &PROJECT, ids: &[5], empty: "no artifacts", row: &|_, a| row(a, true) },
    }
}

/// `--since`: `30s`, `10m`, `2h`, `1d` back from now, or a time in unix ms.
pub fn since_ms(v: &str) -> CliResult<i64> {
    let v = v.trim();
    if let Ok(ms) = v.parse::<i64>() {
        return Ok(ms);
    }
    let unit = v.chars().last().unwrap_or(' ');
    let n: i64 = v
        .strip_suffix(unit)
        .unwrap_or("")
        .parse()
        .map_err(|_| CliError::new("usage", format!("--since {v:?}: expected 30s, 10m, 2h, 1d or unix ms")))?;
    let ms = match unit {
        's' => 1_000,
        'm' => 60_000,
        'h' => 3_600_000,
        'd' => 86_400_000,
        _ => return Err(CliError::new("usage", format!("--since {v:?}: expected 30s, 10m, 2h, 1d or unix ms"))),
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    Ok(now - n.saturating_mul(ms))
}
