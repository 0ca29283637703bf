//! The AG-UI 1.0 projection of a run, as a pure fold: od's run events (wire name + payload, in
//! order) in, canonical AG-UI events out. Deterministic: the same run always projects to the same
//! events, so a client that reconnects gets the same ids again.
//!
//! A run projects onto one or more AG-UI runs ("segments"). Each opens with RUN_STARTED
//! (threadId = the conversation, runId = the od run) and a STATE_SNAPSHOT, and ends with exactly
//! one terminal event: RUN_FINISHED (success, or `cancelled`), RUN_ERROR, or — when a GenUI surface
//! is requested — RUN_FINISHED with an `interrupt` outcome naming that surface (a stage that raises
//! several gives one segment per surface). The next segment starts right after that request and
//! re-opens the steps that were open. Interrupt ids are `<surfaceId>@<event id of the request>`, so
//! a resume names exactly where to continue.
//!
//! Mapping: stage iterations → STEP_STARTED/STEP_FINISHED (stepName = stageId); agent text →
//! TEXT_MESSAGE_START/CONTENT/END (one message per contiguous run of text, closed before anything
//! else); the user's conversation message → one TEXT_MESSAGE_START/CONTENT/END with role `user`; thinking → REASONING_*; tool_use/tool_result → TOOL_CALL_START/ARGS/END/RESULT; pipeline,
//! signal, artifact and GenUI state → STATE_SNAPSHOT/STATE_DELTA (JSON Patch); od facts with no
//! canonical form → CUSTOM `od.<name>` (agent sub-types `od.agent.<type>`); unparsed agent output →
//! RAW; token usage → RUN_FINISHED/RUN_ERROR `usage`. Timestamps are the events' recorded ms; no
//! field is ever null.

mod json;

use serde_json::{json, Map, Value};
use std::collections::{BTreeSet, HashMap, HashSet};

pub use json::strip_nulls;
use json::{diff, iso8601};

/// The state document STATE_SNAPSHOT/STATE_DELTA describe.
fn initial_state(run_id: &str) -> Value {
    json!({ "runId": run_id, "status": "queued", "pipeline": { "stages": {} }, "signals": {}, "artifacts": {},
            "genui": {} })
}

/// One od run projected onto AG-UI events.
pub struct Encoder {
    thread_id: String,
    run_id: String,
    /// A segment (one AG-UI run) is open.
    open: bool,
    /// The terminal event was emitted: nothing follows.
    finished: bool,
    state: Value,
    /// The state before the current event's first change.
    before: Option<Value>,
    /// The open text message, reasoning message.
    text: Option<String>,
    reasoning: Option<String>,
    /// The invocation's last assistant message: the parent of its tool calls.
    parent: Option<String>,
    /// Open steps, in opening order.
    steps: Vec<String>,
    /// Agent tool ids → AG-UI tool call ids, for the current invocation.
    tool_ids: HashMap<String, String>,
    /// Every tool call id used so far (agent ids repeat across invocations).
    used_tool_ids: HashSet<String>,
    /// Surfaces waiting for an answer.
    pending: BTreeSet<String>,
    /// Tokens reported in the current segment.
    usage: Option<(u64, u64)>,
}

/// One output event: `type`, `timestamp`, then the given fields.
fn ev(kind: &str, ts: i64, fields: Value) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), json!(kind));
    m.insert("timestamp".into(), json!(ts));
    if let Value::Object(f) = fields {
        m.extend(f);
    }
    Value::Object(m)
}

impl Encoder {
    /// `thread_id` = the run's conversation, `run_id` = the od run.
    pub fn new(thread_id: &str, run_id: &str) -> Self {
        Self {
            thread_id: thread_id.into(),
            run_id: run_id.into(),
            open: false,
            finished: false,
            state: initial_state(run_id),
            before: None,
            text: None,
            reasoning: None,
            parent: None,
            steps: Vec::new(),
            tool_ids: HashMap::new(),
            used_tool_ids: HashSet::new(),
            pending: BTreeSet::new(),
            usage: None,
        }
    }

    /// True once the terminal event (RUN_FINISHED success/cancelled, RUN_ERROR) was emitted.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// True while a segment is open.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// The current state document.
    pub fn state(&self) -> &Value {
        &self.state
    }

