//! Real agent CLIs from npm (`tests/agents_js`, installed by `tests/agents_js/install.sh`) driving
//! whole `od-new-generation` runs with the exec agent, each in its native dialect, against the
//! fake model server (`common::fake_model`) over HTTPS with a CA made in the test: every run ends
//! `succeeded` with the `index.html` the CLI's write tool wrote recorded as an artifact, and the
//! CLI's text recorded.
//!
//! A CLI that is not installed is skipped with a message — unless `OD_REAL_AGENTS=required`
//! (`.ci/run` sets it), then it fails. `OD_RECORD_AGENT_STREAMS=1` also writes each CLI's stdout of
//! the `generate` stage to `tests/fixtures/agent_streams/<cli>.jsonl` (the dialects' unit tests
//! read those recordings).

use crate::common;

use common::fake_model::{FakeModel, FINAL_TEXT, PAGE};
use common::harness::{of, Engine};
use common::real_cli::{self, agents_js, write, MODEL};
use common::tls::{Flaw, TestCa, TlsFront};
use od::agents::detect::ProbeEnv;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;

const NOW: i64 = 1_800_000_000_000;

/// Where a CLI's pieces are, for its argv and environment.
struct Setup {
    /// A fresh home for the CLI (its state and config).
    home: PathBuf,
    /// `https://127.0.0.1:<port>` (the fake behind TLS).
    url: String,
    /// The test CA's PEM.
    ca: PathBuf,
}

/// One CLI: its catalog id (also its npm bin's name), the `*_BIN` override the daemon finds it
/// by, the model a run names (where the CLI needs one) and its environment (config files written
/// by `env`).
struct Cli {
    id: &'static str,
    bin_env: &'static str,
    model: Option<&'static str>,
    env: fn(&Setup) -> Vec<(&'static str, String)>,
}

fn claude_env(s: &Setup) -> Vec<(&'static str, String)> {
    vec![
        ("ANTHROPIC_BASE_URL", s.url.clone()),
        ("ANTHROPIC_API_KEY", "sk-ant-fake".into()),
        ("ANTHROPIC_MODEL", MODEL.into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("CLAUDE_CODE_MAX_RETRIES", "0".into()),
    ]
}

fn codex_env(s: &Setup) -> Vec<(&'static str, String)> {
    let codex_home = s.home.join(".codex");
    write(
        &codex_home.join("config.toml"),
        &format!(
            r#"model = "{MODEL}"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "{}/v1"
env_key = "FAKE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[features]
plugins = false
apps = false
remote_plugin = false
"#,
            s.url
        ),
    );
    vec![
        ("CODEX_HOME", codex_home.to_string_lossy().into_owned()),
        ("FAKE_API_KEY", "sk-fake".into()),
        // Codex is Rust (rustls): it trusts the CA through these, not NODE_EXTRA_CA_CERTS.
        ("SSL_CERT_FILE", s.ca.to_string_lossy().into_owned()),
        ("CODEX_CA_CERTIFICATE", s.ca.to_string_lossy().into_owned()),
    ]
}

fn gemini_env(s: &Setup) -> Vec<(&'static str, String)> {
    real_cli::gemini_env(&s.home, &s.url)
}

fn qwen_env(s: &Setup) -> Vec<(&'static str, String)> {
    real_cli::qwen_env(&s.home, &s.url)
}

fn opencode_env(s: &Setup) -> Vec<(&'static str, String)> {
    let config = json!({
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": false,
        "share": "disabled",
        "model": format!("fake/{MODEL}"),
        "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
            "options": {"baseURL": format!("{}/v1", s.url), "apiKey": "sk-fake"},
            "models": {MODEL: {"name": "Fake model"}}}}
    });
    vec![
        ("OPENCODE_CONFIG_CONTENT", config.to_string()),
        ("OPENCODE_DISABLE_AUTOUPDATE", "1".into()),
        ("OPENCODE_DISABLE_SHARE", "1".into()),
        ("OPENCODE_DISABLE_MODELS_FETCH", "1".into()),
        // Its default plugins and language servers are fetched from npm at start: not needed here.
        ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1".into()),
        ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1".into()),
    ]
}

