//! Conformance (reads ../shared): the GenUI renderer over every surface declared in the shared
//! corpus (tests/ui_js/conformance_genui.test.mjs under `node --test`). Run with
//! `cargo test --test conformance` (`.ci/run` does); a missing ../shared fails, never skips.

use crate::common::ui_node;

use std::time::Duration;

#[test]
fn genui_renderer_renders_every_shared_corpus_surface() {
    ui_node::run(&["--test", "tests/ui_js/conformance_genui.test.mjs"], &[], Duration::from_secs(120));
}
