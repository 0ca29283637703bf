//! Issue 11 item 1: a web page must not drive the loopback daemon. Requests are written byte by
//! byte (raw TCP) so the test controls `Host`, `Origin`, `Sec-Fetch-Site` and `Content-Type` exactly
//! as a browser would send them after DNS rebinding or in a preflight-free "simple" request.

use crate::common;

use common::harness::Engine;
use common::raw::{addr_of, request, RawResponse};
use serde_json::json;

const NOW: i64 = 1_700_000_000_000;

fn post(e: &Engine, path: &str, headers: &[(&str, &str)], body: &str) -> RawResponse {
    request(&e.url, "POST", path, headers, body.as_bytes())
}

fn health_ok(e: &Engine) -> bool {
    e.get("/api/health").0 == 200
}

#[test]
fn a_rebound_host_cannot_start_an_exec_run_or_read_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let port = addr_of(&e.url).rsplit_once(':').unwrap().1.to_string();
    let marker = tmp.path().join("pwned");
    let host = format!("attacker.example:{port}");
    let origin = format!("http://attacker.example:{port}");
    let body = json!({ "agent": "exec", "agentCommand": format!("touch {}", marker.display()) }).to_string();
    let r = post(&e, "/api/runs", &[("Host", &host), ("Origin", &origin), ("Content-Type", "application/json")], &body);
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden-host"), "{r:?}");
    let read = request(&e.url, "GET", "/api/projects", &[("Host", &host)], b"");
    assert_eq!((read.status, read.code().as_str()), (403, "forbidden-host"), "a rebound page reads nothing");
    let (_, runs) = e.get("/api/runs");
    assert_eq!(runs["runs"], json!([]), "no run was created");
    assert!(!marker.exists(), "the command did not run");
}

#[test]
fn loopback_host_names_on_any_port_are_accepted_and_no_others() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let port = addr_of(&e.url).rsplit_once(':').unwrap().1.to_string();
    // (Any port: a TCP forward such as `ssh -L 9000:127.0.0.1:PORT` keeps its own.)
    let hosts = [format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}"), "localhost".into()];
    for host in hosts.into_iter().chain(["localhost:1".to_string()]) {
        let r = request(&e.url, "GET", "/api/health", &[("Host", &host)], b"");
        assert_eq!(r.status, 200, "Host: {host}: {r:?}");
    }
    for host in ["127.0.0.1.nip.io", "localhost.attacker.example", "127.0.0.2", "attacker.example"] {
        let r = request(&e.url, "GET", "/api/health", &[("Host", host)], b"");
        assert_eq!((r.status, r.code().as_str()), (403, "forbidden-host"), "Host: {host}");
    }
}