fn copilot_env(s: &Setup) -> Vec<(&'static str, String)> {
    vec![
        ("COPILOT_HOME", s.home.join(".copilot").to_string_lossy().into_owned()),
        ("COPILOT_OFFLINE", "true".into()),
        ("COPILOT_PROVIDER_BASE_URL", format!("{}/v1", s.url)),
        ("COPILOT_PROVIDER_API_KEY", "sk-fake".into()),
        ("COPILOT_MODEL", MODEL.into()),
        ("COPILOT_AUTO_UPDATE", "false".into()),
    ]
}

const CLAUDE: Cli = Cli { id: "claude", bin_env: "CLAUDE_BIN", model: None, env: claude_env };
// Its model is in the config.toml `codex_env` writes (a `--model` would be checked against the
// models `codex debug models` lists on the daemon's side, which know no fake).
const CODEX: Cli = Cli { id: "codex", bin_env: "CODEX_BIN", model: None, env: codex_env };
// Gemini CLI needs `-m`: its default model is not one the fake has.
const GEMINI: Cli = Cli { id: "gemini", bin_env: "GEMINI_BIN", model: Some(MODEL), env: gemini_env };
const QWEN: Cli = Cli { id: "qwen", bin_env: "QWEN_BIN", model: Some(MODEL), env: qwen_env };
// OpenCode names a model `provider/model`.
const OPENCODE: Cli =
    Cli { id: "opencode", bin_env: "OPENCODE_BIN", model: Some("fake/fake-model"), env: opencode_env };
const COPILOT: Cli = Cli { id: "copilot", bin_env: "COPILOT_BIN", model: Some(MODEL), env: copilot_env };

/// The one real CLI still driven through the exec agent with a hand-written argv (that path stays
/// covered by a real CLI too).
const CLAUDE_EXEC_ARGS: &[&str] =
    &["-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits"];

/// How a run reaches its CLI.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    /// `agentId: <catalog id>`: the argv is the catalog's template, the binary its `*_BIN`.
    Catalog,
    /// `agent: exec` with [`CLAUDE_EXEC_ARGS`].
    Exec,
}

/// A finished run of a real CLI, and what it ran against.
struct Driven {
    id: String,
    ev: Vec<Value>,
    took: std::time::Duration,
    fake: FakeModel,
    e: Engine,
    /// Each argv the daemon's binary was started with (a run made with `looping`).
    argv_log: PathBuf,
    _front: TlsFront,
    _tmp: tempfile::TempDir,
}

/// The real binary of `cli`, or `None` when it is not installed (and that is allowed).
fn installed(cli: &Cli) -> Option<PathBuf> {
    real_cli::installed(cli.id, cli.id)
}

/// The environment the daemon finds and probes agents in: the test's own, every catalog agent's
/// `*_BIN` cleared (the machine's own CLIs stay out), then `set`.
fn daemon_env(set: &[(&str, String)]) -> ProbeEnv {
    let mut vars: std::collections::HashMap<String, String> =
        std::env::vars().filter(|(k, _)| !k.ends_with("_BIN")).collect();
    for (k, v) in set {
        vars.insert(k.to_string(), v.clone());
    }
    ProbeEnv { vars }
}

/// Runs `cli` through a whole od-new-generation run against the fake (`failing`: every model
/// call answers 500) with `permission` as its mode; `None` when the CLI is not installed.
fn drive(cli: &Cli, via: Via, permission: &str, failing: bool) -> Option<Driven> {
    drive_plugin(cli, via, permission, failing, None)
}

