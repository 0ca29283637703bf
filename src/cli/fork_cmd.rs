//! `od run fork|diff|tree|export|import` (issue 16): forking a run at one of its events, comparing
//! two runs, a run's family tree, and a run as a bundle — for people as text, with `--json` (or a pipe) as the API's JSON.

use serde_json::{json, Map, Value};

use super::args::{inputs_map, parse_value};
use super::conn::{path_segment, run_path};
use super::follow::{follow, on_wait, show_for};
use super::{s, CliError, CliResult, Ctx};

/// What `od run fork` changes.
#[derive(clap::Args, Debug)]
pub struct ForkArgs {
    /// Where: an event id, `<stage>` or `<stage>:<iteration>` (1-based; the fork redoes that
    /// iteration), or `end`.
    #[arg(long)]
    pub at: String,
    /// A GenUI answer, `surface=value` (value as JSON, else text); repeatable.
    #[arg(long = "answer")]
    pub answers: Vec<String>,
    /// An input to change, `key=value` (as `--input` everywhere); repeatable.
    #[arg(long = "input")]
    pub inputs: Vec<String>,
    #[arg(long)]
    pub snapshot_id: Option<String>,
    /// Apply the installed plugin again, which must be at this version.
    #[arg(long)]
    pub plugin_version: Option<String>,
    /// `dry-run` or `exec` (default: the parent's agent).
    #[arg(long)]
    pub agent: Option<String>,
    /// The exec agent's command line.
    #[arg(long)]
    pub agent_cmd: Option<String>,
    /// Dry-run agent script (JSON).
    #[arg(long)]
    pub dry_run: Option<String>,
}

/// `surface=value` answers as an object (value as JSON, else text).
fn answers(items: &[String]) -> Result<Map<String, Value>, CliError> {
    let mut out = Map::new();
    for item in items {
        let (k, v) = item
            .split_once('=')
            .filter(|(k, _)| !k.trim().is_empty())
            .ok_or_else(|| CliError::new("usage", format!("--answer {item:?}: expected surface=value")))?;
        out.insert(k.trim().to_string(), parse_value(v));
    }
    Ok(out)
}

/// Forks `run_id`; with `follow`, shows the fork until it ends and returns its `end`.
pub fn fork(ctx: &Ctx, run_id: &str, a: ForkArgs, follow_it: bool, no_wait: bool) -> Result<Option<Value>, CliError> {
    let mut body = Map::new();
    body.insert("at".into(), json!(a.at));
    body.insert("answers".into(), Value::Object(answers(&a.answers)?));
    body.insert("inputs".into(), Value::Object(inputs_map(None, a.inputs)?));
    body.insert("snapshotId".into(), json!(a.snapshot_id));
    body.insert("pluginVersion".into(), json!(a.plugin_version));
    body.insert("agent".into(), json!(a.agent));
    body.insert("agentCommand".into(), json!(a.agent_cmd));
    if let Some(raw) = a.dry_run {
        let v: Value = serde_json::from_str(&raw).map_err(|e| CliError::new("usage", format!("--dry-run: {e}")))?;
        body.insert("dryRun".into(), v);
    }
    body.retain(|_, v| !v.is_null());
    let conn = ctx.conn_daemon()?;
    let run_id = ctx.resolve(&conn, "run", run_id)?;
    let v = conn.post(&run_path(&run_id, "/fork"), &Value::Object(body))?;
    let fork_id = s(&v["runId"]).to_string();
    if follow_it {
        let show = show_for(&conn, &fork_id, ctx.json, true);
        return Ok(Some(follow(&conn, &fork_id, None, show, on_wait(no_wait))?));
    }
    ctx.print(&v, |v| {
        format!(
            "run {} forked from {} after its event {}\nfollow it: od run watch {}",
            s(&v["runId"]),
            s(&v["parentRunId"]),
            v["forkEventId"],
            s(&v["runId"])
        )
    });
    Ok(None)
}

fn short(v: &Value) -> String {
    match v {
        Value::Null => "—".into(),
        Value::String(x) => x.clone(),
        other => other.to_string(),
    }
}

