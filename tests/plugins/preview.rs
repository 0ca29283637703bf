//! A plugin's preview surface and the context an apply returns (issue 17, spec §8, §9.2): the
//! preview entry, an example and an asset are served read-only with the sandboxed preview CSP;
//! traversal, hidden and credential-like paths are refused; apply lists the context chips and the
//! asset refs, whose `src` the preview endpoint serves.

use crate::common;

use common::harness::{write_plugin, Engine};
use serde_json::{json, Value};

const NOW: i64 = 1_800_000_000_000;

fn get(e: &Engine, path: &str) -> (u16, String, Option<String>, Option<String>) {
    match ureq::get(&format!("{}{path}", e.url)).set("Authorization", &format!("Bearer {}", e.token)).call() {
        Ok(r) => {
            let (ct, csp) =
                (r.header("content-type").map(str::to_string), r.header("content-security-policy").map(str::to_string));
            (r.status(), r.into_string().unwrap(), ct, csp)
        }
        Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap(), None, None),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn preview_example_and_assets_are_served_sandboxed_and_path_safe() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let dir = tmp.path().join("showcase");
    write_plugin(&dir, "showcase", "1.0.0", json!([ { "id": "generate", "atoms": ["file-write"] } ]), "Show it.");
    let path = dir.join("open-design.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["od"]["preview"] = json!({ "type": "html", "entry": "./preview/index.html" });
    m["od"]["useCase"]["exampleOutputs"] = json!([ { "path": "./examples/hero.html", "title": "Hero" } ]);
    m["od"]["context"] =
        json!({ "assets": ["./assets/brief.md"], "craft": ["accessibility-baseline"], "atoms": ["todo-write"] });
    std::fs::write(&path, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    for (rel, body) in [
        ("preview/index.html", "<h1>preview</h1>"),
        ("examples/hero.html", "<h1>hero</h1>"),
        ("assets/brief.md", "# brief"),
    ] {
        std::fs::create_dir_all(dir.join(rel).parent().unwrap()).unwrap();
        std::fs::write(dir.join(rel), body).unwrap();
    }
    e.install(&dir);
    let plain = tmp.path().join("plain");
    write_plugin(&plain, "plain", "1.0.0", json!([ { "id": "generate", "atoms": ["file-write"] } ]), "x");
    e.install(&plain);

    let (code, body, ct, csp) = get(&e, "/api/plugins/showcase/preview");
    assert_eq!((code, body.as_str()), (200, "<h1>preview</h1>"));
    assert!(ct.unwrap().starts_with("text/html"));
    let csp = csp.unwrap();
    assert!(
        csp.contains("connect-src 'none'")
            && csp.contains("sandbox allow-scripts")
            && csp.contains("default-src 'none'"),
        "{csp}"
    );
    assert_eq!(get(&e, "/api/plugins/showcase/example/hero").1, "<h1>hero</h1>");
    assert_eq!(get(&e, "/api/plugins/showcase/example/hero.html").0, 200);
    let (code, body, _, csp) = get(&e, "/api/plugins/showcase/asset/assets/brief.md");
    assert_eq!((code, body.as_str()), (200, "# brief"));
    assert!(csp.is_some());
    // Preview files are shown in place (the UI frames them), never sniffed (issue 36).
    let r = ureq::get(&format!("{}/api/plugins/showcase/asset/assets/brief.md", e.url))
        .set("Authorization", &format!("Bearer {}", e.token))
        .call()
        .unwrap();
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(r.header("content-disposition"), Some("inline; filename=\"brief.md\"; filename*=UTF-8''brief.md"));

    for (path, want) in [
        ("/api/plugins/showcase/asset/..%2F..%2Fetc%2Fpasswd", 400),
        ("/api/plugins/showcase/asset/%2Fetc%2Fpasswd", 400),
        ("/api/plugins/showcase/asset/assets%2F..%2F..%2Fx", 400),
        ("/api/plugins/showcase/asset/.env", 400),
        ("/api/plugins/showcase/asset/keys/server.pem", 400),
        ("/api/plugins/showcase/asset/assets/none.md", 404),
        ("/api/plugins/showcase/example/nope", 404),
        ("/api/plugins/plain/preview", 404),
        ("/api/plugins/nope/preview", 404),
    ] {
        let (code, body, _, _) = get(&e, path);
        assert_eq!(code, want, "{path}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert!(v["error"]["code"].is_string(), "{path}: {body}");
    }

    let (code, a) = e.post("/api/plugins/showcase/apply", json!({}));
    assert_eq!(code, 200, "{a}");
    let kinds: Vec<&str> = a["contextItems"].as_array().unwrap().iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"plugin"));
    for k in ["asset", "craft", "atom"] {
        assert!(kinds.contains(&k), "{kinds:?}");
    }
    let atoms = &a["resolvedContext"]["atoms"];
    assert!(
        atoms.as_array().unwrap().contains(&json!("todo-write"))
            && atoms.as_array().unwrap().contains(&json!("file-write")),
        "{atoms}"
    );
    let asset = &a["assets"][0];
    assert_eq!(
        (asset["path"].clone(), asset["mime"].clone(), asset["stageAt"].clone()),
        (json!("./assets/brief.md"), json!("text/markdown"), json!("run-start"))
    );
    assert_eq!(get(&e, asset["src"].as_str().unwrap()).1, "# brief");
    assert_eq!(a["projectMetadata"]["skillId"], "showcase");
}
