//! `od project create|import|list|info|delete`, `od conversation new|list` and
//! `od files list|read|write|upload|delete` (paths stay inside the project directory).

use clap::Subcommand;
use serde_json::{json, Map, Value};
use std::io::{Read, Write};
use std::path::PathBuf;

use super::args::PluginArgs;
use super::conn::path_segment;
use super::human::{col, keep, Look};
use super::paging::{print_table, PageArgs, TableView};
use super::{s, CliError, CliResult, Ctx};

#[derive(Subcommand, Debug)]
pub enum ProjectCmd {
    /// Create a project (with `--plugin`: apply it, record the snapshot and pin it).
    Create {
        /// Client-chosen id (default: generated).
        #[arg(long)]
        id: Option<String>,
        #[arg(long, default_value = "")]
        name: String,
        #[command(flatten)]
        plugin: PluginArgs,
        #[command(flatten)]
        meta: MetaArgs,
    },
    /// Adopt an existing folder as a project (its files stay where they are).
    Import {
        path: PathBuf,
        #[arg(long)]
        id: Option<String>,
        #[arg(long, default_value = "")]
        name: String,
        #[command(flatten)]
        plugin: PluginArgs,
        #[command(flatten)]
        meta: MetaArgs,
    },
    /// Projects, oldest first (paged).
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    Info {
        id: String,
    },
    /// The artifacts of all the project's runs, oldest first (paged).
    Artifacts {
        id: String,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Delete a project (refused while one of its runs is active).
    Delete {
        id: String,
    },
}

/// Project metadata options.
#[derive(clap::Args, Debug, Default)]
pub struct MetaArgs {
    /// The build command the `build-test` atom runs (`sh -c`, in the project directory).
    #[arg(long)]
    build_cmd: Option<String>,
    /// The test command the `build-test` atom runs.
    #[arg(long)]
    test_cmd: Option<String>,
    /// Other metadata, `key=value` (repeatable).
    #[arg(long = "meta")]
    meta: Vec<String>,
    /// The skill (plugin) the project is for: applied when no --plugin is given, kept in metadata.
    #[arg(long)]
    skill: Option<String>,
    /// The design system the project uses (kept in metadata as `designSystemId`).
    #[arg(long)]
    design_system: Option<String>,
}

impl MetaArgs {
    fn to_json(&self) -> CliResult<Value> {
        let mut m = Map::new();
        for kv in &self.meta {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| CliError::new("usage", format!("--meta {kv:?}: expected key=value")))?;
            m.insert(k.into(), json!(v));
        }
        if let Some(b) = &self.build_cmd {
            m.insert("buildCommand".into(), json!(b));
        }
        if let Some(t) = &self.test_cmd {
            m.insert("testCommand".into(), json!(t));
        }
        if let Some(s) = &self.skill {
            m.insert("skillId".into(), json!(s));
        }
        if let Some(d) = &self.design_system {
            m.insert("designSystemId".into(), json!(d));
        }
        Ok(Value::Object(m))
    }
}

fn print_project(ctx: &Ctx, v: &Value) {
    ctx.print(v, |v| {
        let p = &v["project"];
        let mut out = format!("project {} ({}) at {}", s(&p["id"]), s(&p["name"]), s(&p["dir"]));
        if let Some(c) = v["conversationId"].as_str() {
            out.push_str(&format!("\nconversation {c}"));
        }
        if let Some(sid) = v["appliedPluginSnapshotId"].as_str().or(p["appliedPluginSnapshotId"].as_str()) {
            out.push_str(&format!("\npinned snapshot {sid}"));
        }
        out
    });
}