/// The text form of a diff.
fn diff_text(v: &Value) -> String {
    let mut out = vec![format!(
        "a {} ({})   b {} ({})",
        s(&v["a"]["runId"]),
        s(&v["a"]["status"]),
        s(&v["b"]["runId"]),
        s(&v["b"]["status"])
    )];
    if let Some(sh) = v["sharedUntil"].as_object() {
        out.push(format!("shared history through run {} event {}", short(&sh["runId"]), sh["eventId"]));
    }
    if v["same"] == true {
        out.push("no difference".into());
        return out.join("\n");
    }
    if v["a"]["snapshotId"] != v["b"]["snapshotId"] {
        out.push(format!("snapshot: {} → {}", short(&v["a"]["snapshotId"]), short(&v["b"]["snapshotId"])));
    }
    let list = |k: &str| v[k].as_array().cloned().unwrap_or_default();
    for i in list("inputs") {
        out.push(format!("input {}: {} → {}", s(&i["key"]), short(&i["a"]), short(&i["b"])));
    }
    for a in list("answers") {
        out.push(format!("answer {}: {} → {}", s(&a["surfaceId"]), short(&a["a"]), short(&a["b"])));
    }
    for p in list("prompts").iter().filter(|p| p["same"] == false) {
        let d = |x: &Value| x.as_str().map_or("—".to_string(), |d| d.chars().take(12).collect());
        out.push(format!("prompt {} #{}: {} → {}", s(&p["stageId"]), p["iteration"], d(&p["a"]), d(&p["b"])));
    }
    for g in list("signals") {
        out.push(format!(
            "signal {} #{} {}: {} → {}",
            s(&g["stageId"]),
            g["iteration"],
            s(&g["name"]),
            short(&g["a"]),
            short(&g["b"])
        ));
    }
    for d in list("devloop") {
        let t = |x: &Value| short(&x["termination"]);
        out.push(format!("devloop {} #{}: {} → {}", s(&d["stageId"]), d["iteration"], t(&d["a"]), t(&d["b"])));
    }
    for f in list("files") {
        out.push(format!("file {} ({})", s(&f["path"]), s(&f["status"])));
        if let Some(text) = f["diff"].as_str() {
            out.push(text.trim_end().to_string());
        }
    }
    out.join("\n")
}

/// `od run diff A B`.
pub fn diff(ctx: &Ctx, a: &str, b: &str) -> CliResult {
    let conn = ctx.conn()?;
    let (a, b) = (ctx.resolve(&conn, "run", a)?, ctx.resolve(&conn, "run", b)?);
    let v = conn.get(&format!("{}/{}", run_path(&a, "/diff"), path_segment(&b)))?;
    ctx.print(&v, diff_text);
    Ok(())
}

fn tree_lines(out: &mut Vec<String>, forks: &Value, depth: usize) {
    for f in forks.as_array().into_iter().flatten() {
        out.push(format!(
            "{}└ {} ({}) forked at {} ({})",
            "  ".repeat(depth),
            s(&f["runId"]),
            s(&f["status"]),
            f["forkEventId"],
            s(&f["at"])
        ));
        tree_lines(out, &f["forks"], depth + 1);
    }
}

/// `od run tree RUN`.
pub fn tree(ctx: &Ctx, run_id: &str) -> CliResult {
    let conn = ctx.conn()?;
    let run_id = ctx.resolve(&conn, "run", run_id)?;
    let v = conn.get(&run_path(&run_id, "/tree"))?;
    ctx.print(&v, |v| {
        let mut out = Vec::new();
        for a in v["ancestors"].as_array().into_iter().flatten() {
            out.push(format!(
                "{} ({}) — forked at {} into {}",
                s(&a["runId"]),
                s(&a["status"]),
                a["childForkedAt"],
                s(&a["child"])
            ));
        }
        out.push(format!("{} ({}) ← this run", s(&v["runId"]), s(&v["status"])));
        tree_lines(&mut out, &v["forks"], 0);
        if v["truncated"] == true {
            out.push("(more forks not shown)".into());
        }
        out.join("\n")
    });
    Ok(())
}

/// `od run export RUN --out FILE`: written beside and renamed (durably, `crate::durable`), so a
/// failed export leaves no file and a reported one survives a power cut.
pub fn export(ctx: &Ctx, run_id: &str, out: &std::path::Path) -> CliResult {
    let conn = ctx.conn()?;
    let run_id = ctx.resolve(&conn, "run", run_id)?;
    let bytes = conn.get_bytes(&run_path(&run_id, "/export"))?;
    let io = |e: std::io::Error| CliError::new("io", format!("{}: {e}", out.display()));
    crate::durable::write_file(out, &bytes).map_err(io)?;
    let v = json!({ "runId": run_id, "out": out.display().to_string(), "bytes": bytes.len(),
        "digest": blake3::hash(&bytes).to_hex().as_str() });
    ctx.print(&v, |v| format!("run {} exported to {} ({} bytes)", s(&v["runId"]), s(&v["out"]), v["bytes"]));
    Ok(())
}

/// `od run import FILE`.
pub fn import(ctx: &Ctx, file: &std::path::Path) -> CliResult {
    let bytes = std::fs::read(file).map_err(|e| CliError::new("usage", format!("{}: {e}", file.display())))?;
    let conn = ctx.conn()?;
    let v = conn.post_bytes("/api/runs/import", "application/octet-stream", &bytes)?;
    ctx.print(&v, |v| {
        format!(
            "run {} imported ({} events, {} blobs); check it: od run replay {} --verify",
            s(&v["runId"]),
            v["events"],
            v["blobs"],
            s(&v["runId"])
        )
    });
    Ok(())
}
