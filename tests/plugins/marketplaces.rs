//! Marketplaces through the CLI: add a community index (tests/fixtures/marketplaces/) and a local
//! one, list, info, entries, search across them, refresh (unchanged, then changed), trust tiers,
//! install by entry name (a trusted marketplace's entry installs trusted, a restricted one's
//! restricted), remove, errors. The real community index: `conformance_marketplaces.rs`.

use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

const OD: &str = env!("CARGO_BIN_EXE_od");
/// A community index written for these tests (4 entries, sources never fetched); the real one is
/// exercised by `conformance_marketplaces.rs`.
const COMMUNITY: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/marketplaces/community/open-design-marketplace.json");

fn od(dir: &Path, args: &[&str]) -> Output {
    Command::new(OD).args(args).arg("--data-dir").arg(dir).env_remove("OD_DAEMON_URL").output().unwrap()
}

fn ok_json(out: Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn local_index(dir: &Path, version: &str) -> std::path::PathBuf {
    let plugin = dir.join("plugins/tea-shop");
    std::fs::create_dir_all(&plugin).unwrap();
    std::fs::write(
        plugin.join("SKILL.md"),
        "---\nname: tea-shop\ndescription: A tea shop site.\n---\n# Tea shop\n\nBuild it.\n",
    )
    .unwrap();
    let index = json!({
        "name": "acme/market", "version": version, "specVersion": "1.0.0",
        "plugins": [ { "name": "acme/tea-shop", "title": "Tea shop", "version": "1.0.0", "source": "./plugins/tea-shop",
                       "description": "Builds a tea shop site", "tags": ["shop"] } ]
    });
    let path = dir.join("open-design-marketplace.json");
    std::fs::write(&path, index.to_string()).unwrap();
    path
}

#[test]
fn marketplace_lifecycle_and_install_by_entry_name() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let added = ok_json(od(&data, &["marketplace", "add", COMMUNITY, "--trust", "official", "--json"]));
    let community = added["marketplace"]["id"].as_str().unwrap().to_string();
    assert_eq!(added["marketplace"]["trust"], "official");
    assert_eq!(added["marketplace"]["pluginCount"], 4);
    let index = local_index(&tmp.path().join("acme"), "1.0.0");
    let acme = ok_json(od(&data, &["marketplace", "add", index.to_str().unwrap(), "--json"]));
    assert_eq!(acme["marketplace"]["id"], "acme-market");
    assert_eq!(acme["marketplace"]["trust"], "restricted");

    let list = ok_json(od(&data, &["marketplace", "list", "--json"]));
    assert_eq!(list["marketplaces"].as_array().unwrap().len(), 2);
    let entries = ok_json(od(&data, &["marketplace", "plugins", &community, "--json"]));
    assert_eq!(entries["plugins"][0]["name"], "community/poster-maker");
    let hits = ok_json(od(&data, &["marketplace", "search", "shop", "--json"]));
    let names: Vec<&str> = hits["results"].as_array().unwrap().iter().map(|h| h["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["acme/tea-shop"]);
    assert_eq!(hits["results"][0]["marketplaceId"], "acme-market");

    let again = ok_json(od(&data, &["marketplace", "refresh", "acme-market", "--json"]));
    assert_eq!(again["changed"], false);
    local_index(&tmp.path().join("acme"), "1.1.0");
    let again = ok_json(od(&data, &["marketplace", "refresh", "acme-market", "--json"]));
    assert_eq!((again["changed"].as_bool(), again["marketplace"]["version"].as_str()), (Some(true), Some("1.1.0")));

    // A restricted marketplace's entry installs restricted; after trusting the marketplace, trusted.
    let out = od(&data, &["plugin", "install", "acme/tea-shop"]);
    let last: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "success", "{last}");
    assert_eq!(last["data"]["plugin"]["id"], "tea-shop");
    assert_eq!(last["data"]["plugin"]["trust"], "restricted");
    let trusted = ok_json(od(&data, &["marketplace", "trust", "acme-market", "trusted", "--json"]));
    assert_eq!(trusted["marketplace"]["trust"], "trusted");
    assert!(od(&data, &["plugin", "uninstall", "tea-shop"]).status.success());
    let out = od(&data, &["plugin", "install", "acme/tea-shop"]);
    let last: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(last["data"]["plugin"]["trust"], "trusted", "{last}");

    // Errors: bad tier, unknown id, malformed index, duplicate add.
    assert_eq!(od(&data, &["marketplace", "trust", "acme-market", "all"]).status.code(), Some(1));
    assert_eq!(od(&data, &["marketplace", "info", "nope"]).status.code(), Some(65));
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, r#"{"name":"x","plugins":[{"name":"a","version":"1"}]}"#).unwrap();
    let out = od(&data, &["marketplace", "add", bad.to_str().unwrap()]);
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "invalid-marketplace");
    assert!(err["error"]["message"].as_str().unwrap().contains("plugins[0].source"), "{err}");
    let dup = od(&data, &["marketplace", "add", index.to_str().unwrap()]);
    assert_ne!(dup.status.code(), Some(0));

    let removed = ok_json(od(&data, &["marketplace", "remove", "acme-market", "--json"]));
    assert_eq!(removed["id"], "acme-market");
    assert_eq!(ok_json(od(&data, &["marketplace", "list", "--json"]))["marketplaces"].as_array().unwrap().len(), 1);
    assert_eq!(
        od(&data, &["plugin", "install", "acme/tea-shop"]).status.code(),
        Some(65),
        "no marketplace lists it now: source-not-found, exit 65"
    );
}