/// [`drive`], with `looping`: the run is of a plugin whose one stage runs two iterations, and the
/// daemon's binary a wrapper logging each argv (one line) to `Driven.argv_log`.
fn drive_plugin(cli: &Cli, via: Via, permission: &str, failing: bool, looping: Option<()>) -> Option<Driven> {
    let bin = installed(cli)?;
    let tmp = tempfile::tempdir().unwrap();
    let fake = if failing { FakeModel::start_failing() } else { FakeModel::start() };
    let ca = TestCa::new(tmp.path(), "model");
    let cert = ca.server_cert(tmp.path(), "model", Flaw::None);
    let front = TlsFront::start(&cert, fake.addr);
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let setup =
        Setup { home: home.clone(), url: format!("https://127.0.0.1:{}", front.addr.port()), ca: ca.pem_path.clone() };
    let mut env = json!({
        "HOME": home.to_str().unwrap(),
        "XDG_CONFIG_HOME": home.join(".config").to_str().unwrap(),
        "XDG_DATA_HOME": home.join(".local/share").to_str().unwrap(),
        "XDG_CACHE_HOME": home.join(".cache").to_str().unwrap(),
        "XDG_STATE_HOME": home.join(".local/state").to_str().unwrap(),
        // Node CLIs trust the test CA through this (added to Node's bundled roots).
        "NODE_EXTRA_CA_CERTS": ca.pem_path.to_str().unwrap(),
        "NO_COLOR": "1",
        // The fake is on loopback: never through a proxy the environment may name.
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "CI": "1",
    });
    for (k, v) in (cli.env)(&setup) {
        env[k] = json!(v);
    }
    // `OD_RECORD_AGENT_STREAMS=1`: the daemon's binary is a wrapper teeing the generate stage's
    // stdout into the recording (its argv passed through unchanged).
    let mut daemon_bin = bin.clone();
    if std::env::var("OD_RECORD_AGENT_STREAMS").as_deref() == Ok("1") && !failing {
        let rec = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/agent_streams/{}.jsonl", cli.id));
        std::fs::create_dir_all(rec.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&rec);
        let body = format!(
            "set -o pipefail\nif [ \"$OD_STAGE_ID\" = generate ]; then '{}' \"$@\" | tee '{}'; else exec '{}' \"$@\"; fi",
            bin.display(),
            rec.display(),
            bin.display()
        );
        daemon_bin = common::harness::script(tmp.path(), cli.id, &body);
    }
    let argv_log = tmp.path().join("argv.log");
    if looping.is_some() {
        let body = format!("printf '%s\\n' \"$*\" >> '{}'\nexec '{}' \"$@\"", argv_log.display(), daemon_bin.display());
        daemon_bin = common::harness::script(tmp.path(), &format!("{}-logged", cli.id), &body);
    }
    // The daemon detects (version, auth, the CLI's own model list) in the environment the CLI
    // runs in, as on a user's machine where both are the user's: its `*_BIN`, then the same
    // home, config files and variables.
    let mut daemon_vars: Vec<(&str, String)> =
        env.as_object().unwrap().iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap().to_string())).collect();
    daemon_vars.push((cli.bin_env, daemon_bin.to_string_lossy().into_owned()));
    let probe = daemon_env(&daemon_vars);
    let e = Engine::start_with(&tmp.path().join("data"), NOW, |c| c.agent_probe = Some(probe));
    let plugin = match looping {
        Some(()) => {
            let dir = tmp.path().join("twice");
            let stages =
                json!([{ "id": "generate", "atoms": ["file-write"], "repeat": true, "until": "iterations>=2" }]);
            common::harness::write_plugin(&dir, "twice", "1.0.0", stages, "Write index.html.");
            e.install(&dir);
            "twice"
        }
        None => "od-new-generation",
    };
    let mut body = json!({
        "pluginId": plugin,
        "pluginInputs": { "topic": "tea shop", "audience": "tea lovers", "artifactKind": "landing page" },
        "agentEnv": env,
        "agentTimeoutMs": 180_000,
        "agentIdleTimeoutMs": 120_000,
    });
    match via {
        Via::Catalog => {
            body["agentId"] = json!(cli.id);
            body["permissionMode"] = json!(permission);
            if let Some(m) = cli.model {
                body["model"] = json!(m);
            }
        }
        Via::Exec => {
            let argv: Vec<String> = std::iter::once(daemon_bin.to_string_lossy().into_owned())
                .chain(CLAUDE_EXEC_ARGS.iter().map(|a| a.to_string()))
                .collect();
            body["agent"] = json!("exec");
            body["agentCommand"] = json!(argv);
            body["agentProtocol"] = json!("claude-stream-json");
        }
    }
    let started = Instant::now();
    let (id, ev) = e.run(body);
    let took = started.elapsed();
    Some(Driven { id, ev, took, fake, e, argv_log, _front: front, _tmp: tmp })
}