#[test]
fn simple_cross_site_posts_cannot_stop_cancel_or_revoke() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let host = addr_of(&e.url);
    let id = e.start_run(json!({ "dryRun": { "waitForCancel": "plan" } }));
    let (_, p) = e.post("/api/projects", json!({ "name": "p" }));
    let pid = p["project"]["id"].as_str().unwrap().to_string();
    let routes = [
        "/api/daemon/stop".to_string(),
        format!("/api/runs/{id}/cancel"),
        format!("/api/projects/{pid}/genui/s/revoke"),
    ];
    for path in &routes {
        // What `<form method=post enctype=text/plain>` or `fetch(url, {mode: "no-cors"})` sends.
        let r =
            post(&e, path, &[("Host", &host), ("Origin", "http://evil.example"), ("Content-Type", "text/plain")], "x");
        assert_eq!((r.status, r.code().as_str()), (403, "forbidden-origin"), "{path}: {r:?}");
        let r = post(&e, path, &[("Host", &host), ("Origin", "null"), ("Content-Type", "text/plain")], "");
        assert_eq!((r.status, r.code().as_str()), (403, "forbidden-origin"), "{path} with Origin: null");
        let r = post(&e, path, &[("Host", &host), ("Sec-Fetch-Site", "cross-site")], "");
        assert_eq!((r.status, r.code().as_str()), (403, "forbidden-origin"), "{path} with Sec-Fetch-Site");
        let r = post(&e, path, &[("Host", &host), ("Sec-Fetch-Site", "same-site")], "");
        assert_eq!((r.status, r.code().as_str()), (403, "forbidden-origin"), "{path} same-site");
        // No Origin at all, but a body a form could send: still refused.
        for ct in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
            let r = post(&e, path, &[("Host", &host), ("Content-Type", ct)], "a=b");
            assert_eq!((r.status, r.code().as_str()), (415, "unsupported-media-type"), "{path} as {ct}");
        }
    }
    assert!(health_ok(&e), "the daemon is still up");
    let (_, run) = e.get(&format!("/api/runs/{id}"));
    assert_eq!(run["run"]["status"], "running", "the run was not canceled");
    // The daemon's own origin (and a same-origin fetch) may.
    let own = format!("http://{host}");
    let r = post(
        &e,
        &format!("/api/runs/{id}/cancel"),
        &[("Host", &host), ("Origin", &own), ("Sec-Fetch-Site", "same-origin")],
        "",
    );
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn json_routes_refuse_other_content_types_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let host = addr_of(&e.url);
    let (_, before) = e.get("/api/health");
    let note = json!({ "stream": "note:x", "text": "hi" }).to_string();
    for ct in [None, Some("text/plain"), Some("application/x-www-form-urlencoded"), Some("text/json")] {
        let mut h = vec![("Host", host.as_str())];
        if let Some(ct) = ct {
            h.push(("Content-Type", ct));
        }
        let r = post(&e, "/api/log/notes", &h, &note);
        assert_eq!((r.status, r.code().as_str()), (415, "unsupported-media-type"), "{ct:?}: {r:?}");
    }
    let (_, after) = e.get("/api/health");
    assert_eq!(before["lastSeq"], after["lastSeq"], "nothing was written");
    let r = post(&e, "/api/log/notes", &[("Host", &host), ("Content-Type", "application/json; charset=utf-8")], &note);
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn cross_site_reads_of_the_api_are_refused() {
    // An `<img src>` or a `no-cors` fetch from another site sends a GET without a preflight; some
    // GETs cost (`/api/log/verify` walks the whole log) or record facts (`doctor`).
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let host = addr_of(&e.url);
    let port = host.rsplit_once(':').unwrap().1.to_string();
    for path in ["/api/log/verify", "/api/plugins/od-default/doctor", "/api/projects"] {
        for site in ["cross-site", "same-site"] {
            let r = request(&e.url, "GET", path, &[("Host", &host), ("Sec-Fetch-Site", site)], b"");
            assert_eq!((r.status, r.code().as_str()), (403, "forbidden-origin"), "GET {path} {site}: {r:?}");
        }
        let foreign = request(&e.url, "GET", path, &[("Host", &host), ("Origin", "http://evil.example")], b"");
        assert_eq!((foreign.status, foreign.code().as_str()), (403, "forbidden-origin"), "GET {path} from evil");
    }
    let own = format!("http://127.0.0.1:{port}");
    let r = request(
        &e.url,
        "GET",
        "/api/projects",
        &[("Host", &host), ("Origin", &own), ("Sec-Fetch-Site", "same-origin")],
        b"",
    );
    assert_eq!(r.status, 200, "the daemon's own pages read: {r:?}");
    let r = request(&e.url, "GET", "/api/projects", &[("Host", &host), ("Sec-Fetch-Site", "none")], b"");
    assert_eq!(r.status, 200, "a typed-in address reads: {r:?}");
}

#[test]
fn a_preflight_is_never_approved_and_unknown_methods_get_the_envelope() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let host = addr_of(&e.url);
    let preflight = [
        ("Host", host.as_str()),
        ("Origin", "http://evil.example"),
        ("Access-Control-Request-Method", "POST"),
        ("Access-Control-Request-Headers", "content-type"),
    ];
    let r = request(&e.url, "OPTIONS", "/api/runs", &preflight, b"");
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden-origin"), "{r:?}");
    assert!(!r.head.to_ascii_lowercase().contains("access-control-allow"), "no CORS approval: {}", r.head);
    let r = request(&e.url, "OPTIONS", "/api/runs", &[("Host", &host)], b"");
    assert_eq!((r.status, r.code().as_str()), (405, "method-not-allowed"), "{r:?}");
    let r = request(&e.url, "PATCH", "/api/health", &[("Host", &host), ("Content-Type", "application/json")], b"{}");
    assert_eq!((r.status, r.code().as_str()), (405, "method-not-allowed"), "{r:?}");
}

