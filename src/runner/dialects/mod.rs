//! Agent output dialects: turning an agent's stdout, one line at a time, into [`AgentEvent`]s.
//! Pure (no I/O); [`super::exec`] feeds it the lines of the agent process. One file per dialect:
//!
//! | `protocol` | speaker | file |
//! |---|---|---|
//! | `od` | od's own ND-JSON protocol | [`od`] |
//! | `claude-stream-json` (or `stream-json`) | Claude Code `-p --output-format stream-json`, and what speaks it too (Qwen Code) | [`claude`] |
//! | `codex-json` | Codex `exec --json` | [`codex`] |
//! | `gemini-stream-json` | Gemini CLI `--output-format stream-json` | [`gemini`] |
//! | `opencode-json` | OpenCode `run --format json` | [`opencode`] |
//! | `copilot-json` | GitHub Copilot CLI `--output-format json` | [`copilot`] |
//! | `cursor-stream-json` | Cursor Agent `--output-format stream-json` (Claude's stream plus `tool_call` lines) | [`cursor`] |
//!
//! `auto` (the default) lets the first stdout line that is a JSON object decide: a `type` of
//! `system`, `assistant`, `user`, `result` or `stream_event` means Claude Code, `thread.started`
//! or `turn.started` Codex, `init` (with a `session_id`) Gemini CLI, `step_start` OpenCode, and
//! anything else od's own protocol; lines that are not JSON objects never decide.
//!
//! Every dialect maps onto the same agent events: `text_delta`, `thinking_delta`, `tool_use`,
//! `tool_result`, `usage` (with `costUsd` when the agent says it), a `status` `initialized`
//! carrying the agent's `sessionId` (and `model`) as soon as the stream names them — what a native
//! resume needs, also kept in [`LineParser::session_id`] — artifacts for the files the agent wrote
//! through its file tools ([`super::file_tools`]), and an error for a failed turn.

mod claude;
mod codex;
mod copilot;
mod cursor;
mod gemini;
mod od;
mod opencode;

use crate::runner::agent::AgentEvent;
use serde_json::{json, Map, Value};

pub use crate::agents::options::{Protocol, PROTOCOL_NAMES};

impl Protocol {
    /// What the first JSON object line of an `auto` stream says the agent speaks.
    fn detect(obj: &Map<String, Value>) -> Protocol {
        match obj.get("type").and_then(Value::as_str) {
            Some("system" | "assistant" | "user" | "result" | "stream_event") => Protocol::ClaudeStreamJson,
            Some("thread.started" | "turn.started") => Protocol::CodexJson,
            Some("init") if obj.get("session_id").is_some() => Protocol::GeminiStreamJson,
            Some("step_start") => Protocol::OpencodeJson,
            _ => Protocol::Od,
        }
    }
}

/// What one stdout line meant.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// Something to record.
    Event(AgentEvent),
    /// The agent reported a failure (or broke the protocol).
    Error(String),
    /// The agent said it finished.
    Done,
}

/// The per-dialect state of a [`LineParser`].
#[derive(Debug)]
enum State {
    Undecided,
    Od,
    Claude(claude::Claude),
    Codex(codex::Codex),
    Gemini(gemini::Gemini),
    Opencode(opencode::Opencode),
    Copilot(copilot::Copilot),
}

impl State {
    fn of(protocol: Protocol) -> State {
        match protocol {
            Protocol::Auto => State::Undecided,
            Protocol::Od => State::Od,
            Protocol::ClaudeStreamJson => State::Claude(claude::Claude::default()),
            Protocol::CursorStreamJson => State::Claude(cursor::parser()),
            Protocol::CodexJson => State::Codex(codex::Codex::default()),
            Protocol::GeminiStreamJson => State::Gemini(gemini::Gemini::default()),
            Protocol::OpencodeJson => State::Opencode(opencode::Opencode::default()),
            Protocol::CopilotJson => State::Copilot(copilot::Copilot::default()),
        }
    }
}

/// Turns stdout lines into [`Parsed`] items, keeping the little state the dialects need.
#[derive(Debug)]
pub struct LineParser {
    protocol: Protocol,
    state: State,
    /// The agent's session id, once its stream named it.
    session_id: Option<String>,
}

impl LineParser {
    pub fn new(protocol: Protocol) -> LineParser {
        LineParser { protocol, state: State::of(protocol), session_id: None }
    }