    /// Opens a segment if none is open: RUN_STARTED, STATE_SNAPSHOT, and the steps left open by an
    /// interrupt.
    pub fn open(&mut self, ts: i64) -> Vec<Value> {
        let mut out = Vec::new();
        if self.open || self.finished {
            return out;
        }
        self.open = true;
        self.usage = None;
        self.parent = None;
        out.push(ev(
            "RUN_STARTED",
            ts,
            json!({ "threadId": self.thread_id, "runId": self.run_id, "protocolVersion": "1.0" }),
        ));
        out.push(ev("STATE_SNAPSHOT", ts, json!({ "snapshot": self.state })));
        for s in &self.steps {
            out.push(ev("STEP_STARTED", ts, json!({ "stepName": s })));
        }
        out
    }

    /// Folds one run event (its id, recorded ms, wire name and payload) into AG-UI events.
    pub fn push(&mut self, version: u64, ts: i64, name: &str, data: &Value) -> Vec<Value> {
        if self.finished {
            return Vec::new();
        }
        let mut out = self.open(ts);
        let agent_type = if name == "agent" { data["type"].as_str().unwrap_or("") } else { "" };
        if agent_type != "text_delta" {
            self.close_text(ts, &mut out);
        }
        if agent_type != "thinking_delta" {
            self.close_reasoning(ts, &mut out);
        }
        match name {
            "pipeline_stage_started" => self.stage_started(ts, data, &mut out),
            "pipeline_stage_completed" => self.stage_completed(ts, data, &mut out),
            "pipeline_stage_failed" => {
                let status = match data["action"].as_str() {
                    Some("retry") => "retrying",
                    Some("skip") => "skipped",
                    _ => "failed",
                };
                self.stage_field(data, "status", json!(status));
                out.push(custom(ts, name, data));
            }
            "start" => {
                self.tool_ids.clear();
                self.parent = None;
                if self.state["status"] == "queued" {
                    self.set(&["status"], json!("running"));
                }
                out.push(custom(ts, name, data));
            }
            "agent" => self.agent(version, ts, agent_type, data, &mut out),
            "signal" => {
                if let Some(n) = data["name"].as_str() {
                    self.set(&["signals", n], data["value"].clone());
                }
                out.push(custom(ts, name, data));
            }
            "artifact" => {
                if let Some(id) = data["artifactId"].as_str() {
                    let a = json!({ "path": data["path"], "title": data["title"], "stageId": data["stageId"],
                                    "artifactKind": data["artifactKind"], "renderKind": data["renderKind"] });
                    self.set(&["artifacts", id], a);
                }
                out.push(custom(ts, name, data));
            }
            "devloop_iteration" => {
                self.stage_field(data, "iterations", data["iteration"].clone());
                if data["termination"].as_str().is_some_and(|t| !t.is_empty()) {
                    self.stage_field(data, "termination", data["termination"].clone());
                }
                out.push(custom(ts, name, data));
            }
            "genui_surface_request" => return self.surface_requested(version, ts, data, out),
            "genui_surface_response" | "genui_surface_timeout" => self.surface_answered(ts, name, data, &mut out),
            // The user's message of the run's conversation is a user text message; the agent's
            // reply was streamed as assistant text already, so it stays an od fact (CUSTOM).
            "conversation_message"
                if data["role"] == "user" && data["text"].as_str().is_some_and(|t| !t.is_empty()) =>
            {
                let id = data["messageId"].clone();
                out.push(ev("TEXT_MESSAGE_START", ts, json!({ "messageId": id, "role": "user" })));
                out.push(ev("TEXT_MESSAGE_CONTENT", ts, json!({ "messageId": id, "delta": data["text"] })));
                out.push(ev("TEXT_MESSAGE_END", ts, json!({ "messageId": id })));
            }
            "end" => return self.end(ts, data, out),
            _ => out.push(custom(ts, name, data)),
        }
        self.flush(ts, &mut out);
        out
    }

    /// Emits what changed in the state since the event began, as one STATE_DELTA.
    fn flush(&mut self, ts: i64, out: &mut Vec<Value>) {
        let mut ops = Vec::new();
        if let Some(before) = self.before.take() {
            diff(&before, &self.state, &mut String::new(), &mut ops);
        }
        if !ops.is_empty() {
            out.push(ev("STATE_DELTA", ts, json!({ "delta": ops })));
        }
        out.iter_mut().for_each(strip_nulls);
    }