fn exec_body(marker: &std::path::Path) -> String {
    json!({ "agent": "exec", "agentCommand": format!("touch {}", marker.display()), "agentProtocol": "od" }).to_string()
}

#[test]
fn a_request_supplies_an_agent_command_only_with_the_token_or_the_opt_in() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let host = addr_of(&e.url);
    let marker = tmp.path().join("ran");
    let (_, before) = e.get("/api/health");
    let json_ct = ("Content-Type", "application/json");
    let r = post(&e, "/api/runs", &[("Host", &host), json_ct], &exec_body(&marker));
    assert_eq!((r.status, r.code().as_str()), (403, "exec-forbidden"), "{r:?}");
    assert_eq!(r.json()["error"]["data"]["field"], "agentCommand");
    let env_only = json!({ "agent": "exec", "agentEnv": { "LD_PRELOAD": "/tmp/x.so" } }).to_string();
    let r = post(&e, "/api/runs", &[("Host", &host), json_ct], &env_only);
    assert_eq!((r.status, r.json()["error"]["data"]["field"].as_str()), (403, Some("agentEnv")), "{r:?}");
    let wrong =
        post(&e, "/api/runs", &[("Host", &host), json_ct, ("Authorization", "Bearer nope")], &exec_body(&marker));
    assert_eq!(wrong.code(), "exec-forbidden", "a wrong token is no token");
    // Through the builtin `runs.start` tool, the caller's rights travel with the inner request.
    let call = json!({ "name": "runs.start", "input": { "agent": "exec", "agentCommand": "true" } }).to_string();
    let (_, after) = e.get("/api/health");
    assert_eq!(before["lastSeq"], after["lastSeq"], "nothing was written");
    let r = post(&e, "/api/tools/call", &[("Host", &host), json_ct], &call);
    assert!(r.body.contains("exec-forbidden"), "a tool call cannot launch what its caller may not: {r:?}");
    let (_, runs) = e.get("/api/runs");
    assert_eq!(runs["runs"], json!([]));
    assert!(!marker.exists());
    // The engine's local token (what the CLI sends) may.
    let bearer = format!("Bearer {}", e.token);
    let r = post(&e, "/api/runs", &[("Host", &host), json_ct, ("Authorization", &bearer)], &exec_body(&marker));
    assert_eq!(r.status, 202, "{r:?}");
    let id = r.json()["runId"].as_str().unwrap().to_string();
    e.watch(&id);
    assert!(marker.exists(), "the token holder's command ran");
}

#[test]
fn the_exec_opt_in_lets_tokenless_local_requests_supply_a_command() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start_with(&tmp.path().join("data"), NOW, |c| c.http.allow_http_exec = true);
    let host = addr_of(&e.url);
    let marker = tmp.path().join("ran");
    let r = post(&e, "/api/runs", &[("Host", &host), ("Content-Type", "application/json")], &exec_body(&marker));
    assert_eq!(r.status, 202, "{r:?}");
    // The browser checks still come first.
    let r = post(
        &e,
        "/api/runs",
        &[("Host", &host), ("Origin", "http://evil.example"), ("Content-Type", "application/json")],
        &exec_body(&marker),
    );
    assert_eq!(r.code(), "forbidden-origin");
}

#[test]
fn configured_host_names_are_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start_with(&tmp.path().join("data"), NOW, |c| c.http.allowed_hosts = vec!["od.test".into()]);
    let port = addr_of(&e.url).rsplit_once(':').unwrap().1.to_string();
    let host = format!("od.test:{port}");
    let r = request(&e.url, "GET", "/api/health", &[("Host", &host)], b"");
    assert_eq!(r.status, 200, "{r:?}");
    let r = post(
        &e,
        "/api/log/notes",
        &[("Host", &host), ("Origin", &format!("http://{host}")), ("Content-Type", "application/json")],
        r#"{"stream":"note:a","text":"t"}"#,
    );
    assert_eq!(r.status, 200, "its own origin may post: {r:?}");
    let r = request(&e.url, "GET", "/api/health", &[("Host", "other.test")], b"");
    assert_eq!(r.code(), "forbidden-host");
}

