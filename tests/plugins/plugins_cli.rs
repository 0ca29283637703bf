//! Plugins through the CLI (embedded mode) and the HTTP API: install a local folder with ND-JSON
//! progress, list, info, reinstall unchanged, grants kept, doctor, uninstall, errors and exit codes.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

const OD: &str = env!("CARGO_BIN_EXE_od");

fn od(dir: &Path, args: &[&str]) -> Output {
    Command::new(OD).args(args).arg("--data-dir").arg(dir).env_remove("OD_DAEMON_URL").output().unwrap()
}

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Ids of the plugins that are not bundled.
fn installed(data: &Path) -> Vec<String> {
    let list: Value = serde_json::from_slice(&od(data, &["plugin", "list", "--json"]).stdout).unwrap();
    list["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["trust"] != "bundled")
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect()
}

fn write_plugin(dir: &Path, name: &str, version: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: Makes a thing.\nversion: {version}\n---\n# {name}\n\nDo the thing.\n"),
    )
    .unwrap();
}

#[test]
fn install_list_info_reinstall_uninstall() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let src = tmp.path().join("my-plugin");
    write_plugin(&src, "my-plugin", "1.0.0");

    let out = od(&data, &["plugin", "install", src.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ev = lines(&out);
    let phases: Vec<&str> =
        ev.iter().filter(|l| l["event"] == "progress").map(|l| l["data"]["phase"].as_str().unwrap()).collect();
    assert_eq!(phases, ["resolving", "parsing", "copying", "persisting"]);
    let last = ev.last().unwrap();
    assert_eq!(last["event"], "success");
    assert_eq!(last["data"]["plugin"]["id"], "my-plugin");
    assert_eq!(last["data"]["plugin"]["version"], "1.0.0");
    assert_eq!(last["data"]["plugin"]["trust"], "trusted");
    let fs_path = last["data"]["plugin"]["fsPath"].as_str().unwrap().to_string();
    assert!(data.join(&fs_path).join("SKILL.md").exists(), "files copied into the data dir");

    assert_eq!(installed(&data), ["my-plugin"]);
    let info: Value = serde_json::from_slice(&od(&data, &["plugin", "info", "my-plugin", "--json"]).stdout).unwrap();
    assert_eq!(info["plugin"]["manifest"]["name"], "my-plugin");

    // Same content again: nothing written.
    let seq_before: Value = serde_json::from_slice(&od(&data, &["log", "stats", "--json"]).stdout).unwrap();
    let again = od(&data, &["plugin", "install", src.to_str().unwrap()]);
    assert_eq!(lines(&again).last().unwrap()["data"]["unchanged"], true);
    let seq_after: Value = serde_json::from_slice(&od(&data, &["log", "stats", "--json"]).stdout).unwrap();
    assert_eq!(seq_before["lastSeq"], seq_after["lastSeq"]);

    // An upgrade replaces the version.
    write_plugin(&src, "my-plugin", "1.1.0");
    let up = od(&data, &["plugin", "install", src.to_str().unwrap()]);
    assert_eq!(lines(&up).last().unwrap()["data"]["plugin"]["version"], "1.1.0");

    // Upgrade re-reads the recorded source.
    let up: Value = serde_json::from_slice(&od(&data, &["plugin", "upgrade", "my-plugin", "--json"]).stdout).unwrap();
    assert_eq!((up["unchanged"].as_bool(), up["plugin"]["version"].as_str()), (Some(true), Some("1.1.0")));
    write_plugin(&src, "my-plugin", "1.2.0");
    let up: Value = serde_json::from_slice(&od(&data, &["plugin", "upgrade", "my-plugin", "--json"]).stdout).unwrap();
    assert_eq!((up["previousVersion"].as_str(), up["plugin"]["version"].as_str()), (Some("1.1.0"), Some("1.2.0")));
    let out = od(&data, &["plugin", "upgrade", "build-test"]);
    assert_eq!(serde_json::from_slice::<Value>(&out.stderr).unwrap()["error"]["code"], "bundled-plugin");

    let doc = od(&data, &["plugin", "doctor", "my-plugin", "--json"]);
    assert!(doc.status.success(), "{}", String::from_utf8_lossy(&doc.stdout));

    let rm = od(&data, &["plugin", "uninstall", "my-plugin", "--json"]);
    assert!(rm.status.success());
    assert!(!data.join(&fs_path).exists());
    let missing = od(&data, &["plugin", "info", "my-plugin"]);
    assert_eq!(missing.status.code(), Some(65));
    let err: Value = serde_json::from_slice(&missing.stderr).unwrap();
    assert_eq!(err["error"]["code"], "plugin-not-found");
}

#[test]
fn invalid_folders_install_nothing_and_name_the_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let bad = tmp.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("open-design.json"), "{ not json").unwrap();
    let out = od(&data, &["plugin", "install", bad.to_str().unwrap()]);
    assert_ne!(out.status.code(), Some(0));
    let last = lines(&out).pop().unwrap();
    assert_eq!(last["event"], "error");
    assert_eq!(last["data"]["error"]["code"], "plugin-invalid");
    let diags = last["data"]["error"]["data"]["diagnostics"].as_array().unwrap();
    assert!(diags.iter().any(|d| d["file"] == "open-design.json"), "{diags:?}");
    assert!(installed(&data).is_empty());
    let doc = od(&data, &["plugin", "doctor", bad.to_str().unwrap(), "--json"]);
    assert_ne!(doc.status.code(), Some(0));
    // A path that does not exist is "not found" (exit 65), naming the path — not an unsupported source.
    let missing = tmp.path().join("nope");
    let nowhere = od(&data, &["plugin", "install", missing.to_str().unwrap()]);
    assert_eq!(nowhere.status.code(), Some(65), "{}", String::from_utf8_lossy(&nowhere.stderr));
    let err = lines(&nowhere).pop().unwrap()["data"]["error"].clone();
    assert_eq!(err["code"], "source-not-found");
    assert!(err["message"].as_str().unwrap().contains(missing.to_str().unwrap()), "{err}");
    assert!(err["message"].as_str().unwrap().contains("not found"), "{err}");
    // Something that exists but is neither a folder nor an archive stays unsupported.
    let stray = tmp.path().join("notes.txt");
    std::fs::write(&stray, "hi").unwrap();
    let odd = od(&data, &["plugin", "install", stray.to_str().unwrap()]);
    assert_eq!(lines(&odd).pop().unwrap()["data"]["error"]["code"], "unsupported-source");
}