/// A real CLI's run succeeds with its page and text recorded; see the module documentation.
fn real_run(cli: &Cli, via: Via, permission: &str) {
    let Some(Driven { id, ev, took, fake, e, .. }) = drive(cli, via, permission, false) else { return };
    let end = &ev.last().unwrap()["data"];
    let stderr: Vec<&str> = of(&ev, "stderr").iter().filter_map(|s| s["chunk"].as_str()).collect();
    assert_eq!(
        end["status"],
        "succeeded",
        "{}: {end}\nrequests: {:?}\nagent events: {:#?}\nstderr: {stderr:?}",
        cli.id,
        fake.requests(),
        of(&ev, "agent")
    );
    // Every stage's agent wrote index.html through its write tool; the generate stage's is recorded.
    let arts = of(&ev, "artifact");
    let generated: Vec<&&Value> = arts.iter().filter(|a| a["stageId"] == "generate").collect();
    assert!(
        generated.iter().any(|a| a["path"] == "index.html" && a["bytes"] == PAGE.len()),
        "{}: the page is an artifact: {arts:#?}\nagent events: {:#?}",
        cli.id,
        of(&ev, "agent")
    );
    let stray = Path::new(env!("CARGO_MANIFEST_DIR")).join("index.html");
    assert!(!stray.exists(), "{}: wrote into od's own folder, not the project's", cli.id);
    let text: String = of(&ev, "agent")
        .iter()
        .filter(|a| a["stageId"] == "generate" && a["type"] == "text_delta")
        .filter_map(|a| a["delta"].as_str())
        .collect();
    assert!(text.contains(FINAL_TEXT), "{}: the text is recorded: {text:?}", cli.id);
    let session = of(&ev, "agent").into_iter().find(|a| a["label"] == "initialized" && a["sessionId"].is_string());
    assert!(session.is_some(), "{}: the session id is surfaced", cli.id);
    // Every invocation started the real binary the daemon found by its `*_BIN` (or the recording
    // wrapper), under the catalog id when the run named one.
    assert!(!of(&ev, "start").is_empty());
    for started in of(&ev, "start") {
        let bin = started["bin"].as_str().unwrap_or("");
        let recording = std::env::var("OD_RECORD_AGENT_STREAMS").as_deref() == Ok("1");
        assert!(recording || bin.contains("tests/agents_js/node_modules"), "{}: {started}", cli.id);
        let agent = if via == Via::Catalog { cli.id } else { "exec" };
        assert_eq!(started["agentId"], agent, "{}: {started}", cli.id);
    }
    let (_, files) = e.get(&format!("/api/runs/{id}"));
    assert!(files["run"]["artifactCount"].as_u64().unwrap() >= 1);
    eprintln!(
        "{}: run {id} succeeded in {:.1} s ({} invocations, {} model requests)",
        cli.id,
        took.as_secs_f64(),
        of(&ev, "pipeline_stage_started").len(),
        fake.requests().len()
    );
}

/// The model failing: the CLI says so (Claude Code in a failed `result`, Codex in `turn.failed`,
/// both with their retries off) and the run fails as an agent error naming it, at its first stage.
fn failing_run(cli: &Cli) {
    let Some(Driven { ev, fake, .. }) = drive(cli, Via::Catalog, "accept-edits", true) else { return };
    let end = &ev.last().unwrap()["data"];
    assert_eq!(end["status"], "failed", "{}: {end}", cli.id);
    assert_eq!(end["failureCategory"], "agent-error", "{}: {end}\n{:#?}", cli.id, of(&ev, "agent"));
    let detail = end["failureDetail"].as_str().unwrap_or("");
    // In the CLI's own words (Claude Code: "API Error: 500 …"; Codex: "We're currently
    // experiencing high demand …").
    let said = detail.strip_prefix("stage discovery: the agent reported an error: ").unwrap_or("");
    assert!(!said.trim().is_empty(), "{}: {detail}", cli.id);
    eprintln!("{}: the run failed as expected: {detail}", cli.id);
    assert!(fake.requests().iter().any(|r| r.starts_with("POST ")), "{}: the model was asked", cli.id);
}

