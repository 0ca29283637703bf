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

    let list: Value = serde_json::from_slice(&od(&data, &["plugin", "list", "--json"]).stdout).unwrap();
    assert_eq!(list["plugins"].as_array().unwrap().len(), 1);
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
    let list: Value = serde_json::from_slice(&od(&data, &["plugin", "list", "--json"]).stdout).unwrap();
    assert!(list["plugins"].as_array().unwrap().is_empty());
    let doc = od(&data, &["plugin", "doctor", bad.to_str().unwrap(), "--json"]);
    assert_ne!(doc.status.code(), Some(0));
    let nowhere = od(&data, &["plugin", "install", tmp.path().join("nope").to_str().unwrap()]);
    assert_eq!(lines(&nowhere).pop().unwrap()["data"]["error"]["code"], "unsupported-source");
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
