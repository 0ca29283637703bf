//! The agent catalog (issue 31 items 1, 2 and 5), against a daemon process whose PATH holds fake
//! agent CLIs (shell scripts answering `--version` like the real ones): `od agents list --json` and
//! `GET /api/agents` show the working, the broken and the missing ones with path, version and
//! diagnostics with their fix; a second look is answered from the cache (the scripts count their
//! invocations); a `<data-dir>/agents/*.json` entry appears and a bad one is refused naming file
//! and field; a run with `--agent claude --model m --permission-mode accept-edits` runs the fake
//! `claude` with the mapped flags and succeeds; bad per-run options are refused with nothing written.

use crate::common::daemon_proc::{self, get, poll};
use crate::common::harness::{script, OD};
use serde_json::{json, Value};
use std::path::Path;

/// Appends one line per invocation to `<bin>/calls`.
fn counting(bin: &Path, name: &str, body: &str) {
    let calls = bin.join("calls");
    script(bin, name, &format!("echo \"{name} $*\" >> '{}'\n{body}", calls.display()));
}

fn calls(bin: &Path) -> Vec<String> {
    std::fs::read_to_string(bin.join("calls")).unwrap_or_default().lines().map(str::to_string).collect()
}

/// The fake agents: a working `claude` (signed out, but runnable: it records its argv and stdin and
/// speaks Claude's stream-json), a working `codex`, a `gemini` whose `--version` exits 1, and a
/// `qwen` that is not executable.
fn fake_agents(bin: &Path) {
    std::fs::create_dir_all(bin).unwrap();
    let argv = bin.join("argv");
    let stdin = bin.join("stdin");
    counting(
        bin,
        "claude",
        &format!(
            r#"case "$1" in
  --version) echo "2.1.197 (Claude Code)"; exit 0;;
  auth) echo "not logged in" >&2; exit 1;;
esac
for a in "$@"; do printf '%s\n' "$a"; done > '{argv}'
cat > '{stdin}'
printf '{{"type":"system","subtype":"init","cwd":"%s","session_id":"s1","tools":["Write"],"model":"m"}}\n' "$PWD"
printf '{{"type":"assistant","message":{{"id":"m1","type":"message","role":"assistant","content":[{{"type":"text","text":"ok"}}]}},"session_id":"s1"}}\n'
printf '{{"type":"result","subtype":"success","is_error":false,"duration_ms":5,"num_turns":1,"result":"ok","session_id":"s1","total_cost_usd":0.001,"usage":{{"input_tokens":4,"output_tokens":1}}}}\n'"#,
            argv = argv.display(),
            stdin = stdin.display()
        ),
    );
    counting(
        bin,
        "codex",
        r#"case "$1" in
  --version) echo "codex-cli 0.171.0";;
  login) echo "Logged in using an API key";;
  debug) printf 'gpt-5\ngpt-5-codex\n';;
esac"#,
    );
    counting(bin, "gemini", "echo 'Error: Cannot find module /usr/lib/node_modules/@google/gemini-cli' >&2\nexit 1");
    std::fs::write(bin.join("qwen"), "#!/bin/sh\necho 0.15.10\n").unwrap();
    // An extension agent listing its models, speaking Claude's stream-json.
    counting(
        bin,
        "xagent",
        "case \"$1\" in --version) echo 'xagent 1.2.3';; models) printf 'x-small\\nx-large\\n';; esac",
    );
}

fn daemon(tmp: &Path) -> (daemon_proc::Daemon, std::path::PathBuf) {
    let bin = tmp.join("bin");
    fake_agents(&bin);
    let mut env: Vec<(&str, String)> = vec![
        ("PATH", format!("{}:/usr/bin:/bin", bin.display())),
        ("HOME", tmp.join("home").display().to_string()),
        ("OD_AGENT", String::new()),
        ("OD_AGENT_CMD", String::new()),
    ];
    // Nothing of the machine's own agent setup leaks in (blank counts as unset).
    for k in [
        "CLAUDE_BIN",
        "CODEX_BIN",
        "GEMINI_BIN",
        "QWEN_BIN",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "OPENAI_API_KEY",
        "CODEX_API_KEY",
    ] {
        env.push((k, String::new()));
    }
    (daemon_proc::start(&tmp.join("data"), &[], &env), bin)
}

fn agent<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["agents"].as_array().unwrap().iter().find(|a| a["id"] == id).unwrap_or_else(|| panic!("{id} in {list}"))
}

fn od(url: &str, data: &Path, args: &[&str]) -> (i32, Value, String) {
    let out = std::process::Command::new(OD)
        .args(args)
        .args(["--json", "--data-dir"])
        .arg(data)
        .args(["--daemon-url", url])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let v = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v, format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
}

