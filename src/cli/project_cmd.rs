//! `od project create|import|list|info|delete`, `od conversation new|list` and
//! `od files list|read|write|upload|delete` (paths stay inside the project directory).

use clap::Subcommand;
use serde_json::{json, Map, Value};
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
