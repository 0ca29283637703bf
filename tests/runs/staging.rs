//! The substrate staged into a run's working folder (issue 30 item 2): a plugin with a design
//! system file, a craft file, a context skill, an asset and a stdio MCP server
//! (`tests/fixtures/staging/substrate`), run with an exec agent that saves its stdin, `ls -R -a` of
//! its folder and its `.mcp.json`. The files are there before the agent starts; `.mcp.json` parses
//! and its `od` entry starts `od mcp`, which answers `initialize` and `tools/list`;
//! `substrate_staged` lists each file with its digest; a path-escaping asset is refused by name
//! with nothing staged; a user's own `.mcp.json` is kept; a fork has the same staged files; replay
//! verifies.

use crate::common;

use common::harness::{of, script, Engine, OD};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const NOW: i64 = 1_800_000_000_000;
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/staging/substrate");

/// Saves what the agent had — its prompt, its folder, its `.mcp.json` — per stage, then finishes.
const AGENT: &str = r#"
cat > "$OUT/stdin-$OD_STAGE_ID.txt"
ls -R -a . > "$OUT/ls-$OD_STAGE_ID.txt"
cat .mcp.json > "$OUT/mcp-$OD_STAGE_ID.json" 2>/dev/null
echo '{"type":"done"}'
"#;

struct Setup {
    e: Engine,
    out: PathBuf,
    agent: PathBuf,
}

/// An engine with the fixture (its manifest changed by `patch`) installed, and the agent script.
fn setup(tmp: &Path, patch: impl FnOnce(&mut Value)) -> Setup {
    let plugin = tmp.join("plugin");
    common::copy_dir(Path::new(FIXTURE), &plugin);
    let mpath = plugin.join("open-design.json");
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    patch(&mut manifest);
    std::fs::write(&mpath, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    let e = Engine::start(&tmp.join("data"), NOW);
    e.install(&plugin);
    let out = tmp.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let agent = script(tmp, "agent.sh", AGENT);
    Setup { e, out, agent }
}

fn start(s: &Setup, extra: Value) -> (String, Vec<Value>) {
    let mut body = json!({ "pluginId": "staging-substrate", "agent": "exec",
        "agentCommand": [s.agent.to_str().unwrap()],
        "agentEnv": { "OD_BIN": OD, "OUT": s.out.to_str().unwrap() } });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    s.e.run(body)
}

fn digest(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The run's working folder (its agent's cwd).
fn cwd(ev: &[Value]) -> PathBuf {
    PathBuf::from(of(ev, "start").last().unwrap()["cwd"].as_str().unwrap())
}

/// Sends one JSON-RPC request line and reads lines until its answer (each must be JSON-RPC).
fn rpc(
    stdin: &mut impl Write,
    out: &mut impl Iterator<Item = std::io::Result<String>>,
    id: u64,
    method: &str,
) -> Value {
    let params = match method {
        "initialize" => {
            json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } })
        }
        _ => json!({}),
    };
    writeln!(stdin, "{}", json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })).unwrap();
    stdin.flush().unwrap();
    loop {
        let line = out.next().expect("the server answers").unwrap();
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC: {line:?}: {e}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        if v["id"] == id {
            return v;
        }
    }
}

