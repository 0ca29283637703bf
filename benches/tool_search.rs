//! Tool search: latency at 1,000, 10,000 and 100,000 tools (target p99 under 5 ms at 100,000) and
//! recall@1/5/10 on `../shared/fixtures/tool-retrieval/` (the catalog imported, each query searched),
//! od beside SQLite FTS5 (`bm25` with the same field weights, porter stemming) — the registry the
//! agent-ready RFC recommends — on the same catalog and queries in the same run.
//!
//! Latency is one `Tools::search_tools` call (catalog projection caught up, ranked page of 10,
//! descriptors parsed) on an engine whose catalog was imported through the log; the 200 fixture
//! queries are run 5 times each at every size. The peer runs `SELECT name … MATCH … ORDER BY rank
//! LIMIT 10` with the query's words OR-ed.
//!
//! Run: `cargo bench --bench tool_search`. Results: tables on stdout and
//! `target/bench-results/tool_search.json`.

mod common;
mod tool_catalog;

use od::clock::SystemClock;
use od::engine::Engine;
use od::store::{SledLog, StoreConfig};
use od::tools::catalog::SearchQuery;
use od::tools::Tools;
use rusqlite::Connection;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

const SIZES: &[usize] = &[1_000, 10_000, 100_000];
const REPEAT: usize = 5;
const P99_TARGET_MS: f64 = 5.0;
const TOP: usize = 10;

fn engine(dir: &std::path::Path) -> Tools {
    let store = SledLog::open(StoreConfig::new(dir.join("data"))).expect("store");
    let data = dir.join("data");
    let parts =
        od::daemon::engine_parts(store, data.clone(), &data, Arc::new(SystemClock), Arc::new(od::ids::RandomIds));
    Tools::start(Arc::new(Engine::new(parts).expect("engine"))).expect("tools")
}

/// od's catalog of `n` tools (od's own plus imported ones).
fn od_catalog(n: usize, dir: &std::path::Path) -> (Tools, f64) {
    let e = engine(dir);
    let own = tool_catalog::builtin().len();
    let tools: Vec<Value> = tool_catalog::catalog(n).into_iter().skip(own).collect();
    let t = Instant::now();
    e.import_tools(&Value::Array(tools), None, "bench").expect("import");
    e.search_tools(&SearchQuery { query: "warm".into(), ..Default::default() }).expect("catch up");
    (e, t.elapsed().as_secs_f64())
}

fn words(text: &str) -> Vec<String> {
    let mut v = Vec::new();
    let mut cur = String::new();
    let mut prev: Option<char> = None;
    for c in text.chars() {
        let boundary = !c.is_alphanumeric() || prev.is_some_and(|p| p.is_lowercase() && c.is_uppercase());
        if boundary && !cur.is_empty() {
            v.push(std::mem::take(&mut cur).to_lowercase());
        }
        if c.is_alphanumeric() {
            cur.push(c);
        }
        prev = Some(c);
    }
    if !cur.is_empty() {
        v.push(cur.to_lowercase());
    }
    v
}

fn keywords(t: &Value) -> String {
    let props = t["inputSchema"]["properties"].as_object().cloned().unwrap_or_default();
    props.iter().map(|(k, p)| format!("{k} {}", p["description"].as_str().unwrap_or(""))).collect::<Vec<_>>().join(" ")
}

/// The FTS5 peer over the same tools.
fn sqlite_catalog(tools: &[Value]) -> (Connection, f64) {
    let c = Connection::open_in_memory().expect("sqlite");
    c.execute_batch("CREATE VIRTUAL TABLE tools USING fts5(name UNINDEXED, nameterms, description, keywords, tokenize='porter unicode61');")
        .expect("fts5");
    let t = Instant::now();
    let tx = c.unchecked_transaction().unwrap();
    {
        let mut st =
            tx.prepare("INSERT INTO tools(name, nameterms, description, keywords) VALUES (?1, ?2, ?3, ?4)").unwrap();
        for t in tools {
            let name = t["name"].as_str().unwrap();
            st.execute((name, words(name).join(" "), t["description"].as_str().unwrap_or(""), keywords(t))).unwrap();
        }
    }
    tx.commit().unwrap();
    (c, t.elapsed().as_secs_f64())
}

const STOP: &[&str] = &[
    "a", "an", "the", "of", "to", "in", "on", "at", "for", "and", "or", "is", "are", "what", "how", "can", "you", "i",
    "me", "my", "with", "by", "from", "it", "its", "this", "that", "be", "if", "please",
];

fn fts_query(q: &str) -> String {
    let w: Vec<String> =
        words(q).into_iter().filter(|w| !STOP.contains(&w.as_str())).map(|w| format!("\"{w}\"")).collect();
    if w.is_empty() {
        "\"\"".into()
    } else {
        w.join(" OR ")
    }
}

