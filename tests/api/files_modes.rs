//! Files and daemon modes (issue 17, spec §11.7, §12.2, §14.3): `files list --path`, `files diff`
//! between two runs' recorded versions (and the project's current file), `files watch --path`
//! following what runs record, `run logs --since`, and a headless daemon serving the API without
//! the web UI.

use crate::common;

use common::harness::{Engine, OD};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;
const BRANCHER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/brancher");

fn od(e: &Engine, args: &[&str]) -> std::process::Output {
    std::process::Command::new(OD).args(args).arg("--daemon-url").arg(&e.url).arg("--json").output().unwrap()
}

fn ok_json(out: std::process::Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Runs brancher in `project` answering `style` with `answer`, to its end.
fn run(e: &Engine, project: &str, answer: &str) -> String {
    let id = e.start_run(json!({ "pluginId": "brancher", "projectId": project }));
    let w = ureq::get(&format!("{}/api/runs/{id}/watch", e.url)).call().unwrap();
    for line in BufReader::new(w.into_reader()).lines() {
        if line.unwrap().contains("genui_surface_request") {
            break;
        }
    }
    let (code, v) = e.post(&format!("/api/runs/{id}/genui/style/respond"), json!({ "value": answer }));
    assert_eq!(code, 200, "{v}");
    let ev = e.watch(&id);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
    id
}

#[test]
fn files_list_diff_watch_and_logs_since() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    e.install(Path::new(BRANCHER));
    let (_, p) = e.post("/api/projects", json!({ "name": "p" }));
    let project = p["project"]["id"].as_str().unwrap().to_string();

    // Watch the project's dry-run folder while the runs record.
    let (_, stats) = e.get("/api/log/stats");
    let after = stats["lastSeq"].as_u64().unwrap().to_string();
    let mut watch = std::process::Command::new(OD)
        .args(["files", "watch", "--project", &project, "--path", "dry-run/critique-1.md", "--after", &after])
        .args(["--daemon-url", &e.url])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let bold = run(&e, &project, "bold");
    let calm = run(&e, &project, "calm");
    // Read on another thread, so a watch that printed nothing fails the test instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    let out = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let next = || -> Value {
        let line = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("files watch printed a line");
        serde_json::from_str(&line).unwrap()
    };
    let first = next();
    let second = next();
    watch.kill().unwrap();
    let _ = watch.wait();
    assert_eq!(
        (first["path"].clone(), first["runId"].clone()),
        (json!("dry-run/critique-1.md"), json!(bold)),
        "{first}"
    );
    assert_eq!(second["runId"], calm.as_str(), "{second}");
    assert_ne!(first["digest"], second["digest"]);

    let all = ok_json(od(&e, &["files", "list", "--project", &project]));
    let some = ok_json(od(&e, &["files", "list", "--project", &project, "--path", "dry-run/"]));
    let one = ok_json(od(&e, &["files", "list", "--project", &project, "--path", "dry-run/plan-1.md"]));
    let n = |v: &Value| v["files"].as_array().unwrap().len();
    assert!(n(&all) >= n(&some) && n(&some) > 1, "{all} {some}");
    assert!(some["files"].as_array().unwrap().iter().all(|f| f["path"].as_str().unwrap().starts_with("dry-run/")));
    assert_eq!(n(&one), 1, "{one}");
    assert_eq!(n(&ok_json(od(&e, &["files", "list", "--project", &project, "--path", "dry-ru"]))), 0);

    // The two runs' generate output differs; the plan does not; the project now holds calm's.
    let d = ok_json(od(&e, &["files", "diff", "dry-run/critique-1.md", "--from", &bold, "--to", &calm]));
    assert_eq!(d["same"], false, "{d}");
    let text = d["diff"].as_str().unwrap();
    assert!(
        text.contains("@@") && text.lines().any(|l| l.starts_with('-')) && text.lines().any(|l| l.starts_with('+')),
        "{text}"
    );
    let cur = ok_json(od(&e, &["files", "diff", "dry-run/critique-1.md", "--from", &calm]));
    assert_eq!(cur["same"], true, "{cur}");
    let plan = ok_json(od(&e, &["files", "diff", "dry-run/plan-1.md", "--from", &bold, "--to", &calm]));
    assert_eq!(plan["same"], true, "{plan}");
    let out = od(&e, &["files", "diff", "nope.md", "--from", &bold]);
    assert!(!out.status.success());

    // run logs --since: the engine's clock stands at NOW.
    let (_, all) = e.get(&format!("/api/runs/{bold}/logs?since={NOW}"));
    assert!(!all["entries"].as_array().unwrap().is_empty(), "{all}");
    assert_eq!(all["entries"][0]["at"], NOW);
    let (_, none) = e.get(&format!("/api/runs/{bold}/logs?since={}", NOW + 1));
    assert!(none["entries"].as_array().unwrap().is_empty(), "{none}");
    let (code, bad) = e.get(&format!("/api/runs/{bold}/logs?since=yesterday"));
    assert_eq!((code, bad["error"]["data"]["field"].clone()), (400, json!("since")));
    let out = od(&e, &["run", "logs", &bold, "--since", "3d"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = od(&e, &["run", "logs", &bold, "--since", "3 weeks"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_headless_daemon_serves_the_api_and_no_web_ui() {
    let tmp = tempfile::tempdir().unwrap();
    let ui = Engine::start(&tmp.path().join("a"), NOW);
    assert_eq!(ureq::get(&format!("{}/", ui.url)).call().unwrap().status(), 200);
    let headless = Engine::start_with(&tmp.path().join("b"), NOW, |cfg| cfg.http.headless = true);
    assert!(matches!(ureq::get(&format!("{}/", headless.url)).call(), Err(ureq::Error::Status(404, _))));
    assert_eq!(headless.get("/api/health").0, 200);
}

#[test]
fn od_web_port_is_the_web_uis_own_listener_and_origin() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start_with(&tmp.path().join("a"), NOW, |cfg| cfg.web_port = Some(0));
    let web = e.running.as_ref().unwrap().web_addr.expect("a second listener");
    let api_port = e.url.rsplit(':').next().unwrap().to_string();
    assert_ne!(web.port().to_string(), api_port);
    let page = ureq::get(&format!("http://{web}/")).call().unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.into_string().unwrap().to_lowercase().contains("<html"));
    // The UI's requests come from its own origin: accepted there, refused on the API's port
    // (another port is another origin).
    let post = |base: &str| -> u16 {
        let r = ureq::post(&format!("{base}/api/log/notes"))
            .set("Origin", &format!("http://{web}"))
            .set("Authorization", &format!("Bearer {}", e.token))
            .send_json(serde_json::json!({ "stream": "note:web", "text": "hi" }));
        match r {
            Ok(r) => r.status(),
            Err(ureq::Error::Status(code, _)) => code,
            Err(other) => panic!("{other}"),
        }
    };
    assert_eq!(post(&format!("http://{web}")), 200);
    assert_eq!(post(&e.url), 403);
    // Headless: no web listener.
    let headless = Engine::start_with(&tmp.path().join("b"), NOW, |cfg| {
        cfg.http.headless = true;
        cfg.web_port = Some(0);
    });
    assert!(headless.running.as_ref().unwrap().web_addr.is_none());
}
