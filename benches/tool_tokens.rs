//! Tokens one turn costs the model for tools, flat versus progressive disclosure, counted with a
//! real tokenizer (`tiktoken-rs`, `o200k_base`) at 13, 100, 1,000 and 10,000 tools.
//!
//! - **flat**: the whole catalog as tool definitions (`od mcp --flat`'s `tools/list`: name,
//!   description, inputSchema per tool) — what a model is given on every turn.
//! - **disclosed**: the two meta-tool definitions `od mcp` gives instead (`od_list`, `od_call`).
//!   Target: under 600 tokens at every size.
//!
//! Also measured on the live engine (tools imported, `/api/tools/search?fields=summary` — what
//! `od_list` returns): the cost of one `od_list` page for a fixture query, and of describing one
//! tool — paid only on the turns that use them, bounded by the page size, not by the catalog.
//!
//! Run: `cargo bench --bench tool_tokens`. Results: a table on stdout and
//! `target/bench-results/tool_tokens.json`.

mod common;
mod tool_catalog;

use od::clock::SystemClock;
use od::engine::Engine;
use od::store::{SledLog, StoreConfig};
use od::tools::catalog::SearchQuery;
use od::tools::Tools;
use serde_json::{json, Value};
use std::sync::Arc;

const SIZES: &[usize] = &[13, 100, 1_000, 10_000];
const TARGET: usize = 600;

fn engine_with(tools: &[Value], dir: &std::path::Path) -> Tools {
    let store = SledLog::open(StoreConfig::new(dir.join("data"))).expect("store");
    let data = dir.join("data");
    let parts =
        od::daemon::engine_parts(store, data.clone(), &data, Arc::new(SystemClock), Arc::new(od::ids::RandomIds));
    let e = Tools::start(Arc::new(Engine::new(parts).expect("engine"))).expect("tools");
    let builtin: Vec<String> =
        tool_catalog::builtin().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
    let mut extra: Vec<Value> =
        tools.iter().filter(|t| !builtin.contains(&t["name"].as_str().unwrap().to_string())).cloned().collect();
    if !extra.is_empty() {
        e.import_tools(&Value::Array(std::mem::take(&mut extra)), None, "bench").expect("import");
    }
    e
}

fn main() {
    let bpe = tiktoken_rs::o200k_base().expect("o200k_base ships in the crate");
    let count = |v: &Value| bpe.encode_ordinary(&v.to_string()).len();
    let meta = json!({ "tools": od::tools::disclosure::meta_tools() });
    let disclosed = count(&meta);
    let queries = tool_catalog::queries();
    let query = &queries[2].0; // "What is the capital of Brazil?"
    println!("tool tokens per turn (o200k_base)\n");
    println!(
        "{:>7} | {:>10} | {:>9} | {:>8} | {:>13} | {:>13} | {:>12} | target < {TARGET}",
        "tools", "flat", "disclosed", "ratio", "list (browse)", "list (query)", "describe one"
    );
    let mut rows = Vec::new();
    for &n in SIZES {
        let tools = tool_catalog::catalog(n);
        let flat = count(&json!({ "tools": tools }));
        let tmp = common::tempdir();
        let e = engine_with(&tools, tmp.path());
        let q = SearchQuery {
            query: query.clone(),
            fields: Some("summary".into()),
            limit: Some(od::limits::DISCLOSURE_LIST_PAGE),
            ..Default::default()
        };
        let page = e.search_tools(&q).expect("search");
        let list = count(&page);
        let browse = e.search_tools(&SearchQuery { query: String::new(), ..q.clone() }).expect("list");
        let full_page = count(&browse);
        let first = page["tools"][0]["name"].as_str().unwrap_or("projects.list").to_string();
        let d = e.tool_json(&first).expect("tool")["tool"].clone();
        let describe = count(
            &json!({ "name": d["name"], "description": d["description"], "inputSchema": d["inputSchema"], "digest": "0123456789ab" }),
        );
        let pass = disclosed < TARGET;
        println!(
            "{n:>7} | {flat:>10} | {disclosed:>9} | {:>7.1}× | {full_page:>13} | {list:>13} | {describe:>12} | {}",
            flat as f64 / disclosed as f64,
            common::verdict(pass)
        );
        rows.push(json!({ "tools": n, "flatTokens": flat, "disclosedTokens": disclosed, "ratio": flat as f64 / disclosed as f64,
                          "odListBrowsePageTokens": full_page, "odListBrowsePageSize": browse["tools"].as_array().map_or(0, Vec::len),
                          "odListQueryPageTokens": list, "odListQueryPageSize": page["tools"].as_array().map_or(0, Vec::len),
                          "describeTokens": describe, "describedTool": first, "targetMet": pass }));
        drop(e);
    }
    println!(
        "\ndisclosed = the od_list + od_call definitions (constant, every turn); list = one default od_list page ({} entries) \
         without a query (browse) and for {query:?}; describe = one tool's schema (once per conversation)",
        od::limits::DISCLOSURE_LIST_PAGE
    );
    common::write_json(
        "tool_tokens",
        &json!({ "bench": "tool_tokens", "tokenizer": "o200k_base (tiktoken-rs 0.12)", "target": { "disclosedTokensBelow": TARGET },
                 "query": query, "rows": rows, "machine": common::machine() }),
    );
}
