//! Issue 14: the daemon serves the web UI on its own port — `/` (index.html), `/login`, and every
//! file under `src/http/ui/assets/` at `/ui/<path>`, embedded in the binary — with the right media
//! types, a strict CSP, ETag revalidation and gzip; unknown files are a plain 404, traversal is
//! refused, the UI routes pass the same gate as the API; the first load fits its gzip budget; and
//! `od open` starts a daemon and hands the URL to a browser.

use crate::common;

use common::harness::{Engine, OD};
use common::raw::{addr_of, request};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const NOW: i64 = 1_700_000_000_000;

/// A response as a browser would get it (no redirects followed, bytes untouched).
struct Got {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Got {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }
}

fn fetch(method: &str, url: &str, headers: &[(&str, &str)]) -> Got {
    let agent = ureq::AgentBuilder::new().redirects(0).build();
    let mut req = agent.request(method, url);
    for (k, v) in headers {
        req = req.set(k, v);
    }
    let res = match req.call() {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {url}: {e}"),
    };
    let status = res.status();
    let headers = res.headers_names().iter().map(|n| (n.clone(), res.header(n).unwrap_or("").to_string())).collect();
    let mut body = Vec::new();
    res.into_reader().read_to_end(&mut body).unwrap();
    Got { status, headers, body }
}

fn assets_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http/ui/assets")
}

/// Every file under `src/http/ui/assets/` (relative, `/`-separated), dot files left out, sorted.
fn files_on_disk() -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().unwrap().to_string_lossy().starts_with('.') {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(&assets_dir(), &assets_dir(), &mut out);
    out.sort();
    out
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).unwrap();
    out
}

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; \
                   connect-src 'self'; frame-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'; \
                   form-action 'self'; object-src 'none'";

fn assert_ui_headers(g: &Got, what: &str) {
    assert_eq!(g.header("content-security-policy"), Some(CSP), "{what}");
    assert_eq!(g.header("x-content-type-options"), Some("nosniff"), "{what}");
    assert_eq!(g.header("referrer-policy"), Some("no-referrer"), "{what}");
}

#[test]
fn the_app_and_its_files_are_served_with_their_types_and_security_headers() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let index = std::fs::read(assets_dir().join("index.html")).unwrap();

    let g = fetch("GET", &format!("{}/", e.url), &[]);
    assert_eq!(g.status, 200);
    assert_eq!(g.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(g.body, index, "/ is src/http/ui/assets/index.html");
    assert!(g.text().to_ascii_lowercase().starts_with("<!doctype html>"));
    assert_eq!(g.header("cache-control"), Some("no-cache"));
    assert_ui_headers(&g, "/");

    let types = [
        ("/login", "text/html; charset=utf-8", "login.html"),
        ("/ui/login.js", "text/javascript; charset=utf-8", "login.js"),
        ("/ui/login.css", "text/css; charset=utf-8", "login.css"),
        ("/ui/index.html", "text/html; charset=utf-8", "index.html"),
    ];
    for (path, ct, file) in types {
        let g = fetch("GET", &format!("{}{path}", e.url), &[]);
        assert_eq!((g.status, g.header("content-type")), (200, Some(ct)), "{path}");
        assert_eq!(g.body, std::fs::read(assets_dir().join(file)).unwrap(), "{path}");
        assert_ui_headers(&g, path);
    }

    // HEAD: the same status and headers, no body.
    let h = fetch("HEAD", &format!("{}/ui/login.js", e.url), &[]);
    assert_eq!(h.status, 200);
    assert!(h.body.is_empty());
    assert_eq!(h.header("etag"), fetch("GET", &format!("{}/ui/login.js", e.url), &[]).header("etag"));
    assert_eq!(h.header("content-type"), Some("text/javascript; charset=utf-8"));
    e.stop();
}