#[test]
fn claude_code_when_the_model_fails() {
    failing_run(&CLAUDE);
}

#[test]
fn codex_when_the_model_fails() {
    failing_run(&CODEX);
}

#[test]
fn claude_code() {
    real_run(&CLAUDE, Via::Catalog, "accept-edits");
}

#[test]
fn claude_code_through_exec() {
    real_run(&CLAUDE, Via::Exec, "accept-edits");
}

#[test]
fn codex() {
    real_run(&CODEX, Via::Catalog, "accept-edits");
}

#[test]
fn gemini_cli() {
    real_run(&GEMINI, Via::Catalog, "accept-edits");
}

#[test]
fn qwen_code() {
    real_run(&QWEN, Via::Catalog, "accept-edits");
}

#[test]
fn opencode() {
    real_run(&OPENCODE, Via::Catalog, "accept-edits");
}

#[test]
fn copilot() {
    real_run(&COPILOT, Via::Catalog, "accept-edits");
}

/// `od agents list --json` on a daemon whose `PATH` holds the real CLIs and whose `CODEX_BIN`
/// names a file that is not executable: every installed CLI is `available` with the version it
/// printed and its path inside node_modules; Codex is diagnosed `not-executable` with the fix
/// (issue 31: "two installed and one broken shows all three correctly", with real CLIs).
#[test]
fn od_agents_list_shows_the_installed_clis_and_a_broken_one() {
    let clis = [&CLAUDE, &GEMINI, &QWEN, &OPENCODE, &COPILOT];
    let installed: Vec<&&Cli> = clis.iter().filter(|c| installed(c).is_some()).collect();
    if installed.is_empty() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let broken = tmp.path().join("codex");
    std::fs::write(&broken, "#!/bin/sh\necho 1.0\n").unwrap(); // mode 0644: not executable
    let path = format!("{}:{}", agents_js().display(), std::env::var("PATH").unwrap_or_default());
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let probe = daemon_env(&[
        ("PATH", path),
        ("CODEX_BIN", broken.to_string_lossy().into_owned()),
        ("HOME", home.to_string_lossy().into_owned()),
    ]);
    let e = Engine::start_with(&tmp.path().join("data"), NOW, |c| c.agent_probe = Some(probe));
    let (code, v) = e.od_json(&["agents", "list"]);
    assert_eq!(code, 0, "{v}");
    let agents = v["agents"].as_array().unwrap();
    let find = |id: &str| agents.iter().find(|a| a["id"] == id).unwrap_or_else(|| panic!("{id}: {v:#}"));
    let real = std::fs::canonicalize(agents_js().join("..")).unwrap();
    for cli in installed {
        let a = find(cli.id);
        assert_eq!(a["available"], true, "{}: {a:#}", cli.id);
        let version = a["version"].as_str().unwrap_or("");
        assert!(version.chars().next().is_some_and(|c| c.is_ascii_digit()) && version.contains('.'), "{a:#}");
        let at = a["path"].as_str().unwrap_or("");
        let at = std::fs::canonicalize(at).unwrap_or_default();
        assert!(at.starts_with(&real), "{}: {a:#} is not in {}", cli.id, real.display());
    }
    let codex = find("codex");
    assert_eq!(codex["available"], false, "{codex:#}");
    let diag = &codex["diagnostics"][0];
    assert_eq!(diag["reason"], "not-executable", "{codex:#}");
    assert!(diag["message"].as_str().unwrap_or("").contains(broken.to_str().unwrap()), "{codex:#}");
    assert!(!diag["fix"].as_str().unwrap_or("").is_empty(), "{codex:#}");
    assert!(codex["reason"].is_string(), "{codex:#}");
}

