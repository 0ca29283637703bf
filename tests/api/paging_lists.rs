//! Paging of the lists not backed by the growing read models: plugins, marketplaces (list, entries,
//! search), atoms, tools (by name and ranked search), a project's files, a run's devloop rows and
//! logs, the log's event pages. For each: `limit` bounds a page, walking `nextCursor` returns every
//! item once in the list's order, a bad `limit` / `cursor` is a 400 naming the field, items added
//! between two pages never shift a later page, and the CLI's `--all` prints every item.

use crate::common;

use common::harness::{write_plugin, Engine, OD};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

const NOW: i64 = 1_800_000_000_000;

/// Walks `path` (which may already hold a query) page by page with `limit`; every item of `field`.
/// `between` runs after the first page (to add items while a client pages).
fn walk_with(e: &Engine, path: &str, field: &str, limit: usize, mut between: impl FnMut(&Engine)) -> Vec<Value> {
    let sep = if path.contains('?') { '&' } else { '?' };
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let p = match &cursor {
            None => format!("{path}{sep}limit={limit}"),
            Some(c) => format!("{path}{sep}limit={limit}&cursor={c}"),
        };
        let (code, v) = e.get(&p);
        assert_eq!(code, 200, "{p}: {v}");
        let items = v[field].as_array().unwrap_or_else(|| panic!("{p}: no {field} in {v}"));
        assert!(items.len() <= limit, "{p}: {} items over limit {limit}", items.len());
        assert!(v.get("nextCursor").is_some() || field == "tools", "{p}: no nextCursor field: {v}");
        out.extend(items.iter().cloned());
        pages += 1;
        if pages == 1 {
            between(e);
        }
        match v["nextCursor"].as_str() {
            Some(c) => {
                assert_eq!(items.len(), limit, "{p}: a short page with a next cursor");
                cursor = Some(c.to_string());
            }
            None => return out,
        }
    }
}

fn walk(e: &Engine, path: &str, field: &str, limit: usize) -> Vec<Value> {
    walk_with(e, path, field, limit, |_| {})
}

/// The whole list in one page (tool searches: their largest page).
fn all(e: &Engine, path: &str, field: &str) -> Vec<Value> {
    let sep = if path.contains('?') { '&' } else { '?' };
    let max = if path.starts_with("/api/tools") { 100 } else { 1000 };
    let (code, v) = e.get(&format!("{path}{sep}limit={max}"));
    assert_eq!(code, 200, "{path}: {v}");
    assert!(v["nextCursor"].is_null(), "{path}: more than one page: {v}");
    v[field].as_array().unwrap().clone()
}

fn key(v: &Value, k: &str) -> String {
    v[k].as_str().map_or_else(|| v[k].to_string(), str::to_string)
}

fn keys(items: &[Value], k: &str) -> Vec<String> {
    items.iter().map(|v| key(v, k)).collect()
}

/// Pages of 1, 2 and 3 walk the same items, once each, in the one-page order.
fn walks_every_item_once(e: &Engine, path: &str, field: &str, k: &str) -> Vec<String> {
    let whole = keys(&all(e, path, field), k);
    assert!(whole.len() >= 2, "{path}: too few items to page: {whole:?}");
    for limit in [1, 2, 3] {
        assert_eq!(keys(&walk(e, path, field, limit), k), whole, "{path} with limit {limit}");
    }
    whole
}

/// A bad limit or cursor is a 400 naming the field (default limit: the list answers).
fn refuses_bad_paging(e: &Engine, path: &str, other_cursor: &str) {
    let sep = if path.contains('?') { '&' } else { '?' };
    for (q, field) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=-1", "limit"),
        ("limit=ten", "limit"),
        ("cursor=zz", "cursor"),
        (&format!("cursor={other_cursor}") as &str, "cursor"),
    ] {
        let (code, v) = e.get(&format!("{path}{sep}{q}"));
        assert_eq!(code, 400, "{path}{sep}{q}: {v}");
        assert_eq!(v["error"]["data"]["field"], field, "{path}{sep}{q}: {v}");
    }
}

