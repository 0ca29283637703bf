//! Real ACP agents from npm (`tests/agents_js`): `qwen --acp` and `gemini --acp` driving whole
//! `od-new-generation` runs with `agent: "acp"` against the fake model server
//! (`common::fake_model`) over HTTPS with a CA made in the test. Each run ends `succeeded`, with
//! the `index.html` the agent wrote recorded as an artifact (Qwen writes it through od's
//! `fs/write_text_file`) and the agent's text recorded; under `permissionMode: ask` the agent's
//! permission request is asked through GenUI and the answer goes back.
//!
//! A CLI that is not installed is skipped with a message — unless `OD_REAL_AGENTS=required`
//! (`.ci/run` sets it), then it fails. The environment helpers are copied from `real_agents.rs`
//! (small, and that file belongs to another slice).

use crate::common;

use common::fake_model::{FakeModel, FINAL_TEXT, PAGE};
use common::harness::{of, watch_url, Engine};
use common::real_cli::{agents_js, gemini_env, installed, qwen_env, MODEL};
use common::tls::{Flaw, TestCa, TlsFront};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;

const NOW: i64 = 1_800_000_000_000;

/// One ACP CLI: its npm bin, its ACP argv and environment (config files written into `home`).
struct Cli {
    name: &'static str,
    bin: &'static str,
    args: &'static [&'static str],
    env: fn(home: &Path, url: &str) -> Vec<(&'static str, String)>,
}

const GEMINI: Cli = Cli { name: "gemini", bin: "gemini", args: &["--acp", "-m", MODEL], env: gemini_env };
const QWEN: Cli = Cli { name: "qwen", bin: "qwen", args: &["--acp"], env: qwen_env };

/// A started run of a real ACP CLI, and what it runs against.
struct Started {
    id: String,
    fake: FakeModel,
    e: Engine,
    record: PathBuf,
    _front: TlsFront,
    _tmp: tempfile::TempDir,
}

/// The fake model behind TLS and the environment pointing `cli` at it, before od starts.
struct Prepared {
    bin: PathBuf,
    fake: FakeModel,
    front: TlsFront,
    env: Value,
    record: PathBuf,
    tmp: tempfile::TempDir,
}

/// `None` when the CLI is not installed (and that is allowed).
fn prepare(cli: &Cli) -> Option<Prepared> {
    let bin = installed(cli.name, cli.bin)?;
    let tmp = tempfile::tempdir().unwrap();
    let fake = FakeModel::start();
    let ca = TestCa::new(tmp.path(), "model");
    let cert = ca.server_cert(tmp.path(), "model", Flaw::None);
    let front = TlsFront::start(&cert, fake.addr);
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let url = format!("https://127.0.0.1:{}", front.addr.port());
    let mut env = json!({
        "HOME": home.to_str().unwrap(),
        "XDG_CONFIG_HOME": home.join(".config").to_str().unwrap(),
        "XDG_DATA_HOME": home.join(".local/share").to_str().unwrap(),
        "XDG_CACHE_HOME": home.join(".cache").to_str().unwrap(),
        "XDG_STATE_HOME": home.join(".local/state").to_str().unwrap(),
        "NODE_EXTRA_CA_CERTS": ca.pem_path.to_str().unwrap(),
        "NO_COLOR": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "CI": "1",
    });
    for (k, v) in (cli.env)(&home, &url) {
        env[k] = json!(v);
    }
    // The agent's stdout (its side of the JSON-RPC) is also appended to `acp.out`, for the
    // requests it sent od.
    let record = tmp.path().join("acp.out");
    env["OD_ACP_RECORD"] = json!(record.to_str().unwrap());
    Some(Prepared { bin, fake, front, env, record, tmp })
}

/// Starts `cli` on an od-new-generation run with `extra` run fields, its environment given as
/// the run's `agentEnv`.
fn start(cli: &Cli, extra: Value) -> Option<Started> {
    let Prepared { bin, fake, front, env, record, tmp } = prepare(cli)?;
    let script = r#"set -o pipefail; "$@" | tee -a "$OD_ACP_RECORD""#;
    let argv: Vec<String> = ["bash", "-c", script, "bash"]
        .iter()
        .map(|s| s.to_string())
        .chain(std::iter::once(bin.to_string_lossy().into_owned()))
        .chain(cli.args.iter().map(|a| a.to_string()))
        .collect();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let mut body = json!({
        "pluginId": "od-new-generation",
        "pluginInputs": { "topic": "tea shop", "audience": "tea lovers", "artifactKind": "landing page" },
        "agent": "acp",
        "agentCommand": argv,
        "agentEnv": env,
        "agentTimeoutMs": 180_000,
        "agentIdleTimeoutMs": 120_000,
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let id = e.start_run(body);
    Some(Started { id, fake, e, record, _front: front, _tmp: tmp })
}

impl Started {
    fn agent_requests(&self, method: &str) -> Vec<Value> {
        agent_requests(&self.record, method)
    }
}

/// The requests the agent sent od (recorded in `record`), by method.
fn agent_requests(record: &Path, method: &str) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == method && m.get("id").is_some())
        .collect()
}

