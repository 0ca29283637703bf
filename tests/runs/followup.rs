//! Conversations and follow-up runs (issue 30 item 3): a plugin with three stages, a first run, then
//! a follow-up in the same conversation. The follow-up runs only the stage the plugin declares
//! (`od.pipeline.followUp`), or — for a plugin that declares none — only the last stage; an exec
//! agent that saves its stdin shows the follow-up's prompt holds the first run's messages (the
//! user's and the agent's reply) and its artifacts by path and digest; `od run replay --verify` is
//! ok for both runs; `od run watch --json` of the follow-up shows the message events and the plan,
//! its AG-UI stream the user's message as a user text message;
//! `od conversation messages` lists the conversation. Bad inputs (an unknown conversation, one of
//! another project, a `followUp` naming a stage the pipeline lacks) are refused naming the field,
//! with nothing written.

use crate::common;

use common::harness::{names, of, script, write_plugin, Engine, OD};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const NOW: i64 = 1_800_000_000_000;

/// Saves its prompt per run and stage, writes `<stage>.html`, reports it, and says so.
fn agent(tmp: &Path, out: &Path) -> PathBuf {
    let body = format!(
        r#"cat > "{out}/$OD_RUN_ID-$OD_STAGE_ID.txt"
echo "<p>$OD_STAGE_ID by $OD_RUN_ID</p>" > "$OD_STAGE_ID.html"
echo '{{"type":"artifact","path":"'"$OD_STAGE_ID"'.html"}}'
echo '{{"type":"text","text":"I wrote '"$OD_STAGE_ID"'.html"}}'
echo '{{"type":"done"}}'"#,
        out = out.display()
    );
    script(tmp, "agent.sh", &body)
}

fn stages() -> Value {
    json!([
        { "id": "brief", "atoms": ["todo-write"] },
        { "id": "build", "atoms": ["file-write"] },
        { "id": "polish", "atoms": ["file-write"] }
    ])
}

/// A three-stage plugin folder; `follow_up` becomes its `od.pipeline.followUp` when given.
fn plugin(tmp: &Path, name: &str, follow_up: Option<Value>) -> PathBuf {
    let dir = tmp.join(name);
    write_plugin(&dir, name, "1.0.0", stages(), "Make pages.");
    if let Some(f) = follow_up {
        let p = dir.join("open-design.json");
        let mut m: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        m["od"]["pipeline"]["followUp"] = f;
        std::fs::write(&p, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    }
    dir
}

/// `od <args> --daemon-url <engine> --json` with the engine's token: exit code and stdout (stderr
/// when it failed), parsed as JSON or as ND-JSON lines.
fn od(e: &Engine, args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(OD)
        .args(args)
        .args(["--daemon-url", &e.url, "--json"])
        .env("OD_API_TOKEN", &e.token)
        .env_remove("OD_DAEMON_URL")
        .output()
        .unwrap();
    let text = if out.status.success() { out.stdout } else { out.stderr };
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&text).into_owned())
}

