//! Projects, runs, files and snapshots through the `od` CLI (embedded, and runs in a daemon it starts on demand): the README's one-line
//! run, exit codes, `--json` everywhere, `od run respond --json '{…}'`, the devloop ceiling knob,
//! replay verification, and files that stay inside the project.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

const OD: &str = env!("CARGO_BIN_EXE_od");

fn od(dir: &Path, args: &[&str]) -> Output {
    od_env(dir, args, &[])
}

fn od_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(OD);
    c.args(args).arg("--data-dir").arg(dir).env_remove("OD_DAEMON_URL").env_remove("OD_PROJECT_ID");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn err(out: &Output) -> (i32, Value) {
    let v: Value = serde_json::from_slice(&out.stderr).unwrap_or(Value::Null);
    (out.status.code().unwrap(), v["error"].clone())
}

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

const QUICKSTART: &[&str] = &[
    "run",
    "start",
    "--plugin",
    "od-new-generation",
    "--input",
    "topic=a tea shop",
    "--input",
    "audience=tea lovers",
    "--input",
    "artifactKind=landing page",
    "--follow",
];

#[test]
fn the_readme_run_then_replay_verify_then_inspect() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let out = od(data, QUICKSTART);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ev = lines(&out);
    assert_eq!(ev[0]["event"], "pipeline_stage_started");
    for e in &ev {
        let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["event", "data"], "watch lines are exactly {{event, data}}");
    }
    let end = ev.last().unwrap();
    assert_eq!(end["event"], "end");
    assert_eq!(end["data"]["status"], "succeeded");
    let run_id = end["data"]["runId"].as_str().unwrap().to_string();

    let v = json(&od(data, &["run", "replay", &run_id, "--verify", "--json"]));
    assert_eq!(v["ok"], true);
    let info = json(&od(data, &["run", "info", &run_id, "--json"]));
    assert_eq!(info["run"]["status"], "succeeded");
    // One JSON shape per command: on a pipe without --json, `run info` prints the same document;
    // for people (OD_OUTPUT=human) it prints fields, not a second (unwrapped) JSON shape.
    assert_eq!(json(&od(data, &["run", "info", &run_id])), info, "a pipe gets the --json document");
    let human = od_env(data, &["run", "info", &run_id], &[("OD_OUTPUT", "human")]);
    let human = String::from_utf8_lossy(&human.stdout).to_string();
    assert!(serde_json::from_str::<Value>(&human).is_err(), "human output is not JSON: {human}");
    assert!(human.lines().any(|l| l.starts_with("runId") && l.ends_with(&run_id)), "{human}");
    assert!(human.lines().any(|l| l.starts_with("status") && l.ends_with("succeeded")), "{human}");
    let project = info["run"]["projectId"].as_str().unwrap().to_string();
    let html = od(data, &["files", "read", "index.html", "--project", &project]);
    assert!(String::from_utf8_lossy(&html.stdout).contains("a tea shop"), "the brief reached the page");
    let list = json(&od(data, &["run", "list", "--json"]));
    assert_eq!(list["runs"].as_array().unwrap().len(), 1);
    let logs = json(&od(data, &["run", "logs", &run_id, "--json"]));
    assert!(logs["entries"].as_array().unwrap().iter().any(|e| e["text"].as_str().unwrap().contains("[dry-run]")));
    let snaps = json(&od(data, &["plugin", "snapshots", "list", "--json"]));
    let sid = info["run"]["appliedPluginSnapshotId"].as_str().unwrap();
    assert!(snaps["snapshots"].as_array().unwrap().iter().any(|s| s["snapshotId"] == sid));
    let replay = json(&od(data, &["plugin", "replay", &run_id, "--snapshot-id", sid, "--json"]));
    assert_eq!(replay["rerun"]["pluginId"], "od-new-generation");
    assert_eq!(replay["snapshot"]["inputs"]["topic"], "a tea shop");
    let dev = json(&od(data, &["run", "devloop", &run_id, "--json"]));
    assert_eq!(dev["iterations"].as_array().unwrap().len(), 6);
    // Without --follow, `run start` returns once the run is accepted; the daemon it started in
    // the background carries the run to its end.
    let out = od(data, &["run", "start", "--json"]);
    let started = json(&out);
    let run = started["runId"].as_str().unwrap();
    let watched = od(data, &["run", "watch", run]);
    assert!(watched.status.success(), "{}", String::from_utf8_lossy(&watched.stderr));
    let again = json(&od(data, &["run", "info", run, "--json"]));
    assert_eq!(again["run"]["status"], "succeeded");
    json(&od(data, &["daemon", "stop", "--json"]));
}

