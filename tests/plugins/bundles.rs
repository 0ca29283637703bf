//! Bundle plugins (issue 17, spec §17.3): a plugin with `od.kind: "bundle"` fans its nested
//! skills, design systems and craft out into the registry under namespaced ids (`kit/deck`), each
//! usable on its own — applied, run, referenced by another plugin's context — and changed only
//! with its bundle. Also the installed-plugin doctor's `context.unresolved` and `digest.drift`.

use crate::common;

use common::harness::{write_plugin, Engine};
use serde_json::{json, Value};
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;

fn member(root: &Path, rel: &str, name: &str, version: &str) {
    let dir = root.join(rel);
    write_plugin(&dir, name, version, json!([ { "id": "generate", "atoms": ["file-write"] } ]), "Do the part.");
}

fn bundle(root: &Path) {
    std::fs::create_dir_all(root).unwrap();
    std::fs::write(root.join("SKILL.md"), "---\nname: kit\ndescription: A kit of skills.\n---\nThe kit.\n").unwrap();
    let m = json!({ "specVersion": "1.0.0", "name": "kit", "version": "1.0.0", "title": "Kit",
                    "description": "A kit of skills.", "od": { "kind": "bundle" } });
    std::fs::write(root.join("open-design.json"), m.to_string()).unwrap();
    member(root, "skills/deck", "deck", "1.0.0");
    member(root, "skills/notes", "notes", "1.0.0");
    member(root, "design-systems/neon", "neon", "1.0.0");
    // Not members: no SKILL.md or open-design.json, a hidden folder, a folder outside the groups.
    std::fs::create_dir_all(root.join("skills/empty")).unwrap();
    member(root, "skills/.draft", "draft", "1.0.0");
    member(root, "docs/guide", "guide", "1.0.0");
}

fn install_lines(e: &Engine, dir: &Path) -> Value {
    let r = ureq::post(&format!("{}/api/plugins/install", e.url)).send_json(json!({ "source": dir })).unwrap();
    let body = r.into_string().unwrap();
    serde_json::from_str(body.lines().last().unwrap()).unwrap()
}

fn ids(e: &Engine) -> Vec<String> {
    let (_, v) = e.get("/api/plugins");
    v["plugins"].as_array().unwrap().iter().filter_map(|p| p["id"].as_str().map(str::to_string)).collect()
}