fn od_value(e: &Engine, args: &[&str]) -> Value {
    let (code, text) = od(e, args);
    assert_eq!(code, 0, "od {args:?}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("od {args:?}: {err}: {text}"))
}

fn exec_body(agent: &Path, extra: Value) -> Value {
    let mut body = json!({ "agent": "exec", "agentCommand": [agent.to_str().unwrap()] });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

fn started_stages(ev: &[Value]) -> Vec<String> {
    of(ev, "pipeline_stage_started").iter().map(|d| d["stageId"].as_str().unwrap().to_string()).collect()
}

fn run_of(e: &Engine, id: &str) -> Value {
    let (code, v) = e.get(&format!("/api/runs/{id}"));
    assert_eq!(code, 200, "{v}");
    v["run"].clone()
}

fn assert_replay_ok(e: &Engine, id: &str) {
    let v = od_value(e, &["run", "replay", id, "--verify"]);
    assert_eq!(v["ok"], true, "replay of {id}: {v:#}");
    assert!(!v["prompts"].as_array().unwrap().is_empty(), "{v:#}");
}

#[test]
fn a_follow_up_runs_its_declared_stage_with_the_first_runs_messages_and_artifacts() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let agent = agent(tmp.path(), &out);
    let e = Engine::start(&tmp.path().join("data"), NOW);
    e.install(&plugin(tmp.path(), "fu-declared", Some(json!(["build"]))));

    // The first run: the whole pipeline; its message and the agent's reply are the conversation's.
    let (first, ev1) =
        e.run(exec_body(&agent, json!({ "pluginId": "fu-declared", "message": "Make a tea shop page" })));
    assert_eq!(ev1.last().unwrap()["data"]["status"], "succeeded", "{ev1:#?}");
    assert_eq!(started_stages(&ev1), ["brief", "build", "polish"]);
    assert!(of(&ev1, "follow_up_planned").is_empty(), "a conversation's first run is no follow-up");
    let msgs1 = of(&ev1, "conversation_message");
    assert_eq!(msgs1.len(), 2, "{msgs1:#?}");
    assert_eq!((msgs1[0]["role"].as_str(), msgs1[0]["text"].as_str()), (Some("user"), Some("Make a tea shop page")));
    assert_eq!(msgs1[1]["role"], "agent");
    let reply1 = msgs1[1]["text"].as_str().unwrap();
    assert_eq!(reply1, "I wrote brief.html\nI wrote build.html\nI wrote polish.html");
    let artifacts1: Vec<(String, String)> = of(&ev1, "artifact")
        .iter()
        .map(|a| (a["path"].as_str().unwrap().to_string(), a["digest"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(artifacts1.len(), 3, "{artifacts1:?}");
    let run1 = run_of(&e, &first);
    let (project, conversation) = (run1["projectId"].as_str().unwrap(), run1["conversationId"].as_str().unwrap());

    // The follow-up, in the same conversation: only the declared stage.
    let (second, ev2) = e.run(exec_body(
        &agent,
        json!({ "projectId": project, "conversationId": conversation, "message": "Now make it blue" }),
    ));
    assert_eq!(ev2.last().unwrap()["data"]["status"], "succeeded", "{ev2:#?}");
    assert_eq!(started_stages(&ev2), ["build"], "{:?}", names(&ev2));
    let plan = of(&ev2, "follow_up_planned");
    assert_eq!(plan.len(), 1);
    assert_eq!(plan[0]["stages"], json!(["build"]));
    assert_eq!(plan[0]["rule"], "declared");
    assert_eq!(plan[0]["buildsOn"], json!([first]));
    assert_eq!(run_of(&e, &second)["conversationId"], conversation);

    // Its prompt holds the first run's messages and artifacts (by path and digest), then its brief.
    let prompt = std::fs::read_to_string(out.join(format!("{second}-build.txt"))).unwrap();
    assert!(prompt.contains("Make a tea shop page"), "{prompt}");
    for line in reply1.lines() {
        assert!(prompt.contains(line), "the agent's reply {line:?} is in the follow-up's prompt:\n{prompt}");
    }
    for (path, digest) in &artifacts1 {
        assert!(prompt.contains(path.as_str()) && prompt.contains(&digest[..12]), "{path} {digest}:\n{prompt}");
    }
    assert!(prompt.contains("Now make it blue"), "{prompt}");
    // The first run's prompts carried no conversation (it had none before it).
    let first_prompt = std::fs::read_to_string(out.join(format!("{first}-polish.txt"))).unwrap();
    assert!(!first_prompt.contains("Now make it blue") && !first_prompt.contains("I wrote"), "{first_prompt}");

    // Replay recomposes both runs' prompts byte for byte.
    assert_replay_ok(&e, &first);
    assert_replay_ok(&e, &second);

    // `od run watch --json` of the follow-up: the user's message, the plan, the agent's reply.
    let (code, text) = od(&e, &["run", "watch", &second]);
    assert_eq!(code, 0, "{text}");
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let n = names(&lines);
    let user_at = n.iter().position(|x| x == "conversation_message").expect("the user's message on the wire");
    assert_eq!(lines[user_at]["data"]["role"], "user");
    assert_eq!(lines[user_at]["data"]["text"], "Now make it blue");
    assert_eq!(lines[user_at]["data"]["conversationId"], conversation);
    let plan_at = n.iter().position(|x| x == "follow_up_planned").unwrap();
    let stage_at = n.iter().position(|x| x == "pipeline_stage_started").unwrap();
    assert!(user_at < stage_at && plan_at < stage_at, "{n:?}");
    let replies = of(&lines, "conversation_message").into_iter().filter(|m| m["role"] == "agent").count();
    assert_eq!(replies, 1, "{n:?}");
    assert_eq!(n.last().unwrap(), "end");

    // AG-UI: the user's message is a user text message (messageId `<run>:user`), whole.
    let agui = ureq::get(&format!("{}/api/runs/{second}/agui", e.url))
        .set("Authorization", &format!("Bearer {}", e.token))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    let frames: Vec<Value> =
        agui.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect();
    let user_id = format!("{second}:user");
    let at = frames.iter().position(|f| f["type"] == "TEXT_MESSAGE_START" && f["messageId"] == user_id.as_str());
    let at = at.unwrap_or_else(|| panic!("{agui}"));
    assert_eq!(frames[at]["role"], "user");
    assert_eq!(frames[at + 1]["type"], "TEXT_MESSAGE_CONTENT");
    assert_eq!(frames[at + 1]["delta"], "Now make it blue");
    assert_eq!(frames[at + 2]["type"], "TEXT_MESSAGE_END");

    // A fork of the follow-up at its stage keeps its plan and its context; replay verifies it.
    let (code, v) = e.post(&format!("/api/runs/{second}/fork"), json!({ "at": "build" }));
    assert_eq!(code, 202, "{v}");
    let fork = v["runId"].as_str().unwrap().to_string();
    let fev = e.watch(&fork);
    assert_eq!(fev.last().unwrap()["data"]["status"], "succeeded", "{fev:#?}");
    let fork_prompt = std::fs::read_to_string(out.join(format!("{fork}-build.txt"))).unwrap();
    assert!(fork_prompt.contains("Make a tea shop page") && fork_prompt.contains("Now make it blue"), "{fork_prompt}");
    assert!(!out.join(format!("{fork}-polish.txt")).exists(), "the fork runs only the planned stage");
    assert_replay_ok(&e, &fork);

    // The conversation's messages, oldest first.
    let v = od_value(&e, &["conversation", "messages", conversation, "--project", project]);
    let roles: Vec<(String, String)> = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["runId"].as_str().unwrap().to_string(), m["role"].as_str().unwrap().to_string()))
        .collect();
    let expect: Vec<(String, String)> = [(&first, "user"), (&first, "agent"), (&second, "user"), (&second, "agent")]
        .iter()
        .map(|(r, role)| (r.to_string(), role.to_string()))
        .collect();
    assert_eq!(roles, expect, "{v:#}");
    assert_eq!(v["messages"][3]["text"], "I wrote build.html");
    assert_eq!(v["followUps"][0]["runId"], second.as_str());
}

#[test]
fn a_plugin_that_declares_no_follow_up_reruns_only_its_last_stage() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let agent = agent(tmp.path(), &out);
    let e = Engine::start(&tmp.path().join("data"), NOW);
    e.install(&plugin(tmp.path(), "fu-plain", None));
    let (first, ev1) = e.run(exec_body(&agent, json!({ "pluginId": "fu-plain", "message": "A menu page" })));
    assert_eq!(started_stages(&ev1), ["brief", "build", "polish"]);
    let project = run_of(&e, &first)["projectId"].as_str().unwrap().to_string();

    // `od run start --project P --message …`: the project's conversation, the last stage only.
    let v = od_value(&e, &["run", "start", "--project", &project, "--message", "Shorter, please"]);
    let second = v["runId"].as_str().unwrap().to_string();
    assert_eq!(v["followUp"]["stages"], json!(["polish"]), "{v:#}");
    assert_eq!(v["assistantMessageId"], format!("{second}:agent"), "{v:#}");
    let ev2 = e.watch(&second);
    assert_eq!(ev2.last().unwrap()["data"]["status"], "succeeded", "{ev2:#?}");
    assert_eq!(started_stages(&ev2), ["polish"], "{:?}", names(&ev2));
    let plan = of(&ev2, "follow_up_planned");
    assert_eq!((plan[0]["rule"].as_str(), &plan[0]["stages"]), (Some("last-stage"), &json!(["polish"])));
    assert_eq!(plan[0]["buildsOn"], json!([first]));
    assert_eq!(run_of(&e, &second)["conversationId"], run_of(&e, &first)["conversationId"]);
    assert_replay_ok(&e, &first);
    assert_replay_ok(&e, &second);
}

#[test]
fn bad_follow_ups_are_refused_naming_the_field_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let agent = agent(tmp.path(), &out);
    let e = Engine::start(&tmp.path().join("data"), NOW);
    e.install(&plugin(tmp.path(), "fu-plain", None));
    let (first, _) = e.run(exec_body(&agent, json!({ "pluginId": "fu-plain", "message": "A menu page" })));
    let project = run_of(&e, &first)["projectId"].as_str().unwrap().to_string();
    let (other, _) = e.run(exec_body(&agent, json!({ "pluginId": "fu-plain", "message": "Another" })));
    let other = run_of(&e, &other);
    assert_ne!(other["projectId"], project.as_str());
    let runs = |e: &Engine| e.get(&format!("/api/projects/{project}")).1["project"]["runCount"].clone();
    let before = (runs(&e), e.get("/api/runs").1["runs"].as_array().unwrap().len());

    for (conversation, why) in [("nope", "unknown"), (other["conversationId"].as_str().unwrap(), "another project's")] {
        let body = exec_body(
            &agent,
            json!({ "projectId": project, "conversationId": conversation, "message": "Now make it blue" }),
        );
        let (code, v) = e.post("/api/runs", body);
        assert_eq!(code, 404, "{why}: {v}");
        assert_eq!(v["error"]["code"], "conversation-not-found", "{why}: {v}");
        assert_eq!(v["error"]["data"]["conversationId"], conversation, "{why}: {v}");
    }
    // The CLI says the same, with its exit code for a missing conversation.
    let (code, text) =
        od(&e, &["run", "start", "--project", &project, "--conversation", "nope", "--message", "Now make it blue"]);
    assert_eq!(code, 68, "{text}");
    assert!(text.contains("conversation"), "{text}");
    assert_eq!((runs(&e), e.get("/api/runs").1["runs"].as_array().unwrap().len()), before, "nothing was written");

    // A follow-up stage the pipeline lacks: the install is refused naming the field.
    let bad = plugin(tmp.path(), "fu-bad", Some(json!(["build", "deploy"])));
    let r = ureq::post(&format!("{}/api/plugins/install", e.url))
        .send_json(json!({ "source": bad.to_str().unwrap() }))
        .map(|r| r.into_string().unwrap())
        .unwrap_or_else(|err| match err {
            ureq::Error::Status(_, r) => r.into_string().unwrap(),
            other => panic!("{other}"),
        });
    let last: Value = serde_json::from_str(r.lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "error", "{r}");
    assert!(r.contains("/od/pipeline/followUp/1") && r.contains("deploy"), "{r}");
    assert!(!r.contains("/od/pipeline/followUp/0"), "build is a stage: {r}");
    assert_eq!(e.get("/api/plugins/fu-bad").0, 404, "nothing installed");
}