/// The agent text of the `generate` stage.
fn generate_text(ev: &[Value]) -> String {
    of(ev, "agent")
        .iter()
        .filter(|a| a["stageId"] == "generate" && a["type"] == "text_delta")
        .filter_map(|a| a["delta"].as_str())
        .collect()
}

/// The run succeeded with the page and the text recorded (`through_client`: the page came
/// through od's `fs/write_text_file`).
fn check_success(cli: &Cli, fake: &FakeModel, record: &Path, ev: &[Value], through_client: bool) {
    let end = &ev.last().unwrap()["data"];
    let stderr: Vec<&str> = of(ev, "stderr").iter().filter_map(|s| s["chunk"].as_str()).collect();
    assert_eq!(
        end["status"],
        "succeeded",
        "{}: {end}\nrequests: {:?}\nagent events: {:#?}\nstderr: {stderr:?}",
        cli.name,
        fake.requests(),
        of(ev, "agent")
    );
    let arts = of(ev, "artifact");
    assert!(
        arts.iter().any(|a| a["stageId"] == "generate" && a["path"] == "index.html" && a["bytes"] == PAGE.len()),
        "{}: the page is an artifact: {arts:#?}\nagent events: {:#?}",
        cli.name,
        of(ev, "agent")
    );
    assert!(of(ev, "agent").iter().all(|a| a["label"] != "acp-fs-refused"), "{}: {:#?}", cli.name, of(ev, "agent"));
    let writes = agent_requests(record, "fs/write_text_file");
    if through_client {
        assert!(
            writes.iter().any(|w| w["params"]["path"].as_str().is_some_and(|p| p.ends_with("/index.html"))
                && w["params"]["content"] == PAGE),
            "{}: the page came through od's fs/write_text_file: {writes:?}",
            cli.name
        );
    }
    // The write tool is recorded as called (both agents name it only in updates and permission
    // requests, never in a `tool_call`).
    let edit = of(ev, "agent").into_iter().find(|a| a["stageId"] == "generate" && a["type"] == "tool_use");
    assert!(edit.is_some_and(|u| u["kind"] == "edit"), "{}: the write is a tool_use: {:#?}", cli.name, of(ev, "agent"));
    let text = generate_text(ev);
    assert!(text.contains(FINAL_TEXT), "{}: the text is recorded: {text:?}", cli.name);
    let inited = of(ev, "agent").into_iter().find(|a| a["label"] == "acp-initialized");
    assert!(inited.is_some(), "{}: the handshake is recorded", cli.name);
    let stray = Path::new(env!("CARGO_MANIFEST_DIR")).join("index.html");
    assert!(!stray.exists(), "{}: wrote into od's own folder, not the project's", cli.name);
}

fn real_run(cli: &Cli, through_client: bool) {
    let took = Instant::now();
    let Some(s) = start(cli, json!({ "permissionMode": "bypass" })) else { return };
    let ev = s.e.watch(&s.id);
    check_success(cli, &s.fake, &s.record, &ev, through_client);
    let methods: std::collections::BTreeSet<String> = std::fs::read_to_string(&s.record)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|m| {
            m["method"].as_str().map(|x| {
                format!(
                    "{x}{}",
                    m["params"]["update"]["sessionUpdate"].as_str().map(|u| format!(":{u}")).unwrap_or_default()
                )
            })
        })
        .collect();
    let stderr: Vec<&str> = of(&ev, "stderr").iter().filter_map(|s| s["chunk"].as_str()).collect();
    let stops: Vec<&Value> = of(&ev, "agent").into_iter().filter(|a| a["label"] == "acp-stopped").collect();
    eprintln!("{}: agent methods {methods:?}\nstops {stops:?}\nstderr {stderr:?}", cli.name);
    let auth: Vec<&Value> = of(&ev, "agent").into_iter().filter(|a| a["label"] == "acp-authenticated").collect();
    eprintln!(
        "{}: run {} succeeded in {:.1} s ({} invocations, {} model requests, auth {:?}, {} fs/write_text_file, {} fs/read_text_file)",
        cli.name,
        s.id,
        took.elapsed().as_secs_f64(),
        of(&ev, "pipeline_stage_started").len(),
        s.fake.requests().len(),
        auth.first().map(|a| a["detail"].clone()),
        s.agent_requests("fs/write_text_file").len(),
        s.agent_requests("fs/read_text_file").len(),
    );
}

