//! The layout is the architecture: the pure crates (`od-events`, `od-projections`,
//! `od-migrations`) never reach tokio, sled, axum, clap, an HTTP client or the clock. This test reads
//! `cargo metadata` and fails when a pure crate's normal/build dependency closure leaves its
//! allowlist (dev-dependencies are not part of the closure).

use serde_json::Value;
use std::collections::{BTreeSet, HashMap};

/// Crates any pure crate may depend on (serialisation, hashing, error derive, and their own deps).
const BASE: &[&str] = &[
    "arrayvec",
    "blake3",
    "bytecheck",
    "bytecheck_derive",
    "bytes",
    "cc",
    "cfg-if",
    "constant_time_eq",
    "cpufeatures",
    "equivalent",
    "find-msvc-tools",
    // getrandom, libc, rand_core: only through `cargo metadata`'s rkyv -> uuid edge (rkyv's weak
    // `uuid-1?/std` feature; never built — `cargo tree -p od-events` has no uuid), which reaches
    // getrandom because rmcp (the MCP SDK in `od`) turns on uuid's `v4` workspace-wide.
    "getrandom",
    "hashbrown",
    "indexmap",
    "libc",
    "munge",
    "munge_macro",
    "proc-macro2",
    "ptr_meta",
    "ptr_meta_derive",
    "quote",
    "rancor",
    "rand_core",
    "rend",
    "rkyv",
    "rkyv_derive",
    "serde",
    "serde_core",
    "serde_derive",
    "shlex",
    "simdutf8",
    "syn",
    "thiserror",
    "thiserror-impl",
    "tinyvec",
    "unicode-ident",
    "uuid",
];

fn closure(nodes: &HashMap<String, Value>, names: &HashMap<String, String>, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![root.to_string()];
    while let Some(id) = stack.pop() {
        for d in nodes[&id]["deps"].as_array().unwrap() {
            let normal_or_build =
                d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null() || k["kind"] == "build");
            let pkg = d["pkg"].as_str().unwrap().to_string();
            if normal_or_build && seen.insert(names[&pkg].clone()) {
                stack.push(pkg);
            }
        }
    }
    seen
}

#[test]
fn pure_crates_stay_inside_their_allowlists() {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--filter-platform", "x86_64-unknown-linux-gnu"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: HashMap<String, String> = m["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap().to_string(), p["name"].as_str().unwrap().to_string()))
        .collect();
    let nodes: HashMap<String, Value> = m["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap().to_string(), n.clone()))
        .collect();
    let allow = |extra: &[&str]| -> BTreeSet<String> { BASE.iter().chain(extra).map(|s| s.to_string()).collect() };
    let rules = [
        ("od-events", allow(&[])),
        // Records are small JSON values (`projections/src/records.rs`).
        ("od-projections", allow(&["od-events", "serde_json", "itoa", "memchr", "ryu", "zmij", "foldhash"])),
        ("od-migrations", allow(&["od-events"])),
    ];
    for (krate, allowed) in rules {
        let id = names.iter().find(|(_, n)| *n == krate).map(|(id, _)| id.clone()).expect("crate in workspace");
        let outside: Vec<_> = closure(&nodes, &names, &id).difference(&allowed).cloned().collect();
        assert!(outside.is_empty(), "{krate} depends on crates outside its allowlist: {outside:?}");
    }
}
