//! Output for people and for machines through the `od` CLI (embedded mode): a pipe gets the exact
//! `--json` document, `OD_OUTPUT=human` tables with headers (colour only when forced), ids by
//! unique prefix (ambiguous → exit 2 naming the candidates, unknown → the kind's not-found), the
//! artifacts commands, and `run start` naming its project.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

const OD: &str = env!("CARGO_BIN_EXE_od");

fn od_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(OD);
    c.args(args).arg("--data-dir").arg(dir);
    for k in ["OD_DAEMON_URL", "OD_PROJECT_ID", "OD_OUTPUT", "NO_COLOR", "CLICOLOR_FORCE", "CLICOLOR", "COLUMNS"] {
        c.env_remove(k);
    }
    c.env("TZ", "UTC");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn od(dir: &Path, args: &[&str]) -> Output {
    od_env(dir, args, &[])
}

fn human(dir: &Path, args: &[&str]) -> String {
    let out = od_env(dir, args, &[("OD_OUTPUT", "human")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn err(out: &Output) -> (i32, Value) {
    let v: Value = serde_json::from_slice(&out.stderr).unwrap_or(Value::Null);
    (out.status.code().unwrap(), v["error"].clone())
}

/// Starts a dry run and waits for its end (it runs in the daemon `run start` started on demand);
/// its `run start` document.
fn start(dir: &Path, extra: &[&str]) -> Value {
    let started = json(&od(dir, &[&["run", "start"], extra].concat()));
    let watched = od(dir, &["run", "watch", started["runId"].as_str().unwrap(), "--json"]);
    assert!(watched.status.success(), "{}", String::from_utf8_lossy(&watched.stderr));
    started
}

#[test]
fn a_pipe_gets_the_json_document_and_people_get_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let started = start(data, &[]);
    let run_id = started["runId"].as_str().unwrap();
    // Piped without --json: exactly the --json document.
    let piped = json(&od(data, &["run", "list"]));
    assert_eq!(piped, json(&od(data, &["run", "list", "--json"])));
    assert_eq!(piped["runs"][0]["runId"], run_id);
    assert_eq!(json(&od(data, &["project", "list"]))["projects"].as_array().unwrap().len(), 1);
    // Forced human output: a table with headers, ids shortened, the status plain (no colour
    // without a terminal).
    let table = human(data, &["run", "list"]);
    let mut lines = table.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("RUN") && header.contains("STATUS") && header.contains("PROJECT"), "{table}");
    let row = lines.next().unwrap();
    assert!(row.starts_with(&run_id[..8]) && !row.contains(run_id), "the id is shortened: {table}");
    assert!(row.contains("succeeded") && !table.contains('\u{1b}'), "{table}");
    assert!(serde_json::from_str::<Value>(&table).is_err());
    let projects = human(data, &["project", "list"]);
    assert!(projects.starts_with("PROJECT") && projects.contains("RUNS"), "{projects}");
    // Colour only when forced, never with NO_COLOR.
    let forced = od_env(data, &["run", "list"], &[("OD_OUTPUT", "human"), ("CLICOLOR_FORCE", "1")]);
    assert!(String::from_utf8_lossy(&forced.stdout).contains("\u{1b}[32msucceeded"), "green when forced");
    let off = od_env(data, &["run", "list"], &[("OD_OUTPUT", "human"), ("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]);
    assert!(!String::from_utf8_lossy(&off.stdout).contains('\u{1b}'), "NO_COLOR wins");
    // Times are local date-times (TZ=UTC here), not Unix ms.
    let info = human(data, &["run", "info", run_id]);
    let created = json(&od(data, &["run", "info", run_id]))["run"]["createdAt"].as_i64().unwrap();
    assert!(!info.contains(&created.to_string()), "{info}");
    assert!(
        info.lines().any(|l| l.starts_with("createdAt") && (l.contains("ago") || l.contains("just now"))),
        "{info}"
    );
    // A paged list keeps its hint for people.
    let paged = human(data, &["plugin", "list", "--limit", "1"]);
    assert!(
        paged.starts_with("PLUGIN") && paged.lines().last().unwrap().starts_with("next page: --cursor "),
        "{paged}"
    );
    // A bad OD_OUTPUT is refused, naming it.
    let bad = od_env(data, &["run", "list"], &[("OD_OUTPUT", "yaml")]);
    let (code, e) = err(&bad);
    assert_eq!(code, 2);
    assert!(e["message"].as_str().unwrap().contains("OD_OUTPUT"), "{e}");
}

#[test]
fn ids_resolve_by_unique_prefix_like_git() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    for id in ["p-alpha", "p-beta", "q-one", "pa", "pa2"] {
        json(&od(data, &["project", "create", "--id", id]));
    }
    // Unique prefix → that id; an exact id wins over the longer ids it starts.
    assert_eq!(json(&od(data, &["project", "info", "q"]))["project"]["id"], "q-one");
    assert_eq!(json(&od(data, &["project", "info", "p-a"]))["project"]["id"], "p-alpha");
    assert_eq!(json(&od(data, &["project", "info", "pa"]))["project"]["id"], "pa");
    // Ambiguous → exit 2 naming the candidates.
    let (code, e) = err(&od(data, &["project", "info", "p-"]));
    assert_eq!((code, e["code"].as_str()), (2, Some("ambiguous-id")), "{e}");
    assert_eq!(e["data"]["candidates"], serde_json::json!(["p-alpha", "p-beta"]));
    let (code, e) = err(&od(data, &["project", "info", "p"]));
    assert_eq!(code, 2);
    assert_eq!(e["data"]["candidates"], serde_json::json!(["p-alpha", "p-beta", "pa", "pa2"]));
    // Unknown → the kind's not-found.
    let (code, e) = err(&od(data, &["project", "info", "zz"]));
    assert_eq!((code, e["code"].as_str()), (68, Some("project-not-found")), "{e}");
    // Runs and conversations too: a run named by its first characters, in every run command.
    let started = start(data, &["--project", "q"]);
    assert_eq!(started["projectId"], "q-one", "run start resolves --project");
    let run_id = started["runId"].as_str().unwrap();
    let info = json(&od(data, &["run", "info", &run_id[..8]]));
    assert_eq!(info["run"]["runId"], run_id);
    assert_eq!(json(&od(data, &["run", "logs", &run_id[..8]]))["runId"], run_id);
    let conv = started["conversationId"].as_str().unwrap();
    let listed = json(&od(data, &["run", "list", "--conversation", &conv[..8]]));
    assert_eq!(listed["runs"][0]["runId"], run_id);
    let (code, e) = err(&od(data, &["run", "info", "no-such-run"]));
    assert_eq!((code, e["code"].as_str()), (69, Some("run-not-found")), "{e}");
    // The deleted project's id no longer resolves.
    json(&od(data, &["project", "delete", "p-b"]));
    assert_eq!(json(&od(data, &["project", "info", "p-"]))["project"]["id"], "p-alpha");
}

#[test]
fn artifacts_of_a_run_and_of_a_project() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let first = start(data, &[]);
    let project = first["projectId"].as_str().unwrap();
    let second = start(data, &["--project", project]);
    let count = |run: &str| json(&od(data, &["run", "info", run]))["run"]["artifactCount"].as_u64().unwrap();
    let mut all = Vec::new();
    for run in [&first, &second] {
        let id = run["runId"].as_str().unwrap();
        let arts = json(&od(data, &["run", "artifacts", id]));
        let list = arts["artifacts"].as_array().unwrap();
        assert!(!list.is_empty());
        assert_eq!(list.len() as u64, count(id), "every recorded artifact, once");
        assert!(list.iter().all(|a| a["runId"] == id && a["digest"].as_str().is_some_and(|d| !d.is_empty())));
        assert!(list.iter().any(|a| a["path"] == "index.html"), "{arts}");
        all.extend(list.iter().cloned());
    }
    // Paged like other lists.
    let page = json(&od(data, &["run", "artifacts", first["runId"].as_str().unwrap(), "--limit", "1"]));
    assert_eq!(page["artifacts"].as_array().unwrap().len(), 1);
    assert!(page["nextCursor"].as_str().is_some_and(|c| c.starts_with("run-artifacts.")));
    // The project's: both runs' artifacts, oldest first.
    let out = od(data, &["project", "artifacts", project, "--all"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let of_project: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(of_project, all);
    let table = human(data, &["run", "artifacts", &first["runId"].as_str().unwrap()[..8]]);
    let header = table.lines().next().unwrap();
    for h in ["PATH", "KIND", "BYTES", "DIGEST", "RECORDED"] {
        assert!(header.contains(h), "{table}");
    }
    assert!(table.contains("index.html"), "{table}");
    let (code, _) = err(&od(data, &["run", "artifacts", "nope"]));
    assert_eq!(code, 69);
}

#[test]
fn run_start_names_its_project_and_conversation() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let v = start(data, &[]);
    let info = json(&od(data, &["run", "info", v["runId"].as_str().unwrap()]));
    assert_eq!(v["projectId"], info["run"]["projectId"]);
    assert_eq!(v["conversationId"], info["run"]["conversationId"]);
    let out = human(data, &["run", "start", "--project", v["projectId"].as_str().unwrap()]);
    assert!(out.lines().any(|l| l == format!("project {}", v["projectId"].as_str().unwrap())), "{out}");
    assert!(out.lines().any(|l| l.starts_with("conversation ")), "{out}");
}

#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    start(data, &[]);
    for mode in ["human", "json"] {
        for args in [&["log", "stats"][..], &["run", "list"], &["run", "info", "-"]] {
            let mut c = Command::new(OD);
            c.args(args).arg("--data-dir").arg(data).env_remove("OD_DAEMON_URL").env("OD_OUTPUT", mode);
            let mut child =
                c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
            // The reader is gone before od writes (it first opens its store): as under `| head`.
            drop(child.stdout.take());
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!stderr.contains("panicked"), "{args:?} ({mode}): {stderr}");
            assert_ne!(out.status.code(), Some(101), "{args:?} ({mode})");
        }
    }
}