fn post(url: &str, body: Value) -> (u16, Value) {
    daemon_proc::post(url, "/api/runs", body)
}

fn run_count(url: &str) -> usize {
    get(url, "/api/runs")["runs"].as_array().unwrap().len()
}

#[test]
fn agents_are_detected_cached_listed_and_extended() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(data.join("agents")).unwrap();
    std::fs::write(
        data.join("agents/x.json"),
        json!({
            "id": "xagent", "name": "X Agent", "bin": "xagent", "binEnv": "XAGENT_BIN", "versionArgs": ["--version"],
            "modelsArgs": ["models"], "args": ["--json", {"if": "model", "args": ["--model", "{model}"]}, {"slot": "permission"}],
            "prompt": {"via": "stdin"}, "protocol": "claude-stream-json",
            "permissionModes": {"accept-edits": ["--edits"], "bypass": ["--yolo"]}
        })
        .to_string(),
    )
    .unwrap();
    let (d, bin) = daemon(tmp.path());

    let (code, list, out) = od(&d.url, &data, &["agents", "list"]);
    assert_eq!(code, 0, "{out}");
    let probed = calls(&bin);
    assert!(!probed.is_empty(), "the first list probes the binaries");

    // claude: found on PATH, version parsed, signed out (a warning with the login command).
    let claude = agent(&list, "claude");
    assert_eq!(claude["available"], true, "{claude}");
    assert_eq!(claude["version"], "2.1.197", "{claude}");
    assert_eq!(claude["path"], bin.join("claude").display().to_string().as_str(), "{claude}");
    assert_eq!(claude["authStatus"], "missing", "{claude}");
    let diag = &claude["diagnostics"][0];
    assert_eq!(
        (diag["reason"].as_str(), diag["severity"].as_str()),
        (Some("auth-missing"), Some("warning")),
        "{claude}"
    );
    assert!(diag["fix"].as_str().unwrap().contains("claude /login"), "{claude}");
    assert_eq!(claude["protocols"], json!(["claude-stream-json"]));
    assert_eq!(claude["defaultPermissionMode"], "accept-edits");
    assert_eq!(claude["permissionModes"], json!(["bypass", "accept-edits"]), "ask is not offered headless");
    assert_eq!(claude["source"], "built-in");

    // codex: found, its version and its own model list; its stream is not readable by this build
    // until the codex parser lands, and then it says so.
    let codex = agent(&list, "codex");
    assert_eq!((codex["version"].as_str(), codex["authStatus"].as_str()), (Some("0.171.0"), Some("ok")), "{codex}");
    assert_eq!(codex["modelsSource"], "live", "{codex}");
    assert_eq!(codex["models"][1]["id"], "gpt-5-codex", "{codex}");
    if codex["available"] == false {
        assert_eq!(codex["diagnostics"][0]["reason"], "protocol-unsupported", "{codex}");
    }

    // gemini: its --version fails: unavailable, the error's tail and the reinstall command.
    let gemini = agent(&list, "gemini");
    assert_eq!(gemini["available"], false, "{gemini}");
    let g = &gemini["diagnostics"][0];
    assert_eq!(g["reason"], "version-failed", "{gemini}");
    assert!(g["message"].as_str().unwrap().contains("exit code 1"), "{gemini}");
    assert!(g["message"].as_str().unwrap().contains("Cannot find module"), "{gemini}");
    assert!(g["fix"].as_str().unwrap().contains("npm install -g @google/gemini-cli"), "{gemini}");
    assert_eq!(gemini["reason"], g["message"], "{gemini}");

    // qwen: there but not executable.
    let qwen = agent(&list, "qwen");
    assert_eq!(
        (qwen["available"].as_bool(), qwen["diagnostics"][0]["reason"].as_str()),
        (Some(false), Some("not-executable"))
    );
    assert!(qwen["diagnostics"][0]["fix"].as_str().unwrap().contains("chmod +x"), "{qwen}");

    // amp: nowhere: not-installed, the folders searched and the install command.
    let amp = agent(&list, "amp");
    let a = &amp["diagnostics"][0];
    assert_eq!((amp["available"].as_bool(), a["reason"].as_str()), (Some(false), Some("not-installed")), "{amp}");
    assert!(a["fix"].as_str().unwrap().contains("AMP_BIN"), "{amp}");
    assert!(a["searchedDirs"].as_array().unwrap().iter().any(|d| d == bin.display().to_string().as_str()), "{amp}");

    // The extension is listed with its source and its live models; od's own agents are kept.
    let x = agent(&list, "xagent");
    assert_eq!((x["available"].as_bool(), x["version"].as_str()), (Some(true), Some("1.2.3")), "{x}");
    assert!(x["source"].as_str().unwrap().ends_with("x.json"), "{x}");
    assert_eq!(x["models"], json!([{"id": "x-small", "label": "x-small"}, {"id": "x-large", "label": "x-large"}]));
    assert_eq!(agent(&list, "dry-run")["default"], true);
    assert_eq!(agent(&list, "exec")["available"], false);
    assert_eq!(agent(&list, "acp")["protocols"], json!(["acp"]));

    // GET /api/agents says the same, from the cache: no binary ran again.
    let api = get(&d.url, "/api/agents");
    assert_eq!(api, list);
    assert_eq!(calls(&bin), probed, "a cached look runs nothing");
    // And it is what the OpenAPI document says it is (schemathesis checks the same in CI).
    let doc = get(&d.url, "/api/openapi.json");
    let schema = json!({ "$ref": "#/components/schemas/AgentList", "components": doc["components"] });
    let violations = od::plugins::validator::validate_value(&schema, &api);
    assert!(violations.is_empty(), "{violations:?}");
    let mut bad = api.clone();
    bad["agents"][2]["diagnostics"] = json!([{ "reason": 1 }]);
    assert!(!od::plugins::validator::validate_value(&schema, &bad).is_empty(), "the check can fail");

    // The human table names each state and fix.
    let out = std::process::Command::new(OD)
        .args(["agents", "list", "--daemon-url", &d.url, "--data-dir"])
        .arg(&data)
        .env("OD_OUTPUT", "human")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("2.1.197") && table.contains("version-failed") && table.contains("not-executable"),
        "{table}"
    );
    let (code, info, out) = od(&d.url, &data, &["agents", "info", "gemini"]);
    assert_eq!((code, info["agent"]["id"].as_str()), (0, Some("gemini")), "{out}");

    // Per-run options checked against the catalog, 422 naming the field, nothing written.
    let before = run_count(&d.url);
    let refused = |body: Value, field: &str| {
        let (code, v) = post(&d.url, body.clone());
        assert_eq!(code, 422, "{body}: {v}");
        assert_eq!(v["error"]["data"]["field"], field, "{body}: {v}");
        v
    };
    let v = refused(json!({"agentId": "gemini"}), "agentId");
    assert!(v["error"]["message"].as_str().unwrap().contains("exit code 1"), "{v}");
    refused(json!({"agentId": "nope"}), "agentId");
    refused(json!({"agentId": "xagent", "model": "x-medium"}), "model");
    refused(json!({"agentId": "claude", "permissionMode": "ask"}), "permissionMode");
    refused(json!({"agentId": "claude", "reasoning": "high"}), "reasoning");
    let (code, v) = post(&d.url, json!({"agentId": "claude", "permissionMode": "sideways"}));
    assert_eq!((code, v["error"]["data"]["field"].as_str()), (400, Some("permissionMode")), "{v}");
    // bypass needs the exec right (this client sends no token).
    let (code, v) = post(&d.url, json!({"agentId": "claude", "permissionMode": "bypass"}));
    assert_eq!((code, v["error"]["code"].as_str()), (403, Some("exec-forbidden")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("permissionMode"), "{v}");
    // od's own agents take no permission mode.
    let (code, v) = post(&d.url, json!({"agent": "dry-run", "permissionMode": "bypass"}));
    assert_eq!((code, v["error"]["data"]["field"].as_str()), (400, Some("permissionMode")), "{v}");
    assert_eq!(run_count(&d.url), before, "nothing was written");

    // A bad extension file is refused naming the file and the field.
    std::fs::write(
        data.join("agents/y.json"),
        r#"{"id":"y","name":"Y","bin":"y","args":[],"prompt":{"via":"stdin"},"protocol":"od",
            "permissionModes":{"accept-edits":[],"yolo":["--yolo"]}}"#,
    )
    .unwrap();
    let r = ureq::get(&format!("{}/api/agents", d.url)).call();
    let Err(ureq::Error::Status(400, r)) = r else { panic!("a bad catalog file must be refused") };
    let body: Value = r.into_json().unwrap();
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("y.json") && msg.contains("permissionModes.yolo"), "{body}");
}

