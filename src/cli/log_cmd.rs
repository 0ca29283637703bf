//! `od log tail|verify|stats|append|copy` (copy: `log_copy.rs`).

use clap::Subcommand;
use serde_json::{json, Value};

use super::paging::{emit, PageArgs};
use super::{CliError, CliResult, Ctx};
use crate::store::verify_dir;

#[derive(Subcommand, Debug)]
pub enum LogCmd {
    /// Print events as ND-JSON, from a seq on; --follow keeps streaming new ones. With --limit or
    /// --cursor: one page (`more: --cursor …` on stderr when more follow; --json prints the page
    /// as the route returns it); --all walks every page.
    Tail {
        /// First seq to print (1 = the whole log).
        #[arg(long, default_value_t = 1, conflicts_with = "cursor")]
        from: u64,
        /// Keep printing events as they are appended.
        #[arg(long, conflicts_with_all = ["limit", "cursor", "all"])]
        follow: bool,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Walk the whole log, checking every frame's hash and chain; names the first bad frame.
    Verify,
    /// Counts by kind and stream category, size on disk.
    Stats,
    /// Append a note event to a stream (e.g. `note:release`).
    Append {
        /// Stream id, e.g. `note:ideas`.
        #[arg(long)]
        stream: String,
        /// The note's text.
        #[arg(long)]
        text: String,
        /// Tags (repeatable).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// Expected stream version: a number, `none` (stream must not exist) or `any`.
        #[arg(long)]
        expected_version: Option<String>,
        /// Idempotency key: a retry with the same op id returns the first result.
        #[arg(long)]
        op_id: Option<String>,
    },
    /// Copy the whole log to another backend or data dir (`--to postgres://…` or a directory),
    /// frame by frame with the chain checked on both sides; resumable (a non-empty target must be
    /// a prefix of the source). Stop the daemon first: both logs are opened directly.
    Copy(super::log_copy::CopyArgs),
}

pub fn run(ctx: &Ctx, cmd: LogCmd) -> CliResult {
    match cmd {
        LogCmd::Tail { from, page, .. } if page.limit.is_some() || page.cursor.is_some() || page.all => {
            tail_pages(ctx, from, &page)
        }
        LogCmd::Tail { from, follow, .. } => tail(ctx, from, follow),
        LogCmd::Verify => verify(ctx),
        LogCmd::Stats => stats(ctx),
        LogCmd::Copy(args) => super::log_copy::run(ctx, args),
        LogCmd::Append { stream, text, tags, expected_version, op_id } => {
            let expected = match expected_version.as_deref() {
                None => Value::Null,
                Some(v) => v.parse::<u64>().map(Value::from).unwrap_or_else(|_| Value::from(v)),
            };
            let body =
                json!({ "stream": stream, "text": text, "tags": tags, "expectedVersion": expected, "opId": op_id });
            let r = ctx.conn()?.post("/api/log/notes", &body)?;
            ctx.print(&r, |v| {
                format!(
                    "appended seq {} ({} version {})",
                    v["firstSeq"],
                    v["stream"].as_str().unwrap_or(""),
                    v["firstVersion"]
                )
            });
            Ok(())
        }
    }
}

fn tail(ctx: &Ctx, from: u64, follow: bool) -> CliResult {
    if from == 0 {
        return Err(CliError::new("usage", "--from: seqs start at 1"));
    }
    // Following lasts until interrupted: through the daemon, never holding the data dir.
    let conn = if follow { ctx.conn_daemon()? } else { ctx.conn()? };
    let path = format!("/api/log/tail?after={}&follow={follow}", from - 1);
    let mut failed = None;
    conn.lines(&path, |line| {
        if !emit(line) {
            return Ok(false);
        }
        if line.starts_with("{\"event\":\"error\"") {
            failed = Some(line.to_string());
            return Ok(false);
        }
        Ok(true)
    })?;
    match failed {
        Some(l) => {
            let v: Value = serde_json::from_str(&l).unwrap_or(Value::Null);
            Err(CliError::from_body(0, &v["data"].to_string()))
        }
        None => Ok(()),
    }
}

/// `od log tail --limit/--cursor/--all`: pages of `GET /api/log/events`.
fn tail_pages(ctx: &Ctx, from: u64, page: &PageArgs) -> CliResult {
    if from == 0 {
        return Err(CliError::new("usage", "--from: seqs start at 1"));
    }
    let conn = ctx.conn()?;
    let path = if page.cursor.is_some() {
        "/api/log/events".to_string()
    } else {
        format!("/api/log/events?after={}", from - 1)
    };
    if page.all {
        // Every page from `from` on: the cursor replaces `after` after the first page.
        let mut cursor: Option<String> = None;
        loop {
            let p = match &cursor {
                None => page.path(&path, None),
                Some(c) => page.path("/api/log/events", Some(c)),
            };
            let v = conn.get(&p)?;
            for e in v["events"].as_array().into_iter().flatten() {
                if !emit(&e.to_string()) {
                    return Ok(());
                }
            }
            match v["nextCursor"].as_str() {
                Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
                _ => return Ok(()),
            }
        }
    }
    let v = conn.get(&page.path(&path, None))?;
    if ctx.json {
        emit(&v.to_string());
        return Ok(());
    }
    for e in v["events"].as_array().into_iter().flatten() {
        if !emit(&e.to_string()) {
            return Ok(());
        }
    }
    if let Some(c) = v["nextCursor"].as_str() {
        eprintln!("next page: --cursor {c}");
    }
    Ok(())
}

fn verify(ctx: &Ctx) -> CliResult {
    let daemon = super::discover::find_daemon(&ctx.data_dir, ctx.daemon_url.as_deref(), ctx.token.as_deref())?;
    let report = match daemon {
        Some(_) => ctx.conn()?.get("/api/log/verify")?,
        // No daemon: verify the files in place, read-only (only sled's index is opened from a
        // scratch copy, since sled rewrites damaged files when it opens them), so damage is
        // reported, never rewritten, and a store that refuses to open can still name its first bad
        // frame.
        // A database-held log: the engine's own walk over it (the same frames and chain checks).
        None if matches!(
            crate::store::StoreSpec::from_env(ctx.backend.store.as_deref()).map_err(super::backend::store_error)?,
            crate::store::StoreSpec::Postgres { .. }
        ) =>
        {
            ctx.conn()?.get("/api/log/verify")?
        }
        None => {
            if !ctx.data_dir.join("sled").exists() {
                return Err(CliError::new("usage", format!("{} holds no od log", ctx.data_dir.display())));
            }
            let r = verify_dir(&ctx.data_dir).map_err(|se| CliError::new(se.code(), se.to_string()))?;
            serde_json::to_value(r).expect("plain data")
        }
    };
    ctx.print(&report, |v| match v["firstBad"].as_object() {
        None => {
            let mut out =
                format!("ok: {} frames verified, head {}", v["verified"], v["headHash"].as_str().unwrap_or(""));
            if let Some(runs) = v["runsEndedTwice"].as_array().filter(|r| !r.is_empty()) {
                let names: Vec<&str> = runs.iter().filter_map(Value::as_str).collect();
                out.push_str(&format!(
                    "\nruns that ended more than once (written before od refused appends after a run's end; the first end stands): {}",
                    names.join(", ")
                ));
            }
            out
        }
        Some(b) => format!(
            "BAD frame at seq {}: {} ({} frames verified before it)",
            b["seq"],
            b["reason"].as_str().unwrap_or(""),
            v["verified"]
        ),
    });
    match report["firstBad"].as_object() {
        None => Ok(()),
        Some(b) => {
            let mut e = CliError::new(
                "log-corrupted",
                format!("frame {} failed verification: {}", b["seq"], b["reason"].as_str().unwrap_or("")),
            );
            e.data = json!({ "seq": b["seq"] });
            Err(e)
        }
    }
}

fn stats(ctx: &Ctx) -> CliResult {
    let v = ctx.conn()?.get("/api/log/stats")?;
    ctx.print(&v, |v| {
        let s = &v["stats"];
        let mut out = format!(
            "{} events in {} streams, last seq {}, {} bytes on disk",
            s["events"], s["streams"], v["lastSeq"], v["diskBytes"]
        );
        if let Some(kinds) = s["byKind"].as_object().filter(|k| !k.is_empty()) {
            use super::human::{col, keep};
            let rows = kinds.iter().map(|(k, n)| vec![k.clone(), n.to_string()]).collect();
            out.push_str("\n\n");
            out.push_str(&super::human::table(&ctx.look, &[col("KIND"), keep("EVENTS")], rows));
        }
        out
    });
    Ok(())
}
