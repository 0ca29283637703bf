//! Upstream parity details (issue 17, item 7): `OD_TRUST_DEFAULT`, `OD_TRUSTED_PLUGINS`,
//! `OD_GENUI_PROJECT_TTL_DAYS`, `od project create --skill --design-system` (and `skillId`,
//! `designSystemId` on `POST /api/projects`), `project info`'s top-level `cwd`,
//! `od plugin apply --project` marking what the project already answered, and
//! `od marketplace trust --trust`. One test: it sets an environment variable for the engine it
//! starts in this process.

use crate::common;

use common::harness::{od_cli, write_plugin, Engine};
use serde_json::{json, Value};
use std::process::Command;

const NOW: i64 = 1_800_000_000_000;

fn ok_json(out: std::process::Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or("null")).unwrap()
}

#[test]
fn parity_details() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("brand");
    write_plugin(&dir, "brand", "1.0.0", json!([ { "id": "generate", "atoms": ["file-write"] } ]), "Use the brand.");
    let path = dir.join("open-design.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["od"]["genui"] = json!({ "surfaces": [ { "id": "palette", "kind": "form", "persist": "project",
        "prompt": "Brand palette?", "schema": { "type": "object", "properties": { "primary": { "type": "string" } } } } ] });
    std::fs::write(&path, serde_json::to_string_pretty(&m).unwrap()).unwrap();

    // OD_TRUST_DEFAULT=restricted: a local folder installs restricted; OD_TRUSTED_PLUGINS wins.
    let d1 = tmp.path().join("d1");
    let od = |data: &std::path::Path, env: &[(&str, &str)], args: &[&str]| {
        let mut c = Command::new(common::harness::OD);
        c.args(args).arg("--data-dir").arg(data).env_remove("OD_DAEMON_URL");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let v = ok_json(od(&d1, &[("OD_TRUST_DEFAULT", "restricted")], &["plugin", "install", dir.to_str().unwrap()]));
    assert_eq!(v["data"]["plugin"]["trust"], "restricted", "{v}");
    let d2 = tmp.path().join("d2");
    let env = [("OD_TRUST_DEFAULT", "restricted"), ("OD_TRUSTED_PLUGINS", "other, brand")];
    let v = ok_json(od(&d2, &env, &["plugin", "install", dir.to_str().unwrap(), "--restricted"]));
    assert_eq!(v["data"]["plugin"]["trust"], "trusted", "{v}");

    // A project for a skill and a design system (upstream's fields), and its cwd.
    let d3 = tmp.path().join("d3");
    ok_json(od_cli(&d3, &["plugin", "install", dir.to_str().unwrap()]));
    let v = ok_json(od_cli(
        &d3,
        &["project", "create", "--name", "b", "--skill", "brand", "--design-system", "neon", "--json"],
    ));
    let project = v["project"]["id"].as_str().or(v["projectId"].as_str()).unwrap().to_string();
    let info = ok_json(od_cli(&d3, &["project", "info", &project, "--json"]));
    assert_eq!(info["project"]["metadata"]["skillId"], "brand", "{info}");
    assert_eq!(info["project"]["metadata"]["designSystemId"], "neon", "{info}");
    assert!(
        info["project"]["appliedPluginSnapshotId"].is_string() || info["project"]["pinnedSnapshotId"].is_string(),
        "{info}"
    );
    let cwd = info["cwd"].as_str().unwrap();
    assert!(std::path::Path::new(cwd).is_dir() && cwd == info["project"]["dir"].as_str().unwrap(), "{info}");

    // Project-remembered answers expire after OD_GENUI_PROJECT_TTL_DAYS.
    std::env::set_var("OD_GENUI_PROJECT_TTL_DAYS", "2");
    let e = Engine::start(&tmp.path().join("d4"), NOW);
    e.install(&dir);
    let (_, p) = e.post("/api/projects", json!({ "name": "p", "skillId": "brand", "designSystemId": "neon" }));
    let project = p["project"]["id"].as_str().unwrap().to_string();
    assert_eq!(p["project"]["metadata"]["designSystemId"], "neon", "{p}");
    let run = e.start_run(json!({ "projectId": project, "pluginId": "brand" }));
    let w = ureq::get(&format!("{}/api/runs/{run}/watch", e.url)).call().unwrap();
    for line in std::io::BufRead::lines(std::io::BufReader::new(w.into_reader())) {
        if line.unwrap().contains("genui_surface_request") {
            break;
        }
    }
    let (code, v) =
        e.post(&format!("/api/runs/{run}/genui/palette/respond"), json!({ "value": { "primary": "#f60" } }));
    assert_eq!(code, 200, "{v}");
    let expires = v["surface"]["expiresAt"].as_i64().or(v["expiresAt"].as_i64()).unwrap_or_else(|| panic!("{v}"));
    assert_eq!(expires, e.clock_now() + 2 * 86_400_000);
    e.watch(&run);

    // Apply in the project: what it answered is marked; an unknown project is refused.
    let (code, a) = e.post("/api/plugins/brand/apply", json!({ "projectId": project }));
    assert_eq!(code, 200, "{a}");
    assert_eq!(a["genuiSurfaces"][0]["remembered"], true, "{a}");
    let (_, p2) = e.post("/api/projects", json!({ "name": "q" }));
    let (_, a2) = e.post("/api/plugins/brand/apply", json!({ "projectId": p2["project"]["id"] }));
    assert_eq!(a2["genuiSurfaces"][0]["remembered"], false, "{a2}");
    let (code, _) = e.post("/api/plugins/brand/apply", json!({ "projectId": "nope" }));
    assert_eq!(code, 404);
    // After the TTL the answer is not reused.
    e.clock.advance(3 * 86_400_000);
    let (_, a3) = e.post("/api/plugins/brand/apply", json!({ "projectId": project }));
    assert_eq!(a3["genuiSurfaces"][0]["remembered"], false, "{a3}");

    // `marketplace trust --trust`.
    let index = tmp.path().join("m.json");
    std::fs::write(&index, r#"{"specVersion":"1.0.0","name":"m","version":"1.0.0","plugins":[]}"#).unwrap();
    let v = ok_json(od_cli(&d3, &["marketplace", "add", index.to_str().unwrap(), "--json"]));
    let id = v["marketplace"]["id"].as_str().unwrap().to_string();
    let v = ok_json(od_cli(&d3, &["marketplace", "trust", &id, "--trust", "trusted", "--json"]));
    assert_eq!(v["marketplace"]["trust"], "trusted", "{v}");
}
