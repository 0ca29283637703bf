//! Connectors end to end (issue 17, spec §16 P5 (f)) against a local OAuth 2.0 authorization
//! server and API started here: it checks the PKCE S256 challenge against the verifier, issues
//! distinctive tokens, and answers API calls only with them.
//!
//! A restricted plugin requiring `slack` is refused without `connector:slack` (exit 66); granted
//! per call, its run asks the automatic `__auto_connector_slack` surface; the connection started
//! for that surface goes through the provider and the daemon's callback, which answers the
//! surface; the run's agent then calls `channels.list` through `od connectors execute` with its
//! tool token, while a call to an undeclared connector is refused 403 `connector-not-granted`. A
//! second run in the project is not asked again. No token appears in any file of the data dir but
//! the owner-only credential file.

use crate::common;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use common::harness::{files_below, od_cli, of, script, write_plugin, Engine, OD};
use serde_json::{json, Value};
use sha2::Digest;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const NOW: i64 = 1_800_000_000_000;
pub(crate) const ACCESS: &str = "xoxp-ACCESS-5f0c9e";
const REFRESH: &str = "xoxr-REFRESH-77d2a1";

#[derive(Default)]
pub(crate) struct Provider {
    /// code → (challenge, redirect_uri)
    codes: Mutex<HashMap<String, (String, String)>>,
    pub(crate) exchanged: Mutex<Vec<String>>,
    pub(crate) api_calls: Mutex<Vec<String>>,
}

async fn authorize(State(p): State<Arc<Provider>>, Query(q): Query<HashMap<String, String>>) -> Response {
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["client_id"], "od-test-client");
    assert_eq!(q["code_challenge_method"], "S256", "{q:?}");
    assert!(q["scope"].contains("channels:read"), "{q:?}");
    let code = format!("code-{}", p.codes.lock().unwrap().len());
    p.codes.lock().unwrap().insert(code.clone(), (q["code_challenge"].clone(), q["redirect_uri"].clone()));
    // The user approved: back to od.
    Redirect::to(&format!("{}?code={code}&state={}", q["redirect_uri"], q["state"])).into_response()
}

async fn token(State(p): State<Arc<Provider>>, body: String) -> Response {
    let f: HashMap<String, String> = serde_urlencoded::from_str(&body).unwrap();
    let refused =
        |why: &str| (StatusCode::BAD_REQUEST, Json(json!({ "error": "invalid_grant", "error_description": why })));
    if f.get("grant_type").map(String::as_str) != Some("authorization_code") {
        return refused("grant_type").into_response();
    }
    let Some((challenge, redirect)) = p.codes.lock().unwrap().remove(&f["code"]) else {
        return refused("unknown or used code").into_response();
    };
    let verifier = f.get("code_verifier").cloned().unwrap_or_default();
    let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
    if computed != challenge {
        return refused("PKCE verifier does not match").into_response();
    }
    if f.get("redirect_uri") != Some(&redirect) || f.get("client_id").map(String::as_str) != Some("od-test-client") {
        return refused("redirect_uri or client_id").into_response();
    }
    p.exchanged.lock().unwrap().push(verifier);
    Json(json!({ "access_token": ACCESS, "token_type": "bearer", "refresh_token": REFRESH, "expires_in": 3600,
                 "scope": "channels:read chat:write" }))
    .into_response()
}

fn authorized(h: &HeaderMap) -> bool {
    h.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {ACCESS}"))
}

async fn auth_test(State(p): State<Arc<Provider>>, h: HeaderMap) -> Response {
    if !authorized(&h) {
        return (StatusCode::UNAUTHORIZED, Json(json!({ "ok": false }))).into_response();
    }
    p.api_calls.lock().unwrap().push("auth.test".into());
    Json(json!({ "ok": true, "team": "Acme Team", "user": "ada" })).into_response()
}

