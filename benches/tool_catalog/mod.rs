//! Tool catalogs for `benches/tool_tokens` and `benches/tool_search`: od's own tools, the
//! retrieval fixture (`../shared/fixtures/tool-retrieval/`: 443 BFCL tools, 200 queries with their
//! expected tools), and deterministic synthetic tools beyond that (fixture tools under new
//! namespaces, each description extended with words drawn from the fixture's vocabulary, so the
//! index sees realistic text and a growing vocabulary).
#![allow(dead_code)]

use serde_json::{json, Value};
use std::path::Path;

pub const FIXTURE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/tool-retrieval");

/// The fixture's tools, as listed (MCP shape: name, description, inputSchema).
pub fn fixture() -> Vec<Value> {
    let raw = std::fs::read_to_string(Path::new(FIXTURE_DIR).join("catalog.json")).expect("fixture catalog");
    serde_json::from_str(&raw).expect("fixture json")
}

/// `(query, expected tool names)` of the fixture.
pub fn queries() -> Vec<(String, Vec<String>)> {
    let raw = std::fs::read_to_string(Path::new(FIXTURE_DIR).join("queries.jsonl")).expect("fixture queries");
    raw.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("query json");
            let expected = v["expected"].as_array().unwrap().iter().map(|e| e.as_str().unwrap().to_string()).collect();
            (v["query"].as_str().unwrap().to_string(), expected)
        })
        .collect()
}

/// od's own tools in MCP shape.
pub fn builtin() -> Vec<Value> {
    od::tools::builtin::descriptors()
        .into_iter()
        .map(|d| json!({ "name": d["name"], "description": d["description"], "inputSchema": d["inputSchema"] }))
        .collect()
}

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// `n` tools: od's own first, then the fixture's (`bfcl.`), then synthetic ones (`gNNN.`).
pub fn catalog(n: usize) -> Vec<Value> {
    let mut out: Vec<Value> = builtin().into_iter().take(n).collect();
    let fx = fixture();
    let vocab: Vec<String> = fx
        .iter()
        .flat_map(|t| {
            t["description"].as_str().unwrap_or("").split_whitespace().map(str::to_string).collect::<Vec<_>>()
        })
        .filter(|w| w.len() > 3 && w.chars().all(char::is_alphabetic))
        .collect();
    let mut rng = Lcg(42);
    let mut i = 0usize;
    while out.len() < n {
        let t = &fx[i % fx.len()];
        let round = i / fx.len();
        let mut d = t.clone();
        if round == 0 {
            d["name"] = json!(format!("bfcl.{}", t["name"].as_str().unwrap()));
        } else {
            d["name"] = json!(format!("g{round:03}.{}", t["name"].as_str().unwrap()));
            let extra: Vec<&str> = (0..4).map(|_| vocab[rng.next() as usize % vocab.len()].as_str()).collect();
            d["description"] = json!(format!("{} Also: {}.", t["description"].as_str().unwrap(), extra.join(" ")));
        }
        out.push(d);
        i += 1;
    }
    out
}
