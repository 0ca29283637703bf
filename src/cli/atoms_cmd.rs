//! `od atoms list|show`.

use clap::Subcommand;
use serde_json::Value;

use super::{CliResult, Ctx};

#[derive(Subcommand, Debug)]
pub enum AtomsCmd {
    /// The bundled atoms (by id; paged) and the reference pipelines that use them.
    List {
        #[command(flatten)]
        page: super::paging::PageArgs,
    },
    /// One atom, with its prompt body.
    Show { id: String },
}

pub fn run(ctx: &Ctx, cmd: AtomsCmd) -> CliResult {
    match cmd {
        AtomsCmd::List { page } => {
            let row =
                |a: &Value| format!("{:<24} {}", a["id"].as_str().unwrap_or(""), a["label"].as_str().unwrap_or(""));
            let human = |v: &Value| {
                let mut out: Vec<String> = v["atoms"].as_array().into_iter().flatten().map(row).collect();
                out.push(String::new());
                for p in v["pipelines"].as_array().into_iter().flatten() {
                    let stages: Vec<&str> = p["pipeline"]["stages"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|s| s["id"].as_str())
                        .collect();
                    out.push(format!("{:<24} {}", p["id"].as_str().unwrap_or(""), stages.join(" → ")));
                }
                if let Some(c) = v["nextCursor"].as_str() {
                    out.push(format!("more: --cursor {c}"));
                }
                out.join("\n")
            };
            super::paging::print_list(ctx, &ctx.conn()?, "/api/atoms", "atoms", &page, human, row)
        }
        AtomsCmd::Show { id } => {
            let v = ctx.conn()?.get(&format!("/api/atoms/{}", super::conn::path_segment(&id)))?;
            ctx.print(&v, |v| v["atom"]["skillBody"].as_str().unwrap_or("").to_string());
            Ok(())
        }
    }
}
