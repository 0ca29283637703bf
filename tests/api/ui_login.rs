//! Issue 14, "non-loopback binds keep requiring the token": a browser logs in once at `/login`
//! (`POST /api/auth/login`), and its `HttpOnly; SameSite=Strict` cookie then authorizes `/api/*`
//! like the bearer token; a wrong token sets nothing; cross-site requests stay refused with the
//! cookie; logout clears it; `/` sends a browser without a token to the login page; and a
//! non-loopback daemon, reached by IP or name, takes requests from its own pages (Origin =
//! `http://` + Host) and no others. Issue 36: the cookie holds a session of its own (never the
//! token) that expires and is revoked by logout and by `od daemon sessions revoke`; `Secure` under
//! `OD_SECURE_COOKIES`; the bearer scheme in any case; and the wrong-token throttle never locks
//! out the right token. Raw requests: the test controls every header.

use crate::common;

use common::raw::{request, RawResponse};
use od::daemon::{start, DaemonConfig, Running};
use serde_json::json;

const TOKEN: &str = "s3cret-token";

struct Daemon {
    rt: tokio::runtime::Runtime,
    running: Option<Running>,
    url: String,
    port: String,
}

impl Daemon {
    /// A daemon with `OD_API_TOKEN` on `host`.
    fn start(data: &std::path::Path, host: &str) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let mut cfg = DaemonConfig::new(data.to_path_buf());
        cfg.host = host.to_string();
        cfg.token = Some(TOKEN.into());
        // A non-loopback bind with a token serves plain HTTP only behind a declared TLS proxy
        // (issue 29): these tests speak plain HTTP, as the proxy would to the daemon.
        cfg.http.tls_terminated_by_proxy = host != "127.0.0.1";
        let running = rt.block_on(start(cfg)).unwrap();
        let url = running.url();
        let port = url.rsplit_once(':').unwrap().1.to_string();
        Self { rt, running: Some(running), url, port }
    }

    fn req(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> RawResponse {
        request(&self.url, method, path, headers, body.as_bytes())
    }

    fn login(&self, headers: &[(&str, &str)], token: &str) -> RawResponse {
        let mut h = vec![("Content-Type", "application/json")];
        h.extend_from_slice(headers);
        self.req("POST", "/api/auth/login", &h, &json!({ "token": token }).to_string())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            self.rt.block_on(r.stop());
        }
    }
}

/// The `Set-Cookie` header of a response, if any.
fn set_cookie(r: &RawResponse) -> Option<String> {
    r.head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("set-cookie").then(|| v.trim().to_string())
    })
}

fn header<'a>(r: &'a RawResponse, name: &str) -> Option<&'a str> {
    r.head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then_some(v.trim())
    })
}

/// `Host` and `Cookie`, then `extra`.
fn with<'a>(host: &'a str, cookie: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![("Host", host), ("Cookie", cookie)];
    h.extend_from_slice(extra);
    h
}