    /// Sets `path` in the state (creating parents as objects). The first change of an event keeps
    /// a copy of the state from before it, which `flush` diffs into JSON Patch ops.
    fn set(&mut self, path: &[&str], mut value: Value) {
        strip_nulls(&mut value);
        let mut cur = &self.state;
        for key in path {
            cur = &cur[*key];
        }
        if *cur == value {
            return;
        }
        if self.before.is_none() {
            self.before = Some(self.state.clone());
        }
        let mut cur = &mut self.state;
        for (i, key) in path.iter().enumerate() {
            if !cur.is_object() {
                *cur = json!({});
            }
            let obj = cur.as_object_mut().expect("made an object above");
            if i + 1 == path.len() {
                obj.insert((*key).to_string(), value);
                return;
            }
            cur = obj.entry((*key).to_string()).or_insert_with(|| json!({}));
        }
    }

    /// Removes a top-level-object member of the state, if present.
    fn remove(&mut self, parent: &str, key: &str) {
        if self.state[parent].get(key).is_none() {
            return;
        }
        if self.before.is_none() {
            self.before = Some(self.state.clone());
        }
        if let Some(o) = self.state[parent].as_object_mut() {
            o.remove(key);
        }
    }

    fn stage_field(&mut self, data: &Value, field: &str, value: Value) {
        if let Some(stage) = data["stageId"].as_str() {
            self.set(&["pipeline", "stages", stage, field], value);
        }
    }

    fn stage_started(&mut self, ts: i64, data: &Value, out: &mut Vec<Value>) {
        let stage = data["stageId"].as_str().unwrap_or("stage").to_string();
        if self.steps.contains(&stage) {
            self.steps.retain(|s| *s != stage);
            out.push(ev("STEP_FINISHED", ts, json!({ "stepName": stage })));
        }
        self.steps.push(stage.clone());
        self.parent = None;
        let iteration = data["iteration"].clone();
        out.push(ev(
            "STEP_STARTED",
            ts,
            json!({ "stepName": stage, "metadata": { "od": { "stageId": stage, "iteration": iteration } } }),
        ));
        self.set(&["status"], json!("running"));
        self.set(&["pipeline", "current"], json!({ "stageId": stage, "iteration": iteration }));
        self.stage_field(data, "status", json!("running"));
        self.stage_field(data, "iteration", iteration);
    }

    fn stage_completed(&mut self, ts: i64, data: &Value, out: &mut Vec<Value>) {
        let stage = data["stageId"].as_str().unwrap_or("stage").to_string();
        if self.steps.contains(&stage) {
            self.steps.retain(|s| *s != stage);
            let meta =
                json!({ "od": { "stageId": stage, "iteration": data["iteration"], "converged": data["converged"] } });
            out.push(ev("STEP_FINISHED", ts, json!({ "stepName": stage, "metadata": meta })));
        }
        let status = if self.state["pipeline"]["stages"][stage.as_str()]["status"] == "skipped" {
            "skipped"
        } else {
            "completed"
        };
        self.stage_field(data, "status", json!(status));
        self.stage_field(data, "converged", data["converged"].clone());
        if let Some(d) = data["diffSummary"].as_str() {
            self.stage_field(data, "diffSummary", json!(d));
        }
    }

    fn close_text(&mut self, ts: i64, out: &mut Vec<Value>) {
        if let Some(id) = self.text.take() {
            out.push(ev("TEXT_MESSAGE_END", ts, json!({ "messageId": id })));
        }
    }

    fn close_reasoning(&mut self, ts: i64, out: &mut Vec<Value>) {
        if let Some(id) = self.reasoning.take() {
            out.push(ev("REASONING_MESSAGE_END", ts, json!({ "messageId": id })));
            out.push(ev("REASONING_END", ts, json!({ "messageId": id })));
        }
    }

