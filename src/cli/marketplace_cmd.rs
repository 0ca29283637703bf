//! `od marketplace add|list|info|plugins|refresh|trust|remove|search`.

use clap::Subcommand;
use serde_json::{json, Value};

use super::conn::path_segment;
use super::human::{col, keep, Look};
use super::paging::{print_table, PageArgs, TableView};
use super::{CliResult, Ctx};

#[derive(Subcommand, Debug)]
pub enum MarketplaceCmd {
    /// Add an open-design-marketplace.json index (a file or an https URL; http only to loopback).
    Add {
        url: String,
        /// official | trusted | restricted (default restricted).
        #[arg(long)]
        trust: Option<String>,
    },
    /// Configured marketplaces (by id; paged).
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// One marketplace.
    Info { id: String },
    /// The entries of one marketplace (in its index's order; paged).
    Plugins {
        id: String,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Fetch an index again.
    Refresh { id: String },
    /// Set a marketplace's trust tier (official | trusted | restricted), as a second argument or
    /// with `--trust` (upstream's spelling).
    Trust {
        id: String,
        #[arg(required_unless_present = "trust_flag", conflicts_with = "trust_flag")]
        trust: Option<String>,
        #[arg(long = "trust", id = "trust_flag")]
        trust_flag: Option<String>,
    },
    /// Remove a marketplace (installed plugins stay).
    Remove { id: String },
    /// Search entries across all marketplaces (paged).
    Search {
        query: String,
        #[command(flatten)]
        page: PageArgs,
    },
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
        MarketplaceCmd::List { page } => {
            let row = |_: &Look, m: &Value| vec![s(&m["id"]), s(&m["trust"]), s(&m["pluginCount"]), s(&m["url"])];
            let cols = [keep("MARKETPLACE"), keep("TRUST"), keep("PLUGINS"), col("URL")];
            let view = TableView { cols: &cols, ids: &[], empty: "no marketplaces", row: &row };
            print_table(ctx, &conn, "/api/marketplaces", "marketplaces", &page, &view)?;
        }
        MarketplaceCmd::Info { id } => ctx.print(&conn.get(&format!("/api/marketplaces/{}", path_segment(&id)))?, one),
        MarketplaceCmd::Plugins { id, page } => {
            let path = format!("/api/marketplaces/{}/plugins", path_segment(&id));
            let row = |_: &Look, e: &Value| vec![s(&e["name"]), s(&e["version"]), s(&e["source"])];
            let cols = [keep("NAME"), keep("VERSION"), col("SOURCE")];
            let view = TableView { cols: &cols, ids: &[], empty: "no entries", row: &row };
            print_table(ctx, &conn, &path, "plugins", &page, &view)?;
        }
        MarketplaceCmd::Refresh { id } => {
            let v = conn.post(&format!("/api/marketplaces/{}/refresh", path_segment(&id)), &json!({}))?;
            ctx.print(&v, |v| format!("{} ({})", one(v), if v["changed"] == true { "changed" } else { "unchanged" }));
        }
        MarketplaceCmd::Trust { id, trust, trust_flag } => {
            let trust = trust.or(trust_flag);
            let v = conn.post(&format!("/api/marketplaces/{}/trust", path_segment(&id)), &json!({ "trust": trust }))?;
            ctx.print(&v, one);
        }
        MarketplaceCmd::Remove { id } => {
            let v = conn.delete(&format!("/api/marketplaces/{}", path_segment(&id)))?;
            ctx.print(&v, |v| format!("removed {}", s(&v["id"])));
        }
        MarketplaceCmd::Search { query, page } => {
            let path = format!("/api/marketplaces/search?q={}", path_segment(&query));
            let row = |_: &Look, e: &Value| vec![s(&e["name"]), s(&e["version"]), s(&e["marketplaceId"])];
            let cols = [keep("NAME"), keep("VERSION"), col("MARKETPLACE")];
            let view = TableView { cols: &cols, ids: &[], empty: "no matches", row: &row };
            print_table(ctx, &conn, &path, "results", &page, &view)?;
        }
    }
    Ok(())
}
