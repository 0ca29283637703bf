//! Paging of the lists served from the read-model indexes: runs (filters `projectId`,
//! `conversationId`, `status` incl. `active`), projects, conversations, applied-plugin snapshots
//! (all, by plugin, a project's), artifacts, GenUI rows (run, project) and browser actions — limit,
//! cursor, every item once, order stable while runs are appended between pages, and a bad limit or
//! cursor refused with a 400 naming the field. The CLI pages the same way (`--all`).

use crate::common;

use common::harness::{write_plugin, Engine, OD};
use serde_json::{json, Value};
use std::collections::BTreeSet;

const NOW: i64 = 1_800_000_000_000;

/// Every item of a list, page by page (`limit` each), calling `between` after each page.
fn walk(e: &Engine, path: &str, field: &str, limit: usize, mut between: impl FnMut()) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    let sep = if path.contains('?') { '&' } else { '?' };
    for _ in 0..1000 {
        let url = match &cursor {
            Some(c) => format!("{path}{sep}limit={limit}&cursor={c}"),
            None => format!("{path}{sep}limit={limit}"),
        };
        let (code, v) = e.get(&url);
        assert_eq!(code, 200, "{url}: {v}");
        let items = v[field].as_array().unwrap_or_else(|| panic!("{url}: no {field} in {v}"));
        assert!(items.len() <= limit, "{url}: page longer than its limit");
        out.extend(items.iter().cloned());
        match v["nextCursor"].as_str() {
            Some(c) => {
                assert!(!items.is_empty(), "{url}: an empty page with a next cursor");
                cursor = Some(c.to_string());
                between();
            }
            None => {
                assert!(v["nextCursor"].is_null(), "{url}: nextCursor missing");
                return out;
            }
        }
    }
    panic!("{path}: paging did not end");
}

fn ids(items: &[Value], key: &str) -> Vec<String> {
    items.iter().map(|i| i[key].as_str().unwrap().to_string()).collect()
}

fn assert_bad_paging(e: &Engine, path: &str) {
    let sep = if path.contains('?') { '&' } else { '?' };
    for (q, field) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=x", "limit"),
        ("cursor=zz", "cursor"),
        ("cursor=runs.00", "cursor"),
    ] {
        if path.starts_with("/api/runs?") && q == "cursor=runs.00" {
            continue; // a cursor of this very list
        }
        let (code, v) = e.get(&format!("{path}{sep}{q}"));
        assert_eq!(code, 400, "{path} {q}: {v}");
        assert_eq!(v["error"]["data"]["field"], field, "{path} {q}: {v}");
    }
}

/// A plugin declaring one project-tier surface (`brief`).
fn write_asker(dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), "---\nname: asker\ndescription: Asks first.\n---\nAsk.\n").unwrap();
    let schema =
        json!({ "type": "object", "properties": { "audience": { "type": "string" } }, "required": ["audience"] });
    let manifest = json!({
        "specVersion": "1.0.0", "name": "asker", "version": "1.0.0", "title": "Asker",
        "od": { "kind": "scenario", "taskKind": "new-generation",
                "pipeline": { "stages": [ { "id": "ask", "atoms": ["todo-write"] } ] },
                "genui": { "surfaces": [ { "id": "brief", "kind": "form", "persist": "project",
                    "trigger": { "stageId": "ask" }, "schema": schema } ] } }
    });
    std::fs::write(dir.join("open-design.json"), manifest.to_string()).unwrap();
}

fn setup(tmp: &std::path::Path) -> Engine {
    let e = Engine::start(&tmp.join("data"), NOW);
    let plain = tmp.join("plain");
    write_plugin(&plain, "plain", "1.0.0", json!([ { "id": "make", "atoms": ["file-write"] } ]), "x");
    e.install(&plain);
    for p in ["a", "b"] {
        let (code, v) = e.post("/api/projects", json!({ "id": p, "pluginId": "plain" }));
        assert_eq!(code, 200, "{v}");
    }
    e
}

#[test]
fn runs_page_newest_first_from_their_indexes_and_stay_stable_under_appends() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path());
    let (_, v) = e.post("/api/projects/a/conversations", json!({ "title": "second" }));
    let conv2 = v["conversationId"].as_str().unwrap().to_string();
    let mut in_a = Vec::new();
    for i in 0..7 {
        let body = match i % 3 {
            0 => json!({ "projectId": "a", "pluginId": "plain" }),
            1 => json!({ "projectId": "a", "conversationId": conv2, "pluginId": "plain" }),
            _ => json!({ "projectId": "b", "pluginId": "plain" }),
        };
        let (id, _) = e.run(body.clone());
        if body["projectId"] == "a" {
            in_a.push(id);
        }
    }
    // Every run once, newest first, while new runs are created between pages (they land before
    // the cursor, so they never shift a later page).
    let (_, first) = e.get("/api/runs?limit=1000");
    let before = ids(first["runs"].as_array().unwrap(), "runId");
    let mut added = 0;
    let walked = walk(&e, "/api/runs", "runs", 2, || {
        if added < 3 {
            e.start_run(json!({ "projectId": "b", "pluginId": "plain" }));
            added += 1;
        }
    });
    assert_eq!(ids(&walked, "runId"), before, "pages skipped or repeated runs while runs were appended");
    let created: Vec<i64> = walked.iter().map(|r| r["createdAt"].as_i64().unwrap()).collect();
    assert!(created.windows(2).all(|w| w[0] >= w[1]), "not newest first");
    // Filters.
    let a = walk(&e, "/api/runs?projectId=a", "runs", 2, || {});
    let mut want = in_a.clone();
    want.reverse();
    assert_eq!(ids(&a, "runId"), want);
    let c2 = walk(&e, &format!("/api/runs?conversationId={conv2}"), "runs", 1, || {});
    assert_eq!(c2.len(), 2);
    assert!(c2.iter().all(|r| r["conversationId"] == conv2.as_str()));
    let ok = walk(&e, "/api/runs?status=succeeded&projectId=a", "runs", 3, || {});
    assert_eq!(ok.len(), in_a.len());
    let active = walk(&e, "/api/runs?status=active", "runs", 1, || {});
    assert!(active.iter().all(|r| !["succeeded", "failed", "canceled"].contains(&r["status"].as_str().unwrap())));
    assert_bad_paging(&e, "/api/runs?projectId=a");
    // The CLI walks every page.
    let out = std::process::Command::new(OD)
        .args(["--json", "run", "list", "--project", "a", "--limit", "1", "--all"])
        .env("OD_DAEMON_URL", &e.url)
        .env("OD_API_TOKEN", &e.token)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(ids(&lines, "runId"), want);
}