pub fn run(ctx: &Ctx, cmd: ProjectCmd) -> CliResult {
    match cmd {
        ProjectCmd::Create { id, name, plugin, meta } => {
            let mut body = Map::new();
            body.insert("id".into(), json!(id));
            body.insert("name".into(), json!(name));
            body.insert("metadata".into(), meta.to_json()?);
            body.insert("skillId".into(), json!(meta.skill));
            plugin.fill(&mut body)?;
            let v = ctx.conn()?.post("/api/projects", &Value::Object(body))?;
            print_project(ctx, &v);
        }
        ProjectCmd::Import { path, id, name, plugin, meta } => {
            let abs =
                std::fs::canonicalize(&path).map_err(|e| CliError::new("usage", format!("{}: {e}", path.display())))?;
            let mut body = Map::new();
            body.insert("path".into(), json!(abs));
            body.insert("id".into(), json!(id));
            body.insert("name".into(), json!(name));
            body.insert("metadata".into(), meta.to_json()?);
            plugin.fill(&mut body)?;
            let v = ctx.conn()?.post("/api/import/folder", &Value::Object(body))?;
            print_project(ctx, &v);
        }
        ProjectCmd::List { page } => {
            let row = |_: &Look, p: &Value| {
                vec![
                    s(&p["id"]).to_string(),
                    s(&p["name"]).to_string(),
                    p["runCount"].to_string(),
                    p["createdAt"].as_i64().map(super::human::local_time).unwrap_or_default(),
                    s(&p["dir"]).to_string(),
                ]
            };
            let cols = [keep("PROJECT"), col("NAME"), keep("RUNS"), keep("CREATED"), col("DIR")];
            let view = TableView { cols: &cols, ids: &[0], empty: "no projects", row: &row };
            print_table(ctx, &ctx.conn()?, "/api/projects", "projects", &page, &view)?;
        }
        ProjectCmd::Info { id } => {
            let conn = ctx.conn()?;
            let v = conn.get(&format!("/api/projects/{}", path_segment(&ctx.resolve(&conn, "project", &id)?)))?;
            ctx.print(&v, |v| {
                let mut p = v["project"].clone();
                let conversations = p.as_object_mut().and_then(|m| m.remove("conversations"));
                let mut out = super::info_lines(&ctx.look, &p);
                for c in conversations.as_ref().and_then(Value::as_array).into_iter().flatten() {
                    out.push_str(&format!("\nconversation  {}  {}", s(&c["id"]), s(&c["title"])));
                }
                out
            });
        }
        ProjectCmd::Artifacts { id, page } => {
            let conn = ctx.conn()?;
            let path = format!("/api/projects/{}/artifacts", path_segment(&ctx.resolve(&conn, "project", &id)?));
            print_table(ctx, &conn, &path, "artifacts", &page, &super::run_cmd::artifacts_view(true))?;
        }
        ProjectCmd::Delete { id } => {
            let conn = ctx.conn()?;
            let v = conn.delete(&format!("/api/projects/{}", path_segment(&ctx.resolve(&conn, "project", &id)?)))?;
            ctx.print(&v, |v| format!("deleted project {}", s(&v["projectId"])));
        }
    }
    Ok(())
}

#[derive(Subcommand, Debug)]
pub enum ConversationCmd {
    /// Start a conversation in a project.
    New {
        #[arg(long, env = "OD_PROJECT_ID")]
        project: String,
        #[arg(long, default_value = "")]
        title: String,
        #[arg(long)]
        snapshot_id: Option<String>,
    },
    /// A conversation's messages, oldest first: each run's user message and the agent's reply.
    Messages {
        /// The conversation (an id or a unique prefix).
        conversation: String,
        #[arg(long, env = "OD_PROJECT_ID")]
        project: String,
    },
    /// A project's conversations, oldest first (paged).
    List {
        #[arg(long, env = "OD_PROJECT_ID")]
        project: String,
        #[command(flatten)]
        page: PageArgs,
    },
}