#[test]
fn etags_revalidate_and_gzip_is_served_to_clients_that_accept_it() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let url = format!("{}/ui/login.js", e.url);
    let plain = fetch("GET", &url, &[]);
    let tag = plain.header("etag").unwrap().to_string();
    let digest = blake3::hash(&plain.body).to_hex();
    assert_eq!(tag, format!("\"{}\"", &digest[..32]), "the ETag is the content's blake3");
    assert!(plain.header("content-encoding").is_none());

    let again = fetch("GET", &url, &[("If-None-Match", &tag)]);
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    assert_eq!(again.header("etag"), Some(tag.as_str()));
    assert_ui_headers(&again, "304");
    assert_eq!(fetch("GET", &url, &[("If-None-Match", "\"stale\"")]).status, 200);

    let gz = fetch("GET", &url, &[("Accept-Encoding", "br, gzip;q=0.8")]);
    assert_eq!(gz.status, 200);
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert_eq!(gz.header("vary"), Some("Accept-Encoding"));
    assert_eq!(gz.header("content-length").unwrap(), gz.body.len().to_string());
    assert!(gz.body.len() < plain.body.len());
    assert_eq!(gunzip(&gz.body), plain.body, "the gzip form is the same file");
    let gz_tag = gz.header("etag").unwrap().to_string();
    assert_ne!(gz_tag, tag, "each encoding has its own ETag");
    assert_eq!(fetch("GET", &url, &[("Accept-Encoding", "gzip"), ("If-None-Match", &gz_tag)]).status, 304);
    // Served twice (compressed once and kept): the same bytes.
    assert_eq!(fetch("GET", &url, &[("Accept-Encoding", "gzip")]).body, gz.body);
    assert!(fetch("GET", &url, &[("Accept-Encoding", "gzip;q=0")]).header("content-encoding").is_none());
    e.stop();
}

#[test]
fn unknown_files_are_a_plain_404_traversal_is_refused_and_api_paths_keep_the_json_404() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let g = fetch("GET", &format!("{}/ui/nope.js", e.url), &[]);
    assert_eq!(g.status, 404);
    assert_eq!(g.header("content-type"), Some("text/plain; charset=utf-8"), "not the app's HTML");
    assert_ui_headers(&g, "404");
    // Written byte by byte: no client normalizes these paths first.
    for path in
        ["/ui/../Cargo.toml", "/ui/%2e%2e/Cargo.toml", "/ui/..%2fCargo.toml", "/ui/./index.html", "/ui//index.html"]
    {
        let r = request(&e.url, "GET", path, &[], b"");
        assert!(matches!(r.status, 400 | 404), "{path}: {}", r.status);
        assert!(!r.body.contains("[package]") && !r.body.contains("<!doctype"), "{path}: {}", r.body);
    }
    let r = request(&e.url, "GET", "/api/nope", &[], b"");
    assert_eq!((r.status, r.code().as_str()), (404, "not-found"), "the API's envelope");
    e.stop();
}

#[test]
fn the_ui_routes_pass_the_same_gate_as_the_api() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let port = addr_of(&e.url).rsplit_once(':').unwrap().1.to_string();
    for path in ["/", "/login", "/ui/login.js"] {
        let r = request(&e.url, "GET", path, &[("Host", &format!("attacker.example:{port}"))], b"");
        assert_eq!((r.status, r.code().as_str()), (403, "forbidden-host"), "{path}: a rebound page reads nothing");
        let r = request(&e.url, "GET", path, &[("Host", &format!("localhost:{port}"))], b"");
        assert_eq!(r.status, 200, "{path}");
    }
    e.stop();
}

#[test]
fn every_file_under_src_ui_assets_is_embedded_as_it_is_on_disk() {
    let embedded: Vec<&str> = od::http::ui::assets::all().iter().map(|a| a.path).collect();
    assert_eq!(embedded, files_on_disk(), "build.rs lists every file, no more");
    for a in od::http::ui::assets::all() {
        assert_eq!(a.bytes, std::fs::read(assets_dir().join(a.path)).unwrap().as_slice(), "{}", a.path);
    }
    assert!(embedded.contains(&"index.html") && embedded.contains(&"login.html"));
}