/// A cursor of the runs list: refused by every other list.
fn runs_cursor(e: &Engine) -> String {
    e.start_run(json!({ "pluginId": "od-new-generation", "agent": "dry-run",
        "pluginInputs": { "topic": "tea", "audience": "tea lovers", "artifactKind": "landing-page" } }));
    e.start_run(json!({ "pluginId": "od-new-generation", "agent": "dry-run",
        "pluginInputs": { "topic": "tea", "audience": "tea lovers", "artifactKind": "landing-page" } }));
    let (_, v) = e.get("/api/runs?limit=1");
    v["nextCursor"].as_str().expect("two runs, one per page").to_string()
}

/// `od <args> --all --json` in embedded mode: one JSON object per line.
fn cli_all(data: &Path, args: &[&str]) -> Vec<Value> {
    let out = Command::new(OD)
        .args(args)
        .args(["--all", "--json"])
        .arg("--data-dir")
        .arg(data)
        .env_remove("OD_DAEMON_URL")
        .env_remove("OD_PROJECT_ID")
        .output()
        .unwrap();
    assert!(out.status.success(), "od {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn index_file(dir: &Path, name: &str, entries: usize) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let plugins: Vec<Value> = (0..entries)
        .map(|i| {
            json!({ "name": format!("{name}/p{i:02}"), "title": format!("Plugin {i}"), "version": "1.0.0",
                    "source": format!("./plugins/p{i:02}"), "description": "a tea shop plugin", "tags": ["shop"] })
        })
        .collect();
    let index = json!({ "name": name, "version": "1.0.0", "specVersion": "1.0.0", "plugins": plugins });
    let path = dir.join(format!("{}.json", name.replace('/', "-")));
    std::fs::write(&path, index.to_string()).unwrap();
    path.display().to_string()
}

#[test]
fn plugins_marketplaces_and_atoms_page() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = Engine::start(&data, NOW);
    let other = runs_cursor(&e);

    // Plugins: bundled first, then installed, each by id.
    let before = walks_every_item_once(&e, "/api/plugins", "plugins", "id");
    refuses_bad_paging(&e, "/api/plugins", &other);
    let plugin_dir = tmp.path().join("aaa-late");
    write_plugin(&plugin_dir, "aaa-late", "1.0.0", json!([]), "Late.");
    let mut installed = false;
    let seen = keys(
        &walk_with(&e, "/api/plugins", "plugins", 2, |e| {
            e.install(&plugin_dir);
            installed = true;
        }),
        "id",
    );
    assert!(installed);
    // Installed after the bundled ones: it lands after the first page, so it is seen once, and
    // every plugin listed before is still seen once, in order.
    assert_eq!(seen.iter().filter(|i| *i == "aaa-late").count(), 1, "{seen:?}");
    assert_eq!(seen.iter().filter(|i| *i != "aaa-late").cloned().collect::<Vec<_>>(), before);

    // Marketplaces by id; entries in index order; search by marketplace then position.
    for (i, name) in ["acme/b-market", "acme/d-market", "acme/f-market"].iter().enumerate() {
        let url = index_file(&tmp.path().join("idx"), name, 5 + i);
        let (code, v) = e.post("/api/marketplaces", json!({ "url": url }));
        assert_eq!(code, 201, "{v}");
    }
    let ids = walks_every_item_once(&e, "/api/marketplaces", "marketplaces", "id");
    refuses_bad_paging(&e, "/api/marketplaces", &other);
    let url = index_file(&tmp.path().join("idx"), "acme/c-market", 1);
    let seen = keys(
        &walk_with(&e, "/api/marketplaces", "marketplaces", 1, |e| {
            assert_eq!(e.post("/api/marketplaces", json!({ "url": url })).0, 201);
        }),
        "id",
    );
    // Added after the first page and sorting after it: seen once, the others in their order.
    assert_eq!(seen, ["acme-b-market", "acme-c-market", "acme-d-market", "acme-f-market"], "{ids:?}");

    let entries = walks_every_item_once(&e, "/api/marketplaces/acme-f-market/plugins", "plugins", "name");
    assert_eq!(entries.len(), 7);
    assert_eq!(entries[0], "acme/f-market/p00");
    refuses_bad_paging(&e, "/api/marketplaces/acme-f-market/plugins", &other);
    let hits = walks_every_item_once(&e, "/api/marketplaces/search?q=tea", "results", "name");
    assert_eq!(hits.len(), 5 + 1 + 6 + 7);
    refuses_bad_paging(&e, "/api/marketplaces/search?q=tea", &other);

    // Atoms by id (bundled, fixed); pipelines come whole with each page.
    let atoms = walks_every_item_once(&e, "/api/atoms", "atoms", "id");
    let mut sorted = atoms.clone();
    sorted.sort();
    assert_eq!(atoms, sorted);
    let (_, page) = e.get("/api/atoms?limit=1");
    assert!(!page["pipelines"].as_array().unwrap().is_empty());
    refuses_bad_paging(&e, "/api/atoms", &other);
    e.stop();

    // The CLI's --all prints every item of every page.
    let ids_now = ["acme-b-market", "acme-c-market", "acme-d-market", "acme-f-market"];
    assert_eq!(keys(&cli_all(&data, &["plugin", "list", "--limit", "2"]), "id").len(), before.len() + 1);
    assert_eq!(keys(&cli_all(&data, &["marketplace", "list", "--limit", "1"]), "id"), ids_now);
    assert_eq!(keys(&cli_all(&data, &["marketplace", "plugins", "acme-f-market", "--limit", "3"]), "name"), entries);
    assert_eq!(cli_all(&data, &["marketplace", "search", "tea", "--limit", "4"]).len(), hits.len());
    assert_eq!(keys(&cli_all(&data, &["atoms", "list", "--limit", "2"]), "id"), atoms);
}