#[test]
fn a_claude_run_gets_the_mapped_flags_and_succeeds() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (d, bin) = daemon(tmp.path());
    let (code, v, out) = od(
        &d.url,
        &data,
        &[
            "run",
            "start",
            "--agent",
            "claude",
            "--model",
            "m",
            "--permission-mode",
            "accept-edits",
            "--message",
            "a page",
        ],
    );
    assert_eq!(code, 0, "{out}");
    let run_id = v["runId"].as_str().unwrap().to_string();
    let run = poll("the run to end", 120, || {
        let run = get(&d.url, &format!("/api/runs/{run_id}"))["run"].clone();
        ["succeeded", "failed", "canceled"].contains(&run["status"].as_str().unwrap()).then_some(run)
    });
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["agent"], "claude", "{run}");
    assert_eq!((run["permissionMode"].as_str(), run["model"].as_str()), (Some("accept-edits"), Some("m")), "{run}");

    let argv: Vec<String> = std::fs::read_to_string(bin.join("argv")).unwrap().lines().map(str::to_string).collect();
    let pair = |a: &str, b: &str| argv.windows(2).any(|w| w[0] == a && w[1] == b);
    assert!(pair("--permission-mode", "acceptEdits"), "{argv:?}");
    assert!(pair("--model", "m"), "{argv:?}");
    assert!(pair("--output-format", "stream-json") && argv[0] == "-p", "{argv:?}");
    // The prompt went on stdin, as the catalog declares.
    let stdin = std::fs::read_to_string(bin.join("stdin")).unwrap();
    assert!(stdin.contains("a page"), "{stdin}");

    // AgentStarted names the resolved binary; what the agent said was read as Claude's stream.
    let r = ureq::get(&format!("{}/api/runs/{run_id}/watch", d.url)).call().unwrap();
    let lines: Vec<Value> = std::io::BufRead::lines(std::io::BufReader::new(r.into_reader()))
        .map(Result::unwrap)
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(&l).unwrap())
        .collect();
    let start = lines.iter().find(|e| e["event"] == "start").unwrap();
    assert_eq!(start["data"]["bin"], bin.join("claude").display().to_string().as_str(), "{start}");
    assert_eq!(start["data"]["agentId"], "claude", "{start}");
    let said: String = lines
        .iter()
        .filter(|e| e["event"] == "agent" && e["data"]["type"] == "text_delta")
        .filter_map(|e| e["data"]["delta"].as_str())
        .collect();
    assert!(said.contains("ok"), "{lines:?}");

    // bypass, from the CLI (which holds the exec right: the daemon's token): the mapped flag, and
    // the mode recorded with the run.
    let (code, v, out) =
        od(&d.url, &data, &["run", "start", "--agent", "claude", "--permission-mode", "bypass", "--message", "b"]);
    assert_eq!(code, 0, "{out}");
    let run_id = v["runId"].as_str().unwrap().to_string();
    let run = poll("the bypass run to end", 120, || {
        let run = get(&d.url, &format!("/api/runs/{run_id}"))["run"].clone();
        ["succeeded", "failed", "canceled"].contains(&run["status"].as_str().unwrap()).then_some(run)
    });
    assert_eq!(run["status"], "succeeded", "{run}");
    let argv = std::fs::read_to_string(bin.join("argv")).unwrap();
    assert!(argv.contains("bypassPermissions") && !argv.contains("acceptEdits"), "{argv}");
    assert_eq!(run["permissionMode"], "bypass", "the mode is recorded: {run}");
}