async fn channels(State(p): State<Arc<Provider>>, h: HeaderMap, Query(q): Query<HashMap<String, String>>) -> Response {
    if !authorized(&h) {
        return (StatusCode::UNAUTHORIZED, Json(json!({ "ok": false, "error": "not_authed" }))).into_response();
    }
    p.api_calls
        .lock()
        .unwrap()
        .push(format!("conversations.list limit={}", q.get("limit").cloned().unwrap_or_default()));
    Json(json!({ "ok": true, "channels": [ { "id": "C1", "name": "general" }, { "id": "C2", "name": "design" } ] }))
        .into_response()
}

/// A token endpoint that moved: a 307 to the URL its `to` parameter names (the POST and its
/// code would follow it, were redirects followed).
async fn moved(Query(q): Query<HashMap<String, String>>) -> Response {
    Redirect::temporary(&q["to"]).into_response()
}

/// Starts the provider on its own runtime; returns its base URL.
pub(crate) fn start_provider(rt: &tokio::runtime::Runtime, p: Arc<Provider>) -> String {
    let app = Router::new()
        .route("/oauth/authorize", get(authorize))
        .route("/oauth/token", post(token))
        .route("/oauth/moved", post(moved))
        .route("/api/auth.test", get(auth_test))
        .route("/api/conversations.list", get(channels))
        .with_state(p);
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// A plugin folder whose manifest gains `connectors`.
pub(crate) fn connector_plugin(dir: &Path, name: &str, connectors: Value) {
    // `review`'s only atom declares toolGating [file-read]: no connector calls there.
    let stages =
        json!([ { "id": "digest", "atoms": ["file-write"] }, { "id": "review", "atoms": ["critique-theater"] } ]);
    write_plugin(dir, name, "1.0.0", stages, "Summarise the channels.");
    let path = dir.join("open-design.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["od"]["connectors"] = connectors;
    std::fs::write(&path, serde_json::to_string_pretty(&m).unwrap()).unwrap();
}

fn install_restricted(e: &Engine, dir: &Path) {
    install_restricted_at(&e.url, dir);
}

/// Installs the plugin folder `dir` as restricted on the daemon at `url`.
pub(crate) fn install_restricted_at(url: &str, dir: &Path) {
    let r = ureq::post(&format!("{url}/api/plugins/install"))
        .send_json(json!({ "source": dir.to_str().unwrap(), "trust": "restricted" }))
        .unwrap();
    let last = r.into_string().unwrap().lines().last().unwrap().to_string();
    assert!(last.contains("\"success\""), "{last}");
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// The agent: lists the channels through its tool token, then tries a connector its plugin did
/// not declare; both outcomes are written to the project.
const AGENT: &str = r#"
if [ "$OD_STAGE_ID" = review ]; then
  "$OD_BIN" connectors execute slack channels.list --json > gated.out 2> gated.err
  echo "exit=$?" > gated.txt
  echo '{"type":"done"}'
  exit 0
fi
"$OD_BIN" connectors execute slack channels.list --input '{"limit":2}' --json > channels.json 2> channels.err || exit 5
"$OD_BIN" connectors execute notion search --input '{}' --json > notion.out 2> notion.err
echo "exit=$?" > notion.txt
echo '{"type":"done"}'
"#;

#[test]
fn connector_trust_gate_oauth_prompt_and_tool_calls_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let prt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let provider = Arc::new(Provider::default());
    let base = start_provider(&prt, provider.clone());
    let catalog = json!({ "connectors": {
        "slack": { "clientId": "od-test-client", "authorizeUrl": format!("{base}/oauth/authorize"),
                   "tokenUrl": format!("{base}/oauth/token"), "apiBaseUrl": format!("{base}/api") },
        "notion": { "clientId": "od-test-client", "authorizeUrl": format!("{base}/oauth/authorize"),
                    "tokenUrl": format!("{base}/oauth/token"), "apiBaseUrl": format!("{base}/api") } } });
    std::fs::write(data.join("connectors.json"), catalog.to_string()).unwrap();
    let e = Engine::start(&data, NOW);

    let (code, v) = e.get("/api/connectors");
    assert_eq!(code, 200, "{v}");
    let slack = v["connectors"].as_array().unwrap().iter().find(|c| c["id"] == "slack").unwrap().clone();
    assert_eq!(slack["status"], "pending", "{slack}");
    assert!(slack["allowedToolNames"].as_array().unwrap().contains(&json!("channels.list")));
    let github = v["connectors"].as_array().unwrap().iter().find(|c| c["id"] == "github").unwrap().clone();
    assert_eq!(github["status"], "unavailable", "{github}");

    let digest = tmp.path().join("digest");
    connector_plugin(&digest, "digest", json!({ "required": [ { "id": "slack", "tools": ["channels.list"] } ] }));
    install_restricted(&e, &digest);
    let notes = tmp.path().join("notes");
    connector_plugin(&notes, "notes", json!({ "required": [ { "id": "notion", "tools": ["search"] } ] }));
    install_restricted(&e, &notes);

    // An undeclared connector capability: exit 66, naming it.
    let out = std::process::Command::new(OD)
        .args(["plugin", "apply", "notes", "--grant-caps", "pipeline:*", "--json", "--daemon-url", &e.url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(66), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("connector:notion"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Granted per call: not connected yet, so the automatic oauth-prompt is derived.
    let grants = json!(["connector:slack", "pipeline:*"]);
    let (code, applied) = e.post("/api/plugins/digest/apply", json!({ "grantCaps": grants }));
    assert_eq!(code, 200, "{applied}");
    assert_eq!(
        applied["connectorsResolved"],
        json!([ { "id": "slack", "tools": ["channels.list"], "required": true, "status": "pending" } ])
    );
    let auto =
        applied["genuiSurfaces"].as_array().unwrap().iter().find(|s| s["id"] == "__auto_connector_slack").unwrap();
    assert_eq!(auto["kind"], "oauth-prompt");
    assert_eq!(auto["persist"], "project");
    assert_eq!(auto["oauth"], json!({ "route": "connector", "connectorId": "slack" }));

    let agent = script(tmp.path(), "agent.sh", AGENT);
    let body = json!({ "pluginId": "digest", "grantCaps": grants, "agent": "exec",
                       "agentCommand": [agent.to_str().unwrap()], "agentEnv": { "OD_BIN": OD } });
    let run1 = e.start_run(body.clone());
    // The run waits on the automatic surface.
    let seen = e.watch_until(&run1, "genui_surface_request");
    let req = seen.last().unwrap();
    assert_eq!(req["event"], "genui_surface_request", "{seen:?}");
    assert_eq!(req["data"]["surfaceId"], "__auto_connector_slack", "{req}");

    // The callback is refused for a state it never handed out (even as a browser's cross-site GET).
    let bogus = ureq::get(&format!("{}/api/connectors/oauth/callback/slack?state=nope&code=x", e.url))
        .set("Sec-Fetch-Site", "cross-site")
        .call();
    assert!(matches!(bogus, Err(ureq::Error::Status(400, _))), "{bogus:?}");
    // The start checks the surface it answers.
    let (code, v) =
        e.post("/api/connectors/notion/connect/start", json!({ "runId": run1, "surfaceId": "__auto_connector_slack" }));
    assert_eq!((code, v["error"]["data"]["field"].clone()), (400, json!("surfaceId")), "{v}");

    // Connect through the provider: the browser follows the redirects back to od's callback.
    let (code, started) =
        e.post("/api/connectors/slack/connect/start", json!({ "runId": run1, "surfaceId": "__auto_connector_slack" }));
    assert_eq!(code, 200, "{started}");
    let url = started["authorizeUrl"].as_str().unwrap();
    assert!(url.starts_with(&format!("{base}/oauth/authorize?")) && url.contains("code_challenge="), "{url}");
    let page = ureq::get(url).set("Sec-Fetch-Site", "cross-site").call().unwrap();
    assert_eq!(page.status(), 200);
    let html = page.into_string().unwrap();
    assert!(html.contains("Connected to Slack") && html.contains("Acme Team"), "{html}");
    assert_eq!(provider.exchanged.lock().unwrap().len(), 1);
    // The state was single-use.
    let state = started["state"].as_str().unwrap();
    let again = ureq::get(&format!("{}/api/connectors/oauth/callback/slack?state={state}&code=code-0", e.url)).call();
    assert!(matches!(again, Err(ureq::Error::Status(400, _))), "{again:?}");

    let ev = e.watch(&run1);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:?}");
    let answered = of(&ev, "genui_surface_response");
    assert_eq!(answered.len(), 1, "{ev:?}");
    assert_eq!(answered[0]["respondedBy"], "oauth", "{:?}", answered[0]);
    assert_eq!(answered[0]["value"]["accountLabel"], "Acme Team");

    let (_, info) = e.get(&format!("/api/runs/{run1}"));
    let project = info["projectId"].as_str().or(info["run"]["projectId"].as_str()).unwrap().to_string();
    let (_, p) = e.get(&format!("/api/projects/{project}"));
    let dir = PathBuf::from(p["dir"].as_str().or(p["project"]["dir"].as_str()).unwrap_or_default());
    let dir = if dir.as_os_str().is_empty() { data.join("projects").join(&project) } else { dir };
    let channels: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("channels.json")).unwrap()).unwrap();
    assert_eq!(channels["output"]["channels"][1]["name"], "design", "{channels}");
    assert_eq!(channels["status"], 200);
    assert_eq!(provider.api_calls.lock().unwrap().iter().filter(|c| *c == "conversations.list limit=2").count(), 1);
    // The undeclared connector: 403 connector-not-granted, exit 66.
    assert_eq!(std::fs::read_to_string(dir.join("notion.txt")).unwrap().trim(), "exit=66");
    let refused = std::fs::read_to_string(dir.join("notion.err")).unwrap();
    assert!(refused.contains("connector-not-granted") || refused.contains("connector:notion"), "{refused}");

    // Tool gating: the review stage's atoms allow file reads only.
    assert_eq!(std::fs::read_to_string(dir.join("gated.txt")).unwrap().trim(), "exit=66");
    let gated = std::fs::read_to_string(dir.join("gated.err")).unwrap();
    assert!(gated.contains("tool-gated") && gated.contains("review"), "{gated}");
    assert_eq!(provider.api_calls.lock().unwrap().iter().filter(|c| c.starts_with("conversations.list")).count(), 1);

    let (_, c) = e.get("/api/connectors/slack");
    assert_eq!(
        (c["connector"]["status"].clone(), c["connector"]["accountLabel"].clone()),
        (json!("connected"), json!("Acme Team"))
    );

    // The same project again: connected, so nothing is derived and nothing asked.
    let (code, applied) = e.post("/api/plugins/digest/apply", json!({ "grantCaps": grants }));
    assert_eq!(code, 200);
    assert_eq!(applied["connectorsResolved"][0]["status"], "connected", "{applied}");
    assert_eq!(applied["connectorsResolved"][0]["accountLabel"], "Acme Team");
    assert!(!applied["genuiSurfaces"].as_array().unwrap().iter().any(|s| s["id"] == "__auto_connector_slack"));
    let mut second = body.clone();
    second["projectId"] = json!(project);
    let (run2, ev2) = e.run(second);
    assert_eq!(ev2.last().unwrap()["data"]["status"], "succeeded", "{ev2:?}");
    assert!(of(&ev2, "genui_surface_request").is_empty(), "{ev2:?}");
    let (_, r2) = e.get(&format!("/api/runs/{run2}"));
    let snap =
        r2["appliedPluginSnapshotId"].as_str().or(r2["run"]["appliedPluginSnapshotId"].as_str()).unwrap().to_string();
    let (_, s) = e.get(&format!("/api/applied-plugins/{snap}"));
    let s = if s["snapshot"].is_object() { s["snapshot"].clone() } else { s };
    assert_eq!(s["connectorsResolved"][0]["status"], "connected", "{s}");

    // A direct call without the run's token, with a forged one, and with an ended run's.
    let exec = |auth: Option<&str>| {
        let mut r = ureq::post(&format!("{}/api/tools/connectors/execute", e.url));
        if let Some(a) = auth {
            r = r.set("Authorization", &format!("Bearer {a}"));
        }
        match r.send_json(json!({ "connectorId": "slack", "toolName": "channels.list" })) {
            Ok(r) => (r.status(), r.into_json::<Value>().unwrap()),
            Err(ureq::Error::Status(c, r)) => (c, r.into_json::<Value>().unwrap()),
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(exec(None).1["error"]["code"], "tool-token-missing");
    assert_eq!(exec(Some(&format!("odtt.{run1}.-.99999999999999.00"))).1["error"]["code"], "tool-token-invalid");
    assert_eq!(exec(Some(&e.token)).0, 401);

    // No token in any file of the data dir but the owner-only credential.
    let files: Vec<PathBuf> =
        files_below(&data).into_iter().filter(|f| !f.components().any(|c| c.as_os_str() == "credentials")).collect();
    assert!(files.len() > 5, "{files:?}");
    let verifier = provider.exchanged.lock().unwrap()[0].clone();
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        for secret in [ACCESS, REFRESH, verifier.as_str()] {
            assert!(!contains(&bytes, secret), "{} holds a secret", f.display());
        }
    }
    let cred = data.join("credentials/connectors/slack.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&cred).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(contains(&std::fs::read(&cred).unwrap(), ACCESS));
    // The log records the connection with its label.
    let (_, log) = e.get("/api/log/events?stream=connector:slack");
    assert!(log.to_string().contains("Acme Team") && log.to_string().contains("connector_connected"), "{log}");

    // Disconnected: the credential is gone and a call is refused until connected again.
    let (code, d) = e.delete("/api/connectors/slack/connection");
    assert_eq!((code, d["connector"]["status"].clone()), (200, json!("pending")), "{d}");
    assert!(!cred.exists());
    let (code, v) = e.delete("/api/connectors/slack/connection");
    assert_eq!((code, v["error"]["code"].clone()), (409, json!("connector-not-connected")));
    e.stop();

    // The CLI's view, embedded.
    let out = od_cli(&data, &["connectors", "list", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["connectors"].as_array().unwrap().iter().find(|c| c["id"] == "slack").unwrap()["status"], "pending");
    let out = od_cli(&data, &["connectors", "info", "nope"]);
    assert_eq!(out.status.code(), Some(65));
}

#[test]
fn doctor_checks_connectors_against_the_catalog() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let p = tmp.path().join("p");
    connector_plugin(
        &p,
        "p",
        json!({ "required": [ { "id": "slack", "tools": ["channels.list", "files.delete"] } ],
                "optional": [ { "id": "nope", "tools": [] } ] }),
    );
    let out = od_cli(&data, &["plugin", "doctor", p.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let codes: Vec<(String, String)> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["code"].as_str().unwrap().to_string(), d["pointer"].as_str().unwrap_or("").to_string()))
        .collect();
    assert!(
        codes.contains(&("connector.tool-not-allowed".into(), "/od/connectors/required/0/tools/1".into())),
        "{codes:?}"
    );
    assert!(codes.contains(&("connector.unknown".into(), "/od/connectors/optional/0/id".into())), "{codes:?}");
    assert_eq!(v["ok"], false);
    // A catalog entry of the user's own makes it known.
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        data.join("connectors.json"),
        r#"{"connectors":{"nope":{"name":"Nope","authorizeUrl":"https://n.example/a","tokenUrl":"https://n.example/t",
            "apiBaseUrl":"https://n.example","tools":{}},"slack":{"tools":{"files.delete":{"method":"POST","path":"/files.delete"}}}}}"#,
    )
    .unwrap();
    let out = od_cli(&data, &["plugin", "doctor", p.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    // A broken catalog is named, field and file.
    std::fs::write(data.join("connectors.json"), r#"{"connectors":{"slack":{"tokenUrl":"ftp://x"}}}"#).unwrap();
    let out = od_cli(&data, &["connectors", "list"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("connectors.slack.tokenUrl") && err.contains("connectors.json"), "{err}");
}