fn tool(name: &str, description: &str) -> Value {
    json!({ "name": name, "description": description,
            "inputSchema": { "type": "object", "properties": { "x": { "type": "string" } } } })
}

#[test]
fn tools_page_by_name_and_by_rank_with_registrations_between_pages() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = Engine::start(&data, NOW);
    let other = runs_cursor(&e);
    // Twelve tools that rank equal for "kettle" (same text but the name): ties go by name.
    let tools: Vec<Value> = (0..12).map(|i| tool(&format!("k{i:02}"), "boil the kettle for tea")).collect();
    let (code, v) = e.post("/api/tools/import", json!({ "tools": tools, "namespace": "t", "source": "test" }));
    assert_eq!(code, 200, "{v}");

    // By name (no query): every tool once, in name order; a tool registered between two pages
    // shows once when it sorts after the cursor and not at all before it.
    let (_, first) = e.get("/api/tools?limit=100");
    let total = first["total"].as_u64().unwrap() as usize;
    let names: Vec<String> = keys(first["tools"].as_array().unwrap(), "name");
    assert_eq!(names.len(), total);
    for limit in [1, 5] {
        assert_eq!(keys(&walk(&e, "/api/tools", "tools", limit), "name"), names);
    }
    let seen = keys(
        &walk_with(&e, "/api/tools", "tools", 5, |e| {
            let late = [tool("a.late", "early name"), tool("zz.late", "late name")];
            assert_eq!(e.post("/api/tools/import", json!({ "tools": late, "source": "test" })).0, 200);
        }),
        "name",
    );
    let mut expected = names.clone();
    expected.push("zz.late".into());
    assert_eq!(seen, expected, "a.late sorts before the cursor; zz.late after it");

    // Ranked: ties by name, every hit once; a matching tool registered between pages ranks where
    // its score and name put it.
    let q = "/api/tools/search?query=kettle";
    let ranked = keys(&all(&e, q, "tools"), "name");
    assert_eq!(ranked, (0..12).map(|i| format!("t.k{i:02}")).collect::<Vec<_>>());
    for limit in [1, 5] {
        assert_eq!(keys(&walk(&e, q, "tools", limit), "name"), ranked);
    }
    let seen = keys(
        &walk_with(&e, q, "tools", 5, |e| {
            let late = [tool("k99", "boil the kettle for tea"), tool("k00a", "boil the kettle for tea")];
            assert_eq!(
                e.post("/api/tools/import", json!({ "tools": late, "namespace": "t", "source": "test" })).0,
                200
            );
        }),
        "name",
    );
    let mut expected = ranked.clone();
    expected.push("t.k99".into());
    assert_eq!(seen, expected, "t.k00a ranks before the cursor, t.k99 after it");

    // A bad limit or cursor names its field (tool search pages are at most 100: a page of full
    // descriptors is read by an agent).
    for (q, field) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("cursor=5", "cursor"),
        (&format!("cursor={other}") as &str, "cursor"),
    ] {
        let (code, v) = e.get(&format!("/api/tools/search?query=kettle&{q}"));
        assert_eq!(code, 400, "{q}: {v}");
        assert_eq!(v["error"]["data"]["field"], field, "{q}: {v}");
    }
    e.stop();
    let cli = cli_all(&data, &["tools", "search", "kettle", "--limit", "4"]);
    assert_eq!(cli.len(), 14);
}

