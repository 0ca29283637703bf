//! `od ui list|show|respond|request|revoke|prefill`: GenUI surfaces of runs and the answers a
//! project remembers.

use clap::Subcommand;
use serde_json::{json, Value};

use super::conn::{path_segment, Conn};
use super::human::{col, keep, Look};
use super::paging::{print_table, PageArgs, TableView};
use super::{s, CliError, CliResult, Ctx};

#[derive(Subcommand, Debug)]
pub enum UiCmd {
    /// A run's surfaces, or every remembered answer of a project (what can be revoked).
    List {
        #[arg(long, env = "OD_RUN_ID", conflicts_with = "project")]
        run: Option<String>,
        #[arg(long)]
        project: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// One surface of a run: its latest row and its spec (`--schema`: the schema only).
    Show {
        surface_id: String,
        #[arg(long, env = "OD_RUN_ID")]
        run: String,
        #[arg(long)]
        schema: bool,
    },
    /// Answer a waiting surface (checked against its schema).
    Respond {
        surface_id: String,
        #[arg(long, env = "OD_RUN_ID")]
        run: String,
        /// A string answer.
        #[arg(long, conflicts_with_all = ["value_json", "skip"])]
        value: Option<String>,
        /// A JSON answer.
        #[arg(long, conflicts_with = "skip")]
        value_json: Option<String>,
        /// Answer nothing (null).
        #[arg(long)]
        skip: bool,
        /// user (default), agent or auto.
        #[arg(long, default_value = "user")]
        by: String,
    },
    /// Ask through a declared surface from inside a run (refused, and recorded, if the snapshot or
    /// the surface's trigger does not allow it).
    Request {
        surface_id: String,
        #[arg(long, env = "OD_RUN_ID")]
        run: String,
        #[arg(long)]
        kind: Option<String>,
        #[arg(long)]
        atom: Option<String>,
        /// A choice's options, when its manifest leaves them to the agent (the direction
        /// picker): a JSON array of strings or {value, label, description}.
        #[arg(long)]
        options_json: Option<String>,
    },
    /// Forget a project's remembered answers to a surface.
    Revoke {
        surface_id: String,
        #[arg(long, env = "OD_PROJECT_ID")]
        project: String,
    },
    /// Answer surfaces ahead of time: `--values '{"surfaceId": answer, …}'` (several at once) or one
    /// surface with `--value`/`--value-json`.
    Prefill {
        surface_id: Option<String>,
        #[arg(long, env = "OD_PROJECT_ID")]
        project: String,
        #[arg(long, conflicts_with = "plugin")]
        snapshot_id: Option<String>,
        #[arg(long)]
        plugin: Option<String>,
        #[arg(long)]
        values: Option<String>,
        #[arg(long)]
        value: Option<String>,
        #[arg(long)]
        value_json: Option<String>,
        #[arg(long)]
        conversation: Option<String>,
    },
}

fn parse_json(flag: &str, raw: &str) -> CliResult<Value> {
    serde_json::from_str(raw).map_err(|e| CliError::new("usage", format!("{flag}: {e}")))
}

fn row(r: &Value) -> String {
    format!("{}  {}  {}  {}  {}", s(&r["surfaceId"]), s(&r["kind"]), s(&r["persist"]), s(&r["status"]), r["value"])
}

fn rows(v: &Value) -> String {
    let lines: Vec<String> = v["surfaces"].as_array().into_iter().flatten().map(row).collect();
    if lines.is_empty() {
        "no surfaces".into()
    } else {
        lines.join("\n")
    }
}

/// The command with its run and project ids resolved from the prefixes given.
fn resolved(ctx: &Ctx, conn: &Conn, cmd: UiCmd) -> CliResult<UiCmd> {
    let run = |r: String| ctx.resolve(conn, "run", &r);
    let project = |p: String| ctx.resolve(conn, "project", &p);
    Ok(match cmd {
        UiCmd::List { run: r, project: p, page } => {
            UiCmd::List { run: r.map(run).transpose()?, project: p.map(project).transpose()?, page }
        }
        UiCmd::Show { surface_id, run: r, schema } => UiCmd::Show { surface_id, run: run(r)?, schema },
        UiCmd::Respond { surface_id, run: r, value, value_json, skip, by } => {
            UiCmd::Respond { surface_id, run: run(r)?, value, value_json, skip, by }
        }
        UiCmd::Request { surface_id, run: r, kind, atom, options_json } => {
            UiCmd::Request { surface_id, run: run(r)?, kind, atom, options_json }
        }
        UiCmd::Revoke { surface_id, project: p } => UiCmd::Revoke { surface_id, project: project(p)? },
        UiCmd::Prefill { surface_id, project: p, snapshot_id, plugin, values, value, value_json, conversation } => {
            let snapshot_id = ctx.resolve_opt(conn, "snapshot", snapshot_id)?;
            let conversation = ctx.resolve_opt(conn, "conversation", conversation)?;
            UiCmd::Prefill {
                surface_id,
                project: project(p)?,
                snapshot_id,
                plugin,
                values,
                value,
                value_json,
                conversation,
            }
        }
    })
}

pub fn run(ctx: &Ctx, cmd: UiCmd) -> CliResult {
    // An answer resumes a waiting run: the daemon (started if none runs) carries it on.
    let conn = if matches!(cmd, UiCmd::Respond { .. }) { ctx.conn_daemon()? } else { ctx.conn()? };
    match resolved(ctx, &conn, cmd)? {
        UiCmd::List { run, project, page } => list(ctx, &conn, run, project, &page)?,
        UiCmd::Show { surface_id, run, schema } => {
            let v = conn.get(&format!("/api/runs/{}/genui/{}", path_segment(&run), path_segment(&surface_id)))?;
            let v = if schema { json!({ "schema": v["spec"]["schema"] }) } else { v };
            ctx.print(&v, |v| serde_json::to_string_pretty(v).unwrap_or_default());
        }
        UiCmd::Respond { surface_id, run, value, value_json, skip, by } => {
            let body = match (value, value_json, skip) {
                (Some(v), _, _) => json!({ "value": typed_value(&conn, &run, &surface_id, v)?, "respondedBy": by }),
                (None, Some(j), _) => json!({ "value": parse_json("--value-json", &j)?, "respondedBy": by }),
                (None, None, true) => json!({ "skip": true, "respondedBy": by }),
                (None, None, false) => return Err(CliError::new("usage", "give --value, --value-json or --skip")),
            };
            let path = format!("/api/runs/{}/genui/{}/respond", path_segment(&run), path_segment(&surface_id));
            let v = conn.post(&path, &body)?;
            ctx.print(&v, |v| format!("answered {} ({})", s(&v["surface"]["surfaceId"]), s(&v["surface"]["status"])));
        }
        UiCmd::Request { surface_id, run, kind, atom, options_json } => {
            let path = format!("/api/runs/{}/genui/{}/request", path_segment(&run), path_segment(&surface_id));
            let options = options_json.map(|raw| parse_json("--options-json", &raw)).transpose()?;
            let v = conn.post(&path, &json!({ "kind": kind, "atom": atom, "options": options }))?;
            ctx.print(&v, |v| match v["cached"] == true {
                true => format!("{surface_id}: answered from memory: {}", v["surface"]["value"]),
                false => format!("{surface_id}: asked; the run waits for the answer"),
            });
        }
        UiCmd::Revoke { surface_id, project } => {
            let path = format!("/api/projects/{}/genui/{}/revoke", path_segment(&project), path_segment(&surface_id));
            let v = conn.post(&path, &json!({}))?;
            ctx.print(&v, |v| format!("revoked {} remembered answer(s)", v["invalidated"]));
        }
        UiCmd::Prefill { surface_id, project, snapshot_id, plugin, values, value, value_json, conversation } => {
            let mut map = match values {
                Some(raw) => match parse_json("--values", &raw)? {
                    Value::Object(m) => m,
                    _ => return Err(CliError::new("usage", "--values must be a JSON object")),
                },
                None => serde_json::Map::new(),
            };
            if let Some(sid) = surface_id {
                let v = match (value, value_json) {
                    (Some(v), _) => json!(v),
                    (None, Some(j)) => parse_json("--value-json", &j)?,
                    (None, None) => return Err(CliError::new("usage", "give --value or --value-json for the surface")),
                };
                map.insert(sid, v);
            }
            let body =
                json!({ "snapshotId": snapshot_id, "pluginId": plugin, "values": map, "conversationId": conversation });
            let v = conn.post(&format!("/api/projects/{}/genui/prefill", path_segment(&project)), &body)?;
            ctx.print(&v, rows);
        }
    }
    Ok(())
}

/// `od ui list`: a run's or a project's surfaces, paged.
fn list(ctx: &Ctx, conn: &Conn, run: Option<String>, project: Option<String>, page: &PageArgs) -> CliResult {
    let path = match (run, project) {
        (_, Some(p)) => format!("/api/projects/{}/genui", path_segment(&p)),
        (Some(r), None) => format!("/api/runs/{}/genui", path_segment(&r)),
        (None, None) => return Err(CliError::new("usage", "give --run or --project")),
    };
    let row = |_: &Look, r: &Value| {
        vec![
            s(&r["surfaceId"]).to_string(),
            s(&r["kind"]).to_string(),
            s(&r["persist"]).to_string(),
            s(&r["status"]).to_string(),
            r["value"].to_string(),
        ]
    };
    let cols = [keep("SURFACE"), keep("KIND"), keep("PERSIST"), keep("STATUS"), col("VALUE")];
    let view = TableView { cols: &cols, ids: &[], empty: "no surfaces", row: &row };
    print_table(ctx, conn, &path, "surfaces", page, &view)
}

/// `--value` typed for the waiting surface: a confirmation (or a boolean schema) takes `true` or
/// `false`, a number or integer schema a number; anything else stays a string. When the surface
/// cannot be read, the string goes as given and the answer route reports what is wrong.
fn typed_value(conn: &Conn, run: &str, surface_id: &str, raw: String) -> Result<Value, CliError> {
    let path = format!("/api/runs/{}/genui/{}", path_segment(run), path_segment(surface_id));
    let Ok(surface) = conn.get(&path) else { return Ok(Value::String(raw)) };
    let spec = &surface["spec"];
    let confirmation = spec["kind"] == "confirmation" && spec["schema"].is_null();
    typed_answer(&spec["schema"], confirmation, &raw)
        .map_err(|why| CliError::new("usage", format!("--value: {surface_id} takes {why}, not {raw:?}")))
}

/// `raw` typed for `schema` (a surface's or one form field's): a boolean schema (or a bare
/// confirmation) takes `true`/`false`, a number or integer schema a number, anything else stays a
/// string. The error says what it takes (`true or false`, `a number`).
pub(super) fn typed_answer(schema: &Value, confirmation: bool, raw: &str) -> Result<Value, &'static str> {
    let ty = schema["type"].as_str();
    if ty == Some("boolean") || confirmation {
        return match raw.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err("true or false"),
        };
    }
    if matches!(ty, Some("number" | "integer")) {
        return raw.trim().parse::<serde_json::Number>().map(Value::Number).map_err(|_| "a number");
    }
    Ok(Value::String(raw.to_string()))
}