#[test]
fn projects_conversations_snapshots_artifacts_and_genui_page() {
    let tmp = tempfile::tempdir().unwrap();
    let e = setup(tmp.path());
    for i in 0..4 {
        e.post("/api/projects", json!({ "id": format!("x{i}") }));
        e.post("/api/projects/a/conversations", json!({ "title": format!("c{i}") }));
    }
    let projects = walk(&e, "/api/projects", "projects", 2, || {});
    assert_eq!(ids(&projects, "id"), vec!["a", "b", "x0", "x1", "x2", "x3"], "projects oldest first, each once");
    let convs = walk(&e, "/api/projects/a/conversations", "conversations", 2, || {});
    let titles: Vec<&str> = convs.iter().map(|c| c["title"].as_str().unwrap()).collect();
    assert_eq!(titles, vec!["main", "c0", "c1", "c2", "c3"]);
    for _ in 0..3 {
        e.run(json!({ "projectId": "a", "pluginId": "plain" }));
    }
    e.run(json!({ "projectId": "b", "pluginId": "plain" }));
    let all = walk(&e, "/api/applied-plugins", "snapshots", 2, || {});
    let set: BTreeSet<String> = ids(&all, "snapshotId").into_iter().collect();
    assert_eq!(set.len(), all.len(), "a snapshot listed twice");
    let plain = walk(&e, "/api/applied-plugins?pluginId=plain", "snapshots", 1, || {});
    assert!(!plain.is_empty() && plain.iter().all(|s| s["pluginId"] == "plain"));
    let of_a = walk(&e, "/api/projects/a/applied-plugins", "snapshots", 1, || {});
    let of_b = walk(&e, "/api/projects/b/applied-plugins", "snapshots", 1, || {});
    assert!(!of_a.is_empty() && !of_b.is_empty());
    assert!(of_a.iter().all(|s| !of_b.contains(s) || s["referencedBy"].as_array().unwrap().len() > 1));
    let arts = walk(&e, "/api/projects/a/artifacts", "artifacts", 1, || {});
    assert!(!arts.is_empty(), "the runs recorded no artifacts");
    assert!(arts.iter().all(|a| a["projectId"] == "a"));
    let seen: BTreeSet<String> = ids(&arts, "artifactId").into_iter().collect();
    assert_eq!(seen.len(), arts.len());
    // Prefilled answers are a project's GenUI rows.
    let asker = tmp.path().join("asker");
    write_asker(&asker);
    e.install(&asker);
    for i in 0..3 {
        let body = json!({ "pluginId": "asker", "values": { "brief": { "audience": format!("v{i}") } } });
        let (code, v) = e.post("/api/projects/a/genui/prefill", body);
        assert_eq!(code, 200, "{v}");
    }
    let rows = walk(&e, "/api/projects/a/genui", "surfaces", 2, || {});
    assert_eq!(rows.len(), 3);
    let run = e.get("/api/runs?projectId=a&limit=1").1["runs"][0]["runId"].as_str().unwrap().to_string();
    let run_rows = walk(&e, &format!("/api/runs/{run}/genui"), "surfaces", 1, || {});
    assert!(run_rows.is_empty());
    let actions = walk(&e, &format!("/api/runs/{run}/actions"), "actions", 1, || {});
    assert!(actions.is_empty());
    for path in [
        "/api/projects".to_string(),
        "/api/projects/a/conversations".to_string(),
        "/api/applied-plugins".to_string(),
        "/api/projects/a/applied-plugins".to_string(),
        "/api/projects/a/artifacts".to_string(),
        "/api/projects/a/genui".to_string(),
        format!("/api/runs/{run}/genui"),
        format!("/api/runs/{run}/actions"),
    ] {
        assert_bad_paging(&e, &path);
    }
    // A cursor of one list is refused by another.
    let (_, p) = e.get("/api/projects?limit=1");
    let c = p["nextCursor"].as_str().unwrap();
    let (code, v) = e.get(&format!("/api/applied-plugins?cursor={c}"));
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["error"]["data"]["field"], "cursor");
}