#[test]
fn files_devloop_logs_and_log_pages() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = Engine::start(&data, NOW);
    let other = runs_cursor(&e);

    // Files by path.
    let (_, p) = e.post("/api/projects", json!({ "name": "p" }));
    let pid = p["project"]["id"].as_str().unwrap().to_string();
    let root = data.join("projects").join(&pid);
    for f in ["b.txt", "d/e.txt", "d/c.txt", "f.txt", "a.txt"] {
        let path = root.join(f);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, f).unwrap();
    }
    let files_path = format!("/api/projects/{pid}/files");
    let files = walks_every_item_once(&e, &files_path, "files", "path");
    assert_eq!(files, ["a.txt", "b.txt", "d/c.txt", "d/e.txt", "f.txt"]);
    refuses_bad_paging(&e, &files_path, &other);
    let seen = keys(
        &walk_with(&e, &files_path, "files", 2, |_| {
            std::fs::write(root.join("0.txt"), "before the cursor").unwrap();
            std::fs::write(root.join("z.txt"), "after the cursor").unwrap();
        }),
        "path",
    );
    assert_eq!(seen, ["a.txt", "b.txt", "d/c.txt", "d/e.txt", "f.txt", "z.txt"]);

    // A run's devloop rows and logs, by stream position.
    let (run, _) = e.run(json!({ "pluginId": "od-new-generation", "agent": "dry-run",
        "pluginInputs": { "topic": "tea", "audience": "tea lovers", "artifactKind": "landing-page" } }));
    let devloop_path = format!("/api/runs/{run}/devloop-iterations");
    let rows = walks_every_item_once(&e, &devloop_path, "iterations", "id");
    refuses_bad_paging(&e, &devloop_path, &other);
    let logs_path = format!("/api/runs/{run}/logs");
    let logs = walks_every_item_once(&e, &logs_path, "entries", "id");
    refuses_bad_paging(&e, &logs_path, &other);
    let (_, one) = e.get(&format!("{logs_path}?limit=1"));
    assert_eq!(one["runId"], run.as_str());

    // The log: `after` still works; `cursor` resumes; notes appended between pages come after.
    let (_, head) = e.get("/api/log/events?limit=1");
    let last = head["lastSeq"].as_u64().unwrap() as usize;
    let seqs: Vec<u64> = walk_with(&e, "/api/log/events", "events", 7, |e| {
        let (code, v) = e.post("/api/log/notes", json!({ "stream": "note:paging", "text": "appended meanwhile" }));
        assert_eq!(code, 200, "{v}");
    })
    .iter()
    .map(|v| v["data"]["seq"].as_u64().unwrap())
    .collect();
    assert_eq!(seqs, (1..=last as u64 + 1).collect::<Vec<_>>());
    let (_, after) = e.get("/api/log/events?after=3&limit=2");
    assert_eq!(after["events"][0]["data"]["seq"], 4);
    let c = after["nextCursor"].as_str().unwrap().to_string();
    let (_, next) = e.get(&format!("/api/log/events?cursor={c}&limit=2"));
    assert_eq!(next["events"][0]["data"]["seq"], 6);
    let (code, v) = e.get(&format!("/api/log/events?after=3&cursor={c}"));
    assert_eq!((code, v["error"]["data"]["field"].clone()), (400, json!("cursor")));
    // The tail starts from a page's cursor too.
    let tail = ureq::get(&format!("{}/api/log/tail?cursor={c}", e.url)).call().unwrap().into_string().unwrap();
    let first: Value = serde_json::from_str(tail.lines().next().unwrap()).unwrap();
    assert_eq!(first["data"]["seq"], 6);
    let (code, v) = e.get("/api/log/tail?cursor=log.zz");
    assert_eq!((code, v["error"]["data"]["field"].clone()), (400, json!("cursor")));
    let stream_path = format!("/api/log/events?stream=run:{run}");
    let versions: Vec<u64> =
        walk(&e, &stream_path, "events", 10).iter().map(|v| v["data"]["version"].as_u64().unwrap()).collect();
    assert_eq!(versions, (0..versions.len() as u64).collect::<Vec<_>>());
    let (_, sp) = e.get(&format!("{stream_path}&limit=1"));
    let sc = sp["nextCursor"].as_str().unwrap().to_string();
    for bad in [format!("/api/log/events?stream=note:paging&cursor={sc}"), format!("/api/log/events?cursor={sc}")] {
        let (code, v) = e.get(&bad);
        assert_eq!((code, v["error"]["data"]["field"].clone()), (400, json!("cursor")), "{bad}");
    }
    e.stop();

    // The CLI: --all walks every page; `od log tail` pages stay one JSON line per event.
    let now = ["0.txt", "a.txt", "b.txt", "d/c.txt", "d/e.txt", "f.txt", "z.txt"];
    assert_eq!(keys(&cli_all(&data, &["files", "list", "--project", &pid, "--limit", "2"]), "path"), now);
    assert_eq!(keys(&cli_all(&data, &["run", "devloop", &run, "--limit", "1"]), "id"), rows);
    assert_eq!(keys(&cli_all(&data, &["run", "logs", &run, "--limit", "3"]), "id"), logs);
    let tail = cli_all(&data, &["log", "tail", "--limit", "5"]);
    let tail_seqs: Vec<u64> = tail.iter().map(|v| v["data"]["seq"].as_u64().unwrap()).collect();
    assert!(tail_seqs.len() > last, "the embedded CLI's own start adds events");
    assert_eq!(tail_seqs, (1..=tail_seqs.len() as u64).collect::<Vec<_>>());
}

