//! GitHub Copilot CLI's `--output-format json` (JSONL): one session event per line, `{"type",
//! "data", "id", "timestamp", "ephemeral"?}`, and a closing `result` line.
//!
//! - `assistant.message_delta` (`data.messageId`, `data.deltaContent`) → `text_delta`, and the
//!   whole `assistant.message` (`data.content`) only when no delta of that message came;
//!   `assistant.reasoning_delta` / `assistant.reasoning` likewise → `thinking_delta`;
//! - `tool.execution_start` (`toolCallId`, `toolName`, `arguments`) → `tool_use`;
//!   `tool.execution_complete` (`toolCallId`, `success`, `result.content` or `error`) →
//!   `tool_result`. Its `fileEdits` (`path`, `kind` `create` | `edit` | …; not `delete`) are the
//!   files written: they become artifacts at the end;
//! - `assistant.usage` (`inputTokens`, `outputTokens`, `cost`) → `usage`;
//! - `session.error` (`message`) → an agent error;
//! - `result` (`sessionId`, `exitCode`, `usage.sessionDurationMs`) → status `initialized` with
//!   `sessionId` (what `--resume` takes; Copilot names it only here), a `usage` with `durationMs`,
//!   then done when `exitCode` is 0 or an agent error otherwise.
//!
//! Other lines marked `ephemeral` (model-call bookkeeping, skills and MCP servers loaded) and the
//! echoed `user.message` are dropped; other unknown lines are kept raw.

use super::{agent, artifacts_of, initialized, raw, str_of, u64_of, usage, Parsed};
use crate::runner::file_tools::FileTools;
use serde_json::{json, Map, Value};

/// The state of a Copilot stream.
#[derive(Debug, Default)]
pub(super) struct Copilot {
    /// The message whose text (and reasoning) came as deltas.
    streamed: (String, String),
    /// Usage was reported by `assistant.usage` lines (the `result` then adds only the duration).
    usage_seen: bool,
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
        let message = str_of(data, "messageId").to_string();
        match obj.get("type").and_then(Value::as_str).unwrap_or("") {
            "assistant.message_delta" => {
                self.streamed.0 = message;
                text("text_delta", "deltaContent")
            }
            "assistant.reasoning_delta" => {
                self.streamed.1 = message;
                text("thinking_delta", "deltaContent")
            }
            "assistant.message" if self.streamed.0 != message || message.is_empty() => text("text_delta", "content"),
            "assistant.reasoning" if self.streamed.1 != message || message.is_empty() => {
                text("thinking_delta", "content")
            }
            "assistant.message" | "assistant.reasoning" => Vec::new(),
            "tool.execution_start" => {
                let (id, name) = (str_of(data, "toolCallId"), str_of(data, "toolName"));
                let input = data.get("arguments").cloned().unwrap_or_else(|| json!({}));
                vec![agent(json!({"type": "tool_use", "id": id, "name": name, "input": input}))]
            }
            "tool.execution_complete" => {
                let id = str_of(data, "toolCallId");
                let ok = data.get("success").and_then(Value::as_bool).unwrap_or(false);
                if ok {
                    for edit in data.get("fileEdits").and_then(Value::as_array).into_iter().flatten() {
                        if str_of(edit, "kind") != "delete" {
                            self.files.on_written(str_of(edit, "path"));
                        }
                    }
                }
                let content = if ok {
                    data.get("result").map(|r| r.get("content").unwrap_or(r))
                } else {
                    data.get("error")
                };
                vec![agent(json!({
                    "type": "tool_result",
                    "toolUseId": id,
                    "content": content.cloned().unwrap_or_else(|| json!("")),
                    "isError": !ok,
                }))]
            }
            "assistant.usage" => {
                self.usage_seen = true;
                vec![usage(
                    u64_of(data, "inputTokens"),
                    u64_of(data, "outputTokens"),
                    &[("costUsd", data.get("cost")), ("durationMs", data.get("duration"))],
                )]
            }
            "session.error" => {
                let msg = Some(str_of(data, "message")).filter(|m| !m.trim().is_empty());
                vec![Parsed::Error(msg.unwrap_or("Copilot reported an error").to_string())]
            }
            "result" => {
                let u = obj.get("usage").unwrap_or(&Value::Null);
                let mut out = vec![initialized(None, obj.get("sessionId"))];
                if !self.usage_seen {
                    out.push(usage(0, 0, &[("durationMs", u.get("sessionDurationMs"))]));
                }
                out.extend(self.finish());
                match obj.get("exitCode").and_then(Value::as_i64) {
                    Some(0) | None => out.push(Parsed::Done),
                    Some(code) => out.push(Parsed::Error(format!("Copilot ended its session with exit code {code}"))),
                }
                out
            }
            "user.message" => Vec::new(),
            _ if obj.get("ephemeral").and_then(Value::as_bool) == Some(true) => Vec::new(),
            _ => vec![raw(line)],
        }
    }
}
