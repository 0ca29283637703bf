//! Atom-declared signals and workers (issue 17, spec §23.3.1): `until` may name only the signals
//! its stage's atoms declare (doctor refuses the rest, naming the atom that would declare it);
//! `code-import` writes `code/index.json` for real; `diff-review` raises its decision surface at its
//! own stage and turns the answer into `user.confirmed`, which ends its devloop.

use crate::common;

use common::harness::{od_cli, of, write_plugin, Engine};
use serde_json::{json, Value};

const NOW: i64 = 1_800_000_000_000;

#[test]
fn until_names_only_signals_the_stage_atoms_declare() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("p");
    write_plugin(
        &p,
        "p",
        "1.0.0",
        json!([ { "id": "draft", "atoms": ["file-write"], "repeat": true, "until": "critique.score>=4 || iterations>=3" },
                { "id": "check", "atoms": ["patch-edit", "build-test"], "repeat": true, "until": "build.passing && user.confirmed" } ]),
        "x",
    );
    let out = od_cli(&tmp.path().join("data"), &["plugin", "doctor", p.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let found: Vec<(String, String)> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "pipeline.until-signal-undeclared")
        .map(|d| (d["pointer"].as_str().unwrap().to_string(), d["message"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(found.len(), 2, "{v}");
    // The dotted code keeps od's earlier name as an alias.
    let d =
        v["diagnostics"].as_array().unwrap().iter().find(|d| d["code"] == "pipeline.until-signal-undeclared").unwrap();
    assert_eq!(d["aliases"], json!(["until-signal-undeclared"]));
    assert_eq!(found[0].0, "/od/pipeline/stages/0/until");
    assert!(
        found[0].1.contains("\"critique.score\"") && found[0].1.contains("critique-theater atom declares it"),
        "{}",
        found[0].1
    );
    assert_eq!(found[1].0, "/od/pipeline/stages/1/until");
    assert!(found[1].1.contains("\"user.confirmed\"") && found[1].1.contains("diff-review"), "{}", found[1].1);
    assert_eq!(v["ok"], false);
    // Such a plugin does not install.
    let out = od_cli(&tmp.path().join("data"), &["plugin", "install", p.to_str().unwrap()]);
    assert!(!out.status.success());
}

#[test]
fn code_import_indexes_and_diff_review_confirms() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let dir = tmp.path().join("migrate");
    write_plugin(
        &dir,
        "migrate",
        "1.0.0",
        json!([ { "id": "import", "atoms": ["code-import"] },
                { "id": "review", "atoms": ["diff-review"], "repeat": true, "until": "user.confirmed || iterations>=3" } ]),
        "Migrate the code.",
    );
    e.install(&dir);
    let (code, p) = e.post("/api/projects", json!({ "name": "legacy" }));
    assert_eq!(code, 200, "{p}");
    let project = p["project"]["id"].as_str().unwrap().to_string();
    let pdir = std::path::PathBuf::from(p["project"]["dir"].as_str().unwrap());
    std::fs::create_dir_all(pdir.join("src")).unwrap();
    std::fs::write(pdir.join("src/app.tsx"), "export const A = 1;\nexport const B = 2;\n").unwrap();
    std::fs::write(pdir.join("styles.css"), "body{}").unwrap();

    let id = e.start_run(json!({ "projectId": project, "pluginId": "migrate" }));
    // The review surface is raised at the review stage (not at the run's start).
    let seen = e.watch_until(&id, "genui_surface_request");
    let req = seen.last().unwrap();
    assert_eq!(req["data"]["surfaceId"], "__auto_diff_review_review", "{seen:?}");
    assert!(
        seen.iter().any(|v| v["event"] == "pipeline_stage_completed" && v["data"]["stageId"] == "import"),
        "{seen:?}"
    );

    let index: Value = serde_json::from_slice(&std::fs::read(pdir.join("code/index.json")).unwrap()).unwrap();
    let paths: Vec<&str> = index["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"src/app.tsx") && paths.contains(&"styles.css"), "{index}");
    let app = index["files"].as_array().unwrap().iter().find(|f| f["path"] == "src/app.tsx").unwrap();
    assert_eq!((app["lines"].clone(), app["language"].clone()), (json!(2), json!("typescript")));
    assert!(seen.iter().any(|v| v["event"] == "artifact" && v["data"]["path"] == "code/index.json"), "{seen:?}");

    let (code, v) = e.post(
        &format!("/api/runs/{id}/genui/__auto_diff_review_review/respond"),
        json!({ "value": { "decision": "accept" } }),
    );
    assert_eq!(code, 200, "{v}");
    let ev = e.watch(&id);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:?}");
    let confirmed: Vec<&Value> = of(&ev, "signal").into_iter().filter(|s| s["name"] == "user.confirmed").collect();
    assert_eq!(confirmed.len(), 1, "{ev:?}");
    assert_eq!(confirmed[0]["value"], true);
    let rows: Vec<&Value> = of(&ev, "devloop_iteration").into_iter().filter(|r| r["stageId"] == "review").collect();
    assert_eq!(rows.len(), 1, "{ev:?}");
    assert_eq!(rows[0]["termination"], "until-satisfied", "{:?}", rows[0]);
    assert_eq!(rows[0]["matched"], "user.confirmed==true", "{:?}", rows[0]);
}
