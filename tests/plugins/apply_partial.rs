//! A partial apply (the web UI's Home, a form being filled in): blank required inputs are listed
//! in `missingInputs` and keep their `{{placeholder}}` in the brief, defaults are filled, and the
//! answer is otherwise the apply's; without `partial` the same request is 422 `missing-input`, and
//! a run with the inputs still missing is refused. Nothing is written either way.

use crate::common;

use common::harness::{write_plugin, Engine};
use serde_json::{json, Value};

const NOW: i64 = 1_800_000_000_000;

#[test]
fn a_partial_apply_keeps_blank_required_inputs_as_placeholders_and_a_run_still_refuses_them() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let dir = tmp.path().join("card");
    write_plugin(&dir, "card", "1.0.0", json!([ { "id": "generate", "atoms": ["file-write"] } ]), "Make a card.");
    let path = dir.join("open-design.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["od"]["useCase"]["query"] = json!("A {{tone}} card for {{name}}");
    m["od"]["inputs"] = json!([
        { "name": "name", "type": "string", "required": true },
        { "name": "tone", "type": "string", "default": "warm" }
    ]);
    std::fs::write(&path, m.to_string()).unwrap();
    e.install(&dir);
    let before = e.get("/api/log/stats").1["lastSeq"].clone();

    let (code, a) = e.post("/api/plugins/card/apply", json!({ "partial": true }));
    assert_eq!(code, 200, "{a}");
    assert_eq!(a["query"], "A warm card for {{name}}");
    assert_eq!(a["missingInputs"], json!(["name"]));
    assert_eq!(a["inputs"], json!({ "tone": "warm" }));
    assert!(a["contextItems"].as_array().is_some_and(|c| !c.is_empty()), "{a}");

    let (code, a) = e.post("/api/plugins/card/apply", json!({ "partial": true, "inputs": { "name": "Ada" } }));
    assert_eq!((code, a["query"].clone(), a["missingInputs"].clone()), (200, json!("A warm card for Ada"), json!([])));
    let (code, full) = e.post("/api/plugins/card/apply", json!({ "inputs": { "name": "Ada" } }));
    assert_eq!(code, 200);
    assert!(full.get("missingInputs").is_none(), "a plain apply's answer is unchanged: {full}");
    assert_eq!(full["manifestSourceDigest"], a["manifestSourceDigest"]);

    let (code, err) = e.post("/api/plugins/card/apply", json!({}));
    assert_eq!((code, err["error"]["code"].clone()), (422, json!("missing-input")), "{err}");
    let (code, err) = e.post("/api/plugins/card/apply", json!({ "partial": "yes" }));
    assert_eq!(code, 400, "a partial that is not a boolean is refused: {err}");
    let (code, err) = e.post("/api/runs", json!({ "pluginId": "card", "partial": true }));
    assert!(code == 422 || code == 400, "a run never applies partially: {code} {err}");
    let after = e.get("/api/log/stats").1["lastSeq"].clone();
    assert_eq!(before, after, "nothing was written");
}
