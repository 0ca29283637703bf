//! `od run start|watch|list|info|cancel|logs|signal|respond|devloop|replay` (and `fork|diff|tree`,
//! handled in `fork_cmd.rs`).
//!
//! A run belongs to the data dir's daemon: `od run start` (and `watch`, `respond`) start one in the
//! background when none runs (`cli/autostart.rs`). `run start` returns once the run is accepted,
//! or with `--follow` prints its events until it ends.

use clap::Subcommand;
use serde_json::{json, Value};

use super::args::parse_value;
use super::conn::{path_segment, run_path};
use super::follow::{end_result, on_wait, show_for};
use super::human::{col, keep};
use super::paging::{print_table, PageArgs, TableView};
use super::{s, CliError, CliResult, Ctx};

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once per process
pub enum RunCmd {
    /// Start a run: the plugin's pipeline, stage by stage (default agent: OD_AGENT, else exec when
    /// OD_AGENT_CMD is set, else dry-run — the daemon's rule, see `GET /api/agents`).
    Start(super::run_start::StartArgs),
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
        RunCmd::Start(args) => super::run_start::start(ctx, args),
        RunCmd::Watch { run_id, after, no_wait, derived } => {
            let conn = ctx.conn_daemon()?;
            let run_id = ctx.resolve(&conn, "run", &run_id)?;
            let show = show_for(&conn, &run_id, ctx.json, true);
            let end = super::follow::follow_with(&conn, &run_id, after, show, on_wait(no_wait), derived)?;
            end_result(&end)
        }
        RunCmd::List { project, conversation, status, page } => list(ctx, project, conversation, status, &page),
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
            if v["alreadyEnded"] == true {
                // Nothing was canceled: saying the run's status as if it were would mislead.
                let status = s(&v["run"]["status"]).to_string();
                return Err(CliError::new(
                    "run-ended",
                    format!("run {run_id} had already ended ({status}); nothing was canceled"),
                )
                .with_data(json!({ "runId": run_id, "status": status })));
            }
            ctx.print(&v, |v| format!("run {} {}", s(&v["run"]["runId"]), ctx.look.status(s(&v["run"]["status"]))));
            Ok(())
        }
        RunCmd::Logs { run_id, page, since } => logs(ctx, &run_id, &page, since),
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
        RunCmd::Devloop { run_id, page } => devloop(ctx, &run_id, &page),
        RunCmd::Replay { run_id, verify } => replay(ctx, &run_id, verify),
    }
}

/// `od run list`: a page of runs, filtered by project, conversation and status.
fn list(
    ctx: &Ctx,
    project: Option<String>,
    conversation: Option<String>,
    status: Option<String>,
    page: &PageArgs,
) -> CliResult {
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
    let cols =
        [keep("RUN"), keep("STATUS"), col("PLUGIN"), keep("PROJECT"), keep("CREATED"), keep("AGE"), col("STAGE")];
    let view = TableView { cols: &cols, ids: &[0, 3], empty: "no runs", row: &row };
    print_table(ctx, &conn, &format!("/api/runs{qs}"), "runs", page, &view)
}

/// `od run logs`: what the agent said, paged, optionally since a time.
fn logs(ctx: &Ctx, run_id: &str, page: &PageArgs, since: Option<String>) -> CliResult {
    let conn = ctx.conn()?;
    let run_id = ctx.resolve(&conn, "run", run_id)?;
    let row = |e: &Value| format!("[{}] {}", s(&e["channel"]), s(&e["text"]));
    let path = match since {
        Some(v) => format!("{}?since={}", run_path(&run_id, "/logs"), since_ms(&v)?),
        None => run_path(&run_id, "/logs"),
    };
    super::paging::print_rows(ctx, &conn, &path, "entries", page, "", row)
}

/// `od run devloop`: the run's devloop iterations, paged.
fn devloop(ctx: &Ctx, run_id: &str, page: &PageArgs) -> CliResult {
    let row = |r: &Value| {
        // Counted from 1, as `od run info` and the live view count (the JSON is 0-based).
        let n = r["iteration"].as_u64().map_or_else(|| r["iteration"].to_string(), |i| (i + 1).to_string());
        format!("{} #{n} {} {}", s(&r["stageId"]), s(&r["critiqueSummary"]), s(&r["termination"]))
    };
    let conn = ctx.conn()?;
    let path = run_path(&ctx.resolve(&conn, "run", run_id)?, "/devloop-iterations");
    super::paging::print_rows(ctx, &conn, &path, "iterations", page, "", row)
}

/// `od run replay [--verify]`: the run's snapshot and rerun bundle, or the recomposed prompts
/// checked against their recorded digests.
fn replay(ctx: &Ctx, run_id: &str, verify: bool) -> CliResult {
    let conn = ctx.conn()?;
    let run_id = ctx.resolve(&conn, "run", run_id)?;
    if verify {
        let v = conn.post(&run_path(&run_id, "/replay/verify"), &json!({}))?;
        ctx.print(&v, verified_text);
        if v["ok"] != true {
            let mut e = CliError::new("replay-mismatch", "a recomposed prompt differs from the recorded digest");
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

/// `od run replay --verify`'s answer for people: how many prompts recomposed byte-identical (and
/// how many the parent's), with what the token budget trimmed; or the prompts that differ.
fn verified_text(v: &Value) -> String {
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
        false => format!("replay differs: {}", serde_json::to_string_pretty(&v["prompts"]).unwrap_or_default()),
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