#[test]
fn the_first_load_stays_within_its_gzip_budget() {
    let mut total = 0;
    let mut sizes = Vec::new();
    for path in files_on_disk().iter().filter(|p| !p.starts_with("login.")) {
        let n = od::http::ui::assets::gzip(&std::fs::read(assets_dir().join(path)).unwrap()).len();
        sizes.push((path.clone(), n));
        total += n;
    }
    assert!(!sizes.is_empty());
    let max = od::limits::UI_FIRST_LOAD_MAX_GZIP_BYTES;
    assert!(
        total < max,
        "the first load is {total} bytes gzipped, over UI_FIRST_LOAD_MAX_GZIP_BYTES ({max}): {sizes:?}"
    );
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn od_open_starts_the_daemon_and_hands_the_url_to_the_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let recorded = tmp.path().join("opened.txt");
    let browser = tmp.path().join("browser.sh");
    std::fs::write(&browser, format!("#!/bin/sh\nprintf '%s' \"$1\" > {}.tmp && mv {0}.tmp {0}\n", recorded.display()))
        .unwrap();
    std::fs::set_permissions(&browser, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let od = |args: &[&str], browser: Option<&Path>| {
        let mut c = std::process::Command::new(OD);
        c.args(args).arg("--data-dir").arg(&data).env_remove("OD_DAEMON_URL").env_remove("OD_API_TOKEN");
        match browser {
            Some(b) => c.env("OD_BROWSER", b),
            None => c.env_remove("OD_BROWSER"),
        };
        c.output().unwrap()
    };

    let out = od(&["open", "--json"], Some(&browser));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let url = v["url"].as_str().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with('/'), "{v}");
    assert_eq!(v["opened"], true, "{v}");
    let disc: Value = serde_json::from_str(&std::fs::read_to_string(data.join("daemon.json")).unwrap()).unwrap();
    assert_eq!(v["pid"], disc["pid"], "the pid of the daemon that serves the data dir: {v}");
    let g = fetch("GET", &url, &[]);
    assert_eq!(g.status, 200);
    assert!(g.text().to_ascii_lowercase().starts_with("<!doctype html>"), "{}", g.text());
    wait_until("the browser command got the URL", || std::fs::read_to_string(&recorded).is_ok_and(|u| u == url));

    // A second `od open` finds the running daemon; --no-browser opens nothing.
    std::fs::remove_file(&recorded).unwrap();
    let out = od(&["open", "--json", "--no-browser"], Some(&browser));
    let again: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&again["url"], &again["pid"], &again["opened"]), (&v["url"], &v["pid"], &Value::Bool(false)));
    // An opener that fails (no browser, no display) is not "opened": it is said, with the URL.
    let failing = tmp.path().join("no-browser.sh");
    std::fs::write(&failing, "#!/bin/sh\necho 'no method available for opening' >&2\nexit 3\n").unwrap();
    std::fs::set_permissions(&failing, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = od(&["open", "--json"], Some(&failing));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap()["opened"], false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("could not open a browser") && err.contains(&url), "{err}");
    // Not a terminal and no OD_BROWSER: the URL only.
    let out = od(&["open", "--json"], None);
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap()["opened"], false);
    assert!(!recorded.exists(), "no browser was started");

    assert!(od(&["daemon", "stop", "--json"], None).status.success());
}

/// A run's artifact preview address (issue 34): the file as that run recorded it, under the
/// artifact CSP (styles yes, scripts no, sandboxed); a wrong MAC, another run's id or an expired
/// address is 403 `preview-expired`; a file the run did not record has no address.
#[test]
fn a_run_s_preview_address_serves_what_it_recorded_under_the_artifact_csp_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let (run_a, ev) = e.run(serde_json::json!({}));
    let (run_b, _) = e.run(serde_json::json!({}));
    let path = ev.iter().find(|v| v["event"] == "artifact").expect("the dry run records an artifact")["data"]["path"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, v) = e.get(&format!("/api/runs/{run_a}/preview-url?path={path}"));
    assert_eq!(code, 200, "{v}");
    let url = v["url"].as_str().unwrap().to_string();
    assert!(url.starts_with(&format!("/preview/runs/{run_a}/")), "{url}");
    let got = fetch("GET", &format!("{}{url}", e.url), &[]);
    assert_eq!(got.status, 200);
    let csp = got.header("content-security-policy").unwrap_or_default().to_string();
    assert!(csp.contains("script-src 'none'") && csp.contains("style-src 'self' 'unsafe-inline'"), "{csp}");
    assert!(csp.trim_end().ends_with("sandbox"), "{csp}");
    let recorded = ureq::get(&format!("{}/api/runs/{run_a}/files/{path}", e.url)).call().unwrap();
    let mut want = Vec::new();
    recorded.into_reader().read_to_end(&mut want).unwrap();
    assert_eq!(got.body, want, "the run's recorded bytes");

    let parts: Vec<&str> = url.splitn(7, '/').collect(); // "", preview, runs, id, exp, mac, path
    let (exp, mac) = (parts[4], parts[5]);
    let flipped = format!("{}{}", &mac[..63], if mac.ends_with('0') { '1' } else { '0' });
    for bad in [
        format!("/preview/runs/{run_a}/{exp}/{flipped}/{path}"),
        format!("/preview/runs/{run_b}/{exp}/{mac}/{path}"),
        format!("/preview/runs/{run_a}/{}/{mac}/{path}", exp.parse::<i64>().unwrap() + 1),
        format!("/preview/runs/{run_a}/soon/{mac}/{path}"),
    ] {
        let got = fetch("GET", &format!("{}{bad}", e.url), &[]);
        assert_eq!(got.status, 403, "{bad}");
        assert!(String::from_utf8_lossy(&got.body).contains("preview-expired"), "{bad}");
    }
    e.clock.advance(3_600_000);
    assert_eq!(fetch("GET", &format!("{}{url}", e.url), &[]).status, 403, "expired after an hour");
    let (code, _) = e.get(&format!("/api/runs/{run_a}/preview-url?path=never-written.html"));
    assert_eq!(code, 404);
    e.stop();
}