    /// The protocol in use (still `Auto` until a JSON object line decided it).
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The agent's own session id (for a native resume), once its stream named it.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// The output ended: what is still owed (the artifacts of file-tool calls not yet reported).
    pub fn finish(&mut self) -> Vec<Parsed> {
        match &mut self.state {
            State::Undecided | State::Od => Vec::new(),
            State::Claude(c) => c.finish(),
            State::Codex(c) => c.finish(),
            State::Gemini(g) => g.finish(),
            State::Opencode(o) => o.finish(),
            State::Copilot(c) => c.finish(),
        }
    }

    /// Parses one line (without its newline).
    pub fn feed(&mut self, line: &str) -> Vec<Parsed> {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            return Vec::new();
        }
        let obj = match serde_json::from_str::<Value>(trimmed) {
            Ok(Value::Object(obj)) => obj,
            _ => return vec![raw(line)],
        };
        if let State::Undecided = self.state {
            self.protocol = Protocol::detect(&obj);
            self.state = State::of(self.protocol);
        }
        let out = match &mut self.state {
            State::Undecided | State::Od => vec![od::line(&obj, line)],
            State::Claude(c) => c.line(&obj, line),
            State::Codex(c) => c.line(&obj, line),
            State::Gemini(g) => g.line(&obj, line),
            State::Opencode(o) => o.line(&obj, line),
            State::Copilot(c) => c.line(&obj, line),
        };
        for p in &out {
            if let Parsed::Event(AgentEvent::Output { payload, .. }) = p {
                if let Some(id) = payload.get("sessionId").and_then(Value::as_str) {
                    self.session_id = Some(id.to_string());
                }
            }
        }
        out
    }
}

// ---- The one event mapper: the shapes every dialect (and ACP's session updates) maps onto ----

/// `text_delta` (a piece of the answer) or, with `thinking`, `thinking_delta`.
pub(crate) fn delta(thinking: bool, text: &str) -> Value {
    json!({"type": if thinking { "thinking_delta" } else { "text_delta" }, "delta": text})
}

/// `tool_use`: the agent calls `name` with `input`.
pub(crate) fn tool_use(id: impl serde::Serialize, name: impl serde::Serialize, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

/// `tool_result`: what the call `id` gave back.
pub(crate) fn tool_result(id: impl serde::Serialize, content: Value, is_error: bool) -> Value {
    json!({"type": "tool_result", "toolUseId": id, "content": content, "isError": is_error})
}

/// A `status` with its `label`, and `detail` when there is one.
pub(crate) fn status(label: &str, detail: Option<Value>) -> Value {
    let mut payload = json!({"type": "status", "label": label});
    if let Some(d) = detail {
        payload["detail"] = d;
    }
    payload
}

/// An `agent` output event.
pub(crate) fn agent(payload: Value) -> Parsed {
    Parsed::Event(AgentEvent::Output { channel: "agent".to_string(), payload })
}

/// The artifacts of the file-tool calls not yet reported.
pub(crate) fn artifacts_of(tools: &mut crate::runner::file_tools::FileTools) -> Vec<Parsed> {
    tools.take().into_iter().map(|d| Parsed::Event(AgentEvent::Artifact(d))).collect()
}

/// A line kept as it is.
pub(crate) fn raw(line: &str) -> Parsed {
    agent(json!({"type": "raw", "line": line}))
}

/// The `initialized` status: the agent's model and session id, each when known.
pub(crate) fn initialized(model: Option<&Value>, session: Option<&Value>) -> Parsed {
    let mut payload = status("initialized", None);
    if let Some(model) = model.filter(|m| !m.is_null()) {
        payload["model"] = model.clone();
    }
    if let Some(s) = session.and_then(Value::as_str).filter(|s| !s.is_empty()) {
        payload["sessionId"] = json!(s);
    }
    agent(payload)
}

/// A `usage` event; `input`/`output` tokens, then optional extra fields.
pub(crate) fn usage(input: u64, output: u64, extra: &[(&str, Option<&Value>)]) -> Parsed {
    let mut payload = json!({"type": "usage", "usage": {"input_tokens": input, "output_tokens": output}});
    for (k, v) in extra {
        if let Some(v) = v.filter(|v| !v.is_null()) {
            payload[*k] = v.clone();
        }
    }
    agent(payload)
}

/// `obj[key]` as a string, or `""`.
pub(crate) fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `v[key]` as a whole number, or 0.
pub(crate) fn u64_of(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// (artifactKind, renderKind) guessed from a path's extension.
pub(crate) fn kinds_for(path: &str) -> (&'static str, &'static str) {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "html" => ("html", "html"),
        "md" => ("markdown", "markdown"),
        "png" | "jpg" | "jpeg" | "gif" | "webp" | "svg" => ("image", "image"),
        _ => ("file", "text"),
    }
}

#[cfg(test)]
pub(crate) mod test_support;

#[cfg(test)]
mod tests;