    fn agent(&mut self, version: u64, ts: i64, kind: &str, data: &Value, out: &mut Vec<Value>) {
        match kind {
            "text_delta" => {
                let delta = data["delta"].as_str().unwrap_or("");
                let id = match &self.text {
                    Some(id) => id.clone(),
                    None => {
                        let id = format!("{}:msg:{version}", self.run_id);
                        out.push(ev("TEXT_MESSAGE_START", ts, json!({ "messageId": id, "role": "assistant" })));
                        self.text = Some(id.clone());
                        self.parent = Some(id.clone());
                        id
                    }
                };
                out.push(ev("TEXT_MESSAGE_CONTENT", ts, json!({ "messageId": id, "delta": delta })));
            }
            "thinking_delta" => {
                let delta = data["delta"].as_str().unwrap_or("");
                let id = match &self.reasoning {
                    Some(id) => id.clone(),
                    None => {
                        let id = format!("{}:reasoning:{version}", self.run_id);
                        out.push(ev("REASONING_START", ts, json!({ "messageId": id })));
                        out.push(ev("REASONING_MESSAGE_START", ts, json!({ "messageId": id, "role": "reasoning" })));
                        self.reasoning = Some(id.clone());
                        id
                    }
                };
                out.push(ev("REASONING_MESSAGE_CONTENT", ts, json!({ "messageId": id, "delta": delta })));
            }
            "tool_use" => self.tool_use(version, ts, data, out),
            "tool_result" => {
                let agent_id = data["toolUseId"].as_str().unwrap_or("");
                let call = self.tool_ids.get(agent_id).cloned().unwrap_or_else(|| agent_id.to_string());
                let mut e = json!({ "messageId": format!("{}:tool:{version}", self.run_id), "toolCallId": call,
                                    "content": tool_content(&data["content"]), "role": "tool" });
                if data["isError"] == true {
                    e["metadata"] = json!({ "od": { "isError": true } });
                }
                out.push(ev("TOOL_CALL_RESULT", ts, e));
            }
            "usage" => {
                let u = &data["usage"];
                let (i, o) = (u["input_tokens"].as_u64().unwrap_or(0), u["output_tokens"].as_u64().unwrap_or(0));
                let (pi, po) = self.usage.unwrap_or((0, 0));
                self.usage = Some((pi + i, po + o));
                out.push(custom(ts, "agent.usage", data));
            }
            "raw" => out.push(ev("RAW", ts, json!({ "event": data, "source": "od.agent" }))),
            other => out.push(custom(ts, &format!("agent.{}", if other.is_empty() { "unknown" } else { other }), data)),
        }
    }

    fn tool_use(&mut self, version: u64, ts: i64, data: &Value, out: &mut Vec<Value>) {
        let agent_id = data["id"].as_str().unwrap_or("");
        let call = if agent_id.is_empty() || self.used_tool_ids.contains(agent_id) {
            format!("{}:call:{version}", self.run_id)
        } else {
            agent_id.to_string()
        };
        self.used_tool_ids.insert(call.clone());
        self.tool_ids.insert(agent_id.to_string(), call.clone());
        let mut start = json!({ "toolCallId": call, "toolCallName": data["name"].as_str().unwrap_or("unknown") });
        if let Some(p) = &self.parent {
            start["parentMessageId"] = json!(p);
        }
        out.push(ev("TOOL_CALL_START", ts, start));
        let input = if data["input"].is_null() { json!({}) } else { data["input"].clone() };
        out.push(ev("TOOL_CALL_ARGS", ts, json!({ "toolCallId": call, "delta": input.to_string() })));
        out.push(ev("TOOL_CALL_END", ts, json!({ "toolCallId": call })));
    }

    /// Closes what is open (text, reasoning, steps) before a terminal event.
    fn close_all(&mut self, ts: i64, out: &mut Vec<Value>) {
        self.close_text(ts, out);
        self.close_reasoning(ts, out);
        for s in self.steps.iter().rev() {
            out.push(ev("STEP_FINISHED", ts, json!({ "stepName": s })));
        }
    }

    fn usage_field(&self) -> Option<Value> {
        self.usage.map(|(i, o)| json!([{ "inputTokens": i, "outputTokens": o, "totalTokens": i + o }]))
    }

