//! The one gate (issue 36, DESIGN.md §5): every route and field that can start a process or reach
//! outside a project refuses a caller without a token (`exec-forbidden`, nothing written, nothing
//! started) and a plugin without the capability; the list is checked against the served API's
//! request schemas, so a new field that names a command or a folder cannot slip past it. Also:
//! token-less build and MCP stdio commands (finding 3), adopted folders (finding 4), and notes that
//! squat engine-owned streams (finding 8).

use crate::common;

use common::harness::{of, write_plugin, Engine, OD};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;

/// A request without any token (a web page, a script without the local token).
fn anon(e: &Engine, method: &str, path: &str, body: &Value) -> (u16, Value) {
    match ureq::request(method, &format!("{}{path}", e.url)).send_json(body.clone()) {
        Ok(r) => (r.status(), r.into_json().unwrap_or(Value::Null)),
        Err(ureq::Error::Status(c, r)) => (c, r.into_json().unwrap_or(Value::Null)),
        Err(err) => panic!("{method} {path}: {err}"),
    }
}

fn last_seq(e: &Engine) -> Value {
    e.get("/api/health").1["lastSeq"].clone()
}

/// A plugin `name` whose MCP server `s` is a stdio command that leaves `marker` when started.
fn stdio_plugin(dir: &Path, name: &str, marker: &Path) {
    write_plugin(dir, name, "1.0.0", json!([{ "id": "a", "atoms": ["file-write"] }]), "Body.");
    let path = dir.join("open-design.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["od"]["context"] = json!({ "mcp": [{ "name": "s", "command": "sh",
        "args": ["-c", format!("touch {}; exit 1", marker.display())] }] });
    std::fs::write(&path, m.to_string()).unwrap();
}

/// A plugin `name` whose MCP server `self` is od's own (`od mcp --flat`) on another data dir.
fn od_mcp_plugin(dir: &Path, name: &str, other: &Path) {
    write_plugin(dir, name, "1.0.0", json!([{ "id": "a", "atoms": ["file-write"] }]), "Body.");
    let path = dir.join("open-design.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["od"]["context"] = json!({ "mcp": [{ "name": "self", "command": OD,
        "args": ["mcp", "--flat", "--allow", "*", "--data-dir", other.to_str().unwrap()] }] });
    std::fs::write(&path, m.to_string()).unwrap();
}

fn install_restricted(e: &Engine, dir: &Path) {
    let r = ureq::post(&format!("{}/api/plugins/install", e.url))
        .set("Authorization", &format!("Bearer {}", e.token))
        .send_json(json!({ "source": dir.to_str().unwrap(), "trust": "restricted" }))
        .unwrap()
        .into_string()
        .unwrap();
    assert!(r.contains("\"success\""), "{r}");
}

/// Request fields that name a command, its environment, project metadata (build/test commands) or
/// a folder; and the routes that start a plugin's MCP server.
const REACHING_FIELDS: [&str; 4] = ["agentCommand", "agentEnv", "metadata", "path"];
const MCP_ROUTES: [(&str, &str); 3] =
    [("post", "/api/tools/index"), ("post", "/api/tools/call"), ("post", "/api/tools/{name}/call")];

/// The (method, path) of every served route whose request body has one of [`REACHING_FIELDS`].
fn reaching_routes(e: &Engine) -> BTreeSet<(String, String)> {
    let (code, spec) = e.get("/api/openapi.json");
    assert_eq!(code, 200);
    let resolve = |s: &Value| -> Value {
        match s["$ref"].as_str() {
            Some(r) => spec["components"]["schemas"][r.rsplit('/').next().unwrap()].clone(),
            None => s.clone(),
        }
    };
    let mut out = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let schema = resolve(&op["requestBody"]["content"]["application/json"]["schema"]);
            let props = schema["properties"].as_object().cloned().unwrap_or_default();
            if REACHING_FIELDS.iter().any(|f| props.contains_key(*f)) || MCP_ROUTES.contains(&(method, path)) {
                out.insert((method.clone(), path.clone()));
            }
        }
    }
    out
}