#[test]
fn qwen_acp() {
    real_run(&QWEN, true);
}

#[test]
fn gemini_acp() {
    real_run(&GEMINI, true);
}

/// Under `permissionMode: ask` the agent's permission request for its write is asked through
/// GenUI (`agent-permission-edit`, the agent's own options), the user's allow goes back as the
/// agent's option, is remembered for the run (no second ask), and the run succeeds with the page.
fn asked_run(cli: &Cli, through_client: bool) {
    let Some(s) = start(cli, json!({ "permissionMode": "ask" })) else { return };
    let ev = s.e.watch_to(&s.id, |v| v["event"] == "genui_surface_request");
    let req = &ev.last().unwrap()["data"];
    assert_eq!(ev.last().unwrap()["event"], "genui_surface_request", "{}: it asked: {:#?}", cli.name, of(&ev, "agent"));
    let options = req["payload"]["options"].as_array().unwrap();
    let allow = options.iter().find(|o| o["kind"] == "allow_once").unwrap_or_else(|| panic!("{options:?}"));
    let allow = allow["optionId"].as_str().unwrap();
    let surface = req["surfaceId"].as_str().unwrap().to_string();
    eprintln!("{}: asked {surface} for {} with {options:?}", cli.name, req["payload"]["toolCall"]);
    let (code, v) = s.e.od_json(&["ui", "respond", &surface, "--run", &s.id, "--value", allow]);
    assert_eq!(code, 0, "{v}");
    let ev = s.e.watch(&s.id);
    check_success(cli, &s.fake, &s.record, &ev, through_client);
    let resp = of(&ev, "genui_surface_response");
    assert_eq!((resp[0]["respondedBy"].as_str(), &resp[0]["value"]), (Some("user"), &json!(allow)), "{resp:?}");
    assert_eq!(of(&ev, "genui_surface_request").len(), 1, "{}: asked once for the run", cli.name);
}

#[test]
fn qwen_acp_asks_permission_through_genui() {
    asked_run(&QWEN, true);
}

#[test]
fn gemini_acp_asks_permission_through_genui() {
    asked_run(&GEMINI, true);
}

/// The catalog's `acp` agent taking its command from the CLI, on a machine where `qwen` is on
/// the daemon's PATH and the daemon's own environment points it at the model:
/// `od run start --agent acp --agent-cmd "qwen --acp"` runs to `succeeded` with the page.
#[test]
fn od_run_start_agent_acp_with_qwen_on_path() {
    let Some(p) = prepare(&QWEN) else { return };
    let path = format!("{}:{}", agents_js().display(), std::env::var("PATH").unwrap_or_default());
    let mut env: Vec<(&str, String)> = vec![("PATH", path)];
    for (k, v) in p.env.as_object().unwrap() {
        env.push((k.as_str(), v.as_str().unwrap().to_string()));
    }
    let d = common::daemon_proc::start(&p.tmp.path().join("data"), &[], &env);
    let inputs = json!({ "topic": "tea shop", "audience": "tea lovers", "artifactKind": "landing page" });
    let out = std::process::Command::new(common::harness::OD)
        .args(["run", "start", "--plugin", "od-new-generation", "--inputs", &inputs.to_string()])
        .args(["--agent", "acp", "--agent-cmd", "qwen --acp", "--permission-mode", "bypass"])
        .args(["--agent-timeout-ms", "180000", "--daemon-url", &d.url, "--json", "--data-dir"])
        .arg(&d.data)
        .output()
        .unwrap();
    let started: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    let id = started["runId"].as_str().or(started["id"].as_str()).unwrap_or_else(|| panic!("{started}"));
    let ev = watch_url(&d.url, id, "", |_| false);
    check_success(&QWEN, &p.fake, &p.record, &ev, false);
    let start = &of(&ev, "start")[0];
    assert_eq!(start["agentId"], "acp", "{start}");
    drop(p.front);
}