#[test]
fn a_browser_logs_in_with_the_token_and_the_cookie_authorizes_the_api() {
    let tmp = tempfile::tempdir().unwrap();
    let d = Daemon::start(&tmp.path().join("data"), "127.0.0.1");
    let host = format!("127.0.0.1:{}", d.port);
    let origin = format!("http://{host}");
    let same = [("Host", host.as_str()), ("Origin", origin.as_str()), ("Sec-Fetch-Site", "same-origin")];

    // No token: `/` sends the browser to the login page, which (with its files) is served.
    let r = d.req("GET", "/", &[("Host", &host)], "");
    assert_eq!((r.status, header(&r, "location")), (303, Some("/login")), "{r:?}");
    for path in ["/login", "/ui/login.js", "/ui/login.css"] {
        assert_eq!(d.req("GET", path, &[("Host", &host)], "").status, 200, "{path}");
    }
    assert_eq!(d.req("GET", "/ui/index.html", &[("Host", &host)], "").status, 401, "the app's files want the token");
    let r = d.req("GET", "/api/auth/session", &same, "");
    assert_eq!(r.json(), json!({ "authenticated": false, "tokenRequired": true }));
    assert_eq!(d.req("GET", "/api/plugins", &same, "").status, 401);

    // A wrong token: 401 naming `token`, no cookie.
    let r = d.login(&same, "guess");
    assert_eq!((r.status, r.code().as_str()), (401, "unauthorized"), "{r:?}");
    assert_eq!(r.json()["error"]["data"]["field"], "token");
    assert!(set_cookie(&r).is_none(), "{}", r.head);

    // The right one: 200 and an HttpOnly, SameSite=Strict cookie for the whole site, expiring
    // with its session, not Secure on plain HTTP.
    let r = d.login(&same, TOKEN);
    assert_eq!((r.status, r.json()), (200, json!({ "ok": true })), "{r:?}");
    let cookie = set_cookie(&r).unwrap();
    let mut attrs = cookie.split(';').map(str::trim);
    let pair = attrs.next().unwrap().to_string();
    let attrs: Vec<&str> = attrs.collect();
    let max_age = format!("Max-Age={}", od::limits::SESSION_TTL_MS / 1000);
    for a in ["HttpOnly", "SameSite=Strict", "Path=/", max_age.as_str()] {
        assert!(attrs.contains(&a), "{cookie}");
    }
    assert!(!attrs.contains(&"Secure"), "{cookie}");
    // The cookie holds a session's own secret, not the token, and that secret is no bearer token.
    let secret = pair.split_once('=').unwrap().1.to_string();
    assert!(!secret.contains(TOKEN) && secret.len() == 64, "{pair}");
    let bearer = format!("Bearer {secret}");
    assert_eq!(d.req("GET", "/api/plugins", &[("Host", &host), ("Authorization", &bearer)], "").status, 401);

    // The cookie works wherever the token does: API reads and writes, the app itself.
    let r = d.req("GET", "/api/plugins", &with(&host, &pair, &[("Sec-Fetch-Site", "same-origin")]), "");
    assert_eq!(r.status, 200, "{r:?}");
    let note = json!({ "stream": "note:ui", "text": "from the page" }).to_string();
    let h = with(&host, &pair, &[("Origin", &origin), ("Content-Type", "application/json")]);
    assert_eq!(d.req("POST", "/api/log/notes", &h, &note).status, 200);
    let r = d.req("GET", "/", &with(&host, &pair, &[]), "");
    assert_eq!(r.status, 200);
    assert!(r.body.to_ascii_lowercase().starts_with("<!doctype html>"));
    let r = d.req("GET", "/api/auth/session", &with(&host, &pair, &[]), "");
    assert_eq!(r.json(), json!({ "authenticated": true, "tokenRequired": true }));
    // A bearer header, when sent, decides alone.
    let r = d.req("GET", "/api/plugins", &with(&host, &pair, &[("Authorization", "Bearer wrong")]), "");
    assert_eq!(r.status, 401);

    // Another site's requests are refused, cookie or not.
    let r = d.req("GET", "/api/plugins", &with(&host, &pair, &[("Origin", "http://evil.example")]), "");
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden-origin"));
    let r = d.req("GET", "/api/plugins", &with(&host, &pair, &[("Sec-Fetch-Site", "cross-site")]), "");
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden-origin"));
    let h = with(&host, &pair, &[("Origin", "http://evil.example"), ("Content-Type", "application/json")]);
    assert_eq!(d.req("POST", "/api/log/notes", &h, &note).status, 403);
    let r = d.login(&[("Host", &host), ("Origin", "http://evil.example")], TOKEN);
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden-origin"), "no login from another site");
    assert!(set_cookie(&r).is_none());

    // Logout clears the cookie (empty, expired), with the same name and attributes.
    let r = d.req("POST", "/api/auth/logout", &with(&host, &pair, &[("Origin", &origin)]), "");
    assert_eq!(r.status, 200, "{r:?}");
    let cleared = set_cookie(&r).unwrap();
    let name = pair.split_once('=').unwrap().0;
    assert!(cleared.starts_with(&format!("{name}=;")) && cleared.contains("Max-Age=0"), "{cleared}");
    assert!(cleared.contains("HttpOnly") && cleared.contains("Path=/"), "{cleared}");
    // …and ends the session: the old cookie, replayed, is no login.
    let r = d.req("GET", "/api/plugins", &with(&host, &pair, &[]), "");
    assert_eq!(r.status, 401, "a logged-out session is revoked: {r:?}");
}

