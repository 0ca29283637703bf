//! The conformance suite over the real-world corpora in ../shared/fixtures (not part of a clone):
//! `cargo test --test conformance` (.ci/run does). Every test fails loudly when a corpus is missing.
//! One binary for the suite (each file a module), so od is linked once for all of it.

#[path = "../common/mod.rs"]
mod common;

mod marketplaces;
mod mcp;
mod plugin_load;
mod tools;
mod ui_genui;

/// A path below the shared fixtures: `OD_SHARED_FIXTURES` when set (CI runs this binary from the
/// build of a clone that has no ../shared beside it), else `../shared/fixtures` beside the checkout.
pub fn shared_fixture(rel: &str) -> String {
    let root = std::env::var("OD_SHARED_FIXTURES")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures").to_string());
    if rel.is_empty() {
        root
    } else {
        format!("{root}/{rel}")
    }
}