#[test]
fn trust_grants_persist_across_upgrades_and_revoke_keeps_prompt_inject() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let src = tmp.path().join("p");
    write_plugin(&src, "p", "1.0.0");
    assert!(od(&data, &["plugin", "install", src.to_str().unwrap()]).status.success());
    let caps = |data: &Path| -> Vec<String> {
        let v: Value = serde_json::from_slice(&od(data, &["plugin", "info", "p", "--json"]).stdout).unwrap();
        v["plugin"]["capabilitiesGranted"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect()
    };
    assert_eq!(caps(&data), ["prompt:inject"]);
    let out = od(&data, &["plugin", "trust", "p", "--capabilities", "network,mcp:figma", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["action"], "grant");
    assert_eq!(caps(&data), ["mcp:figma", "network", "prompt:inject"]);
    // An upgrade keeps what the user granted.
    write_plugin(&src, "p", "2.0.0");
    assert!(od(&data, &["plugin", "install", src.to_str().unwrap()]).status.success());
    assert_eq!(caps(&data), ["mcp:figma", "network", "prompt:inject"]);
    let out = od(&data, &["plugin", "trust", "p", "--capabilities", "network,prompt:inject", "--revoke"]);
    assert!(out.status.success());
    assert_eq!(caps(&data), ["mcp:figma", "prompt:inject"]);
    for bad in ["all", "connector:*", "teleport"] {
        let out = od(&data, &["plugin", "trust", "p", "--capabilities", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err: Value = serde_json::from_slice(&out.stderr).unwrap();
        assert_eq!(err["error"]["code"], "invalid-capability");
    }
    assert_eq!(caps(&data), ["mcp:figma", "prompt:inject"], "refused grants write nothing");
    assert_eq!(od(&data, &["plugin", "trust", "nope", "--capabilities", "network"]).status.code(), Some(65));
}

fn write_gated_plugin(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: gated\ndescription: Needs things.\n---\n# Gated\n\nUse {{topic}}.\n",
    )
    .unwrap();
    let manifest = serde_json::json!({
        "specVersion": "1.0.0", "name": "gated", "version": "1.0.0",
        "od": {
            "kind": "skill",
            "useCase": { "query": { "en": "Write about {{topic}} for {{audience}}", "fr": "Écrire sur {{topic}}" } },
            "inputs": [
                { "name": "topic", "type": "string", "required": true },
                { "name": "audience", "type": "string", "default": "everyone" }
            ],
            "context": { "mcp": [ { "name": "figma", "command": "npx", "args": ["figma-mcp"] } ] },
            "capabilities": ["fs:write"]
        }
    });
    std::fs::write(dir.join("open-design.json"), manifest.to_string()).unwrap();
}

#[test]
fn apply_is_pure_validates_inputs_and_gates_capabilities() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let src = tmp.path().join("gated");
    write_gated_plugin(&src);
    let out = od(&data, &["plugin", "install", src.to_str().unwrap(), "--restricted"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));

    // Missing required input: exit 67 naming the field.
    let out = od(&data, &["plugin", "apply", "gated", "--grant-caps", "mcp:figma,subprocess,network,fs:write"]);
    assert_eq!(out.status.code(), Some(67), "{}", String::from_utf8_lossy(&out.stderr));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "missing-input");
    assert_eq!(err["error"]["data"]["missing"], serde_json::json!(["topic"]));

    // Restricted and nothing granted: exit 66 with the structured body.
    let out = od(&data, &["plugin", "apply", "gated", "--input", "topic=tea"]);
    assert_eq!(out.status.code(), Some(66));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "capabilities-required");
    let missing = err["error"]["data"]["missing"].clone();
    assert_eq!(
        missing,
        serde_json::json!(["fs:write", "mcp:figma", "network", "subprocess"]),
        "implied capabilities included"
    );
    assert!(err["error"]["data"]["remediation"][0]
        .as_str()
        .unwrap()
        .starts_with("od plugin trust gated --capabilities"));

    // Per-call grants pass the gate.
    let out = od(
        &data,
        &[
            "plugin",
            "apply",
            "gated",
            "--input",
            "topic=tea",
            "--grant-caps",
            "fs:write,mcp:figma,network,subprocess",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let first: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(first["query"], "Write about tea for everyone");
    assert_eq!(first["appliedPlugin"]["snapshotId"], "");

    // Persisted grants are honoured by the gate (the reference daemon ignores them).
    assert!(od(&data, &["plugin", "trust", "gated", "--capabilities", "fs:write,mcp:figma,network,subprocess"])
        .status
        .success());
    let stats_before: Value = serde_json::from_slice(&od(&data, &["log", "stats", "--json"]).stdout).unwrap();
    let snapshot = |dir: &Path| {
        let mut files: Vec<(String, u64)> = walk(dir);
        files.sort();
        files
    };
    let files_before = snapshot(&data);

    // Apply is pure: 100 applies through one daemon write no event and no file.
    let d = start_daemon(&data);
    for i in 0..100 {
        let body = serde_json::json!({ "inputs": { "topic": format!("t{i}") }, "locale": "fr-CA" });
        let r: Value =
            ureq::post(&format!("{}/api/plugins/gated/apply", d.1)).send_json(body).unwrap().into_json().unwrap();
        assert_eq!(r["query"], format!("Écrire sur t{i}"));
        if i == 0 {
            assert_ne!(r["manifestSourceDigest"], first["manifestSourceDigest"], "inputs change the digest");
        }
    }
    let again: Value = ureq::post(&format!("{}/api/plugins/gated/apply", d.1))
        .send_json(serde_json::json!({ "inputs": { "topic": "tea" } }))
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(again["manifestSourceDigest"], first["manifestSourceDigest"], "same inputs, same digest");
    let status: Value = ureq::get(&format!("{}/api/daemon/status", d.1)).call().unwrap().into_json().unwrap();
    assert_eq!(
        status["lastSeq"],
        stats_before["lastSeq"].as_u64().unwrap() + 1,
        "only the daemon's start was recorded"
    );
    stop_daemon(d);
    let files_after = snapshot(&data);
    let changed: Vec<_> = files_after.iter().filter(|f| !files_before.contains(f)).map(|f| f.0.clone()).collect();
    assert!(
        changed.iter().all(|f| f == "daemon.log"
            || f.starts_with("sled/")
            || f.starts_with("log/")
            || f.starts_with(od::projector::READ_MODELS_FILE)),
        "apply wrote files: {changed:?}"
    );
    let stats_after: Value = serde_json::from_slice(&od(&data, &["log", "stats", "--json"]).stdout).unwrap();
    let kinds = &stats_after["stats"]["byKind"];
    assert_eq!(kinds["daemon_started"], 1);
    assert_eq!(stats_after["lastSeq"], stats_before["lastSeq"].as_u64().unwrap() + 2, "start and stop only");
}

fn walk(dir: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().to_string();
                out.push((rel, e.metadata().unwrap().len()));
            }
        }
    }
    out
}

