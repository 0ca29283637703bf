//! Locales (issue 17, spec §5 `title_i18n`, `useCase.query`): listings, a plugin's page, apply and
//! the surfaces a run raises are localized in the spec's order — the requested locale, its base
//! language, `en`, the plain value, then the first translation — while the manifest (and so the
//! snapshot's digest inputs) stays as written.

use crate::common;

use common::harness::{write_plugin, Engine, OD};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};

const NOW: i64 = 1_800_000_000_000;

fn plugin(e: &Engine, dir: &std::path::Path) {
    write_plugin(dir, "grain", "1.0.0", json!([ { "id": "generate", "atoms": ["file-write"] } ]), "Make it warm.");
    let path = dir.join("open-design.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["title"] = json!("Warm Grain");
    m["title_i18n"] = json!({ "en": "Warm Grain", "zh-CN": "暖色颗粒", "ko": "따뜻한 그레인" });
    m["description_i18n"] = json!({ "en": "A warm film look.", "zh": "温暖的胶片质感。" });
    m["od"]["useCase"]["query"] = json!({ "en": "Make {{topic}} warm", "zh": "让{{topic}}变得温暖" });
    m["od"]["genui"] = json!({ "surfaces": [ { "id": "tone", "kind": "choice", "persist": "run",
        "prompt": "Which tone?", "prompt_i18n": { "zh": "哪种色调？" },
        "schema": { "type": "string", "enum": ["amber", "rose"] } } ] });
    std::fs::write(&path, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    e.install(dir);
}

fn listed_title(e: &Engine, locale: Option<&str>) -> (String, Value) {
    let q = locale.map(|l| format!("?locale={l}")).unwrap_or_default();
    let (code, v) = e.get(&format!("/api/plugins{q}"));
    assert_eq!(code, 200, "{v}");
    let p = v["plugins"].as_array().unwrap().iter().find(|p| p["id"] == "grain").unwrap().clone();
    (p["title"].as_str().unwrap().to_string(), p["description"].clone())
}

#[test]
fn listings_apply_and_surfaces_follow_the_locale() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    plugin(&e, &tmp.path().join("grain"));

    assert_eq!(listed_title(&e, Some("zh-CN")), ("暖色颗粒".into(), json!("温暖的胶片质感。")));
    assert_eq!(listed_title(&e, Some("ko-KR")).0, "따뜻한 그레인", "the base language");
    assert_eq!(listed_title(&e, Some("zh-TW")), ("Warm Grain".into(), json!("温暖的胶片质感。")), "no zh title: en");
    assert_eq!(listed_title(&e, Some("fr")), ("Warm Grain".into(), json!("A warm film look.")));
    assert_eq!(listed_title(&e, None).0, "Warm Grain");
    let (_, one) = e.get("/api/plugins/grain?locale=ko");
    assert_eq!(one["plugin"]["title"], "따뜻한 그레인");
    // The manifest is kept as written.
    assert!(one["plugin"]["manifest"]["title_i18n"].is_object());

    // The CLI's table, for people.
    let out = std::process::Command::new(OD)
        .args(["plugin", "list", "--locale", "zh-CN", "--daemon-url", &e.url])
        .env("OD_OUTPUT", "human")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("暖色颗粒"), "{text}");

    let (code, a) = e.post("/api/plugins/grain/apply", json!({ "locale": "zh-CN", "inputs": { "topic": "咖啡" } }));
    assert_eq!(code, 200, "{a}");
    assert_eq!(a["query"], "让咖啡变得温暖");
    assert_eq!(a["appliedPlugin"]["pluginTitle"], "暖色颗粒");
    assert_eq!(a["genuiSurfaces"][0]["prompt"], "哪种色调？");
    let (_, en) = e.post("/api/plugins/grain/apply", json!({ "inputs": { "topic": "coffee" } }));
    assert_eq!(
        (en["query"].clone(), en["genuiSurfaces"][0]["prompt"].clone()),
        (json!("Make coffee warm"), json!("Which tone?"))
    );

    // A run in zh asks its surface in zh.
    let id = e.start_run(json!({ "pluginId": "grain", "locale": "zh", "inputs": { "topic": "茶" } }));
    let r = ureq::get(&format!("{}/api/runs/{id}/watch", e.url)).call().unwrap();
    let mut asked = Value::Null;
    for line in BufReader::new(r.into_reader()).lines() {
        let line = line.unwrap();
        if line.contains("genui_surface_request") {
            asked = serde_json::from_str(&line).unwrap();
            break;
        }
    }
    assert_eq!(asked["data"]["payload"]["prompt"], "哪种色调？", "{asked}");
}
