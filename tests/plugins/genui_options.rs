//! A choice whose options the agent proposes (the direction picker): the manifest leaves the pick
//! open, so the surface is not raised at the stage's entry; an exec agent asks it with three
//! directions (`genui_request` + `options`), the recorded request carries them as the field's
//! `oneOf`, an answer outside them is refused naming the field, a pick reaches the next stage's
//! prompt, the same question in the same conversation is answered from memory (and carried into a
//! follow-up whose stages do not ask it), options that do
//! not fit are refused and recorded, and the bundled scenarios that hold the atom declare the
//! surface without asking it on their own.

use crate::common;

use common::harness::{of, script, Engine};
use serde_json::{json, Value};
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;

/// At `pick` the agent proposes three directions; at `make` it says which answer its prompt holds.
const AGENT: &str = r#"#!/bin/sh
prompt=$(cat)
if [ "$OD_STAGE_ID" = pick ]; then
  echo '{"type":"text","text":"three directions"}'
  echo '{"type":"genui_request","surfaceId":"direction-choice","atom":"direction-picker","options":[{"value":"warm","label":"Warm paper","description":"Cream, rust and a serif"},{"value":"cool","label":"Cool glass"},"mono"]}'
else
  line=$(printf '%s\n' "$prompt" | grep '^- direction-choice:' || echo 'no answer')
  printf '{"type":"text","text":"make saw %s"}\n' "$(printf '%s' "$line" | sed 's/"/\\"/g')"
fi
echo '{"type":"done"}'
"#;

fn setup(tmp: &Path) -> (Engine, String) {
    let e = Engine::start(&tmp.join("data"), NOW);
    let dir = tmp.join("picker");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), "---\nname: picker\ndescription: Offers directions.\n---\nPick.\n").unwrap();
    let manifest = json!({ "specVersion": "1.0.0", "name": "picker", "version": "1.0.0",
        "od": { "kind": "scenario", "taskKind": "new-generation",
            "pipeline": { "stages": [ { "id": "pick", "atoms": ["direction-picker"] }, { "id": "make", "atoms": ["file-write"] } ] },
            "genui": { "surfaces": [ { "id": "direction-choice", "kind": "choice", "persist": "conversation",
                "trigger": { "atom": "direction-picker" }, "prompt": "Which direction?",
                "schema": { "type": "object", "required": ["direction"],
                    "properties": { "direction": { "type": "string", "title": "Direction" }, "note": { "type": "string" } } } } ] } } });
    std::fs::write(dir.join("open-design.json"), manifest.to_string()).unwrap();
    e.install(&dir);
    let (code, v) = e.post("/api/projects", json!({ "id": "p", "name": "P" }));
    assert_eq!(code, 200, "{v}");
    let agent = script(tmp, "agent.sh", AGENT);
    (e, agent.to_str().unwrap().to_string())
}

fn start(e: &Engine, agent: &str, conversation: Option<&str>) -> String {
    let mut body = json!({ "projectId": "p", "pluginId": "picker", "agent": "exec", "agentCommand": [agent] });
    if let Some(c) = conversation {
        body["conversationId"] = json!(c);
    }
    e.start_run(body)
}

/// The agent's text lines of the run, as recorded.
fn texts(ev: &[Value]) -> String {
    ev.iter().filter(|v| v["event"] == "agent").map(|v| v["data"].to_string()).collect::<Vec<_>>().join("\n")
}