#[test]
fn the_daemons_local_token_logs_in_too() {
    let tmp = tempfile::tempdir().unwrap();
    let d = Daemon::start(&tmp.path().join("data"), "127.0.0.1");
    let local = d.running.as_ref().unwrap().local_token.clone();
    let host = format!("127.0.0.1:{}", d.port);
    let r = d.login(&[("Host", &host)], &local);
    assert_eq!(r.status, 200, "{r:?}");
    let pair = set_cookie(&r).unwrap().split(';').next().unwrap().to_string();
    assert_eq!(d.req("GET", "/api/plugins", &[("Host", &host), ("Cookie", &pair)], "").status, 200);
    // A cookie of another value is no login.
    let name = pair.split_once('=').unwrap().0;
    let forged = format!("{name}=not-it");
    assert_eq!(d.req("GET", "/api/plugins", &[("Host", &host), ("Cookie", &forged)], "").status, 401);
    let r = d.req("GET", "/", &[("Host", &host), ("Cookie", &forged)], "");
    assert_eq!(r.status, 303);
}

#[test]
fn a_non_loopback_daemon_takes_its_own_pages_requests_by_ip_or_name_and_no_others() {
    let tmp = tempfile::tempdir().unwrap();
    let d = Daemon::start(&tmp.path().join("data"), "0.0.0.0");
    for name in ["192.0.2.7", "od.lan"] {
        let host = format!("{name}:{}", d.port);
        let origin = format!("http://{host}");
        let r = d.login(&[("Host", &host), ("Origin", &origin), ("Sec-Fetch-Site", "same-origin")], TOKEN);
        assert_eq!(r.status, 200, "{name}: {r:?}");
        let pair = set_cookie(&r).unwrap().split(';').next().unwrap().to_string();
        let h = [("Host", host.as_str()), ("Origin", origin.as_str()), ("Cookie", pair.as_str())];
        assert_eq!(d.req("GET", "/api/plugins", &h, "").status, 200, "{name}");
        // Another origin on the same daemon: refused, cookie or not.
        for other in ["http://evil.example", &format!("http://{name}:1"), "null"] {
            let h = [("Host", host.as_str()), ("Origin", other), ("Cookie", pair.as_str())];
            let r = d.req("GET", "/api/plugins", &h, "");
            assert_eq!((r.status, r.code().as_str()), (403, "forbidden-origin"), "{name} from {other}");
            let r = d.login(&[("Host", &host), ("Origin", other)], TOKEN);
            assert_eq!(r.status, 403, "{name}: login from {other}");
        }
        // `/` without a token: the login page.
        assert_eq!(d.req("GET", "/", &[("Host", &host)], "").status, 303);
    }
}

