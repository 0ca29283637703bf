//! `od files diff|watch|list|read|write|upload|delete|gc`: a project's files, always inside its
//! directory (a path travels as one encoded segment, so the daemon sees and refuses `..`), a run's
//! files as it recorded them, the artifacts runs record followed live, and the blob store's collection.

use clap::Subcommand;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::PathBuf;

use super::conn::{path_segment, Conn};
use super::human::{col, keep, Look};
use super::paging::{print_table, PageArgs, TableView};
use super::{s, CliError, CliResult, Ctx};

#[derive(Subcommand, Debug)]
pub enum FilesCmd {
    /// A file as a run recorded it against another run's (`--to`), or the project's current one:
    /// digests, sizes and a unified diff.
    Diff {
        path: String,
        /// `<runId>` (at its end) or `<runId>@<eventId>`.
        #[arg(long)]
        from: String,
        #[arg(long)]
        to: Option<String>,
    },
    /// Follow the files runs record in a project, as ND-JSON lines (`--path`: a file or folder).
    Watch {
        #[arg(long, env = "OD_PROJECT_ID")]
        project: String,
        #[arg(long)]
        path: Option<String>,
        /// Start after this log seq (a line's `seq`: resume where a watch stopped); default: now.
        #[arg(long)]
        after: Option<u64>,
    },
    /// The project's files, by path (paged).
    List {
        #[arg(long, env = "OD_PROJECT_ID")]
        project: String,
        /// Only this file, or the files below this folder.
        #[arg(long)]
        path: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Print a file (or save it with --out).
    Read {
        path: String,
        #[arg(long, env = "OD_PROJECT_ID", required_unless_present = "run", default_value = "")]
        project: String,
        #[arg(long)]
        out: Option<PathBuf>,
        /// Read the file as this run recorded it (from the blob store), not the project's folder.
        #[arg(long)]
        run: Option<String>,
        /// With --run: as it was at this event of the run (default: the run's last event).
        #[arg(long, requires = "run")]
        at: Option<u64>,
    },
    /// Write a file from --content, or from standard input.
    Write {
        path: String,
        #[arg(long, env = "OD_PROJECT_ID")]
        project: String,
        #[arg(long)]
        content: Option<String>,
    },
    /// Copy a local file into the project (as --as, default its file name).
    Upload {
        file: PathBuf,
        #[arg(long, env = "OD_PROJECT_ID")]
        project: String,
        #[arg(long = "as")]
        as_path: Option<String>,
    },
    /// Delete a file.
    Delete {
        path: String,
        #[arg(long, env = "OD_PROJECT_ID")]
        project: String,
    },
    /// Collect the blob store: mark blobs no artifact of an existing project names, and remove
    /// those unreferenced past `OD_SNAPSHOT_UNREFERENCED_TTL_DAYS` (or, with --before unix ms,
    /// unreferenced since before then). Each step is an event.
    Gc {
        #[arg(long)]
        before: Option<i64>,
    },
}

fn file_url(project: &str, path: &str) -> CliResult<String> {
    // The whole path travels as one encoded segment (`/` as %2F), so no client or proxy resolves
    // `..` away: the daemon sees it and refuses a path that leaves the project. A bare `.`/`..`
    // cannot be sent that way and is refused here with the daemon's error.
    if path == "." || path == ".." {
        return Err(CliError::new("path-escapes-project", format!("path {path:?} escapes the project directory")));
    }
    Ok(format!("/api/projects/{}/files/{}", path_segment(project), path_segment(path)))
}

pub fn run_files(ctx: &Ctx, cmd: FilesCmd) -> CliResult {
    let conn = ctx.conn()?;
    match resolve_ids(ctx, &conn, cmd)? {
        FilesCmd::Gc { before } => gc(ctx, &conn, before),
        FilesCmd::Diff { path, from, to } => diff(ctx, &conn, &path, &from, to.as_deref()),
        FilesCmd::Watch { project, path, after } => watch(&conn, &project, path.as_deref(), after),
        FilesCmd::List { project, page, path } => list(ctx, &conn, &project, &page, path),
        FilesCmd::Read { path, project, out, run, at } => read(&conn, &path, &project, out, run.as_deref(), at),
        FilesCmd::Write { path, project, content } => {
            let bytes = match content {
                Some(c) => c.into_bytes(),
                None => {
                    let mut b = Vec::new();
                    std::io::stdin().read_to_end(&mut b).map_err(|e| CliError::new("error", e.to_string()))?;
                    b
                }
            };
            let v = conn.put_bytes(&file_url(&project, &path)?, &bytes)?;
            ctx.print(&v, |v| format!("wrote {} ({} bytes)", s(&v["file"]["path"]), v["file"]["size"]));
            Ok(())
        }
        FilesCmd::Upload { file, project, as_path } => {
            let bytes = std::fs::read(&file).map_err(|e| CliError::new("usage", format!("{}: {e}", file.display())))?;
            let name = match as_path {
                Some(p) => p,
                None => file.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default(),
            };
            let v = conn.put_bytes(&file_url(&project, &name)?, &bytes)?;
            ctx.print(&v, |v| format!("uploaded {} ({} bytes)", s(&v["file"]["path"]), v["file"]["size"]));
            Ok(())
        }
        FilesCmd::Delete { path, project } => {
            let v = conn.delete(&file_url(&project, &path)?)?;
            ctx.print(&v, |v| format!("deleted {}", s(&v["file"]["path"])));
            Ok(())
        }
    }
}

/// The command with the projects and runs it names resolved from their prefixes.
fn resolve_ids(ctx: &Ctx, conn: &Conn, cmd: FilesCmd) -> CliResult<FilesCmd> {
    let project = |p: &str| ctx.resolve(conn, "project", p);
    Ok(match cmd {
        FilesCmd::Gc { before } => FilesCmd::Gc { before },
        FilesCmd::List { project: p, page, path } => FilesCmd::List { project: project(&p)?, page, path },
        FilesCmd::Watch { project: p, path, after } => FilesCmd::Watch { project: project(&p)?, path, after },
        FilesCmd::Diff { path, from, to } => {
            let side = |v: &str| -> CliResult<String> {
                Ok(match v.split_once('@') {
                    Some((r, at)) => format!("{}@{at}", ctx.resolve(conn, "run", r)?),
                    None => ctx.resolve(conn, "run", v)?,
                })
            };
            FilesCmd::Diff { path, from: side(&from)?, to: to.as_deref().map(side).transpose()? }
        }
        FilesCmd::Read { path, project, out, run: Some(run), at } => {
            FilesCmd::Read { path, project, out, run: Some(ctx.resolve(conn, "run", &run)?), at }
        }
        FilesCmd::Read { path, project: p, out, run: None, at } => {
            FilesCmd::Read { path, project: project(&p)?, out, run: None, at }
        }
        FilesCmd::Write { path, project: p, content } => FilesCmd::Write { path, project: project(&p)?, content },
        FilesCmd::Upload { file, project: p, as_path } => FilesCmd::Upload { file, project: project(&p)?, as_path },
        FilesCmd::Delete { path, project: p } => FilesCmd::Delete { path, project: project(&p)? },
    })
}

/// `od files gc`: collects the blob store (each step an event).
fn gc(ctx: &Ctx, conn: &Conn, before: Option<i64>) -> CliResult {
    if before.is_some_and(|b| b < 0) {
        return Err(CliError::new("usage", "--before is unix milliseconds"));
    }
    let v = conn.post("/api/blobs/gc", &json!({ "before": before }))?;
    let n = |k: &str| v[k].as_array().map_or(0, Vec::len);
    ctx.print(&v, |v| {
        format!("{} blob(s) newly unreferenced, {} removed, {} kept", n("unreferenced"), n("expired"), v["kept"])
    });
    Ok(())
}

/// `od files diff`: a file as one run recorded it against another's (or the project's current one).
fn diff(ctx: &Ctx, conn: &Conn, path: &str, from: &str, to: Option<&str>) -> CliResult {
    let mut q = format!("/api/files/diff?path={}&from={}", path_segment(path), path_segment(from));
    if let Some(t) = to {
        q.push_str(&format!("&to={}", path_segment(t)));
    }
    let v = conn.get(&q)?;
    ctx.print(&v, |v| {
        if v["same"] == true {
            return format!("{path}: same ({} bytes)", v["from"]["bytes"]);
        }
        match v["diff"].as_str() {
            Some(d) => d.trim_end().to_string(),
            None => {
                format!("{path}: differs (binary or large: {} → {})", s(&v["from"]["digest"]), s(&v["to"]["digest"]))
            }
        }
    });
    Ok(())
}

/// `od files watch`: every artifact recorded in the project from now (or `--after`) on — the log,
/// followed — as ND-JSON lines.
fn watch(conn: &Conn, project: &str, path: Option<&str>, after: Option<u64>) -> CliResult {
    let after = match after {
        Some(a) => a,
        None => conn.get("/api/log/stats")?["lastSeq"].as_u64().unwrap_or(0),
    };
    conn.lines(&format!("/api/log/tail?follow=true&after={after}"), |line| {
        let v: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        let d = &v["data"]["payload"];
        if v["event"] != "artifact_recorded" || d["projectId"] != project {
            return Ok(true);
        }
        let p = d["path"].as_str().unwrap_or("");
        if path.is_some_and(|prefix| !crate::http::projects_under(p, prefix)) {
            return Ok(true);
        }
        let out = json!({ "path": p, "runId": d["runId"], "artifactId": d["artifactId"], "digest": d["digest"],
                          "bytes": d["bytes"], "stageId": d["stageId"], "at": d["recordedAt"], "seq": v["data"]["seq"] });
        Ok(super::paging::emit(&out.to_string()))
    })
}

/// `od files list`: the project's files by path (only below `prefix` when given), paged.
fn list(ctx: &Ctx, conn: &Conn, project: &str, page: &PageArgs, prefix: Option<String>) -> CliResult {
    let mut path = format!("/api/projects/{}/files", path_segment(project));
    if let Some(p) = prefix {
        path.push_str(&format!("?path={}", path_segment(&p)));
    }
    let row = |_: &Look, f: &Value| {
        let modified = f["modifiedAt"].as_i64().map(super::human::local_time).unwrap_or_default();
        vec![s(&f["path"]).to_string(), f["size"].to_string(), modified]
    };
    let cols = [col("PATH"), keep("BYTES"), keep("MODIFIED")];
    let view = TableView { cols: &cols, ids: &[], empty: "no files", row: &row };
    print_table(ctx, conn, &path, "files", page, &view)
}

/// `od files read`: a project's file, or a run's as it recorded it (at an event with `--at`), to
/// stdout or `--out`.
fn read(conn: &Conn, path: &str, project: &str, out: Option<PathBuf>, run: Option<&str>, at: Option<u64>) -> CliResult {
    let url = match run {
        Some(r) => {
            let at = at.map(|a| format!("?at={a}")).unwrap_or_default();
            file_url(r, path)?.replacen("/api/projects/", "/api/runs/", 1) + &at
        }
        None => file_url(project, path)?,
    };
    let bytes = conn.get_bytes(&url)?;
    match out {
        Some(p) => crate::durable::write_file(&p, &bytes)
            .map_err(|e| CliError::new("error", format!("{}: {e}", p.display())))?,
        None => {
            let mut o = std::io::stdout();
            o.write_all(&bytes).and_then(|_| o.flush()).map_err(|e| CliError::new("error", e.to_string()))?;
        }
    }
    Ok(())
}