/// The conversation costs no commit of its own: the user's message lands in the run's creation
/// append, the plan with it, the agent's reply in its `end` append — a dry-run run with a message,
/// and its follow-up, cost the 3 fdatasyncs of a run without one (`run_commits.rs`). The executor's
/// batching may add one under a loaded machine (`run_commits.rs` sees it too), so each is measured
/// three times and the fewest counts: a reply that needed a flush of its own would cost 4 every time.
#[test]
fn messages_and_plans_cost_no_extra_commit() {
    use common::faults::{FaultFiles, Layer, Op};
    use std::sync::Arc;
    let tmp = tempfile::tempdir().unwrap();
    let faults = FaultFiles::new();
    let layer = faults.clone();
    let e = Engine::start_with(&tmp.path().join("data"), NOW, move |cfg| cfg.files = Arc::new(Layer(layer)));
    let body = json!({ "pluginId": "od-new-generation", "agent": "dry-run", "message": "A tea page",
        "pluginInputs": { "topic": "tea", "audience": "tea lovers", "artifactKind": "landing-page" } });
    // A first run warms what a first run may record once.
    e.run(body.clone());
    let (mut firsts, mut follow_ups) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let before = faults.calls(Op::Sync);
        let (first, ev) = e.run(body.clone());
        firsts.push(faults.calls(Op::Sync) - before);
        assert_eq!(of(&ev, "conversation_message").len(), 2, "{:?}", names(&ev));
        let run = run_of(&e, &first);
        let follow = json!({ "projectId": run["projectId"], "conversationId": run["conversationId"],
            "agent": "dry-run", "message": "Bolder" });
        let before = faults.calls(Op::Sync);
        let (_, ev2) = e.run(follow);
        follow_ups.push(faults.calls(Op::Sync) - before);
        assert_eq!(of(&ev2, "follow_up_planned")[0]["buildsOn"], json!([first]), "{:?}", names(&ev2));
        assert_eq!(of(&ev2, "conversation_message").len(), 2, "{:?}", names(&ev2));
    }
    eprintln!("fdatasyncs: runs with a message {firsts:?}, their follow-ups {follow_ups:?}");
    assert!(firsts.iter().min() <= Some(&3), "fdatasyncs of runs with a message: {firsts:?}");
    assert!(follow_ups.iter().min() <= Some(&3), "fdatasyncs of follow-ups: {follow_ups:?}");
    e.stop();
}