    fn surface_requested(&mut self, version: u64, ts: i64, data: &Value, mut out: Vec<Value>) -> Vec<Value> {
        let sid = data["surfaceId"].as_str().unwrap_or("surface").to_string();
        let spec = &data["payload"];
        let kind = data["kind"].as_str().or(spec["kind"].as_str()).unwrap_or("confirmation");
        let mut row = json!({ "status": "pending", "kind": kind, "persist": data["persist"], "stageId": data["stageId"],
                              "requestedAt": data["requestedAt"], "timeoutAt": data["timeoutAt"],
                              "interruptId": format!("{sid}@{version}") });
        for k in ["prompt", "schema"] {
            if !spec[k].is_null() {
                row[k] = spec[k].clone();
            }
        }
        self.set(&["genui", &sid], row);
        self.set(&["status"], json!("awaiting-input"));
        let mut interrupt = json!({ "id": format!("{sid}@{version}"), "reason": format!("genui:{kind}"),
            "metadata": { "od": { "surfaceId": sid, "kind": kind, "persist": data["persist"], "stageId": data["stageId"],
                                  "requestedAt": data["requestedAt"], "timeoutAt": data["timeoutAt"],
                                  "onTimeout": data["onTimeout"], "spec": spec } } });
        if let Some(p) = spec["prompt"].as_str() {
            interrupt["message"] = json!(p);
        }
        if spec["schema"].is_object() {
            interrupt["responseSchema"] = spec["schema"].clone();
        }
        if let Some(t) = data["timeoutAt"].as_i64().filter(|t| *t > 0) {
            interrupt["expiresAt"] = json!(iso8601(t));
        }
        strip_nulls(&mut interrupt);
        self.pending.insert(sid);
        out.push(custom(ts, "genui_surface_request", data));
        self.flush(ts, &mut out);
        self.close_all(ts, &mut out);
        let mut fin = json!({ "threadId": self.thread_id, "runId": self.run_id,
                              "outcome": { "type": "interrupt", "interrupts": [interrupt] } });
        if let Some(u) = self.usage_field() {
            fin["usage"] = u;
        }
        out.push(ev("RUN_FINISHED", ts, fin));
        out.iter_mut().for_each(strip_nulls);
        self.open = false;
        self.text = None;
        out
    }

    fn surface_answered(&mut self, ts: i64, name: &str, data: &Value, out: &mut Vec<Value>) {
        let sid = data["surfaceId"].as_str().unwrap_or("surface").to_string();
        self.pending.remove(&sid);
        if name == "genui_surface_response" {
            self.set(&["genui", &sid, "status"], json!("resolved"));
            for k in ["value", "respondedBy", "respondedAt"] {
                self.set(&["genui", &sid, k], data[k].clone());
            }
        } else {
            self.set(&["genui", &sid, "status"], json!("timeout"));
            self.set(&["genui", &sid, "resolution"], data["resolution"].clone());
        }
        if self.pending.is_empty() && self.state["status"] == "awaiting-input" {
            self.set(&["status"], json!("running"));
        }
        out.push(custom(ts, name, data));
    }

    fn end(&mut self, ts: i64, data: &Value, mut out: Vec<Value>) -> Vec<Value> {
        let status = data["status"].as_str().unwrap_or("failed");
        self.set(&["status"], json!(status));
        self.remove("pipeline", "current");
        self.flush(ts, &mut out);
        self.close_all(ts, &mut out);
        let usage = self.usage_field();
        let mut terminal = match status {
            "succeeded" => ev(
                "RUN_FINISHED",
                ts,
                json!({ "threadId": self.thread_id, "runId": self.run_id, "outcome": { "type": "success" },
                        "result": { "status": status, "artifactCount": data["artifactCount"] } }),
            ),
            "canceled" => ev(
                "RUN_FINISHED",
                ts,
                json!({ "threadId": self.thread_id, "runId": self.run_id, "outcome": { "type": "cancelled" } }),
            ),
            _ => {
                let message = data["failureDetail"].as_str().filter(|m| !m.is_empty()).unwrap_or("the run failed");
                ev("RUN_ERROR", ts, json!({ "message": message, "code": data["failureCategory"] }))
            }
        };
        if let Some(u) = usage {
            terminal["usage"] = u;
        }
        out.push(terminal);
        out.iter_mut().for_each(strip_nulls);
        self.finished = true;
        self.open = false;
        self.steps.clear();
        out
    }
}

/// CUSTOM `od.<name>` carrying the wire payload.
fn custom(ts: i64, name: &str, data: &Value) -> Value {
    let value = if data.is_null() { json!({}) } else { data.clone() };
    ev("CUSTOM", ts, json!({ "name": format!("od.{name}"), "value": value }))
}

/// A tool result's content as AG-UI accepts it: a string; text blocks joined; anything else as JSON.
fn tool_content(c: &Value) -> Value {
    match c {
        Value::String(s) => json!(s),
        Value::Array(parts) if parts.iter().all(|p| p["type"] == "text" && p["text"].is_string()) => {
            json!(parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(""))
        }
        Value::Null => json!(""),
        other => json!(other.to_string()),
    }
}
