//! Issue 14, "non-loopback binds keep requiring the token": a browser logs in once at `/login`
//! (`POST /api/auth/login`), the token is then kept in an `HttpOnly; SameSite=Strict` cookie that
//! authorizes `/api/*` like the bearer token; a wrong token sets nothing; cross-site requests stay
//! refused with the cookie; logout clears it; `/` sends a browser without a token to the login
//! page; and a non-loopback daemon, reached by IP or name, takes requests from its own pages
//! (Origin = `http://` + Host) and no others. Raw requests: the test controls every header.

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

    // The right one: 200 and an HttpOnly, SameSite=Strict cookie for the whole site.
    let r = d.login(&same, TOKEN);
    assert_eq!((r.status, r.json()), (200, json!({ "ok": true })), "{r:?}");
    let cookie = set_cookie(&r).unwrap();
    let mut attrs = cookie.split(';').map(str::trim);
    let pair = attrs.next().unwrap().to_string();
    let attrs: Vec<&str> = attrs.collect();
    for a in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(attrs.contains(&a), "{cookie}");
    }

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

/// Wrong tokens are throttled per client address: past the limit in a window, every request of
/// that address carrying a token — the right one included — and every login is 429 with
/// `Retry-After` until the window ends; requests without a token are not counted.
#[test]
fn wrong_tokens_are_throttled_per_address_until_the_window_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let e = common::harness::Engine::start_with(&tmp.path().join("data"), 1_800_000_000_000, |cfg| {
        cfg.token = Some(TOKEN.into())
    });
    let call = |token: Option<&str>| -> (u16, Option<String>) {
        let mut r = ureq::get(&format!("{}/api/plugins", e.url));
        if let Some(t) = token {
            r = r.set("Authorization", &format!("Bearer {t}"));
        }
        match r.call() {
            Ok(r) => (r.status(), None),
            Err(ureq::Error::Status(code, r)) => (code, r.header("retry-after").map(str::to_string)),
            Err(other) => panic!("{other}"),
        }
    };
    let login = |token: &str| -> u16 {
        match ureq::post(&format!("{}/api/auth/login", e.url)).send_json(json!({ "token": token })) {
            Ok(r) => r.status(),
            Err(ureq::Error::Status(code, _)) => code,
            Err(other) => panic!("{other}"),
        }
    };
    // Without a token: 401, never counted.
    for _ in 0..30 {
        assert_eq!(call(None).0, 401);
    }
    assert_eq!(call(Some(TOKEN)).0, 200);
    for i in 0..od::limits::AUTH_FAILURES_PER_WINDOW {
        assert_eq!(call(Some("guess")).0, 401, "guess {i}");
    }
    // Blocked now, the right token too (a guess learns nothing), and logging in.
    assert_eq!(call(Some(TOKEN)), (429, Some("60".into())));
    assert_eq!(call(Some("guess")).0, 429);
    assert_eq!(login(TOKEN), 429);
    e.clock.advance(od::limits::AUTH_FAILURE_WINDOW_MS);
    assert_eq!(call(Some(TOKEN)).0, 200);
    // Wrong logins count the same.
    for _ in 0..od::limits::AUTH_FAILURES_PER_WINDOW {
        assert_eq!(login("guess"), 401);
    }
    assert_eq!(login(TOKEN), 429);
    let out = std::process::Command::new(common::harness::OD)
        .args(["plugin", "list", "--daemon-url", &e.url, "--json"])
        .env("OD_API_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(77), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("too-many-attempts"));
    e.clock.advance(od::limits::AUTH_FAILURE_WINDOW_MS);
    assert_eq!(login(TOKEN), 200);
}
