//! GitHub Copilot CLI's `--output-format json` (JSONL): one session event per line, `{"type",
//! "data", "id", "timestamp"}`.
//!
//! - `session.start` (`data.sessionId`, `data.selectedModel`) → status `initialized`;
//! - `assistant.message_delta` (`data.deltaContent`) → `text_delta`, and the whole
//!   `assistant.message` (`data.content`) only when no delta of it came; `assistant.reasoning_delta`
//!   → `thinking_delta`; `assistant.message`'s `data.toolRequests` are announced by the
//!   `tool.execution_start` that follows;
//! - `tool.execution_start` (`toolCallId`, `toolName`, `arguments`) → `tool_use`;
//!   `tool.execution_complete` (`toolCallId`, `success`, `result` or `error`) → `tool_result`. A
//!   successful `create` or `edit` (its `arguments.path`) becomes an artifact at the end;
//! - `assistant.usage` (`inputTokens`, `outputTokens`, `cost`) → `usage`;
//! - `session.error` (`message`) → an agent error.

use super::{agent, artifacts_of, initialized, raw, str_of, u64_of, usage, Parsed};
use crate::runner::file_tools::FileTools;
use serde_json::{json, Map, Value};

/// The state of a Copilot stream.
#[derive(Debug, Default)]
pub(super) struct Copilot {
    /// The current message's text already came as deltas.
    streamed: bool,
    files: FileTools,
}

impl Copilot {
    pub(super) fn finish(&mut self) -> Vec<Parsed> {
        artifacts_of(&mut self.files)
    }

    pub(super) fn line(&mut self, obj: &Map<String, Value>, line: &str) -> Vec<Parsed> {
        let data = obj.get("data").unwrap_or(&Value::Null);
        let text = |kind: &str, field: &str| match data.get(field).and_then(Value::as_str) {
            Some(t) if !t.is_empty() => vec![agent(json!({"type": kind, "delta": t}))],
            _ => Vec::new(),
        };
        match obj.get("type").and_then(Value::as_str).unwrap_or("") {
            "session.start" => vec![initialized(data.get("selectedModel"), data.get("sessionId"))],
            "assistant.message_delta" => {
                self.streamed = true;
                text("text_delta", "deltaContent")
            }
            "assistant.message" => {
                let out = if self.streamed { Vec::new() } else { text("text_delta", "content") };
                self.streamed = false;
                out
            }
            "assistant.reasoning_delta" => text("thinking_delta", "deltaContent"),
            "tool.execution_start" => {
                let (id, name) = (str_of(data, "toolCallId"), str_of(data, "toolName"));
                let input = data.get("arguments").cloned().unwrap_or_else(|| json!({}));
                self.files.on_call(id, name, &input);
                vec![agent(json!({"type": "tool_use", "id": id, "name": name, "input": input}))]
            }
            "tool.execution_complete" => {
                let id = str_of(data, "toolCallId");
                let ok = data.get("success").and_then(Value::as_bool).unwrap_or(false);
                self.files.on_tool_result(id, !ok);
                let content = if ok { data.get("result") } else { data.get("error") };
                vec![agent(json!({
                    "type": "tool_result",
                    "toolUseId": id,
                    "content": content.cloned().unwrap_or_else(|| json!("")),
                    "isError": !ok,
                }))]
            }
            "assistant.usage" => vec![usage(
                u64_of(data, "inputTokens"),
                u64_of(data, "outputTokens"),
                &[("costUsd", data.get("cost")), ("durationMs", data.get("duration"))],
            )],
            "session.error" => {
                let msg = Some(str_of(data, "message")).filter(|m| !m.trim().is_empty());
                vec![Parsed::Error(msg.unwrap_or("Copilot reported an error").to_string())]
            }
            _ => vec![raw(line)],
        }
    }
}