#[test]
fn od_agents_test_runs_the_agent_once_bounded_in_time() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    fake_agents(&bin);
    // An amp that hangs (with a child) once asked anything but its version.
    script(&bin, "amp", "case \"$1\" in --version) echo 0.0.1;; *) sleep 30 & wait;; esac");
    let test = |id: &str, extra: &[&str]| {
        let out = std::process::Command::new(OD)
            .args(["agents", "test", id, "--json", "--data-dir"])
            .arg(tmp.path().join("data"))
            .args(extra)
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("CLAUDE_BIN", "")
            .env("AMP_BIN", "")
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.code().unwrap_or(-1), v, String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (code, v, err) = test("claude", &[]);
    assert_eq!((code, v["ok"].as_bool()), (0, Some(true)), "{v} {err}");
    assert_eq!(v["text"], "ok", "{v}");
    assert!(v["argv"].as_array().unwrap().iter().any(|a| a == "acceptEdits"), "{v}");
    assert_eq!(std::fs::read_to_string(bin.join("stdin")).unwrap(), "say ok");

    let t = std::time::Instant::now();
    let (code, v, err) = test("amp", &["--timeout-ms", "500"]);
    assert_ne!(code, 0, "{v} {err}");
    assert_eq!((v["ok"].as_bool(), v["timedOut"].as_bool()), (Some(false), Some(true)), "{v} {err}");
    assert!(err.contains("agent-test-failed"), "{err}");
    assert!(t.elapsed() < std::time::Duration::from_secs(20), "the bound held");

    // A broken binary: no report of a run, the reason named.
    let (code, v, err) = test("gemini", &["--timeout-ms", "5000"]);
    assert_ne!(code, 0, "{v} {err}");
    assert_eq!(v["ok"], false, "{v}");
}
