//! `od` at a terminal, driven under a pseudo-terminal (expect-style, every wait a deadline): the
//! live progress view of `od run start --follow` (stage n/m, devloop iteration, the score against
//! the `until`, the end summary) and ND-JSON with `--json`; a form surface answered in the
//! terminal, an answer the daemon refuses re-asked, a confirmation answered `y` from `od run
//! watch`; and a follow with no terminal on stdin that exits 73 at once instead of blocking.
//! Without a daemon each `od` hosts the engine in-process (embedded mode).

use rexpect::process::WaitStatus;
use rexpect::session::{spawn_command, PtySession};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const OD: &str = env!("CARGO_BIN_EXE_od");
/// Deadline of each expectation: a debug build starting its embedded engine on a busy machine.
const WAIT_MS: u64 = 60_000;

fn cmd(data: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(OD);
    c.args(args).arg("--data-dir").arg(data).env_remove("OD_DAEMON_URL").env_remove("OD_PROJECT_ID");
    c.env("TERM", "xterm").env_remove("NO_COLOR");
    c
}

fn od(data: &Path, args: &[&str]) -> Output {
    cmd(data, args).stdin(Stdio::null()).output().unwrap()
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn pty(data: &Path, args: &[&str]) -> PtySession {
    spawn_command(cmd(data, args), Some(WAIT_MS)).unwrap()
}

/// rexpect reads the terminal byte by byte as chars: a UTF-8 needle is matched in that form.
fn as_read(s: &str) -> String {
    s.bytes().map(char::from).collect()
}

/// What rexpect read, back as UTF-8.
fn decoded(read: &str) -> String {
    String::from_utf8_lossy(&read.chars().map(|c| c as u8).collect::<Vec<u8>>()).into_owned()
}

/// Waits for `needle`, returning what came before it (panics with the context at the deadline).
fn expect(p: &mut PtySession, needle: &str) -> String {
    match p.exp_string(&as_read(needle)) {
        Ok(before) => decoded(&before),
        Err(e) => panic!("waiting for {needle:?}: {}", decoded(&e.to_string())),
    }
}

/// Types `keys` (flushed: rexpect buffers what it sends).
fn send(p: &mut PtySession, keys: &str) {
    p.send(keys).unwrap();
    p.flush().unwrap();
}

/// Reads to the end and returns the rest of the output and the exit code.
fn finish(mut p: PtySession) -> (String, i32) {
    let rest = decoded(&p.exp_eof().unwrap_or_default());
    match p.process().wait().unwrap() {
        WaitStatus::Exited(_, code) => (rest, code),
        other => panic!("od did not exit: {other:?}"),
    }
}

fn survey(tmp: &Path) -> PathBuf {
    let data = tmp.join("data");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/terminal/survey");
    let out = od(&data, &["plugin", "install", src.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    data
}

fn events(data: &Path, run: &str) -> Vec<Value> {
    let out = od(data, &["run", "watch", run, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
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
fn the_follow_view_shows_stages_iterations_the_score_against_the_until_and_a_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut p = pty(&data, QUICKSTART);
    let mut seen = expect(&mut p, "· plugin od-new-generation · project ");
    for needle in [
        // Nothing configured: the view says the dry-run agent is a default (issue 30 item 4).
        "· dry-run agent: no agent configured (set OD_AGENT_CMD",
        "stage 1/4 discovery",
        "[dry-run] stage `discovery` iteration 1",
        "dry-run/discovery-1.md (markdown)",
        "stage 2/4 plan",
        "stage 3/4 generate",
        "index.html (html)",
        "stage 4/4 critique (until critique.score>=4 || iterations>=3)",
        "critique.score 2 / until ≥ 4",
        "iteration 1: not yet, again",
        "iteration 2",
        "critique.score 3 / until ≥ 4",
        "critique.score 4 / until ≥ 4",
        "until met: critique.score>=4",
        "succeeded",
        "stages: discovery, plan, generate, critique (3 iterations, until-satisfied)",
        "artifacts (6): dry-run/discovery-1.md, dry-run/plan-1.md, index.html",
    ] {
        seen.push_str(&expect(&mut p, needle));
    }
    let (rest, code) = finish(p);
    seen.push_str(&rest);
    assert_eq!(code, 0, "{seen}");
    assert!(!seen.contains("{\"event\""), "no ND-JSON on a terminal: {seen}");

    // `--json` on a terminal keeps ND-JSON, exactly as through a pipe.
    let mut args = QUICKSTART.to_vec();
    args.push("--json");
    let mut p = pty(&data, &args);
    expect(&mut p, r#"{"event":"pipeline_stage_started","data":{"kind":"pipeline_stage_started""#);
    expect(&mut p, r#"{"event":"end","data":{"#);
    let (rest, code) = finish(p);
    assert_eq!(code, 0, "{rest}");
    assert!(!rest.contains("stage 1/4"), "{rest}");
}

#[test]
fn a_form_is_answered_in_the_terminal_and_a_refused_field_is_asked_again() {
    let tmp = tempfile::tempdir().unwrap();
    let data = survey(tmp.path());
    let mut p = pty(&data, &["run", "start", "--plugin", "survey", "--follow"]);
    let (_, header) = p.exp_regex(r"run [0-9a-f-]{36} ").unwrap();
    let run = header.split(' ').nth(1).unwrap().to_string();
    expect(&mut p, "Who is it for?");
    expect(&mut p, "the people the page speaks to");
    expect(&mut p, "audience *");
    // Too short for `minLength: 3`: only the daemon refuses it.
    send(&mut p, "ab");
    send(&mut p, "\r");
    expect(&mut p, "tone *");
    send(&mut p, "\x1b[B"); // arrow down: calm -> bold
    send(&mut p, "\r");
    expect(&mut p, "pages");
    send(&mut p, "\r"); // the default, 1
    expect(&mut p, "/audience: length must be >=3");
    expect(&mut p, "audience *");
    send(&mut p, "kids club");
    send(&mut p, "\r");
    expect(&mut p, "brief answered (user)");
    expect(&mut p, "Build it now?");
    // A whole line answers, not a key: "maybe" is asked again (its `y` answered yes once, and
    // the rest leaked into the shell); then "y".
    send(&mut p, "maybe\r");
    expect(&mut p, "answer yes or no");
    send(&mut p, "y\r");
    expect(&mut p, "go answered (user)");
    expect(&mut p, "succeeded");
    let (rest, code) = finish(p);
    assert_eq!(code, 0, "{rest}");

    // The answers are recorded: the surface row and the run's events.
    let shown = json_of(&od(&data, &["ui", "show", "brief", "--run", &run, "--json"]));
    let row = shown.to_string();
    assert!(row.contains(r#""audience":"kids club""#) && row.contains(r#""tone":"bold""#), "{shown}");
    let ev = events(&data, &run);
    let answers: Vec<(Value, Value)> = ev
        .iter()
        .filter(|e| e["event"] == "genui_surface_response")
        .map(|e| (e["data"]["surfaceId"].clone(), e["data"]["value"].clone()))
        .collect();
    assert_eq!(
        answers,
        [(json!("brief"), json!({ "audience": "kids club", "tone": "bold", "pages": 1 })), (json!("go"), json!(true))]
    );
    assert!(ev.iter().filter(|e| e["event"] == "genui_surface_response").all(|e| e["data"]["respondedBy"] == "user"));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
}

#[test]
fn a_confirmation_is_answered_y_from_run_watch() {
    let tmp = tempfile::tempdir().unwrap();
    let data = survey(tmp.path());
    // No terminal: the form is named with exit 73; answer it the scripted way.
    let out = od(&data, &["run", "start", "--plugin", "survey", "--follow", "--no-wait"]);
    assert_eq!(out.status.code(), Some(73), "{}", String::from_utf8_lossy(&out.stderr));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    let run = err["error"]["data"]["runId"].as_str().unwrap().to_string();
    let brief = r#"{"audience":"tea lovers","tone":"calm"}"#;
    assert!(od(&data, &["ui", "respond", "brief", "--run", &run, "--value-json", brief]).status.success());
    // `od run watch` on a terminal hosts the run again and asks the confirmation there.
    let mut p = pty(&data, &["run", "watch", &run]);
    expect(&mut p, "stage 1/2 ask");
    expect(&mut p, "Build it now?");
    send(&mut p, "y\r");
    expect(&mut p, "go answered (user)");
    expect(&mut p, "succeeded");
    let (rest, code) = finish(p);
    assert_eq!(code, 0, "{rest}");
    let ev = events(&data, &run);
    let go = ev.iter().find(|e| e["event"] == "genui_surface_response" && e["data"]["surfaceId"] == "go").unwrap();
    assert_eq!(go["data"]["value"], true);
}

#[test]
fn a_follow_with_no_terminal_on_stdin_exits_73_at_once_instead_of_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    let data = survey(tmp.path());
    // stdin a pipe that stays open (nobody will ever answer), no --no-wait.
    let mut child = cmd(&data, &["run", "start", "--plugin", "survey", "--follow"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a follow with nobody to answer blocked instead of exiting 73");
        }
        std::thread::park_timeout(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(73), "{}", String::from_utf8_lossy(&out.stderr));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "genui-surface-awaiting");
    assert_eq!(err["error"]["data"]["surfaceId"], "brief");
    assert_eq!(err["error"]["data"]["schema"]["required"], json!(["audience", "tone"]));
    // stdout was a pipe: the events before it are ND-JSON.
    let first: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(first["event"], "pipeline_stage_started");
}

#[test]
fn ctrl_c_at_a_question_says_the_run_still_waits_and_how_to_take_it_up() {
    let tmp = tempfile::tempdir().unwrap();
    let data = survey(tmp.path());
    let mut p = pty(&data, &["run", "start", "--plugin", "survey", "--follow"]);
    let (_, header) = p.exp_regex(r"run [0-9a-f-]{36} ").unwrap();
    let run = header.split(' ').nth(1).unwrap().to_string();
    let before = expect(&mut p, "audience *");
    assert_eq!(before.matches("Who is it for?").count(), 1, "the question is printed once: {before}");
    send(&mut p, "\x03");
    expect(&mut p, &format!("Stopped following run {run}; it still waits for an answer to brief"));
    expect(&mut p, &format!("od ui respond brief --run {run}"));
    let (rest, code) = finish(p);
    assert_eq!(code, 130, "{rest}");
    // The run is not gone: it waits, and is answered from another command.
    let info = json_of(&od(&data, &["run", "info", &run, "--json"]));
    assert_eq!(info["run"]["status"], "awaiting-input", "{info}");
}

#[test]
fn q_at_a_pick_leaves_the_question_with_text_not_a_tick_and_json() {
    let tmp = tempfile::tempdir().unwrap();
    let data = survey(tmp.path());
    let mut p = pty(&data, &["run", "start", "--plugin", "survey", "--follow"]);
    let (_, header) = p.exp_regex(r"run [0-9a-f-]{36} ").unwrap();
    let run = header.split(' ').nth(1).unwrap().to_string();
    expect(&mut p, "audience *");
    send(&mut p, "kids club\r");
    expect(&mut p, "tone *");
    // `q` (like Esc) leaves a pick: the person is told the run waits and how to answer it.
    send(&mut p, "q");
    let said = expect(&mut p, &format!("od ui respond brief --run {run}"));
    let (rest, code) = finish(p);
    let seen = format!("{said}{rest}");
    assert_eq!(code, 73, "{seen}");
    assert!(seen.contains(&format!("run {run} waits for an answer to brief")), "{seen}");
    assert!(!seen.contains('\u{2714}'), "no tick for a question left unanswered: {seen}");
    assert!(!seen.contains("{\"error\""), "text for people, not the JSON envelope: {seen}");
    let info = json_of(&od(&data, &["run", "info", &run, "--json"]));
    assert_eq!(info["run"]["status"], "awaiting-input", "{info}");
}

#[test]
fn an_error_on_a_terminal_is_text_for_people_and_json_for_programs() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let p = pty(&data, &["run", "info", "00000000-0000-4000-8000-000000000000"]);
    let (rest, code) = finish(p);
    assert_eq!(code, 69, "{rest}");
    assert!(rest.contains("od: ") && rest.contains("(run-not-found, exit 69)"), "{rest}");
    assert!(!rest.contains("{\"error\""), "no envelope on a terminal: {rest}");
    // A pipe (and --json) keeps the envelope.
    let out = od(&data, &["run", "info", "00000000-0000-4000-8000-000000000000"]);
    let v: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(v["error"]["code"], "run-not-found");
}

#[test]
fn plugin_install_on_a_terminal_reads_as_text_and_as_nd_json_in_a_pipe() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/terminal/survey");
    let p = pty(&data, &["plugin", "install", src.to_str().unwrap()]);
    let (rest, code) = finish(p);
    assert_eq!(code, 0, "{rest}");
    assert!(rest.contains("installed: survey "), "{rest}");
    assert!(!rest.contains("{\"event\""), "no ND-JSON on a terminal: {rest}");
    let out = od(&data, &["plugin", "install", src.to_str().unwrap()]);
    let last: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!((&last["event"], &last["data"]["unchanged"]), (&json!("success"), &json!(true)), "{last}");
}

#[test]
fn plugin_info_on_a_terminal_shows_what_the_manifest_declares_not_its_json() {
    let tmp = tempfile::tempdir().unwrap();
    let data = survey(tmp.path());
    let p = pty(&data, &["plugin", "info", "survey"]);
    let (rest, code) = finish(p);
    assert_eq!(code, 0, "{rest}");
    assert!(rest.contains("manifest.stages") && rest.contains("manifest.surfaces"), "{rest}");
    assert!(!rest.contains("\"specVersion\""), "no manifest JSON on a terminal: {rest}");
    // A bundled plugin has no install time: a dash, not "- (20793 d ago)".
    let p = pty(&data, &["plugin", "info", "od-new-generation"]);
    let (rest, code) = finish(p);
    assert_eq!(code, 0, "{rest}");
    assert!(!rest.contains(" d ago)"), "{rest}");
}

#[test]
fn a_start_missing_plugin_inputs_asks_for_them_on_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut p = pty(&data, &["run", "start", "--plugin", "od-new-generation"]);
    for (label, answer) in [("What to make", "landing page"), ("Audience", "tea lovers"), ("Topic", "a tea shop")] {
        expect(&mut p, label);
        send(&mut p, &format!("{answer}\r"));
    }
    let (rest, code) = finish(p);
    assert_eq!(code, 0, "{rest}");
    assert!(!rest.contains("missing-input"), "{rest}");
    // A pipe gets the error, as before: programs are not asked.
    let out = od(&data, &["run", "start", "--plugin", "od-new-generation"]);
    assert_eq!(out.status.code(), Some(67), "{}", String::from_utf8_lossy(&out.stderr));
    let runs = json_of(&od(&data, &["run", "list", "--json"]));
    let first = &runs["runs"][0];
    let created = json_of(&od(&data, &["run", "info", first["runId"].as_str().unwrap(), "--json"]));
    assert_eq!(created["run"]["pluginId"], "od-new-generation", "{created}");
}

#[test]
fn plugin_apply_on_a_terminal_reads_as_a_brief_not_json() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let args = ["plugin", "apply", "od-new-generation", "--input", "topic=tea", "--input", "audience=kids"];
    let p = pty(&data, &[&args[..], &["--input", "artifactKind=poster"]].concat());
    let (rest, code) = finish(p);
    assert_eq!(code, 0, "{rest}");
    assert!(rest.contains("New generation 1.0.0") && rest.contains("stages"), "{rest}");
    assert!(rest.contains("about tea"), "the composed brief: {rest}");
    assert!(!rest.contains("\"query\""), "no JSON on a terminal: {rest}");
}
