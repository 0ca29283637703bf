//! The GenUI renderer's unit tests (`src/http/ui/assets/genui.js`, tests in tests/ui_js/genui.test.mjs)
//! over the surfaces of this repository's manifests, run with `node --test`; node's report is the
//! failure message.

use crate::common::ui_node;

use std::time::Duration;

#[test]
fn genui_renderer_unit_tests_pass_under_node() {
    ui_node::run(&["--test", "tests/ui_js/genui.test.mjs"], &[], Duration::from_secs(120));
}
