//! OAuth for a plugin's MCP server reached over HTTP (issue 17, spec §10.3.1 `oauth.route: mcp`),
//! end to end against a local MCP server and authorization server started here: protected-resource
//! metadata (RFC 9728) names the authorization server, its metadata (RFC 8414) the endpoints,
//! od registers itself (RFC 7591), the authorization checks PKCE S256 and the RFC 8707 resource,
//! and the MCP endpoint (Streamable HTTP, one answer as an event stream) answers only the bearer
//! token it issued.
//!
//! A run raises the plugin's `oauth-prompt` surface; the authorization started for it answers it
//! through the callback; the server's tools then index and call with the stored token, which is
//! refreshed once it expires; a second run in the project is not asked; the token is nowhere in
//! the data dir but its owner-only credential file; disconnecting makes calls exit 74.

use crate::common;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use common::harness::{files_below, of, write_plugin, Engine};
use serde_json::{json, Value};
use sha2::Digest;
use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};

const NOW: i64 = 1_800_000_000_000;
pub(crate) const ACCESS: &str = "mcp-ACCESS-91be0c";
const ACCESS2: &str = "mcp-ACCESS2-3a7f55";
const REFRESH: &str = "mcp-REFRESH-c40d18";

#[derive(Default)]
pub(crate) struct Server {
    /// The base URL its metadata names (set by `start_server`; an HTTPS front's when behind one).
    pub(crate) base: Mutex<String>,
    pub(crate) registered: Mutex<Vec<Value>>,
    /// code → (challenge, redirect_uri)
    codes: Mutex<HashMap<String, (String, String)>>,
    refreshed: Mutex<u32>,
    /// Every MCP message: (method, bearer, session id, protocol version header).
    pub(crate) seen: Mutex<Vec<(String, String, String, String)>>,
}

fn base(s: &Server) -> String {
    s.base.lock().unwrap().clone()
}

async fn resource_meta(State(s): State<Arc<Server>>) -> Json<Value> {
    let b = base(&s);
    Json(json!({ "resource": format!("{b}/mcp"), "authorization_servers": [format!("{b}/auth")],
                 "scopes_supported": ["brand.read"] }))
}

async fn as_meta(State(s): State<Arc<Server>>) -> Json<Value> {
    let b = base(&s);
    Json(json!({ "issuer": format!("{b}/auth"), "authorization_endpoint": format!("{b}/auth/authorize"),
                 "token_endpoint": format!("{b}/auth/token"), "registration_endpoint": format!("{b}/auth/register"),
                 "code_challenge_methods_supported": ["S256"], "response_types_supported": ["code"] }))
}

async fn register(State(s): State<Arc<Server>>, Json(b): Json<Value>) -> Response {
    assert_eq!(b["token_endpoint_auth_method"], "none", "{b}");
    s.registered.lock().unwrap().push(b);
    (StatusCode::CREATED, Json(json!({ "client_id": "dyn-client-1" }))).into_response()
}

async fn authorize(State(s): State<Arc<Server>>, Query(q): Query<HashMap<String, String>>) -> Response {
    assert_eq!(q["client_id"], "dyn-client-1", "{q:?}");
    assert_eq!(q["code_challenge_method"], "S256", "{q:?}");
    assert_eq!(q["resource"], format!("{}/mcp", base(&s)), "RFC 8707: {q:?}");
    assert_eq!(q["scope"], "brand.read", "{q:?}");
    let code = format!("code-{}", s.codes.lock().unwrap().len());
    s.codes.lock().unwrap().insert(code.clone(), (q["code_challenge"].clone(), q["redirect_uri"].clone()));
    Redirect::to(&format!("{}?code={code}&state={}", q["redirect_uri"], q["state"])).into_response()
}

