//! Connector tokens against a hostile or slow provider (issue 39, findings 5–7), through a run's
//! real tool token and `POST /api/tools/connectors/execute`, against a local OAuth token endpoint
//! and API started here. The run's exec agent hands its tool token to the test and waits.
//!
//! - 8 parallel calls on an expired token make ONE refresh at the provider (slow on purpose, so
//!   the calls overlap), all 8 succeed, and the credential is written through the durable-write
//!   primitive (no temp file left behind).
//! - `expires_in` of 2^64 − 1 is clamped: the refreshed token is not "expired" on its next use.
//! - A token holding CR/LF — stored earlier, or handed out by a refresh — and a provider echoing
//!   what it was sent (its API's answer, its refresh error) never put a secret in what the agent
//!   sees, nor anywhere in the data dir but the credential file.

use crate::common;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use common::harness::{files_below, script, write_plugin, Engine};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const NOW: i64 = 1_800_000_000_000;
const FRESH: &str = "fresh-ACCESS-9b1e";
const STALE: &str = "stale-SECRET-access";
const REFRESH: &str = "xoxr-REFRESH-77d2a1";

/// What the token endpoint answers a refresh with.
#[derive(Clone)]
enum Mode {
    Fresh {
        expires_in: u64,
    },
    /// An access token holding CR/LF.
    CrLf,
    /// A refusal quoting the refresh token it was sent.
    EchoError,
}

struct Provider {
    refreshes: AtomicUsize,
    mode: Mutex<Mode>,
}

async fn token(State(p): State<Arc<Provider>>, body: String) -> Response {
    let f: HashMap<String, String> = serde_urlencoded::from_str(&body).unwrap();
    assert_eq!(f.get("grant_type").map(String::as_str), Some("refresh_token"), "{body}");
    p.refreshes.fetch_add(1, Ordering::SeqCst);
    // Slow, so that parallel calls on the expired token all arrive while this refresh runs.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mode = p.mode.lock().unwrap().clone();
    match mode {
        Mode::Fresh { expires_in } => Json(json!({ "access_token": FRESH, "token_type": "bearer",
            "refresh_token": REFRESH, "expires_in": expires_in }))
        .into_response(),
        Mode::CrLf => Json(json!({ "access_token": "fresh-SECRET\r\nX-Evil: 1", "token_type": "bearer",
            "expires_in": 3600 }))
        .into_response(),
        Mode::EchoError => (
            StatusCode::BAD_REQUEST,
            Json(json!({ "error": "invalid_grant",
                "error_description": format!("refresh token {} is revoked", f["refresh_token"]) })),
        )
            .into_response(),
    }
}

/// The API: the channels for the fresh token; anything else is refused, echoing what was sent.
async fn channels(h: HeaderMap) -> Response {
    let auth = h.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    if auth == format!("Bearer {FRESH}") {
        return Json(json!({ "ok": true, "channels": [ { "id": "C1", "name": "general" } ] })).into_response();
    }
    (StatusCode::UNAUTHORIZED, Json(json!({ "ok": false, "youSent": auth }))).into_response()
}

/// The agent: hands its tool token over, then waits for the test to release it.
const AGENT: &str = r#"
printf '%s' "$OD_TOOL_TOKEN" > "$SIG/token.tmp" && mv "$SIG/token.tmp" "$SIG/token"
while [ ! -e "$SIG/release" ]; do sleep 0.05; done
echo '{"type":"done"}'
"#;

struct Setup {
    tmp: tempfile::TempDir,
    _rt: tokio::runtime::Runtime,
    data: PathBuf,
    sig: PathBuf,
    e: Engine,
    provider: Arc<Provider>,
    run: String,
    token: String,
}

fn put_cred(data: &Path, access: &str, expires_at: i64) {
    let dir = data.join("credentials/connectors");
    std::fs::create_dir_all(&dir).unwrap();
    let c = json!({ "accessToken": access, "refreshToken": REFRESH, "tokenType": "bearer", "expiresAt": expires_at,
                    "scopes": ["channels:read"], "accountLabel": "Acme Team", "connectedAt": NOW - 10_000 });
    std::fs::write(dir.join("slack.json"), c.to_string()).unwrap();
}

fn cred(data: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(data.join("credentials/connectors/slack.json")).unwrap()).unwrap()
}

/// A daemon whose `slack` connector points at the provider, an expired stored credential, and a
/// live run of a restricted plugin granted `connector:slack`, its tool token in hand.
fn setup(mode: Mode) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let provider = Arc::new(Provider { refreshes: AtomicUsize::new(0), mode: Mutex::new(mode) });
    let app = Router::new()
        .route("/oauth/token", post(token))
        .route("/api/conversations.list", get(channels))
        .with_state(provider.clone());
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
    let catalog = json!({ "connectors": { "slack": { "clientId": "od-test-client",
        "authorizeUrl": format!("{base}/oauth/authorize"), "tokenUrl": format!("{base}/oauth/token"),
        "apiBaseUrl": format!("{base}/api") } } });
    std::fs::write(data.join("connectors.json"), catalog.to_string()).unwrap();
    put_cred(&data, STALE, NOW - 1_000);
    let e = Engine::start(&data, NOW);

    let plugin = tmp.path().join("digest");
    write_plugin(&plugin, "digest", "1.0.0", json!([ { "id": "digest", "atoms": ["file-write"] } ]), "Digest.");
    let path = plugin.join("open-design.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["od"]["connectors"] = json!({ "required": [ { "id": "slack", "tools": ["channels.list"] } ] });
    std::fs::write(&path, m.to_string()).unwrap();
    let r = ureq::post(&format!("{}/api/plugins/install", e.url))
        .send_json(json!({ "source": plugin.to_str().unwrap(), "trust": "restricted" }))
        .unwrap();
    assert!(r.into_string().unwrap().lines().last().unwrap().contains("\"success\""));

    let sig = tmp.path().join("sig");
    std::fs::create_dir_all(&sig).unwrap();
    let agent = script(tmp.path(), "agent.sh", AGENT);
    let run = e.start_run(json!({ "pluginId": "digest", "grantCaps": ["connector:slack", "pipeline:*"],
        "agent": "exec", "agentCommand": [agent.to_str().unwrap()], "agentEnv": { "SIG": sig.to_str().unwrap() } }));
    let token =
        common::daemon_proc::poll("the agent's tool token", 60, || std::fs::read_to_string(sig.join("token")).ok());
    Setup { tmp, _rt: rt, data, sig, e, provider, run, token }
}

