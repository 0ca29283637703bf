//! `od projections list|rebuild [NAME]`: the read models the engine keeps, and folding one (or all)
//! from the log again.

use clap::Subcommand;
use serde_json::{json, Value};

use super::{s, CliResult, Ctx};

#[derive(Subcommand, Debug)]
pub enum ProjectionsCmd {
    /// Every projection: name, version, kind (records on disk or memory) and the seq it reflects.
    List,
    /// Clear a projection (or every one) and fold the whole log again; nothing observable changes.
    Rebuild {
        /// The projection to rebuild (default: all).
        name: Option<String>,
    },
}

fn line(p: &Value) -> String {
    format!("{}  v{}  {}  seq {}", s(&p["name"]), p["version"], s(&p["kind"]), p["seq"])
}

pub fn run(ctx: &Ctx, cmd: ProjectionsCmd) -> CliResult {
    let conn = ctx.conn()?;
    match cmd {
        ProjectionsCmd::List => {
            let v = conn.get("/api/projections")?;
            ctx.print(&v, |v| {
                v["projections"].as_array().into_iter().flatten().map(line).collect::<Vec<_>>().join("\n")
            });
        }
        ProjectionsCmd::Rebuild { name } => {
            let v = conn.post("/api/projections/rebuild", &json!({ "name": name }))?;
            ctx.print(&v, |v| {
                v["rebuilt"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| format!("rebuilt {}", line(p)))
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
    }
    Ok(())
}