#[test]
fn a_bundle_fans_out_into_namespaced_plugins() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let kit = tmp.path().join("kit");
    bundle(&kit);

    let done = install_lines(&e, &kit);
    assert_eq!(done["event"], "success", "{done}");
    assert_eq!(done["data"]["members"], json!(["kit/deck", "kit/notes", "kit/neon"]));
    let listed = ids(&e);
    for id in ["kit", "kit/deck", "kit/notes", "kit/neon"] {
        assert!(listed.contains(&id.to_string()), "{id} in {listed:?}");
    }
    assert!(!listed.iter().any(|i| i.contains("draft") || i.contains("guide") || i.contains("empty")), "{listed:?}");
    let (code, deck) = e.get("/api/plugins/kit%2Fdeck");
    assert_eq!(code, 200, "{deck}");
    assert_eq!(deck["plugin"]["trust"], "trusted");
    assert_eq!(deck["plugin"]["manifest"]["name"], "kit/deck");
    // Installing the same bundle again changes nothing.
    assert_eq!(install_lines(&e, &kit)["data"]["unchanged"], true);

    // A member applies and runs on its own (the CLI encodes the id into the path).
    let (code, applied) = e.od_json(&["plugin", "apply", "kit/deck"]);
    assert_eq!(code, 0, "{applied}");
    assert_eq!(applied["appliedPlugin"]["pluginId"], "kit/deck");
    let (run_id, ev) = e.run(json!({ "pluginId": "kit/deck", "inputs": { "topic": "tea" } }));
    let end = ev.last().unwrap();
    assert_eq!(end["data"]["status"], "succeeded", "{run_id}: {end}");

    // Another plugin references members individually: they resolve, and join the digest.
    let talk = tmp.path().join("talk");
    write_plugin(&talk, "talk", "1.0.0", json!([ { "id": "generate", "atoms": ["file-write"] } ]), "Talk.");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(talk.join("open-design.json")).unwrap()).unwrap();
    m["od"]["context"] = json!({ "skills": [ { "ref": "kit/deck" }, { "ref": "kit/missing" } ],
                                 "designSystem": { "ref": "kit/neon", "primary": true } });
    std::fs::write(talk.join("open-design.json"), m.to_string()).unwrap();
    e.install(&talk);
    let (code, a) = e.post("/api/plugins/talk/apply", json!({}));
    assert_eq!(code, 200, "{a}");
    let chip = |id: &str| a["contextItems"].as_array().unwrap().iter().find(|i| i["id"] == id).cloned().unwrap();
    assert_eq!(
        (chip("kit/deck")["pluginId"].clone(), chip("kit/deck")["pluginVersion"].clone()),
        (json!("kit/deck"), json!("1.0.0"))
    );
    assert_eq!(chip("kit/neon")["kind"], "design-system");
    assert!(chip("kit/missing").get("pluginId").is_none());
    let refs: Vec<&str> = a["resolvedContextRefs"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(refs.iter().any(|r| r.starts_with("skill: kit/deck@1.0.0#")), "{refs:?}");
    assert!(refs.iter().any(|r| r.starts_with("design-system: kit/neon@1.0.0#")), "{refs:?}");
    let (_, doc) = e.get("/api/plugins/talk/doctor");
    let unresolved: Vec<&Value> =
        doc["diagnostics"].as_array().unwrap().iter().filter(|d| d["code"] == "context.unresolved").collect();
    assert_eq!(unresolved.len(), 1, "{doc}");
    assert!(unresolved[0]["message"].as_str().unwrap().contains("kit/missing"));

    // A member changes only with its bundle.
    for (args, what) in
        [(vec!["plugin", "uninstall", "kit/deck"], "uninstall"), (vec!["plugin", "upgrade", "kit/deck"], "upgrade")]
    {
        let (code, err) = e.od_json(&args);
        assert_eq!(code, 1, "{what}: {err}");
        assert_eq!(err["error"]["code"], "bundle-member", "{what}: {err}");
        assert_eq!(err["error"]["data"]["bundleId"], "kit");
    }

    // The installed copy edited on disk: the doctor reports the drift.
    let (_, d0) = e.get("/api/plugins/kit%2Fdeck/doctor");
    assert!(!d0["diagnostics"].to_string().contains("digest.drift"), "{d0}");
    let installed = tmp.path().join("data").join(deck["plugin"]["fsPath"].as_str().unwrap());
    std::fs::write(installed.join("SKILL.md"), "---\nname: deck\ndescription: Tampered.\n---\nTampered.\n").unwrap();
    let (_, d1) = e.get("/api/plugins/kit%2Fdeck/doctor");
    assert!(d1["diagnostics"].as_array().unwrap().iter().any(|d| d["code"] == "digest.drift"), "{d1}");

    // A bad member fails the whole bundle, named, with nothing written.
    let before = e.get("/api/plugins").1;
    member(&kit, "craft/bad", "bad", "1.0.0");
    std::fs::write(kit.join("craft/bad/open-design.json"), "{ not json").unwrap();
    let failed = install_lines(&e, &kit);
    assert_eq!(failed["event"], "error", "{failed}");
    assert!(failed["data"]["error"]["message"].as_str().unwrap().contains("craft/bad"), "{failed}");
    assert_eq!(e.get("/api/plugins").1, before, "nothing was installed");
    let (_, doc) = e.post("/api/plugins/doctor", json!({ "path": kit }));
    assert_eq!(doc["ok"], false);
    assert!(
        doc["diagnostics"].as_array().unwrap().iter().any(|d| d["file"].as_str().unwrap().starts_with("craft/bad/")),
        "{doc}"
    );
    std::fs::remove_dir_all(kit.join("craft")).unwrap();

    // A reinstall drops a member the bundle no longer carries and upgrades the others.
    std::fs::remove_dir_all(kit.join("skills/notes")).unwrap();
    member(&kit, "skills/deck", "deck", "1.1.0");
    let again = install_lines(&e, &kit);
    assert_eq!(again["data"]["members"], json!(["kit/deck", "kit/neon"]), "{again}");
    assert_eq!(e.get("/api/plugins/kit%2Fnotes").0, 404);
    assert_eq!(e.get("/api/plugins/kit%2Fdeck").1["plugin"]["version"], "1.1.0");

    // A bundle that stops being one keeps no members.
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(kit.join("open-design.json")).unwrap()).unwrap();
    m["od"]["kind"] = json!("scenario");
    std::fs::write(kit.join("open-design.json"), m.to_string()).unwrap();
    let plain = install_lines(&e, &kit);
    assert_eq!((plain["event"].clone(), plain["data"]["members"].clone()), (json!("success"), json!([])), "{plain}");
    assert!(!ids(&e).iter().any(|i| i.starts_with("kit/")), "{:?}", ids(&e));
    m["od"]["kind"] = json!("bundle");
    std::fs::write(kit.join("open-design.json"), m.to_string()).unwrap();
    assert_eq!(install_lines(&e, &kit)["data"]["members"], json!(["kit/deck", "kit/neon"]));

    // Uninstalling the bundle removes every member and their files.
    let (code, _) = e.od_json(&["plugin", "uninstall", "kit"]);
    assert_eq!(code, 0);
    assert!(!ids(&e).iter().any(|i| i == "kit" || i.starts_with("kit/")));
    assert!(!tmp.path().join("data/plugins/kit").exists());
}