#[test]
fn the_daemon_writes_its_token_for_the_user_only_and_the_cli_uses_it() {
    use std::io::BufRead;
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let od = |args: &[&str]| {
        std::process::Command::new(common::harness::OD)
            .args(args)
            .arg("--data-dir")
            .arg(&data)
            .env_remove("OD_DAEMON_URL")
            .env_remove("OD_API_TOKEN")
            .env_remove("OD_ALLOW_HTTP_EXEC")
            .output()
            .unwrap()
    };
    let mut child = std::process::Command::new(common::harness::OD)
        .args(["daemon", "start", "--foreground", "--port", "0", "--json", "--data-dir"])
        .arg(&data)
        .env_remove("OD_DAEMON_URL")
        .env_remove("OD_API_TOKEN")
        .env_remove("OD_ALLOW_HTTP_EXEC")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let url = serde_json::from_str::<serde_json::Value>(&line).unwrap()["url"].as_str().unwrap().to_string();
    let file = data.join("daemon.json");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let disc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(disc["token"].as_str().unwrap().len(), 64);
    let marker = tmp.path().join("ran");
    let host = addr_of(&url);
    let r = request(
        &url,
        "POST",
        "/api/runs",
        &[("Host", &host), ("Content-Type", "application/json")],
        exec_body(&marker).as_bytes(),
    );
    assert_eq!(r.code(), "exec-forbidden");
    let cmd = format!("touch {}", marker.display());
    let out =
        od(&["run", "start", "--agent", "exec", "--agent-cmd", &cmd, "--agent-protocol", "od", "--follow", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(marker.exists(), "the CLI sent the daemon's token");
    let out = od(&["daemon", "stop", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    child.wait().unwrap();
}

#[test]
fn raw_body_routes_need_a_type_a_form_cannot_send() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let host = addr_of(&e.url);
    let (_, p) = e.post("/api/projects", json!({ "name": "p" }));
    let pid = p["project"]["id"].as_str().unwrap().to_string();
    let file = format!("/api/projects/{pid}/files/a.txt");
    for ct in [None, Some("text/plain"), Some("multipart/form-data; boundary=x")] {
        let mut h = vec![("Host", host.as_str())];
        h.extend(ct.map(|c| ("Content-Type", c)));
        let r = request(&e.url, "PUT", &file, &h, b"hello");
        assert_eq!((r.status, r.code().as_str()), (415, "unsupported-media-type"), "{ct:?}");
    }
    let r = request(&e.url, "PUT", &file, &[("Host", &host), ("Content-Type", "application/octet-stream")], b"hello");
    assert_eq!(r.status, 200, "{r:?}");
    let (id, _) = e.run(json!({}));
    let agui = format!("/api/runs/{id}/agui");
    let r = post(&e, &agui, &[("Host", &host), ("Content-Type", "text/json")], "{}");
    assert_eq!((r.status, r.code().as_str()), (415, "unsupported-media-type"), "{r:?}");
    let r = post(&e, &agui, &[("Host", &host), ("Content-Type", "application/json")], "{}");
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn the_cli_reaches_a_token_daemon_of_its_data_dir_through_the_discovery_file() {
    use std::io::BufRead;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut child = std::process::Command::new(common::harness::OD)
        .args(["daemon", "start", "--foreground", "--port", "0", "--json", "--data-dir"])
        .arg(&data)
        .env_remove("OD_DAEMON_URL")
        .env("OD_API_TOKEN", "s3cret")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let url = serde_json::from_str::<serde_json::Value>(&line).unwrap()["url"].as_str().unwrap().to_string();
    let host = addr_of(&url);
    assert_eq!(request(&url, "GET", "/api/health", &[("Host", &host)], b"").code(), "unauthorized");
    for explicit in [None, Some(url.as_str())] {
        let mut cmd = std::process::Command::new(common::harness::OD);
        cmd.args(["log", "stats", "--json", "--data-dir"]).arg(&data).env_remove("OD_API_TOKEN");
        match explicit {
            Some(u) => cmd.env("OD_DAEMON_URL", u),
            None => cmd.env_remove("OD_DAEMON_URL"),
        };
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{explicit:?}: {}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["lastSeq"].as_u64().is_some(), "answered by the daemon: {v}");
    }
    let out = std::process::Command::new(common::harness::OD)
        .args(["daemon", "stop", "--json", "--data-dir"])
        .arg(&data)
        .env_remove("OD_API_TOKEN")
        .env_remove("OD_DAEMON_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    child.wait().unwrap();
}

/// Issue 39 #2: beacons cannot change anything. `<a ping>` in a page the daemon served sends a
/// same-origin POST of `text/ping` (body `PING`, with `Ping-From`/`Ping-To`) that no preflight
/// guards; the Reporting API posts `application/reports+json` and `application/csp-report`. Every
/// state-changing route accepts only `application/json` and `application/octet-stream`: each of
/// these is 415, the daemon keeps running, and nothing is written.
#[test]
fn beacons_and_other_unlisted_types_are_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let host = addr_of(&e.url);
    let own = format!("http://{host}");
    let (_, p) = e.post("/api/projects", json!({ "name": "p" }));
    let pid = p["project"]["id"].as_str().unwrap().to_string();
    let (_, before) = e.get("/api/health");
    let routes = [
        ("POST", "/api/daemon/stop".to_string()),
        ("POST", "/api/log/notes".to_string()),
        ("POST", "/api/projects".to_string()),
        ("POST", "/api/auth/logout".to_string()),
        ("PUT", format!("/api/projects/{pid}/files/a.txt")),
    ];
    let types = [
        "text/ping",
        "application/reports+json",
        "application/csp-report",
        "application/vnd.od+json",
        "text/json",
        "image/png",
    ];
    for (method, path) in &routes {
        for ct in types {
            let ping_to = format!("{own}/#");
            let h = [
                ("Host", host.as_str()),
                ("Origin", own.as_str()),
                ("Sec-Fetch-Site", "same-origin"),
                ("Content-Type", ct),
                ("Ping-From", own.as_str()),
                ("Ping-To", ping_to.as_str()),
            ];
            let r = request(&e.url, method, path, &h, b"PING");
            assert_eq!(
                (r.status, r.code().as_str()),
                (415, "unsupported-media-type"),
                "{method} {path} as {ct}: {r:?}"
            );
        }
        // The type decides even without a body.
        let r = request(&e.url, method, path, &[("Host", host.as_str()), ("Content-Type", "text/ping")], b"");
        assert_eq!(r.status, 415, "{method} {path}: {r:?}");
    }
    assert!(health_ok(&e), "the daemon is still up");
    let (_, after) = e.get("/api/health");
    assert_eq!(before["lastSeq"], after["lastSeq"], "nothing was written");
    // What od's clients send still works.
    let r = post(&e, "/api/daemon/stop", &[("Host", &host), ("Content-Type", "application/json")], "{}");
    assert_eq!(r.status, 200, "{r:?}");
}

/// Issue 36 "also seen": file routes send `X-Content-Type-Options: nosniff` and a
/// `Content-Disposition` naming the file: `attachment` for raw downloads and exports (an HTML file
/// opened directly is saved, never rendered as the daemon's page).
#[test]
fn file_routes_send_nosniff_and_a_disposition() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let host = addr_of(&e.url);
    let (_, p) = e.post("/api/projects", json!({ "name": "p" }));
    let pid = p["project"]["id"].as_str().unwrap().to_string();
    let file = format!("/api/projects/{pid}/files/site/index%20page.html");
    let put = [("Host", host.as_str()), ("Content-Type", "application/octet-stream")];
    assert_eq!(request(&e.url, "PUT", &file, &put, b"<script>alert(1)</script>").status, 200);
    let (id, _) = e.run(json!({}));
    let (_, run) = e.get(&format!("/api/runs/{id}"));
    let snapshot = run["run"]["appliedPluginSnapshotId"].as_str().unwrap().to_string();
    let header = |r: &RawResponse, name: &str| -> String {
        r.head
            .lines()
            .find_map(|l| {
                l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_default()
    };
    let bearer = format!("Bearer {}", e.token);
    for (path, name) in [
        (file.as_str(), "index page.html"),
        (&format!("/api/runs/{id}/export"), ""),
        (&format!("/api/applied-plugins/{snapshot}/export"), ""),
    ] {
        let r = request(&e.url, "GET", path, &[("Host", host.as_str()), ("Authorization", bearer.as_str())], b"");
        assert_eq!(r.status, 200, "{path}: {r:?}");
        assert_eq!(header(&r, "x-content-type-options"), "nosniff", "{path}");
        let d = header(&r, "content-disposition");
        assert!(d.starts_with("attachment; filename=\""), "{path}: {d}");
        if !name.is_empty() {
            assert!(
                d.contains("filename=\"index_page.html\"") && d.contains("filename*=UTF-8''index%20page.html"),
                "{d}"
            );
        }
    }
}