#[test]
fn log_tail_into_a_pipe_closed_early_ends_quietly() {
    use std::io::BufRead;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let e = Engine::start(&data, NOW);
    // Far more output than a pipe holds, so the CLI is still writing when the reader leaves.
    for i in 0..3000 {
        let text = format!("note {i} {}", "x".repeat(200));
        assert_eq!(e.post("/api/log/notes", json!({ "stream": "note:pipe", "text": text })).0, 200);
    }
    e.stop();
    // The log walks write far more than a pipe holds; the list walks page by page (one item a
    // page), so the reader is gone before their later pages.
    let walks: [&[&str]; 5] = [
        &["log", "tail"],
        &["log", "tail", "--all", "--limit", "100"],
        &["log", "tail", "--limit", "1000"],
        &["tools", "search", "--all", "--limit", "1"],
        &["plugin", "list", "--all", "--limit", "1"],
    ];
    for args in walks {
        let mut child = Command::new(OD)
            .args(args)
            .arg("--data-dir")
            .arg(&data)
            .env_remove("OD_DAEMON_URL")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        assert!(first.starts_with('{') || args[0] != "log", "{args:?}: {first}");
        // The reader is dropped here, as `| head -1` exits.
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !stderr.contains("panicked"), "{args:?}: {:?} {stderr}", out.status);
    }
}