/// Native resume (issue 31): a stage running twice with Claude Code through the catalog — the
/// second iteration's command line carries `--resume <the session id the first one's stream
/// named>`, and the resumed session writes its page again and ends the run `succeeded`.
#[test]
fn claude_code_resumes_its_session_in_the_next_iteration() {
    let Some(Driven { ev, argv_log, _tmp: _keep, .. }) =
        drive_plugin(&CLAUDE, Via::Catalog, "accept-edits", false, Some(()))
    else {
        return;
    };
    let end = &ev.last().unwrap()["data"];
    assert_eq!(end["status"], "succeeded", "{end}\n{:#?}", of(&ev, "agent"));
    // The session each stage iteration's stream named.
    let named = |stage: &Value, i: u64| {
        of(&ev, "agent")
            .iter()
            .filter(|a| a["label"] == "initialized" && &a["stageId"] == stage && a["iteration"] == i)
            .filter_map(|a| a["sessionId"].as_str())
            .next_back()
            .map(str::to_string)
    };
    // `--version`, `-p --help` and `auth status` probes are logged too: the invocations are the
    // lines with `stream-json`, in the order of their `start` events.
    let log = std::fs::read_to_string(&argv_log).unwrap();
    let runs: Vec<&str> = log.lines().filter(|l| l.contains("stream-json")).collect();
    let started = of(&ev, "start");
    assert_eq!(runs.len(), started.len(), "{log}");
    let mut resumed = 0;
    for (argv, s) in runs.iter().zip(&started) {
        let i = s["iteration"].as_u64().unwrap();
        match i.checked_sub(1) {
            None => assert!(!argv.contains("--resume"), "{s}: {argv}"),
            Some(prev) => {
                let id = named(&s["stageId"], prev).unwrap_or_else(|| panic!("{s}: the previous iteration's session"));
                assert!(argv.contains(&format!("--resume {id}")), "{s}: {argv}\n{log}");
                resumed += 1;
            }
        }
    }
    assert!(resumed >= 1, "the looping stage ran twice: {log}");
    let arts = of(&ev, "artifact");
    assert!(arts.iter().any(|a| a["path"] == "index.html"), "{arts:#?}");
}

// `permissionMode: bypass` through the catalog's flags (the exec right is the test's): Codex
// (`--dangerously-bypass-approvals-and-sandbox`), Gemini CLI and Qwen Code (`--approval-mode
// yolo`), OpenCode (`--dangerously-skip-permissions`), Copilot (`--allow-all-tools`) run to
// `succeeded`. Claude Code refuses `bypassPermissions` as root unless `IS_SANDBOX=1` is in its
// environment (given here).

#[test]
fn codex_in_bypass_mode() {
    real_run(&CODEX, Via::Catalog, "bypass");
}

#[test]
fn gemini_cli_in_bypass_mode() {
    real_run(&GEMINI, Via::Catalog, "bypass");
}

#[test]
fn qwen_code_in_bypass_mode() {
    real_run(&QWEN, Via::Catalog, "bypass");
}

#[test]
fn opencode_in_bypass_mode() {
    real_run(&OPENCODE, Via::Catalog, "bypass");
}

#[test]
fn copilot_in_bypass_mode() {
    real_run(&COPILOT, Via::Catalog, "bypass");
}

#[test]
fn claude_code_in_bypass_mode_as_a_sandbox() {
    real_run(&CLAUDE_SANDBOXED, Via::Catalog, "bypass");
}

fn claude_sandboxed_env(s: &Setup) -> Vec<(&'static str, String)> {
    let mut env = claude_env(s);
    env.push(("IS_SANDBOX", "1".into()));
    env
}

const CLAUDE_SANDBOXED: Cli = Cli { id: "claude", bin_env: "CLAUDE_BIN", model: None, env: claude_sandboxed_env };