#[test]
fn every_route_and_field_that_can_start_a_process_or_reach_outside_a_project_is_gated() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let marker = tmp.path().join("started");
    // What the table needs: an exec run (to fork), a plugin with a stdio MCP server, an indexed tool.
    let (parent, _) = e.run(json!({ "agent": "exec", "agentCommand": "true", "agentProtocol": "od" }));
    stdio_plugin(&tmp.path().join("stdio"), "stdio", &marker);
    install_restricted(&e, &tmp.path().join("stdio"));
    od_mcp_plugin(&tmp.path().join("odmcp"), "odmcp", &tmp.path().join("other"));
    install_restricted(&e, &tmp.path().join("odmcp"));
    let (code, _) = e.post("/api/plugins/odmcp/trust", json!({ "capabilities": ["mcp:self", "subprocess"] }));
    assert!(code < 300);
    let (code, v) = e.post("/api/tools/index", json!({ "pluginId": "odmcp" }));
    assert_eq!((code, v["servers"][0]["status"].clone()), (200, json!("indexed")), "{v}");
    std::fs::create_dir_all(tmp.path().join("work")).unwrap();
    let touch = format!("touch {}", marker.display());
    let fork = format!("/api/runs/{parent}/fork");
    // (method, route as the API lists it, path to call, body, the field the refusal names)
    let gated: Vec<(&str, &str, String, Value, &str)> = vec![
        ("post", "/api/runs", "/api/runs".into(), json!({ "agent": "exec", "agentCommand": touch }), "agentCommand"),
        ("post", "/api/runs", "/api/runs".into(), json!({ "agent": "exec", "agentEnv": { "A": "1" } }), "agentEnv"),
        ("post", "/api/runs/{id}/fork", fork.clone(), json!({ "at": "end", "agentCommand": touch }), "agentCommand"),
        // A fork that would run its parent's command again.
        ("post", "/api/runs/{id}/fork", fork.clone(), json!({ "at": "end" }), "agentCommand"),
        (
            "post",
            "/api/projects",
            "/api/projects".into(),
            json!({ "metadata": { "buildCommand": touch } }),
            "metadata.buildCommand",
        ),
        (
            "post",
            "/api/projects",
            "/api/projects".into(),
            json!({ "metadata": { "testCommand": touch } }),
            "metadata.testCommand",
        ),
        ("post", "/api/import/folder", "/api/import/folder".into(), json!({ "path": tmp.path().join("work") }), "path"),
        (
            "post",
            "/api/import/folder",
            "/api/import/folder".into(),
            json!({ "path": tmp.path().join("work"), "metadata": { "buildCommand": touch } }),
            "metadata.buildCommand",
        ),
        (
            "post",
            "/api/tools/index",
            "/api/tools/index".into(),
            json!({ "pluginId": "stdio" }),
            "od.context.mcp[s].command",
        ),
        (
            "post",
            "/api/tools/call",
            "/api/tools/call".into(),
            json!({ "name": "odmcp.self.projects-list", "input": {} }),
            "od.context.mcp[self].command",
        ),
        (
            "post",
            "/api/tools/{name}/call",
            "/api/tools/odmcp.self.projects-list/call".into(),
            json!({}),
            "od.context.mcp[self].command",
        ),
    ];
    let before = last_seq(&e);
    for (_, route, path, body, field) in &gated {
        let (code, v) = anon(&e, "POST", path, body);
        assert_eq!((code, v["error"]["code"].as_str()), (403, Some("exec-forbidden")), "{route} {body}: {v}");
        assert_eq!(v["error"]["data"]["field"], *field, "{route} {body}: {v}");
    }
    assert_eq!(last_seq(&e), before, "a refusal writes nothing");
    assert!(!marker.exists(), "nothing was started");
    // Every served route whose request can name a command, metadata or a folder, or start an MCP
    // server, is in the table — or is known to reach nothing: plugin doctor's `path` reads a plugin
    // folder and runs nothing; MCP OAuth's body shares the component name `StartBody` with
    // `POST /api/runs` (an OpenAPI name clash) and it speaks to URL servers only.
    let listed: BTreeSet<(String, String)> = gated.iter().map(|g| (g.0.to_string(), g.1.to_string())).collect();
    let not_reaching: BTreeSet<(String, String)> = [("post", "/api/plugins/doctor"), ("post", "/api/mcp/oauth/start")]
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    let missing: Vec<_> =
        reaching_routes(&e).difference(&listed).filter(|r| !not_reaching.contains(*r)).cloned().collect();
    assert!(missing.is_empty(), "routes that reach a command or a folder but are not in the gate's table: {missing:?}");

    // With the token, the plugin's capability is the second half of the gate.
    let (code, v) = e.post("/api/tools/index", json!({ "pluginId": "stdio" }));
    assert_eq!((code, v["error"]["code"].as_str()), (409, Some("capabilities-required")), "{v}");
    assert!(!marker.exists(), "a plugin without the capability starts nothing");
    let (code, _) = e.post("/api/plugins/stdio/trust", json!({ "capabilities": ["mcp:s", "subprocess"] }));
    assert!(code < 300);
    let (code, v) = e.post("/api/tools/index", json!({ "pluginId": "stdio" }));
    assert_eq!(code, 200, "{v}");
    assert!(marker.exists(), "the token holder's granted server was started");
}