fn sqlite_search(c: &Connection, q: &str) -> Vec<String> {
    let mut st = c
        .prepare_cached("SELECT name FROM tools WHERE tools MATCH ?1 ORDER BY bm25(tools, 0.0, 3.0, 1.0, 0.5) LIMIT ?2")
        .unwrap();
    st.query_map((fts_query(q), TOP as i64), |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap).collect()
}

fn od_search(e: &Tools, q: &str) -> Vec<String> {
    let v = e.search_tools(&SearchQuery { query: q.into(), limit: Some(TOP), ..Default::default() }).expect("search");
    v["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

fn latencies(mut f: impl FnMut(&str), queries: &[(String, Vec<String>)]) -> (f64, f64, f64) {
    let mut ms = Vec::with_capacity(queries.len() * REPEAT);
    for _ in 0..REPEAT {
        for (q, _) in queries {
            let t = Instant::now();
            f(q);
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    ms.sort_by(f64::total_cmp);
    (common::quantile(&ms, 0.5), common::quantile(&ms, 0.99), ms[ms.len() - 1])
}

fn recall(found: impl Fn(&str) -> Vec<String>, queries: &[(String, Vec<String>)], prefix: &str) -> [f64; 3] {
    let mut sums = [0.0; 3];
    for (q, expected) in queries {
        let got = found(q);
        for (i, k) in [1, 5, 10].into_iter().enumerate() {
            let top: Vec<&String> = got.iter().take(k).collect();
            let hit = expected.iter().filter(|x| top.iter().any(|g| **g == format!("{prefix}{x}"))).count();
            sums[i] += hit as f64 / expected.len() as f64;
        }
    }
    sums.map(|s| s / queries.len() as f64)
}

fn main() {
    let queries = tool_catalog::queries();
    println!("recall on the retrieval fixture ({} tools, {} queries)\n", tool_catalog::fixture().len(), queries.len());
    let tmp = common::tempdir();
    let e = engine(tmp.path());
    e.import_tools(&Value::Array(tool_catalog::fixture()), Some("bfcl"), "fixture").expect("import fixture");
    let od_r = recall(|q| od_search(&e, q), &queries, "bfcl.");
    drop(e);
    let fixture: Vec<Value> = tool_catalog::fixture();
    let (c, _) = sqlite_catalog(&fixture);
    let sq_r = recall(|q| sqlite_search(&c, q), &queries, "");
    println!("{:>12} | {:>9} | {:>9} | {:>9}", "", "recall@1", "recall@5", "recall@10");
    println!("{:>12} | {:>9.3} | {:>9.3} | {:>9.3}", "od", od_r[0], od_r[1], od_r[2]);
    println!("{:>12} | {:>9.3} | {:>9.3} | {:>9.3}", "SQLite FTS5", sq_r[0], sq_r[1], sq_r[2]);

    println!("\nsearch latency, {} queries × {REPEAT}, top {TOP} (ms)\n", queries.len());
    println!(
        "{:>7} | {:>8} | {:>8} | {:>8} | {:>11} | {:>11} | {:>10} | {:>10} | target p99 < 5 ms",
        "tools", "od p50", "od p99", "od max", "FTS5 p50", "FTS5 p99", "od import", "FTS5 load"
    );
    let mut rows = Vec::new();
    for &n in SIZES {
        let tmp = common::tempdir();
        let (e, import_s) = od_catalog(n, tmp.path());
        let (p50, p99, max) = latencies(|q| drop(od_search(&e, q)), &queries);
        let tools = tool_catalog::catalog(n);
        let (c, load_s) = sqlite_catalog(&tools);
        let (s50, s99, _) = latencies(|q| drop(sqlite_search(&c, q)), &queries);
        let pass = n < 100_000 || p99 < P99_TARGET_MS;
        println!(
            "{n:>7} | {p50:>8.3} | {p99:>8.3} | {max:>8.3} | {s50:>11.3} | {s99:>11.3} | {import_s:>9.1}s | {load_s:>9.1}s | {}",
            if n == 100_000 { common::verdict(pass) } else { "" }
        );
        rows.push(json!({ "tools": n, "od": { "p50Ms": p50, "p99Ms": p99, "maxMs": max, "importSecs": import_s },
                          "sqliteFts5": { "p50Ms": s50, "p99Ms": s99, "loadSecs": load_s } }));
        drop(e);
    }
    common::write_json(
        "tool_search",
        &json!({ "bench": "tool_search", "queries": queries.len(), "repeat": REPEAT, "top": TOP,
                 "recall": { "od": { "at1": od_r[0], "at5": od_r[1], "at10": od_r[2] },
                             "sqliteFts5": { "at1": sq_r[0], "at5": sq_r[1], "at10": sq_r[2] } },
                 "latency": rows, "target": { "p99MsAt100k": P99_TARGET_MS }, "machine": common::machine() }),
    );
}
