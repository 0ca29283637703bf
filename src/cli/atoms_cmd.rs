//! `od atoms list|show`.

use clap::Subcommand;

use super::{CliResult, Ctx};

#[derive(Subcommand, Debug)]
pub enum AtomsCmd {
    /// The bundled atoms and the reference pipelines that use them.
    List,
    /// One atom, with its prompt body.
    Show { id: String },
}

pub fn run(ctx: &Ctx, cmd: AtomsCmd) -> CliResult {
    match cmd {
        AtomsCmd::List => {
            let v = ctx.conn()?.get("/api/atoms")?;
            ctx.print(&v, |v| {
                let mut out: Vec<String> = v["atoms"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| format!("{:<24} {}", a["id"].as_str().unwrap_or(""), a["label"].as_str().unwrap_or("")))
                    .collect();
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
                out.join("\n")
            });
            Ok(())
        }
        AtomsCmd::Show { id } => {
            let v = ctx.conn()?.get(&format!("/api/atoms/{}", super::conn::path_segment(&id)))?;
            ctx.print(&v, |v| v["atom"]["skillBody"].as_str().unwrap_or("").to_string());
            Ok(())
        }
    }
}