/// Finding 3: `metadata.buildCommand`, run by the `build-test` worker, runs only for a run whose
/// creator holds the exec right, and only with the plugin's `subprocess` grant.
#[test]
fn a_build_command_runs_only_for_a_token_holders_run() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let dir = tmp.path().join("bt");
    write_plugin(&dir, "bt", "1.0.0", json!([ { "id": "verify", "atoms": ["patch-edit", "build-test"] } ]), "Work.");
    e.install(&dir);
    let marker = tmp.path().join("built");
    let meta = json!({ "buildCommand": format!("touch {}", marker.display()) });
    let (code, v) = anon(&e, "POST", "/api/projects", &json!({ "name": "bt", "metadata": meta }));
    assert_eq!((code, v["error"]["code"].as_str()), (403, Some("exec-forbidden")), "{v}");
    let (code, p) = e.post("/api/projects", json!({ "name": "bt", "metadata": meta }));
    assert_eq!(code, 200, "{p}");
    let project = p["project"]["id"].as_str().unwrap().to_string();
    // A token-less client starts a run of the same project: the worker does not run the command.
    let (code, v) = anon(&e, "POST", "/api/runs", &json!({ "projectId": project, "pluginId": "bt" }));
    assert_eq!(code, 202, "{v}");
    let ev = e.watch(v["runId"].as_str().unwrap());
    assert!(!marker.exists(), "a token-less caller's run ran the build command");
    let build: Vec<&Value> = of(&ev, "signal").into_iter().filter(|s| s["name"] == "build.passing").collect();
    assert_eq!(build.len(), 1, "{ev:?}");
    assert_eq!(build[0]["value"], false);
    let said = serde_json::to_string(&ev).unwrap();
    assert!(said.contains("not run: metadata.buildCommand"), "the run says why: {said}");
    // The token holder's run does.
    let (_, ev) = e.run(json!({ "projectId": project, "pluginId": "bt" }));
    assert!(marker.exists(), "{ev:?}");
}

/// Finding 3: a local-folder plugin's MCP stdio command is not started by a token-less client.
#[test]
fn a_tokenless_client_starts_no_mcp_stdio_server() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let marker = tmp.path().join("started");
    stdio_plugin(&tmp.path().join("p"), "stdio", &marker);
    // A token-less client may install a local folder, and the plugin may even be trusted …
    let r = ureq::post(&format!("{}/api/plugins/install", e.url))
        .send_json(json!({ "source": tmp.path().join("p") }))
        .unwrap()
        .into_string()
        .unwrap();
    assert!(r.contains("\"success\""), "{r}");
    let (code, v) = anon(&e, "POST", "/api/tools/index", &json!({ "pluginId": "stdio" }));
    assert_eq!((code, v["error"]["code"].as_str()), (403, Some("exec-forbidden")), "{v}");
    // … and indexing every plugin skips the stdio server, naming why.
    let (code, v) = anon(&e, "POST", "/api/tools/index", &json!({}));
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["servers"][0]["status"], "skipped", "{v}");
    assert!(v["servers"][0]["reason"].as_str().unwrap().contains("exec right"), "{v}");
    assert!(!marker.exists(), "the stdio command was started for a token-less client");
    let (code, v) = e.post("/api/tools/index", json!({ "pluginId": "stdio" }));
    assert_eq!(code, 200, "{v}");
    assert!(marker.exists(), "with the token it starts");
}