fn start_daemon(data: &Path) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = Command::new(OD)
        .args(["daemon", "start", "--foreground", "--port", "0", "--json", "--data-dir"])
        .arg(data)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    (child, v["url"].as_str().unwrap().to_string())
}

fn stop_daemon(mut d: (std::process::Child, String)) {
    ureq::post(&format!("{}/api/daemon/stop", d.1)).call().unwrap();
    assert!(d.0.wait().unwrap().success());
}

#[test]
fn bundled_plugins_are_listed_and_refuse_change() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let list: Value = serde_json::from_slice(&od(&data, &["plugin", "list", "--json"]).stdout).unwrap();
    let bundled: Vec<&str> = list["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["trust"] == "bundled")
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert!(bundled.contains(&"build-test") && bundled.contains(&"od-default"), "{bundled:?}");
    let out = od(&data, &["plugin", "uninstall", "build-test"]);
    assert_ne!(out.status.code(), Some(0));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "bundled-plugin");
    let fake = tmp.path().join("od-default");
    write_plugin(&fake, "od-default", "9.9.9");
    let out = od(&data, &["plugin", "install", fake.to_str().unwrap()]);
    assert_eq!(lines(&out).pop().unwrap()["data"]["error"]["code"], "bundled-plugin");
    let atoms: Value = serde_json::from_slice(&od(&data, &["atoms", "list", "--json"]).stdout).unwrap();
    assert_eq!(atoms["atoms"].as_array().unwrap().len(), 13);
    let cm = atoms["pipelines"].as_array().unwrap().iter().find(|p| p["id"] == "od-code-migration").unwrap();
    let verify = cm["pipeline"]["stages"].as_array().unwrap().iter().find(|s| s["id"] == "verify").unwrap();
    assert_eq!(verify["until"], "(build.passing && tests.passing) || iterations>=8");
    let bt = atoms["atoms"].as_array().unwrap().iter().find(|a| a["id"] == "build-test").unwrap();
    assert_eq!(bt["taskKinds"], serde_json::json!(["code-migration"]));
    let show: Value = serde_json::from_slice(&od(&data, &["atoms", "show", "build-test", "--json"]).stdout).unwrap();
    assert!(show["atom"]["skillBody"].as_str().unwrap().contains("build.passing"));
    // The bundled scenario applies (trusted: it holds what it requires).
    let out = od(&data, &["plugin", "apply", "od-new-generation", "--json"]);
    assert_eq!(out.status.code(), Some(67));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["data"]["missing"], serde_json::json!(["artifactKind", "audience", "topic"]));
    let args = [
        "plugin",
        "apply",
        "od-new-generation",
        "--input",
        "artifactKind=landing page",
        "--input",
        "audience=tea lovers",
    ];
    let out = od(&data, &[&args[..], &["--input", "topic=a tea shop", "--json"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["trust"], "trusted");
    assert!(v["capabilitiesRequired"].as_array().unwrap().iter().any(|c| c == "pipeline:*"));
    assert!(v["query"].as_str().unwrap().contains("a tea shop"), "{}", v["query"]);
}

#[test]
fn a_plugin_without_a_pipeline_gets_its_task_kinds_scenario() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let src = tmp.path().join("plain");
    write_plugin(&src, "plain", "1.0.0");
    assert!(od(&data, &["plugin", "install", src.to_str().unwrap()]).status.success());
    let out = od(&data, &["plugin", "apply", "plain", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["pipelineSource"]["scenario"], "od-new-generation");
    let ids: Vec<&str> =
        v["pipeline"]["stages"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["discovery", "plan", "generate", "critique"]);
    assert!(v["resolvedContextRefs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r == "pipeline-atom: critique:critique-theater"));
}

/// A restricted plugin with a pipeline needs `pipeline:*`: the 409's remediation names it, and
/// `od plugin trust` with exactly that list makes the plugin runnable (it was refused as a
/// wildcard, so the remediation could never be followed). Other wildcards stay refused.
#[test]
fn the_remediation_of_capabilities_required_can_be_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ui/plugins/guarded");
    let out = od(&data, &["plugin", "install", src.to_str().unwrap(), "--restricted"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = od(&data, &["plugin", "apply", "guarded", "--json"]);
    assert_eq!(out.status.code(), Some(66));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    let missing: Vec<&str> =
        err["error"]["data"]["missing"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(missing, ["fs:write", "network", "pipeline:*"]);
    let out = od(&data, &["plugin", "trust", "guarded", "--capabilities", &missing.join(","), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = od(&data, &["plugin", "apply", "guarded", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for bad in ["pipeline:**", "mcp:*", "*"] {
        let out = od(&data, &["plugin", "trust", "guarded", "--capabilities", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
    }
}

/// A stdout whose reader is already gone: every write fails with EPIPE (od ignores SIGPIPE, as
/// Rust programs do), so the test does not depend on who wins a race with `| head`.
fn closed_pipe() -> std::process::Stdio {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    unsafe { libc::close(fds[0]) };
    // SAFETY: fds[1] is a fresh descriptor owned by nothing else.
    std::process::Stdio::from(unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[1]) })
}

#[test]
fn output_into_a_closed_pipe_ends_quietly_and_the_install_still_happens() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, src) = (tmp.path().join("data"), tmp.path().join("piped"));
    write_plugin(&src, "piped", "1.0.0");
    for args in [vec!["plugin", "install", src.to_str().unwrap()], vec!["--json", "log", "tail", "--limit", "5"]] {
        let out = Command::new(OD)
            .args(&args)
            .arg("--data-dir")
            .arg(&data)
            .env_remove("OD_DAEMON_URL")
            .stdout(closed_pipe())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
    assert_eq!(installed(&data), vec!["piped".to_string()]);
}