/// Issue 36 #5: wrong tokens are throttled per client address without locking out the right
/// one. After 21+ wrong bearer tokens the right bearer token (with a lower-case scheme too) and
/// the right login still pass at once; wrong ones are 429. A guesser that keeps going from the
/// same address runs out of checks, and then `OD_API_TOKEN` candidates wait seconds (Retry-After)
/// — but the daemon's local token (the CLI's) and a login session never do: the CLI of the data
/// dir keeps working, and with `--daemon-url` it says the daemon throttles it (exit 77), not that
/// no daemon or another od process is there. Requests without a token are never counted.
#[test]
fn wrong_tokens_are_throttled_but_the_right_token_and_login_still_pass() {
    use od::limits::{AUTH_FAILURES_PER_WINDOW, AUTH_FAILURE_WINDOW_MS, AUTH_THROTTLED_CHECKS};
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = common::harness::Engine::start_with(&data, 1_800_000_000_000, |cfg| cfg.token = Some(TOKEN.into()));
    let call_with = |auth: Option<String>, cookie: Option<&str>| -> (u16, Option<String>) {
        let mut r = ureq::get(&format!("{}/api/plugins", e.url));
        if let Some(a) = auth {
            r = r.set("Authorization", &a);
        }
        if let Some(c) = cookie {
            r = r.set("Cookie", c);
        }
        match r.call() {
            Ok(r) => (r.status(), None),
            Err(ureq::Error::Status(code, r)) => (code, r.header("retry-after").map(str::to_string)),
            Err(other) => panic!("{other}"),
        }
    };
    let call = |token: Option<&str>| call_with(token.map(|t| format!("Bearer {t}")), None);
    let login = |token: &str| -> (u16, Option<String>) {
        match ureq::post(&format!("{}/api/auth/login", e.url)).send_json(json!({ "token": token })) {
            Ok(r) => (r.status(), r.header("set-cookie").map(|c| c.split(';').next().unwrap().to_string())),
            Err(ureq::Error::Status(code, _)) => (code, None),
            Err(other) => panic!("{other}"),
        }
    };
    let elsewhere = tmp.path().join("elsewhere");
    let cli = |args: &[&str], data: &std::path::Path| {
        let out = std::process::Command::new(common::harness::OD)
            .args(args)
            .arg("--data-dir")
            .arg(data)
            .env("OD_API_TOKEN", TOKEN)
            .env_remove("OD_DAEMON_URL")
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    // Without a token: 401, never counted.
    for _ in 0..30 {
        assert_eq!(call(None).0, 401);
    }
    let (_, session) = login(TOKEN);
    let session = session.expect("a session cookie");
    for i in 0..AUTH_FAILURES_PER_WINDOW {
        assert_eq!(call(Some("guess")).0, 401, "guess {i}");
    }
    // The 21st wrong token: 429 with Retry-After.
    let (status, retry) = call(Some("guess"));
    assert_eq!(status, 429);
    assert!(retry.is_some());
    // The right bearer token, in any case of the scheme, and the right login: at once.
    assert_eq!(call(Some(TOKEN)).0, 200);
    assert_eq!(call_with(Some(format!("bearer {TOKEN}")), None).0, 200);
    assert_eq!(login(TOKEN).0, 200);
    assert_eq!(login("guess").0, 429, "a wrong login is 429 too");
    // A guesser that keeps going spends the address's checks: then candidates for OD_API_TOKEN
    // wait, unread — the right one included — for at most one interval.
    for _ in 0..AUTH_THROTTLED_CHECKS {
        call(Some("guess"));
    }
    let interval = AUTH_FAILURE_WINDOW_MS / i64::from(AUTH_FAILURES_PER_WINDOW);
    let wait = ((interval + 999) / 1000).to_string();
    assert_eq!(call(Some(TOKEN)), (429, Some(wait.clone())));
    assert_eq!(login(TOKEN).0, 429);
    // What od minted still passes: the login session and the local token (the CLI's).
    assert_eq!(call_with(None, Some(&session)).0, 200);
    assert_eq!(call(Some(&e.token)).0, 200);
    let (code, stderr) = cli(&["plugin", "list", "--json"], &data);
    assert_eq!(code, Some(0), "the data dir's CLI uses the local token: {stderr}");
    // From elsewhere, with --daemon-url and OD_API_TOKEN, the CLI tells the throttle, not a
    // missing daemon.
    let (code, stderr) = cli(&["plugin", "list", "--daemon-url", &e.url, "--json"], &elsewhere);
    assert_eq!(code, Some(77), "{stderr}");
    assert!(stderr.contains("too-many-attempts") && stderr.contains("throttles this address"), "{stderr}");
    assert!(!stderr.contains("another od process") && !stderr.contains("no od daemon"), "{stderr}");
    // A discovery file whose token is not the daemon's (stale): the data dir's CLI is throttled
    // like any guess, and says so (exit 77), instead of "another od process" (exit 80).
    let file = data.join("daemon.json");
    let original = std::fs::read_to_string(&file).unwrap();
    let mut stale: serde_json::Value = serde_json::from_str(&original).unwrap();
    stale["token"] = json!("stale-token");
    std::fs::write(&file, stale.to_string()).unwrap();
    let (code, stderr) = cli(&["plugin", "list", "--json"], &data);
    assert_eq!(code, Some(77), "{stderr}");
    assert!(stderr.contains("throttles this address") && !stderr.contains("another od process"), "{stderr}");
    std::fs::write(&file, original).unwrap();
    // One interval later the right token gets its check.
    e.clock.advance(interval);
    assert_eq!(call(Some(TOKEN)).0, 200);
    e.clock.advance(AUTH_FAILURE_WINDOW_MS);
    assert_eq!(call(Some("guess")).0, 401, "a new window");
    assert_eq!(login(TOKEN).0, 200);
}

/// Issue 36 "also seen": a login session expires ([`od::limits::SESSION_TTL_MS`]) and is revoked
/// by `od daemon sessions revoke` (one by id, or all) — listed by id and times, never by secret.
#[test]
fn sessions_expire_and_are_revoked_by_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = common::harness::Engine::start_with(&data, 1_800_000_000_000, |cfg| cfg.token = Some(TOKEN.into()));
    let login = || -> String {
        let r = ureq::post(&format!("{}/api/auth/login", e.url)).send_json(json!({ "token": TOKEN })).unwrap();
        r.header("set-cookie").unwrap().split(';').next().unwrap().to_string()
    };
    let status = |cookie: &str| match ureq::get(&format!("{}/api/plugins", e.url)).set("Cookie", cookie).call() {
        Ok(r) => r.status(),
        Err(ureq::Error::Status(code, _)) => code,
        Err(other) => panic!("{other}"),
    };
    let od = |args: &[&str]| {
        let out = common::harness::od_cli(&data, args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let (a, b, c) = (login(), login(), login());
    assert!([&a, &b, &c].iter().all(|x| status(x) == 200));
    let listed = od(&["daemon", "sessions", "list", "--json"]);
    let ids: Vec<String> =
        listed["sessions"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(ids.len(), 3, "{listed}");
    let text = listed.to_string();
    for cookie in [&a, &b, &c] {
        assert!(!text.contains(cookie.split_once('=').unwrap().1), "no secret is listed");
    }
    // Revoke one by id: exactly one cookie stops working.
    let out = od(&["daemon", "sessions", "revoke", &ids[0], "--json"]);
    assert_eq!(out["revoked"], 1);
    let alive: Vec<u16> = [&a, &b, &c].iter().map(|x| status(x)).collect();
    assert_eq!(alive.iter().filter(|s| **s == 401).count(), 1, "{alive:?}");
    let unknown = common::harness::od_cli(&data, &["daemon", "sessions", "revoke", &ids[0], "--json"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("session-not-found"));
    // Expiry: a session is good until its TTL, not after.
    let d = login();
    e.clock.advance(od::limits::SESSION_TTL_MS - 1);
    assert_eq!(status(&d), 200);
    e.clock.advance(1);
    assert_eq!(status(&d), 401, "expired");
    // Revoke all.
    let fresh = login();
    let out = od(&["daemon", "sessions", "revoke", "--all", "--json"]);
    assert!(out["revoked"].as_u64().unwrap() >= 1);
    assert_eq!(status(&fresh), 401);
    assert_eq!(od(&["daemon", "sessions", "list", "--json"])["sessions"], json!([]));
}

/// Issue 36 "also seen": with `OD_SECURE_COOKIES` (HTTPS in front) the session cookie is `Secure`,
/// on login and on logout.
#[test]
fn the_session_cookie_is_secure_when_browsers_use_https() {
    let tmp = tempfile::tempdir().unwrap();
    let e = common::harness::Engine::start_with(&tmp.path().join("data"), 1_800_000_000_000, |cfg| {
        cfg.token = Some(TOKEN.into());
        cfg.http.secure_cookies = true;
    });
    let r = ureq::post(&format!("{}/api/auth/login", e.url)).send_json(json!({ "token": TOKEN })).unwrap();
    let cookie = r.header("set-cookie").unwrap().to_string();
    assert!(cookie.split(';').map(str::trim).any(|a| a == "Secure"), "{cookie}");
    let r = ureq::post(&format!("{}/api/auth/logout", e.url)).call().unwrap();
    assert!(r.header("set-cookie").unwrap().contains("Secure"));
}