/// Finding 4: the data dir (or what holds it, or is inside it), `/` and system folders are never
/// adopted, so `daemon.json` and `credentials/` are never served as project files.
#[test]
fn an_adopted_folder_is_never_the_data_dir_root_or_a_system_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = Engine::start(&data, NOW);
    std::fs::create_dir_all(data.join("credentials")).unwrap();
    for bad in [data.clone(), tmp.path().to_path_buf(), data.join("credentials"), "/".into(), "/etc".into()] {
        let (code, v) = e.post("/api/import/folder", json!({ "path": bad }));
        assert_eq!((code, v["error"]["data"]["field"].as_str()), (400, Some("path")), "{}: {v}", bad.display());
    }
    let (_, projects) = e.get("/api/projects");
    assert_eq!(projects["projects"], json!([]), "nothing was adopted");
    // A folder of the user's is adopted (with the token), and serves its own files only.
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("a.txt"), "mine").unwrap();
    std::os::unix::fs::symlink(data.join("daemon.json"), work.join("token.json")).unwrap();
    let (code, p) = e.post("/api/import/folder", json!({ "path": work }));
    assert_eq!(code, 200, "{p}");
    let id = p["project"]["id"].as_str().unwrap().to_string();
    // (status, body) of a project file read.
    let get = |f: &str| match ureq::get(&format!("{}/api/projects/{id}/files/{f}", e.url))
        .set("Authorization", &format!("Bearer {}", e.token))
        .call()
    {
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap_or_default()),
        Err(err) => panic!("{err}"),
    };
    assert_eq!(get("a.txt"), (200, "mine".to_string()));
    let (code, body) = get("token.json");
    assert!(code >= 400 && !body.contains(&e.token), "a link to daemon.json is not followed: {code} {body}");
    let (code, body) = get("../data/daemon.json");
    assert!(code >= 400 && !body.contains(&e.token), "{code} {body}");
}

/// Finding 8: notes go to `note:` streams only; a snapshot body stream squatted by a note in a log
/// from before that rule does not break runs (the body is verified against its digest when read).
#[test]
fn notes_cannot_squat_engine_streams_and_a_squatted_body_stream_does_not_break_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs = json!({ "topic": "tea shop", "audience": "tea lovers", "artifactKind": "landing-page" });
    let run = json!({ "pluginId": "od-new-generation", "pluginInputs": inputs });
    // The body digest of this plugin and inputs (the same in every data dir).
    let a = Engine::start(&tmp.path().join("a"), NOW);
    let (_, ev) = a.run(run.clone());
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
    let (_, page) = a.get("/api/log/events?limit=1000");
    let body_stream = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["data"]["stream"].as_str())
        .find(|s| s.starts_with("snapshot-body:"))
        .expect("a body stream")
        .to_string();
    for stream in [body_stream.as_str(), "run:x", "plugin:x", "project:x", "system", "tools"] {
        let (code, v) = a.post("/api/log/notes", json!({ "stream": stream, "text": "squat" }));
        assert_eq!((code, v["error"]["data"]["field"].as_str()), (400, Some("stream")), "{stream}: {v}");
    }
    assert_eq!(a.post("/api/log/notes", json!({ "stream": "note:mine", "text": "ok" })).0, 200);
    a.stop();
    // A log squatted before the rule: the note sits where the body would go.
    let b_dir = tmp.path().join("b");
    {
        let store = common::open(&b_dir);
        common::append_note(&store, &body_stream, "squatted");
    }
    let b = Engine::start(&b_dir, NOW);
    let (_, ev) = b.run(run.clone());
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{:?}", ev.last());
    let (_, ev) = b.run(run);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "and the next run too");
}