pub fn run_conversation(ctx: &Ctx, cmd: ConversationCmd) -> CliResult {
    let conn = ctx.conn()?;
    match cmd {
        ConversationCmd::New { project, title, snapshot_id } => {
            let project = ctx.resolve(&conn, "project", &project)?;
            let snapshot_id = ctx.resolve_opt(&conn, "snapshot", snapshot_id)?;
            let body = json!({ "title": title, "appliedPluginSnapshotId": snapshot_id });
            let v = conn.post(&format!("/api/projects/{}/conversations", path_segment(&project)), &body)?;
            ctx.print(&v, |v| format!("conversation {}", s(&v["conversationId"])));
        }
        ConversationCmd::Messages { conversation, project } => {
            let project = ctx.resolve(&conn, "project", &project)?;
            let conversation = ctx.resolve(&conn, "conversation", &conversation)?;
            let path = format!(
                "/api/projects/{}/conversations/{}/messages",
                path_segment(&project),
                path_segment(&conversation)
            );
            let v = conn.get(&path)?;
            ctx.print(&v, messages_text);
        }
        ConversationCmd::List { project, page } => {
            let project = ctx.resolve(&conn, "project", &project)?;
            let row = |_: &Look, c: &Value| {
                vec![
                    s(&c["id"]).to_string(),
                    s(&c["title"]).to_string(),
                    c["createdAt"].as_i64().map(super::human::local_time).unwrap_or_default(),
                    s(&c["snapshotId"]).to_string(),
                ]
            };
            let cols = [keep("CONVERSATION"), col("TITLE"), keep("CREATED"), keep("SNAPSHOT")];
            let view = TableView { cols: &cols, ids: &[0, 3], empty: "no conversations", row: &row };
            let path = format!("/api/projects/{}/conversations", path_segment(&project));
            print_table(ctx, &conn, &path, "conversations", &page, &view)?;
        }
    }
    Ok(())
}