async fn token(State(s): State<Arc<Server>>, body: String) -> Response {
    let f: HashMap<String, String> = serde_urlencoded::from_str(&body).unwrap();
    let refused = |why: &str| {
        (StatusCode::BAD_REQUEST, Json(json!({ "error": "invalid_grant", "error_description": why }))).into_response()
    };
    if f.get("resource").map(String::as_str) != Some(&format!("{}/mcp", base(&s))) {
        return refused("resource");
    }
    match f.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let Some((challenge, redirect)) = s.codes.lock().unwrap().remove(&f["code"]) else {
                return refused("unknown or used code");
            };
            let verifier = f.get("code_verifier").cloned().unwrap_or_default();
            let computed =
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
            if computed != challenge || f.get("redirect_uri") != Some(&redirect) {
                return refused("PKCE verifier or redirect_uri");
            }
            Json(json!({ "access_token": ACCESS, "token_type": "Bearer", "expires_in": 3600,
                         "refresh_token": REFRESH, "scope": "brand.read" }))
            .into_response()
        }
        Some("refresh_token") if f.get("refresh_token").map(String::as_str) == Some(REFRESH) => {
            *s.refreshed.lock().unwrap() += 1;
            Json(json!({ "access_token": ACCESS2, "token_type": "Bearer", "expires_in": 3600 })).into_response()
        }
        _ => refused("grant"),
    }
}

fn header(h: &HeaderMap, name: &str) -> String {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
}

async fn mcp(State(s): State<Arc<Server>>, h: HeaderMap, Json(msg): Json<Value>) -> Response {
    let bearer = header(&h, "authorization");
    let method = msg["method"].as_str().unwrap_or("").to_string();
    s.seen.lock().unwrap().push((
        method.clone(),
        bearer.clone(),
        header(&h, "mcp-session-id"),
        header(&h, "mcp-protocol-version"),
    ));
    if bearer != format!("Bearer {ACCESS}") && bearer != format!("Bearer {ACCESS2}") {
        let www = format!("Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"", base(&s));
        return (StatusCode::UNAUTHORIZED, [("www-authenticate", www)]).into_response();
    }
    let id = msg["id"].clone();
    let answer = |result: Value| json!({ "jsonrpc": "2.0", "id": id, "result": result });
    match method.as_str() {
        "initialize" => (
            [("mcp-session-id", "sess-42")],
            Json(answer(json!({ "protocolVersion": "2025-06-18", "capabilities": { "tools": {} },
                                "serverInfo": { "name": "brandkit", "version": "1.0.0" } }))),
        )
            .into_response(),
        "notifications/initialized" => StatusCode::ACCEPTED.into_response(),
        // The list comes back as an event stream, after a progress notification.
        "tools/list" => {
            let tools = answer(json!({ "tools": [ { "name": "palette", "description": "The brand's colour palette",
                "inputSchema": { "type": "object", "properties": { "brand": { "type": "string" } } } } ] }));
            let body = format!(
                "event: message\ndata: {}\n\nevent: message\ndata: {tools}\n\n",
                json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": { "progress": 1 } })
            );
            ([("content-type", "text/event-stream")], body).into_response()
        }
        "tools/call" => {
            let brand = msg["params"]["arguments"]["brand"].as_str().unwrap_or("?");
            Json(answer(json!({ "content": [ { "type": "text", "text": format!("{brand}: #ff6600 #1a1a1a") } ] })))
                .into_response()
        }
        _ => Json(json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32601, "message": "no such method" } }))
            .into_response(),
    }
}

pub(crate) fn start_server(rt: &tokio::runtime::Runtime, s: Arc<Server>) -> String {
    let app = Router::new()
        .route("/.well-known/oauth-protected-resource/mcp", get(resource_meta))
        .route("/.well-known/oauth-authorization-server/auth", get(as_meta))
        .route("/auth/register", post(register))
        .route("/auth/authorize", get(authorize))
        .route("/auth/token", post(token))
        .route("/mcp", post(mcp))
        .with_state(s.clone());
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
    let b = format!("http://{addr}");
    *s.base.lock().unwrap() = b.clone();
    b
}