#[test]
fn the_agents_directions_are_the_cards_checked_remembered_and_refused_when_they_do_not_fit() {
    let tmp = tempfile::tempdir().unwrap();
    let (e, agent) = setup(tmp.path());
    let id = start(&e, &agent, None);
    let asked = e.watch_to(&id, |v| v["event"] == "genui_surface_request");
    let req = of(&asked, "genui_surface_request")[0];
    assert_eq!(req["requestedBy"], "agent", "not raised at the stage's entry: {req}");
    assert_eq!(req["stageId"], "pick");
    assert_eq!(
        req["payload"]["schema"]["properties"]["direction"]["oneOf"],
        json!([{ "const": "warm", "title": "Warm paper", "description": "Cream, rust and a serif" },
               { "const": "cool", "title": "Cool glass" }, { "const": "mono" }])
    );
    let (_, run) = e.get(&format!("/api/runs/{id}"));
    assert_eq!(run["run"]["status"], "awaiting-input");

    // Outside the options: refused at the field, nothing recorded.
    let (_, before) = e.get("/api/log/stats");
    let respond = |v: Value| e.post(&format!("/api/runs/{id}/genui/direction-choice/respond"), json!({ "value": v }));
    let (code, v) = respond(json!({ "direction": "teal" }));
    assert_eq!((code, v["error"]["code"].as_str().unwrap()), (422, "invalid-answer"), "{v}");
    assert!(v["error"]["data"]["violations"].to_string().contains("/direction"), "{v}");
    let (_, after) = e.get("/api/log/stats");
    assert_eq!(before["lastSeq"], after["lastSeq"]);

    let (code, v) = respond(json!({ "direction": "warm", "note": "a little darker" }));
    assert_eq!(code, 200, "{v}");
    let ev = e.watch(&id);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
    let said = texts(&ev);
    assert!(
        said.contains("make saw - direction-choice:") && said.contains("warm") && said.contains("a little darker"),
        "{said}"
    );
    assert!(!texts(&ev).contains("no answer"), "{}", texts(&ev));

    // The same question in the same conversation: answered from memory, not asked.
    let conv = run["run"]["conversationId"].as_str().unwrap().to_string();
    let again = start(&e, &agent, Some(&conv));
    let ev = e.watch(&again);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:?}");
    assert!(of(&ev, "genui_surface_request").is_empty());
    let cached = of(&ev, "genui_surface_response");
    assert_eq!(
        (cached[0]["respondedBy"].as_str(), cached[0]["value"]["direction"].as_str()),
        (Some("cache"), Some("warm"))
    );

    // A follow-up in the conversation runs only `make`, which never asks: the direction the
    // conversation picked is carried into it (from memory) and reaches its prompt.
    let body = json!({ "projectId": "p", "conversationId": conv, "message": "bolder", "agent": "exec", "agentCommand": [agent] });
    let follow = e.start_run(body);
    let ev = e.watch(&follow);
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:?}");
    assert_eq!(of(&ev, "follow_up_planned").len(), 1);
    let carried = of(&ev, "genui_surface_response");
    assert_eq!(
        (carried[0]["respondedBy"].as_str(), carried[0]["value"]["direction"].as_str()),
        (Some("cache"), Some("warm"))
    );
    assert!(texts(&ev).contains("make saw - direction-choice:") && texts(&ev).contains("warm"), "{}", texts(&ev));
    let (_, verify) = e.post(&format!("/api/runs/{follow}/replay/verify"), json!({}));
    assert_eq!(verify["ok"], true, "{verify}");

    // Options that do not fit are refused (403) and recorded with the reason.
    let (_, c) = e.post("/api/projects/p/conversations", json!({ "title": "another" }));
    let third = start(&e, &agent, c["conversationId"].as_str());
    e.watch_to(&third, |v| v["event"] == "genui_surface_request");
    let req = |body: Value| e.post(&format!("/api/runs/{third}/genui/direction-choice/request"), body);
    for (body, why) in [
        (json!({ "options": ["only one"] }), "2 to 12"),
        (json!({ "options": ["a", { "value": "b", "colour": "red" }] }), "unknown field `colour`"),
        (json!({ "options": ["a", { "value": 7 }] }), "must be a string"),
    ] {
        let (code, v) = req(body.clone());
        assert_eq!((code, v["error"]["code"].as_str().unwrap()), (403, "genui-surface-refused"), "{body}: {v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(why), "{body}: {v}");
    }
    let (_, logs) = e.get(&format!("/api/log/events?stream=run:{third}"));
    let refused: Vec<&Value> =
        logs["events"].as_array().unwrap().iter().filter(|x| x["event"] == "surface_refused").collect();
    assert_eq!(refused.len(), 3, "{logs}");
    e.post(&format!("/api/runs/{third}/cancel"), json!({}));
}

#[test]
fn bundled_scenarios_holding_the_picker_declare_its_choice_and_leave_it_to_the_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    for id in ["od-default", "od-new-generation", "od-tune-collab", "od-design-refine"] {
        let (code, v) = e.get(&format!("/api/plugins/{id}"));
        assert_eq!(code, 200, "{v}");
        let text = v.to_string();
        assert!(text.contains("direction-choice"), "{id} declares the direction choice");
    }
    // A dry run of the default scenario goes through without being asked for a direction.
    let (id, ev) = e.run(json!({ "pluginId": "od-default", "message": "a poster" }));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{id}: {ev:?}");
    assert!(of(&ev, "genui_surface_request").is_empty());
}