/// A run-start question (a GenUI surface without a trigger, asked at the pipeline's first stage)
/// is the first run's: a follow-up that runs only a later stage does not ask it again.
#[test]
fn a_follow_up_does_not_ask_the_run_start_questions_again() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let agent = agent(tmp.path(), &out);
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let dir = plugin(tmp.path(), "fu-asks", None);
    let p = dir.join("open-design.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    m["od"]["genui"] = json!({ "surfaces": [{ "id": "style", "kind": "choice", "persist": "run",
        "prompt": "Which style?", "schema": { "type": "string", "enum": ["bold", "calm"] } }] });
    std::fs::write(&p, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    e.install(&dir);

    let first = e.start_run(exec_body(&agent, json!({ "pluginId": "fu-asks", "message": "A menu page" })));
    let asked = e.watch_until(&first, "genui_surface_request");
    assert_eq!(asked.last().unwrap()["data"]["surfaceId"], "style", "{:?}", names(&asked));
    let (code, v) = e.post(&format!("/api/runs/{first}/genui/style/respond"), json!({ "value": "bold" }));
    assert_eq!(code, 200, "{v}");
    assert_eq!(e.watch(&first).last().unwrap()["data"]["status"], "succeeded");

    let run = run_of(&e, &first);
    let second = e.start_run(exec_body(
        &agent,
        json!({ "projectId": run["projectId"], "conversationId": run["conversationId"], "message": "Shorter" }),
    ));
    let ev = e.watch_until(&second, "genui_surface_request");
    assert!(of(&ev, "genui_surface_request").is_empty(), "{:?}", names(&ev));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{:?}", names(&ev));
    assert_eq!(started_stages(&ev), ["polish"]);
}
