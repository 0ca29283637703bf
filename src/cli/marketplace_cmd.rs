//! `od marketplace add|list|info|plugins|refresh|trust|remove|search`.

use clap::Subcommand;
use serde_json::{json, Value};

use super::conn::path_segment;
use super::{CliResult, Ctx};

#[derive(Subcommand, Debug)]
pub enum MarketplaceCmd {
    /// Add an open-design-marketplace.json index (a file or http URL).
    Add {
        url: String,
        /// official | trusted | restricted (default restricted).
        #[arg(long)]
        trust: Option<String>,
    },
    /// Configured marketplaces.
    List,
    /// One marketplace.
    Info { id: String },
    /// The entries of one marketplace.
    Plugins { id: String },
    /// Fetch an index again.
    Refresh { id: String },
    /// Set a marketplace's trust tier (official | trusted | restricted).
    Trust { id: String, trust: String },
    /// Remove a marketplace (installed plugins stay).
    Remove { id: String },
    /// Search entries across all marketplaces.
    Search { query: String },
}

fn s(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

pub fn run(ctx: &Ctx, cmd: MarketplaceCmd) -> CliResult {
    let conn = ctx.conn()?;
    let one = |v: &Value| {
        format!(
            "{}  {}  {} plugins  ({})",
            s(&v["marketplace"]["id"]),
            s(&v["marketplace"]["trust"]),
            v["marketplace"]["pluginCount"],
            s(&v["marketplace"]["url"])
        )
    };
    match cmd {
        MarketplaceCmd::Add { url, trust } => {
            let url = std::fs::canonicalize(&url).map_or(url, |p| p.display().to_string());
            let v = conn.post("/api/marketplaces", &json!({ "url": url, "trust": trust }))?;
            ctx.print(&v, one);
        }
        MarketplaceCmd::List => {
            let v = conn.get("/api/marketplaces")?;
            ctx.print(&v, |v| {
                let rows: Vec<String> = v["marketplaces"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|m| one(&json!({ "marketplace": m })))
                    .collect();
                if rows.is_empty() {
                    "no marketplaces".into()
                } else {
                    rows.join("\n")
                }
            });
        }
        MarketplaceCmd::Info { id } => ctx.print(&conn.get(&format!("/api/marketplaces/{}", path_segment(&id)))?, one),
        MarketplaceCmd::Plugins { id } => {
            let v = conn.get(&format!("/api/marketplaces/{}/plugins", path_segment(&id)))?;
            ctx.print(&v, |v| {
                v["plugins"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|e| format!("{}  {}  {}", s(&e["name"]), s(&e["version"]), s(&e["source"])))
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        MarketplaceCmd::Refresh { id } => {
            let v = conn.post(&format!("/api/marketplaces/{}/refresh", path_segment(&id)), &json!({}))?;
            ctx.print(&v, |v| format!("{} ({})", one(v), if v["changed"] == true { "changed" } else { "unchanged" }));
        }
        MarketplaceCmd::Trust { id, trust } => {
            let v = conn.post(&format!("/api/marketplaces/{}/trust", path_segment(&id)), &json!({ "trust": trust }))?;
            ctx.print(&v, one);
        }
        MarketplaceCmd::Remove { id } => {
            let v = conn.delete(&format!("/api/marketplaces/{}", path_segment(&id)))?;
            ctx.print(&v, |v| format!("removed {}", s(&v["id"])));
        }
        MarketplaceCmd::Search { query } => {
            let v = conn.get(&format!("/api/marketplaces/search?q={}", path_segment(&query)))?;
            ctx.print(&v, |v| {
                v["results"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|e| format!("{}  {}  [{}]", s(&e["name"]), s(&e["version"]), s(&e["marketplaceId"])))
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
    }
    Ok(())
}
