//! `od plugin snapshots list|show|record|prune`: the immutable applied-plugin snapshots.

use clap::Subcommand;
use serde_json::{json, Value};

use super::conn::path_segment;
use super::human::{col, keep, Look};
use super::paging::{print_table, PageArgs, TableView};
use super::{s, CliError, CliResult, Ctx};

#[derive(Subcommand, Debug)]
pub enum SnapshotCmd {
    /// Snapshots with their status (fresh, stale, expired) and who references them.
    List {
        #[arg(long)]
        plugin: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// One snapshot, whole.
    Show { snapshot_id: String },
    /// Apply a plugin and record the result as an (unreferenced) snapshot to pin later.
    Record {
        plugin_id: String,
        #[arg(long)]
        inputs: Option<String>,
        #[arg(long = "input")]
        input: Vec<String>,
        #[arg(long, value_delimiter = ',')]
        grant_caps: Vec<String>,
        #[arg(long)]
        locale: Option<String>,
    },
    /// Expire unreferenced snapshots past `OD_SNAPSHOT_UNREFERENCED_TTL_DAYS`, or with `--before`
    /// (unix ms) every unreferenced one applied before then. Referenced snapshots are kept.
    Prune {
        #[arg(long)]
        before: Option<i64>,
    },
}

pub fn run(ctx: &Ctx, cmd: SnapshotCmd) -> CliResult {
    let conn = ctx.conn()?;
    match cmd {
        SnapshotCmd::List { plugin, page } => {
            let q = plugin.map(|p| format!("?pluginId={}", path_segment(&p))).unwrap_or_default();
            let row = |_: &Look, x: &Value| {
                vec![
                    s(&x["snapshotId"]).to_string(),
                    format!("{}@{}", s(&x["pluginId"]), s(&x["pluginVersion"])),
                    s(&x["status"]).to_string(),
                    x["refCount"].to_string(),
                    x["appliedAt"].as_i64().map(super::human::local_time).unwrap_or_default(),
                ]
            };
            let cols = [keep("SNAPSHOT"), col("PLUGIN"), keep("STATUS"), keep("REFS"), keep("APPLIED")];
            let view = TableView { cols: &cols, ids: &[0], empty: "no snapshots", row: &row };
            print_table(ctx, &conn, &format!("/api/applied-plugins{q}"), "snapshots", &page, &view)?;
        }
        SnapshotCmd::Show { snapshot_id } => {
            let id = ctx.resolve(&conn, "snapshot", &snapshot_id)?;
            let v = conn.get(&format!("/api/applied-plugins/{}", path_segment(&id)))?;
            ctx.print(&v, |v| serde_json::to_string_pretty(&v["snapshot"]).unwrap_or_default());
        }
        SnapshotCmd::Record { plugin_id, inputs, input, grant_caps, locale } => {
            let inputs = super::args::inputs_map(inputs, input)?;
            let body = json!({ "pluginId": plugin_id, "inputs": inputs, "grantCaps": grant_caps, "locale": locale });
            let v = conn.post("/api/applied-plugins", &body)?;
            ctx.print(&v, |v| format!("recorded snapshot {}", s(&v["snapshotId"])));
        }
        SnapshotCmd::Prune { before } => {
            if before.is_some_and(|b| b < 0) {
                return Err(CliError::new("usage", "--before is unix milliseconds"));
            }
            let v = conn.post("/api/applied-plugins/prune", &json!({ "before": before }))?;
            ctx.print(&v, |v| format!("expired {} snapshot(s)", v["expired"].as_array().map_or(0, Vec::len)));
        }
    }
    Ok(())
}
