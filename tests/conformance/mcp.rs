//! Conformance (reads ../shared: the BFCL-derived tool-retrieval catalog, 443 real-world tools).
//! `od mcp` over stdio with the real catalog imported: the disclosed session ranks it, stays flat
//! (what the model is given does not grow with it) and pages it; the flat catalog lists every tool.
//! The same on the project's own catalog, and the real MCP clients, are in `mcp.rs`. Run with
//! `cargo test --test conformance` (`.ci/run` does); a missing ../shared fails, never skips.

use crate::common;

use serde_json::Value;
use std::path::Path;

static FIXTURE: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| crate::shared_fixture("tool-retrieval/catalog.json"));

fn corpus() -> Value {
    assert!(
        Path::new(&*FIXTURE).is_file(),
        "the conformance corpus is missing: {} (the conformance suite needs ../shared/fixtures beside \
         the checkout; `cargo test --workspace` does not)",
        *FIXTURE
    );
    let catalog: Value = serde_json::from_str(&std::fs::read_to_string(&*FIXTURE).unwrap()).unwrap();
    assert_eq!(catalog.as_array().unwrap().len(), 443);
    catalog
}

#[test]
fn disclosed_session_lists_describes_once_calls_refuses_and_stays_flat() {
    common::mcp::disclosed_session_stays_flat(&corpus(), "bfcl");
}

#[test]
fn the_flat_catalog_pages_every_tool_and_calls_them_directly() {
    common::mcp::flat_catalog_pages_every_tool(&corpus(), "bfcl");
}
