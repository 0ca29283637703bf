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

use super::{agent, artifacts_of, delta, initialized, raw, str_of, tool_result, tool_use, u64_of, usage, Parsed};
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
            Some(t) if !t.is_empty() => vec![agent(delta(kind == "thinking_delta", t))],
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
                vec![agent(tool_use(id, name, input))]
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
                let content =
                    if ok { data.get("result").map(|r| r.get("content").unwrap_or(r)) } else { data.get("error") };
                vec![agent(tool_result(id, content.cloned().unwrap_or_else(|| json!("")), !ok))]
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

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{Parsed, Protocol};

    #[test]
    fn recorded_copilot_session() {
        let (all, p) = parse_all(Protocol::CopilotJson, &recorded("copilot"));
        assert_eq!(p.session_id(), Some("c27782dc-aea1-4abb-8ba0-d54523d4c8b5"));
        assert_eq!(text(&all), "I wrote index.html for you.", "streamed once, not repeated by the whole message");
        let uses = payloads(&all, "tool_use");
        assert_eq!((uses.len(), uses[0]["name"].as_str()), (1, Some("create")));
        let r = payloads(&all, "tool_result")[0];
        assert!(r["content"].as_str().unwrap().starts_with("Created file "), "{r}");
        let arts = artifacts(&all);
        assert_eq!(arts.len(), 1, "from fileEdits");
        assert!(arts[0].path.ends_with("/index.html"));
        assert_eq!(payloads(&all, "usage")[0]["durationMs"], 4323);
        let raw: Vec<&str> = payloads(&all, "raw").iter().map(|r| r["line"].as_str().unwrap()).collect();
        assert!(raw.iter().all(|l| l.contains("assistant.turn_")), "only turn marks stay raw: {raw:?}");
        assert_eq!(all.last(), Some(&Parsed::Done));
    }

    #[test]
    fn a_failed_tool_an_error_and_a_failed_exit() {
        let lines = [
            r#"{"type":"tool.execution_start","data":{"toolCallId":"t1","toolName":"edit","arguments":{"path":"/p/a.html"}}}"#,
            r#"{"type":"tool.execution_complete","data":{"toolCallId":"t1","success":false,"error":{"message":"no match"},"fileEdits":[{"path":"/p/a.html","kind":"edit"}]}}"#,
            r#"{"type":"assistant.usage","data":{"inputTokens":7,"outputTokens":3,"cost":0.5}}"#,
            r#"{"type":"session.error","data":{"message":"provider unreachable"}}"#,
            r#"{"type":"result","sessionId":"s1","exitCode":1,"usage":{"sessionDurationMs":10}}"#,
        ]
        .join("\n");
        let (all, p) = parse_all(Protocol::CopilotJson, &lines);
        assert!(artifacts(&all).is_empty());
        assert_eq!(payloads(&all, "tool_result")[0]["isError"], true);
        let u = payloads(&all, "usage");
        assert_eq!((u.len(), u[0]["costUsd"].as_f64()), (1, Some(0.5)), "the result adds no second usage");
        assert!(all.contains(&Parsed::Error("provider unreachable".into())));
        assert!(matches!(all.last(), Some(Parsed::Error(m)) if m.contains("exit code 1")));
        assert_eq!(p.session_id(), Some("s1"));
    }
}