/// Starts an `.mcp.json` entry as a client would (its command and args, in `cwd`) and returns its
/// answers to `initialize` and `tools/list`.
pub(crate) fn drive_mcp(entry: &Value, cwd: &Path) -> (Value, Value) {
    let args: Vec<&str> = entry["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    let mut child = Command::new(entry["command"].as_str().unwrap())
        .args(&args)
        .current_dir(cwd)
        .env_remove("OD_DAEMON_URL")
        .env_remove("OD_DATA_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let init = rpc(&mut stdin, &mut out, 1, "initialize");
    writeln!(stdin, "{}", json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).unwrap();
    let list = rpc(&mut stdin, &mut out, 2, "tools/list");
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    (init, list)
}

#[test]
fn the_substrate_is_in_the_folder_before_the_agent_starts_and_recorded_with_digests() {
    let tmp = tempfile::tempdir().unwrap();
    let s = setup(tmp.path(), |_| {});
    let (id, ev) = start(&s, json!({}));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:#?}");

    // Recorded before the first agent invocation, once.
    let names: Vec<&str> = ev.iter().map(|v| v["event"].as_str().unwrap()).collect();
    let staged_at = names.iter().position(|n| *n == "substrate_staged").expect("substrate_staged on the wire");
    assert!(staged_at < names.iter().position(|n| *n == "start").unwrap(), "{names:?}");
    assert_eq!(of(&ev, "substrate_staged").len(), 1);
    let staged = of(&ev, "substrate_staged")[0];
    assert_eq!(staged["contextDir"], ".od/context");
    assert_eq!(staged["mcpConfig"], ".mcp.json");
    assert_eq!(staged["mcpConfigMode"], "created");
    assert_eq!(staged["missing"], json!([]), "{staged}");

    // Each file with its kind, source and the digest of the plugin's bytes.
    let files = staged["files"].as_array().unwrap();
    let want = [
        ("assets/logo.svg", "asset", "assets/logo.svg"),
        (".od/context/SKILL.md", "context", "SKILL.md"),
        (".od/context/design/DESIGN.md", "context", "design/DESIGN.md"),
        (".od/context/craft/typography.md", "context", "craft/typography.md"),
        (".od/context/skills/motion/SKILL.md", "context", "skills/motion/SKILL.md"),
    ];
    let work = cwd(&ev);
    for (path, kind, source) in want {
        let f = files.iter().find(|f| f["path"] == path).unwrap_or_else(|| panic!("{path} not staged: {files:?}"));
        let bytes = std::fs::read(Path::new(FIXTURE).join(source)).unwrap();
        assert_eq!((f["kind"].as_str(), f["source"].as_str()), (Some(kind), Some(source)));
        assert_eq!(f["digest"], digest(&bytes), "{path}");
        assert_eq!(f["bytes"], bytes.len() as u64);
        assert_eq!(std::fs::read(work.join(path)).unwrap(), bytes, "{path} in the folder");
    }
    let mcp_file = files.iter().find(|f| f["kind"] == "mcp-config").unwrap();
    assert_eq!(mcp_file["path"], ".mcp.json");
    assert_eq!(files.len(), 6, "{files:?}");

    // The agent's own listing (first stage) shows the asset, the context and `.mcp.json`.
    let ls = read(&s.out.join("ls-draft.txt"));
    for needle in [
        "logo.svg",
        ".mcp.json",
        "./.od/context:",
        "./.od/context/design:",
        "DESIGN.md",
        "typography.md",
        "./.od/context/skills/motion:",
    ] {
        assert!(ls.contains(needle), "{needle} missing from the agent's listing:\n{ls}");
    }
    // Its prompt names the staged context folder.
    let prompt = read(&s.out.join("stdin-draft.txt"));
    assert!(prompt.contains("## Staged context\n") && prompt.contains("`.od/context/`"), "{prompt}");

    // `.mcp.json` as the agent read it: what was recorded, valid, naming od and the plugin's server.
    let mcp_text = read(&s.out.join("mcp-draft.json"));
    assert_eq!(mcp_file["digest"], digest(mcp_text.as_bytes()));
    let mcp: Value = serde_json::from_str(&mcp_text).unwrap();
    let servers = mcp["mcpServers"].as_object().unwrap();
    assert_eq!(servers.keys().collect::<Vec<_>>(), ["od", "fixture-mcp"]);
    assert_eq!(servers["od"]["command"], OD);
    assert_eq!(servers["od"]["args"].as_array().unwrap()[4..], [json!("mcp"), json!("--run"), json!(id)]);
    assert_eq!(
        servers["fixture-mcp"],
        json!({ "command": "sh", "args": ["mcp/server.sh"], "env": { "FIXTURE": "1" } })
    );

    // `od mcp` answers through it.
    let (init, list) = drive_mcp(&servers["od"], &work);
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    let tools: Vec<&str> =
        list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(tools.contains(&"od_list") && tools.contains(&"od_call"), "{list}");

    // Blob collection keeps the staged files' blobs while the project exists (two passes: blobs
    // stored since the previous pass are skipped once).
    for _ in 0..2 {
        let (code, gc) = s.e.post("/api/blobs/gc", json!({}));
        assert_eq!(code, 200, "{gc}");
        for f in files {
            assert!(!gc["unreferenced"].to_string().contains(f["digest"].as_str().unwrap()), "{gc}");
        }
    }

    // Replay recomposes every prompt (with the staged line) byte for byte.
    let (_, verify) = s.e.post(&format!("/api/runs/{id}/replay/verify"), json!({}));
    assert_eq!(verify["ok"], true, "{verify}");
    assert_eq!(verify["prompts"].as_array().unwrap().len(), 2);
}

/// A run whose plugin names `field` as `patch` sets it: refused by name at staging, nothing written.
fn refused_at_staging(field: &str, path: &str, patch: impl FnOnce(&mut Value)) {
    let tmp = tempfile::tempdir().unwrap();
    let s = setup(tmp.path(), patch);
    let (_, ev) = start(&s, json!({}));
    let end = &ev.last().unwrap()["data"];
    assert_eq!(end["status"], "failed", "{ev:#?}");
    assert_eq!(end["failureCategory"], "substrate");
    let detail = end["failureDetail"].as_str().unwrap();
    assert!(detail.contains(field) && detail.contains(&format!("{path:?}")), "{detail}");
    assert!(of(&ev, "substrate_staged").is_empty() && of(&ev, "start").is_empty(), "{ev:#?}");
    // Nothing was written: no asset, no context folder, no `.mcp.json`, nothing outside.
    let projects = s.e.data.join("projects");
    let written: Vec<PathBuf> = if projects.exists() { common::harness::files_below(&projects) } else { vec![] };
    assert!(written.is_empty(), "{written:?}");
    assert!(!tmp.path().join("outside.md").exists() && !s.e.data.join("outside.md").exists());
}

#[test]
fn a_path_escaping_asset_is_refused_by_name_with_nothing_staged() {
    // At install: an asset path leaving the plugin never gets that far (the field is named).
    let tmp = tempfile::tempdir().unwrap();
    let plugin = tmp.path().join("plugin");
    common::copy_dir(Path::new(FIXTURE), &plugin);
    let mpath = plugin.join("open-design.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    m["od"]["context"]["assets"] = json!(["../outside.md"]);
    std::fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let r = ureq::post(&format!("{}/api/plugins/install", e.url))
        .send_json(json!({ "source": plugin.to_str().unwrap() }))
        .unwrap()
        .into_string()
        .unwrap();
    assert!(r.contains("/od/context/assets/0") && r.contains("path-escape"), "{r}");
    drop(e);
    // At staging: an asset aimed into od's own folder, and a craft reference (not a path field
    // the loader checks) leaving the folder.
    refused_at_staging("od.context.assets[0]", ".od/prompts/x.md", |m| {
        m["od"]["context"]["assets"] = json!([".od/prompts/x.md"])
    });
    refused_at_staging("od.context.craft[0]", "../outside.md", |m| {
        m["od"]["context"]["craft"] = json!(["../outside.md"])
    });
}

#[test]
fn a_users_own_mcp_json_is_kept_and_ods_servers_merged_in_or_put_beside() {
    let tmp = tempfile::tempdir().unwrap();
    let s = setup(tmp.path(), |_| {});
    // The first run makes the project and its folder.
    let (first, ev) = start(&s, json!({}));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:#?}");
    let work = cwd(&ev);
    let (_, run) = s.e.get(&format!("/api/runs/{first}"));
    let project = run["projectId"].as_str().or(run["run"]["projectId"].as_str()).unwrap().to_string();

    // A user's own server list: od's servers are merged in beside it, the user's entry kept.
    let user = json!({ "mcpServers": { "mine": { "command": "my-server" } }, "note": "kept" });
    std::fs::write(work.join(".mcp.json"), serde_json::to_vec_pretty(&user).unwrap()).unwrap();
    let (_, ev) = start(&s, json!({ "projectId": project }));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:#?}");
    assert_eq!(cwd(&ev), work);
    let staged = of(&ev, "substrate_staged")[0];
    assert_eq!((staged["mcpConfig"].as_str(), staged["mcpConfigMode"].as_str()), (Some(".mcp.json"), Some("merged")));
    let merged: Value = serde_json::from_slice(&std::fs::read(work.join(".mcp.json")).unwrap()).unwrap();
    assert_eq!(merged["note"], "kept");
    assert_eq!(merged["mcpServers"]["mine"], user["mcpServers"]["mine"]);
    assert_eq!(merged["mcpServers"].as_object().unwrap().keys().collect::<Vec<_>>(), ["mine", "od", "fixture-mcp"]);

    // The next run replaces only od's servers in the file od wrote (the user's entry stays).
    let (third, ev) = start(&s, json!({ "projectId": project }));
    let staged = of(&ev, "substrate_staged")[0];
    assert_eq!(staged["mcpConfigMode"], "merged", "{staged}");
    let again: Value = serde_json::from_slice(&std::fs::read(work.join(".mcp.json")).unwrap()).unwrap();
    assert_eq!(again["mcpServers"]["mine"], user["mcpServers"]["mine"]);
    assert_eq!(again["mcpServers"]["od"]["args"][6], json!(third));

    // A user's file that names `od` itself is left untouched: od's configuration goes beside it.
    let theirs = json!({ "mcpServers": { "od": { "command": "their-od" } } });
    let theirs_bytes = serde_json::to_vec_pretty(&theirs).unwrap();
    std::fs::write(work.join(".mcp.json"), &theirs_bytes).unwrap();
    let (_, ev) = start(&s, json!({ "projectId": project }));
    let staged = of(&ev, "substrate_staged")[0];
    assert_eq!(
        (staged["mcpConfig"].as_str(), staged["mcpConfigMode"].as_str()),
        (Some(".od/mcp.json"), Some("beside-user-file"))
    );
    assert_eq!(std::fs::read(work.join(".mcp.json")).unwrap(), theirs_bytes);
    let beside: Value = serde_json::from_slice(&std::fs::read(work.join(".od/mcp.json")).unwrap()).unwrap();
    assert_eq!(beside["mcpServers"]["od"]["command"], OD);
}

#[test]
fn a_fork_has_the_same_staged_files_and_replays_verified() {
    let tmp = tempfile::tempdir().unwrap();
    let s = setup(tmp.path(), |_| {});
    let (parent, ev) = start(&s, json!({}));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:#?}");
    let staged = of(&ev, "substrate_staged")[0].clone();

    let (code, v) = s.e.post(&format!("/api/runs/{parent}/fork"), json!({ "at": "polish" }));
    assert_eq!(code, 202, "{v}");
    let fork = v["runId"].as_str().unwrap().to_string();
    std::fs::remove_file(s.out.join("ls-polish.txt")).unwrap();
    let fev = s.e.watch(&fork);
    assert_eq!(fev.last().unwrap()["data"]["status"], "succeeded", "{fev:#?}");
    // The fork staged nothing of its own: it inherited the parent's record and its files.
    let own: Vec<&Value> =
        fev.iter().filter(|v| v["event"] == "substrate_staged" && v["data"]["runId"] == fork.as_str()).collect();
    assert!(own.is_empty(), "{own:?}");
    let fork_dir = cwd(&fev);
    assert_ne!(fork_dir, cwd(&ev));
    for f in staged["files"].as_array().unwrap() {
        let path = f["path"].as_str().unwrap();
        let bytes = std::fs::read(fork_dir.join(path)).unwrap_or_else(|e| panic!("{path} in the fork: {e}"));
        assert_eq!(digest(&bytes), f["digest"].as_str().unwrap(), "{path}");
    }
    let ls = read(&s.out.join("ls-polish.txt"));
    assert!(ls.contains("logo.svg") && ls.contains("./.od/context/design:"), "{ls}");
    let prompt = read(&s.out.join("stdin-polish.txt"));
    assert!(prompt.contains("## Staged context\n"), "{prompt}");
    for run in [&parent, &fork] {
        let (_, verify) = s.e.post(&format!("/api/runs/{run}/replay/verify"), json!({}));
        assert_eq!(verify["ok"], true, "{verify}");
    }

    // `od run export` carries the staged files' blobs; the import elsewhere verifies and holds them.
    let bundle = tmp.path().join("fork.tar");
    let out =
        common::harness::od_cli(&s.e.data, &["run", "export", &fork, "--out", bundle.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let Setup { e, .. } = s;
    e.stop();
    let b = Engine::start(&tmp.path().join("b"), NOW);
    let out = common::harness::od_cli(&b.data, &["run", "import", bundle.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (_, again) = b.post(&format!("/api/runs/{fork}/replay/verify"), json!({}));
    assert_eq!(again["ok"], true, "{again}");
    for f in staged["files"].as_array().unwrap() {
        let d = f["digest"].as_str().unwrap();
        assert!(b.data.join("blobs").join(&d[..2]).join(&d[2..]).is_file(), "blob of {} imported", f["path"]);
    }
}