impl Setup {
    /// One tool call with the run's token: status and body.
    fn exec(&self) -> (u16, Value) {
        let r = ureq::post(&format!("{}/api/tools/connectors/execute", self.e.url))
            .set("Authorization", &format!("Bearer {}", self.token))
            .send_json(json!({ "connectorId": "slack", "toolName": "channels.list", "input": { "limit": 1 } }));
        match r {
            Ok(r) => (r.status(), r.into_json().unwrap()),
            Err(ureq::Error::Status(c, r)) => (c, r.into_json().unwrap()),
            Err(e) => panic!("{e}"),
        }
    }

    fn refreshes(&self) -> usize {
        self.provider.refreshes.load(Ordering::SeqCst)
    }

    /// Lets the run end and stops the daemon; the temp dir (kept while the caller needs it) and
    /// the data dir.
    fn finish(self) -> (tempfile::TempDir, PathBuf) {
        std::fs::write(self.sig.join("release"), "").unwrap();
        let ev = self.e.watch(&self.run);
        assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:?}");
        self.e.stop();
        (self.tmp, self.data)
    }
}

#[test]
fn parallel_calls_on_an_expired_token_make_one_refresh_and_all_succeed() {
    let s = setup(Mode::Fresh { expires_in: 3600 });
    let s = Arc::new(s);
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || s.exec())
        })
        .collect();
    for c in calls {
        let (code, v) = c.join().unwrap();
        assert_eq!(code, 200, "{v}");
        assert_eq!(v["output"]["channels"][0]["name"], "general", "{v}");
    }
    assert_eq!(s.refreshes(), 1, "one refresh for 8 parallel calls");
    let c = cred(&s.data);
    assert_eq!((c["accessToken"].as_str(), c["expiresAt"].as_i64()), (Some(FRESH), Some(NOW + 3_600_000)), "{c}");
    let dir = s.data.join("credentials/connectors");
    let names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["slack.json"], "no temp file left behind");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(dir.join("slack.json")).unwrap().permissions().mode() & 0o777, 0o600);
    Arc::try_unwrap(s).ok().expect("the calls are done").finish();
}

#[test]
fn an_expires_in_of_2_64_minus_1_is_clamped_not_wrapped() {
    let s = setup(Mode::Fresh { expires_in: u64::MAX });
    for _ in 0..4 {
        let (code, v) = s.exec();
        assert_eq!(code, 200, "{v}");
    }
    assert_eq!(s.refreshes(), 1, "the refreshed token did not look expired");
    let c = cred(&s.data);
    assert_eq!(c["expiresAt"].as_i64(), Some(s.e.clock_now() + od::limits::MAX_TOKEN_LIFETIME_MS), "{c}");
    s.finish();
}

/// Whether `hay` holds any piece of a secret this test planted.
fn leaks(hay: &str) -> Option<&'static str> {
    ["SECRET", "X-Evil", REFRESH].into_iter().find(|p| hay.contains(p))
}

#[test]
fn a_token_with_cr_lf_or_an_echoing_provider_is_never_quoted() {
    let s = setup(Mode::CrLf);
    let mut seen = Vec::new();
    // A token stored before tokens were checked on arrival.
    put_cred(&s.data, "legacy-SECRET\r\nX-Evil: 1", NOW + 3_600_000);
    let (code, v) = s.exec();
    assert_eq!((code, v["error"]["code"].as_str()), (502, Some("connector-call-failed")), "{v}");
    seen.push(v);
    // A refresh handing out a token with CR/LF: refused, nothing stored.
    put_cred(&s.data, STALE, NOW - 1_000);
    let (code, v) = s.exec();
    assert_eq!((code, v["error"]["code"].as_str()), (502, Some("oauth-provider-refused")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("access_token"), "{v}");
    assert_eq!(cred(&s.data)["accessToken"], STALE);
    seen.push(v);
    // A refresh refused by a provider that quotes the refresh token back.
    *s.provider.mode.lock().unwrap() = Mode::EchoError;
    let (code, v) = s.exec();
    assert_eq!((code, v["error"]["code"].as_str()), (502, Some("oauth-provider-refused")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("[redacted]"), "{v}");
    seen.push(v);
    // An API that echoes the Authorization header it got.
    put_cred(&s.data, "wrong-SECRET-access", NOW + 3_600_000);
    let (code, v) = s.exec();
    assert_eq!((code, v["error"]["data"]["providerStatus"].as_u64()), (502, Some(401)), "{v}");
    assert_eq!(v["error"]["data"]["providerBody"]["youSent"], "Bearer [redacted]", "{v}");
    seen.push(v);
    for v in &seen {
        assert_eq!(leaks(&v.to_string()), None, "the agent saw a secret: {v}");
    }
    let (_keep, data) = s.finish();
    for f in files_below(&data) {
        if f.components().any(|c| c.as_os_str() == "credentials") {
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        assert_eq!(leaks(&text), None, "{} holds a secret", f.display());
    }
}