#[test]
fn an_mcp_server_is_authorized_from_its_surface_and_called_with_its_token() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let srt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let server = Arc::new(Server::default());
    let base = start_server(&srt, server.clone());
    let e = Engine::start(&data, NOW);

    let dir = tmp.path().join("brand");
    write_plugin(&dir, "brand", "1.0.0", json!([ { "id": "generate", "atoms": ["file-write"] } ]), "Use the brand.");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("open-design.json")).unwrap()).unwrap();
    m["od"]["context"] = json!({ "mcp": [ { "name": "brandkit", "url": format!("{base}/mcp") },
                                          { "name": "local", "command": "true" } ] });
    m["od"]["genui"] = json!({ "surfaces": [ { "id": "brandkit-auth", "kind": "oauth-prompt", "persist": "project",
        "prompt": "Authorize Brandkit", "oauth": { "route": "mcp", "mcpServerId": "brandkit" } } ] });
    std::fs::write(dir.join("open-design.json"), m.to_string()).unwrap();
    e.install(&dir);

    // Before the authorization the server refuses od: the index says how to authorize. (The CLI
    // reads the local token from the data dir: its stdio server needs the exec right.)
    let (code, idx) = e.od_json(&["tools", "index", "--plugin", "brand", "--data-dir", data.to_str().unwrap()]);
    assert_eq!(code, 0, "{idx}");
    let row = idx["servers"].as_array().unwrap().iter().find(|r| r["server"] == "brandkit").unwrap().clone();
    assert_eq!(row["status"], "failed", "{row}");
    assert!(row["reason"].as_str().unwrap().contains("od mcp oauth start --plugin brand --server brandkit"), "{row}");

    // Bad starts: a stdio server, an unknown one, no plugin, a surface of another server.
    for (body, field) in [
        (json!({ "pluginId": "brand", "serverId": "local" }), "serverId"),
        (json!({ "pluginId": "brand", "serverId": "nope" }), "serverId"),
        (json!({ "serverId": "brandkit" }), "pluginId"),
    ] {
        let (code, v) = e.post("/api/mcp/oauth/start", body.clone());
        assert_eq!((code, v["error"]["data"]["field"].clone()), (400, json!(field)), "{body}: {v}");
    }
    let bogus = ureq::get(&format!("{}/api/mcp/oauth/callback?state=nope&code=x", e.url))
        .set("Sec-Fetch-Site", "cross-site")
        .call();
    assert!(matches!(bogus, Err(ureq::Error::Status(400, _))), "{bogus:?}");

    // The run asks its surface.
    let run1 = e.start_run(json!({ "pluginId": "brand" }));
    let seen = e.watch_until(&run1, "genui_surface_request");
    let req = seen.last().unwrap();
    assert_eq!(req["event"], "genui_surface_request", "{seen:?}");
    assert_eq!(req["data"]["surfaceId"], "brandkit-auth");
    let (code, v) =
        e.post("/api/mcp/oauth/start", json!({ "serverId": "local", "runId": run1, "surfaceId": "brandkit-auth" }));
    assert_eq!((code, v["error"]["data"]["field"].clone()), (400, json!("surfaceId")), "{v}");

    // Authorize it: the plugin is the run's; the browser follows the redirects to od's callback.
    let (code, started) =
        e.post("/api/mcp/oauth/start", json!({ "serverId": "brandkit", "runId": run1, "surfaceId": "brandkit-auth" }));
    assert_eq!(code, 200, "{started}");
    assert_eq!(started["pluginId"], "brand");
    assert_eq!(started["redirectUri"], format!("{}/api/mcp/oauth/callback", e.url));
    let url = started["authorizeUrl"].as_str().unwrap();
    assert!(url.starts_with(&format!("{base}/auth/authorize?")), "{url}");
    let page = ureq::get(url).set("Sec-Fetch-Site", "cross-site").call().unwrap();
    let html = page.into_string().unwrap();
    assert!(html.contains("Authorized MCP server brandkit"), "{html}");
    assert_eq!(server.registered.lock().unwrap().len(), 1);
    assert_eq!(server.registered.lock().unwrap()[0]["redirect_uris"], json!([started["redirectUri"]]));
    let state = started["state"].as_str().unwrap();
    let again = ureq::get(&format!("{}/api/mcp/oauth/callback?state={state}&code=code-0", e.url)).call();
    assert!(matches!(again, Err(ureq::Error::Status(400, _))), "single use: {again:?}");

    let ev = e.watch(&run1);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:?}");
    let answered = of(&ev, "genui_surface_response");
    assert_eq!(answered.len(), 1, "{ev:?}");
    assert_eq!(answered[0]["respondedBy"], "oauth");
    assert_eq!(answered[0]["value"], json!({ "mcpServerId": "brandkit", "status": "connected" }));
    // Kept for the project: the reference's state-sync line follows the answer (when asked for).
    assert!(of(&ev, "genui_state_synced").is_empty());
    let derived = e.watch_query(&run1, "?derived=true");
    let synced = of(&derived, "genui_state_synced");
    assert_eq!(
        synced,
        vec![
            &json!({ "kind": "genui_state_synced", "surfaceId": "brandkit-auth", "runId": run1, "persistTier": "project" })
        ]
    );

    let (code, st) = e.od_json(&["mcp", "oauth", "status", "--plugin", "brand", "--server", "brandkit"]);
    assert_eq!((code, st["connected"].clone(), st["scope"].clone()), (0, json!(true), json!("brand.read")), "{st}");

    // The tools index and call with the token, over one session each.
    let (code, idx) = e.od_json(&["tools", "index", "--plugin", "brand", "--data-dir", data.to_str().unwrap()]);
    assert_eq!(code, 0, "{idx}");
    let row = idx["servers"].as_array().unwrap().iter().find(|r| r["server"] == "brandkit").unwrap().clone();
    assert_eq!(
        (row["status"].clone(), row["tools"].clone()),
        (json!("indexed"), json!(["brand.brandkit.palette"])),
        "{row}"
    );
    let (code, out) = e.od_json(&["tools", "call", "brand.brandkit.palette", "--input", r#"{"brand":"acme"}"#]);
    assert_eq!(code, 0, "{out}");
    assert!(out.to_string().contains("acme: #ff6600"), "{out}");
    {
        let seen = server.seen.lock().unwrap();
        let call = seen.iter().rfind(|m| m.0 == "tools/call").unwrap();
        assert_eq!(call.1, format!("Bearer {ACCESS}"));
        assert_eq!((call.2.as_str(), call.3.as_str()), ("sess-42", "2025-06-18"), "session and protocol version");
    }

    // The token expires: the next call refreshes it first.
    e.clock.advance(3_601_000);
    let (code, out) = e.od_json(&["tools", "call", "brand.brandkit.palette", "--input", r#"{"brand":"zed"}"#]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(*server.refreshed.lock().unwrap(), 1);
    assert_eq!(
        server.seen.lock().unwrap().iter().rfind(|m| m.0 == "tools/call").unwrap().1,
        format!("Bearer {ACCESS2}")
    );

    // A second run in the project is not asked.
    let (_, info) = e.get(&format!("/api/runs/{run1}"));
    let project = info["projectId"].as_str().or(info["run"]["projectId"].as_str()).unwrap().to_string();
    let (_, ev2) = e.run(json!({ "pluginId": "brand", "projectId": project }));
    assert_eq!(ev2.last().unwrap()["data"]["status"], "succeeded", "{ev2:?}");
    assert!(of(&ev2, "genui_surface_request").is_empty(), "{ev2:?}");
    assert_eq!(of(&ev2, "genui_surface_response")[0]["respondedBy"], "mcp");

    // The tokens are only in the owner-only credential file.
    for f in &files_below(&data) {
        let bytes = std::fs::read(f).unwrap_or_default();
        let holds = [ACCESS, ACCESS2, REFRESH].iter().any(|t| bytes.windows(t.len()).any(|w| w == t.as_bytes()));
        let cred = f.parent().is_some_and(|p| p.ends_with("credentials/mcp")) && !f.ends_with("clients.json");
        assert_eq!(holds, cred, "{}", f.display());
        if cred {
            assert_eq!(std::fs::metadata(f).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }

    // Disconnected: calls say how to authorize again (exit 74).
    let (code, v) = e.od_json(&["mcp", "oauth", "disconnect", "--plugin", "brand", "--server", "brandkit"]);
    assert_eq!((code, v["connected"].clone()), (0, json!(false)), "{v}");
    let (code, err) = e.od_json(&["tools", "call", "brand.brandkit.palette", "--input", "{}"]);
    assert_eq!(code, 74, "{err}");
    assert_eq!(err["error"]["code"], "mcp-not-authorized");
    let (code, _) = e.od_json(&["mcp", "oauth", "disconnect", "--plugin", "brand", "--server", "brandkit"]);
    assert_eq!(code, 74, "nothing to disconnect");
    // The log holds the facts.
    let (_, log) = e.get("/api/log/events?limit=10000");
    let text = log.to_string();
    assert!(text.contains("mcp_server_authorized") && text.contains("mcp_server_deauthorized"), "{text}");
}