/// A conversation's messages as a person reads them: `you:` / `agent:` lines, with each run.
fn messages_text(v: &Value) -> String {
    let mut out = Vec::new();
    for m in v["messages"].as_array().into_iter().flatten() {
        let who = if m["role"] == "user" { "you" } else { "agent" };
        out.push(format!("{who} ({}): {}", s(&m["runId"]), s(&m["text"])));
    }
    if out.is_empty() {
        return "no messages".into();
    }
    out.join("\n")
}

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
        page: super::paging::PageArgs,
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
    if let FilesCmd::Gc { before } = cmd {
        if before.is_some_and(|b| b < 0) {
            return Err(CliError::new("usage", "--before is unix milliseconds"));
        }
        let v = conn.post("/api/blobs/gc", &json!({ "before": before }))?;
        let n = |k: &str| v[k].as_array().map_or(0, Vec::len);
        ctx.print(&v, |v| {
            format!("{} blob(s) newly unreferenced, {} removed, {} kept", n("unreferenced"), n("expired"), v["kept"])
        });
        return Ok(());
    }
    let cmd = match cmd {
        FilesCmd::Gc { before } => FilesCmd::Gc { before },
        FilesCmd::List { project, page, path } => {
            FilesCmd::List { project: ctx.resolve(&conn, "project", &project)?, page, path }
        }
        FilesCmd::Watch { project, path, after } => {
            FilesCmd::Watch { project: ctx.resolve(&conn, "project", &project)?, path, after }
        }
        FilesCmd::Diff { path, from, to } => {
            let side = |v: &str| -> CliResult<String> {
                Ok(match v.split_once('@') {
                    Some((r, at)) => format!("{}@{at}", ctx.resolve(&conn, "run", r)?),
                    None => ctx.resolve(&conn, "run", v)?,
                })
            };
            FilesCmd::Diff { path, from: side(&from)?, to: to.as_deref().map(side).transpose()? }
        }
        FilesCmd::Read { path, project, out, run: Some(run), at } => {
            FilesCmd::Read { path, project, out, run: Some(ctx.resolve(&conn, "run", &run)?), at }
        }
        FilesCmd::Read { path, project, out, run: None, at } => {
            FilesCmd::Read { path, project: ctx.resolve(&conn, "project", &project)?, out, run: None, at }
        }
        FilesCmd::Write { path, project, content } => {
            FilesCmd::Write { path, project: ctx.resolve(&conn, "project", &project)?, content }
        }
        FilesCmd::Upload { file, project, as_path } => {
            FilesCmd::Upload { file, project: ctx.resolve(&conn, "project", &project)?, as_path }
        }
        FilesCmd::Delete { path, project } => {
            FilesCmd::Delete { path, project: ctx.resolve(&conn, "project", &project)? }
        }
    };
    match cmd {
        // Handled above.
        FilesCmd::Gc { .. } => {}
        FilesCmd::Diff { path, from, to } => {
            let mut q = format!("/api/files/diff?path={}&from={}", path_segment(&path), path_segment(&from));
            if let Some(t) = &to {
                q.push_str(&format!("&to={}", path_segment(t)));
            }
            let v = conn.get(&q)?;
            ctx.print(&v, |v| {
                if v["same"] == true {
                    return format!("{path}: same ({} bytes)", v["from"]["bytes"]);
                }
                match v["diff"].as_str() {
                    Some(d) => d.trim_end().to_string(),
                    None => format!(
                        "{path}: differs (binary or large: {} → {})",
                        s(&v["from"]["digest"]),
                        s(&v["to"]["digest"])
                    ),
                }
            });
        }
        FilesCmd::Watch { project, path, after } => {
            // Every artifact recorded in the project from now (or `--after`) on: the log, followed.
            let after = match after {
                Some(a) => a,
                None => conn.get("/api/log/stats")?["lastSeq"].as_u64().unwrap_or(0),
            };
            conn.lines(&format!("/api/log/tail?follow=true&after={after}"), |line| {
                let v: Value = serde_json::from_str(line).unwrap_or(Value::Null);
                let d = &v["data"]["payload"];
                if v["event"] != "artifact_recorded" || d["projectId"] != project.as_str() {
                    return Ok(true);
                }
                let p = d["path"].as_str().unwrap_or("");
                if path.as_deref().is_some_and(|prefix| !super::super::http::projects_under(p, prefix)) {
                    return Ok(true);
                }
                let out = json!({ "path": p, "runId": d["runId"], "artifactId": d["artifactId"], "digest": d["digest"],
                                  "bytes": d["bytes"], "stageId": d["stageId"], "at": d["recordedAt"], "seq": v["data"]["seq"] });
                Ok(super::paging::emit(&out.to_string()))
            })?;
        }
        FilesCmd::List { project, page, path: prefix } => {
            let mut path = format!("/api/projects/{}/files", path_segment(&project));
            if let Some(p) = prefix {
                path.push_str(&format!("?path={}", path_segment(&p)));
            }
            let row = |_: &Look, f: &Value| {
                let modified = f["modifiedAt"].as_i64().map(super::human::local_time).unwrap_or_default();
                vec![s(&f["path"]).to_string(), f["size"].to_string(), modified]
            };
            let cols = [col("PATH"), keep("BYTES"), keep("MODIFIED")];
            let view = TableView { cols: &cols, ids: &[], empty: "no files", row: &row };
            print_table(ctx, &conn, &path, "files", &page, &view)?;
        }
        FilesCmd::Read { path, project, out, run, at } => {
            let url = match &run {
                Some(r) => {
                    let at = at.map(|a| format!("?at={a}")).unwrap_or_default();
                    file_url(r, &path)?.replacen("/api/projects/", "/api/runs/", 1) + &at
                }
                None => file_url(&project, &path)?,
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
        }
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
        }
        FilesCmd::Upload { file, project, as_path } => {
            let bytes = std::fs::read(&file).map_err(|e| CliError::new("usage", format!("{}: {e}", file.display())))?;
            let name = match as_path {
                Some(p) => p,
                None => file.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default(),
            };
            let v = conn.put_bytes(&file_url(&project, &name)?, &bytes)?;
            ctx.print(&v, |v| format!("uploaded {} ({} bytes)", s(&v["file"]["path"]), v["file"]["size"]));
        }
        FilesCmd::Delete { path, project } => {
            let v = conn.delete(&file_url(&project, &path)?)?;
            ctx.print(&v, |v| format!("deleted {}", s(&v["file"]["path"])));
        }
    }
    Ok(())
}