#[test]
fn a_plugin_run_pins_its_snapshot_on_the_project_it_creates() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let out = od(data, QUICKSTART);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let first = lines(&out).last().unwrap()["data"]["runId"].as_str().unwrap().to_string();
    let info = json(&od(data, &["run", "info", &first, "--json"]));
    let (project, sid) = (info["run"]["projectId"].as_str().unwrap(), &info["run"]["appliedPluginSnapshotId"]);
    let p = json(&od(data, &["project", "info", project, "--json"]));
    assert_eq!(&p["project"]["appliedPluginSnapshotId"], sid, "the new project pins the run's snapshot: {p}");
    // The project's next run, naming no plugin, runs the pinned one (not od-default).
    let out = od(data, &["run", "start", "--project", project, "--follow"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let second = lines(&out).last().unwrap()["data"]["runId"].as_str().unwrap().to_string();
    let again = json(&od(data, &["run", "info", &second, "--json"]));
    assert_eq!(again["run"]["pluginId"], "od-new-generation");
    assert_eq!(&again["run"]["appliedPluginSnapshotId"], sid);
    let html = od(data, &["files", "read", "index.html", "--project", project]);
    assert!(String::from_utf8_lossy(&html.stdout).contains("a tea shop"), "the page is still the plugin's");
    // The snapshot is referenced by the project, so it is not an expiry candidate.
    let snap = json(&od(data, &["plugin", "snapshots", "show", sid.as_str().unwrap(), "--json"]));
    let refs = snap.to_string();
    assert!(refs.contains(&format!("project:{project}")), "{snap}");
}

#[test]
fn exit_codes_for_runs_projects_and_snapshots() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let (code, e) = err(&od(data, &["run", "info", "nope"]));
    assert_eq!((code, e["code"].as_str().unwrap()), (69, "run-not-found"));
    let (code, e) = err(&od(data, &["project", "info", "nope"]));
    assert_eq!((code, e["code"].as_str().unwrap()), (68, "project-not-found"));
    let (code, e) = err(&od(data, &["plugin", "snapshots", "show", "nope"]));
    assert_eq!((code, e["code"].as_str().unwrap()), (65, "snapshot-not-found"));
    let (code, e) = err(&od(data, &["run", "start", "--plugin", "od-new-generation"]));
    assert_eq!((code, e["code"].as_str().unwrap()), (67, "missing-input"));
    assert_eq!(e["data"]["missing"].as_array().unwrap().len(), 3);
    let (code, e) = err(&od(data, &["run", "start", "--agent", "exec"]));
    assert_eq!((code, e["data"]["field"].as_str().unwrap()), (2, "agentCommand"));
    // Typos are refused, naming the field, with nothing written: an unknown status filter and an
    // unknown dry-run script field.
    let (code, e) = err(&od(data, &["run", "list", "--status", "bogus"]));
    assert_eq!((code, e["data"]["field"].as_str().unwrap()), (2, "status"), "{e}");
    assert!(e["message"].as_str().unwrap().contains("awaiting-input"), "the message lists the statuses: {e}");
    let (code, e) = err(&od(data, &["run", "start", "--dry-run", r#"{"fial":1}"#]));
    assert_eq!((code, e["data"]["field"].as_str().unwrap()), (2, "dryRun"), "{e}");
    assert!(e["message"].as_str().unwrap().contains("fial"), "{e}");
    let (code, e) = err(&od(data, &["run", "start", "--dry-run", r#"{"critiqueScores":"high"}"#]));
    assert_eq!((code, e["data"]["field"].as_str().unwrap()), (2, "dryRun"), "{e}");
    let runs = json(&od(data, &["run", "list", "--json"]));
    assert_eq!(runs["runs"], serde_json::json!([]), "refused starts wrote no run");
    // A failed run exits non-zero with the end on stderr.
    let (code, e) = err(&od(data, &["run", "start", "--dry-run", r#"{"crash":"discovery"}"#, "--follow"]));
    assert_eq!((code, e["code"].as_str().unwrap()), (1, "run-failed"));
    assert_eq!(e["data"]["failureCategory"], "agent-crashed");
    json(&od(data, &["project", "create", "--id", "p", "--json"]));
    let (code, e) = err(&od(data, &["project", "create", "--id", "p"]));
    assert_eq!((code, e["code"].as_str().unwrap()), (76, "already-exists"));
}

#[test]
fn the_devloop_ceiling_comes_from_the_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let out = od_env(
        data,
        &["run", "start", "--dry-run", r#"{"critiqueScores":[1]}"#, "--follow"],
        &[("OD_MAX_DEVLOOP_ITERATIONS", "2")],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ev = lines(&out);
    let crit =
        ev.iter().filter(|e| e["event"] == "pipeline_stage_started" && e["data"]["stageId"] == "critique").count();
    // od-default's critique: `critique.score>=4 || iterations>=3`, capped at 2 here.
    assert_eq!(crit, 2);
    let rows: Vec<&Value> = ev.iter().filter(|e| e["event"] == "devloop_iteration").collect();
    assert_eq!(rows.last().unwrap()["data"]["termination"], "iteration-cap");
}

#[test]
fn files_stay_inside_the_project() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    json(&od(&data, &["project", "create", "--id", "site", "--json"]));
    let v =
        json(&od(&data, &["files", "write", "pages/about.md", "--content", "# About", "--project", "site", "--json"]));
    assert_eq!(v["file"]["path"], "pages/about.md");
    let local = tmp.path().join("logo.svg");
    std::fs::write(&local, "<svg/>").unwrap();
    json(&od(&data, &["files", "upload", local.to_str().unwrap(), "--project", "site", "--json"]));
    let list = json(&od(&data, &["files", "list", "--project", "site", "--json"]));
    let paths: Vec<&str> = list["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["logo.svg", "pages/about.md"]);
    let out = od(&data, &["files", "read", "pages/about.md", "--project", "site"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "# About");
    for bad in ["../escape.txt", "pages/../../escape.txt", "/etc/passwd"] {
        let (code, e) = err(&od(&data, &["files", "write", bad, "--content", "x", "--project", "site"]));
        assert_eq!(code, 2, "{bad}: {e}");
        assert_eq!(e["code"], "path-escapes-project", "{bad}");
    }
    assert!(!tmp.path().join("data/projects/escape.txt").exists() && !data.join("escape.txt").exists());
    // A symlink inside the project that points out is not followed.
    std::os::unix::fs::symlink(tmp.path(), data.join("projects/site/out")).unwrap();
    let (code, e) = err(&od(&data, &["files", "write", "out/x.txt", "--content", "x", "--project", "site"]));
    assert_eq!((code, e["code"].as_str().unwrap()), (2, "path-escapes-project"));
    assert!(!tmp.path().join("x.txt").exists());
    json(&od(&data, &["files", "delete", "logo.svg", "--project", "site", "--json"]));
    let (code, _) = err(&od(&data, &["files", "read", "logo.svg", "--project", "site"]));
    assert_eq!(code, 1);
    // Import adopts a folder in place; delete leaves an imported folder alone.
    let folder = tmp.path().join("existing");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("README.md"), "hi").unwrap();
    let v = json(&od(&data, &["project", "import", folder.to_str().unwrap(), "--id", "ex", "--json"]));
    assert_eq!(v["project"]["importedFrom"], folder.canonicalize().unwrap().to_str().unwrap());
    let list = json(&od(&data, &["files", "list", "--project", "ex", "--json"]));
    assert_eq!(list["files"][0]["path"], "README.md");
    json(&od(&data, &["project", "delete", "ex", "--json"]));
    assert!(folder.join("README.md").exists());
    json(&od(&data, &["project", "delete", "site", "--json"]));
    assert!(!data.join("projects/site").exists());
}

#[test]
fn files_write_never_follows_a_link_at_its_temp_name() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let victim = outside.join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    json(&od(&data, &["project", "create", "--id", "site", "--json"]));
    let dir = data.join("projects/site");
    // A link planted where the old writer put its temp file (and where a guess of the new one might be).
    std::os::unix::fs::symlink(&victim, dir.join(".index.html.od-tmp")).unwrap();
    std::fs::create_dir_all(dir.join("pages")).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("pages/.about.md.od-tmp")).unwrap();
    for path in ["index.html", "pages/about.md"] {
        let v = json(&od(&data, &["files", "write", path, "--content", "<h1>new</h1>", "--project", "site", "--json"]));
        assert_eq!(v["file"]["path"], path);
        let meta = std::fs::symlink_metadata(dir.join(path)).unwrap();
        assert!(meta.file_type().is_file(), "{path} must be a regular file, not a link");
        assert_eq!(std::fs::read_to_string(dir.join(path)).unwrap(), "<h1>new</h1>");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // A link at the target itself is refused, and what it points at is untouched.
    std::os::unix::fs::symlink(&victim, dir.join("link.txt")).unwrap();
    let (code, e) = err(&od(&data, &["files", "write", "link.txt", "--content", "x", "--project", "site"]));
    assert_eq!((code, e["code"].as_str().unwrap()), (2, "path-escapes-project"));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // A FIFO in the project is not a file: reading it is refused instead of hanging.
    let fifo = dir.join("pipe");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let (code, _) = err(&od(&data, &["files", "read", "pipe", "--project", "site"]));
    assert_ne!(code, 0);
}
