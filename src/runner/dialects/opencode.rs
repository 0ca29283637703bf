//! OpenCode's `run --format json`: one event per line, tagged by `type`, each with the
//! `sessionID` and a `part` (OpenCode's message part).
//!
//! - the first line naming a `sessionID` → status `initialized` with `sessionId` (what
//!   `--session` takes);
//! - `text` (`part.text`, a whole text part) → `text_delta`; `reasoning` → `thinking_delta`;
//! - `tool_use` (`part.callID`, `part.tool`, `part.state` with `status`, `input`, `output` or
//!   `error`) → `tool_use`, and once its state is `completed` or `error` a `tool_result` too. A
//!   completed `write` or `edit` (its `input.filePath`) becomes an artifact at the end;
//! - `step_start` → nothing; `step_finish` (`part.tokens.input`/`output`, `part.cost`) → `usage`
//!   with `costUsd`;
//! - `error` (`error.data.message` or `error.name`) → an agent error.
//!
//! OpenCode has no closing line: its exit status says how the run ended.

use super::{agent, artifacts_of, initialized, raw, str_of, u64_of, usage, Parsed};
use crate::runner::file_tools::FileTools;
use serde_json::{json, Map, Value};
use std::collections::HashSet;

/// Most tool calls remembered as announced.
const MAX_CALLS: usize = 4096;

/// The state of an OpenCode stream.
#[derive(Debug, Default)]
pub(super) struct Opencode {
    session: bool,
    announced: HashSet<String>,
    files: FileTools,
}

impl Opencode {
    pub(super) fn finish(&mut self) -> Vec<Parsed> {
        artifacts_of(&mut self.files)
    }

    pub(super) fn line(&mut self, obj: &Map<String, Value>, line: &str) -> Vec<Parsed> {
        let mut out = Vec::new();
        if !self.session {
            if let Some(s) = obj.get("sessionID").filter(|s| s.is_string()) {
                self.session = true;
                out.push(initialized(None, Some(s)));
            }
        }
        let part = obj.get("part").unwrap_or(&Value::Null);
        match obj.get("type").and_then(Value::as_str).unwrap_or("") {
            kind @ ("text" | "reasoning") => {
                let delta = if kind == "text" { "text_delta" } else { "thinking_delta" };
                if let Some(t) = part.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                    out.push(agent(json!({"type": delta, "delta": t})));
                }
            }
            "tool_use" => out.extend(self.tool(part)),
            "step_start" => {}
            "step_finish" => {
                let tokens = part.get("tokens").unwrap_or(&Value::Null);
                out.push(usage(
                    u64_of(tokens, "input"),
                    u64_of(tokens, "output"),
                    &[("costUsd", part.get("cost")), ("stopReason", part.get("reason"))],
                ));
            }
            "error" => {
                let e = obj.get("error").unwrap_or(&Value::Null);
                let msg = e.pointer("/data/message").and_then(Value::as_str).filter(|m| !m.trim().is_empty());
                let msg = msg.or_else(|| e.get("name").and_then(Value::as_str)).unwrap_or("OpenCode reported an error");
                out.push(Parsed::Error(msg.to_string()));
            }
            _ => out.push(raw(line)),
        }
        out
    }

    fn tool(&mut self, part: &Value) -> Vec<Parsed> {
        let id = part.get("callID").or_else(|| part.get("id")).and_then(Value::as_str).unwrap_or("");
        let name = str_of(part, "tool");
        let state = part.get("state").unwrap_or(&Value::Null);
        let input = state.get("input").cloned().unwrap_or_else(|| json!({}));
        let mut out = Vec::new();
        if !self.announced.contains(id) {
            if self.announced.len() < MAX_CALLS {
                self.announced.insert(id.to_string());
            }
            self.files.on_call(id, name, &input);
            out.push(agent(json!({"type": "tool_use", "id": id, "name": name, "input": input})));
        }
        let status = str_of(state, "status");
        if matches!(status, "completed" | "error") {
            let failed = status == "error";
            self.files.on_tool_result(id, failed);
            let content = if failed { state.get("error") } else { state.get("output") };
            out.push(agent(json!({
                "type": "tool_result",
                "toolUseId": id,
                "content": content.cloned().unwrap_or_else(|| json!("")),
                "isError": failed,
            })));
        }
        out
    }
}
