//! Gemini CLI's `--output-format stream-json`: one event per line, tagged by `type`.
//!
//! - `init` (`session_id`, `model`) → status `initialized` with `sessionId` (what `--resume` takes);
//! - `message` with `role` `assistant` (`content`, a delta when `delta` is true) → `text_delta`;
//!   `role` `user` (the prompt echoed) → nothing;
//! - `tool_use` (`tool_name`, `tool_id`, `parameters`) → `tool_use`; `tool_result` (`tool_id`,
//!   `status` `success` | `error`, `output` or `error.message`) → `tool_result`. A successful
//!   `write_file` or `replace` (its `parameters.file_path`) becomes an artifact at the end;
//! - `error` (`severity`, `message`) → status `warning` or `error` (Gemini ends a failed turn
//!   with a failed `result` or its exit status);
//! - `result` (`status`, `stats` with `input_tokens`, `output_tokens`, `duration_ms`) → `usage`,
//!   then done on `success` or an agent error otherwise.

use super::{agent, artifacts_of, initialized, raw, str_of, u64_of, usage, Parsed};
use crate::runner::file_tools::FileTools;
use serde_json::{json, Map, Value};

/// The state of a Gemini stream.
#[derive(Debug, Default)]
pub(super) struct Gemini {
    files: FileTools,
}

impl Gemini {
    pub(super) fn finish(&mut self) -> Vec<Parsed> {
        artifacts_of(&mut self.files)
    }

    pub(super) fn line(&mut self, obj: &Map<String, Value>, line: &str) -> Vec<Parsed> {
        let v = Value::Object(obj.clone());
        match str_of(&v, "type") {
            "init" => vec![initialized(obj.get("model"), obj.get("session_id"))],
            "message" if str_of(&v, "role") == "assistant" => match obj.get("content").and_then(Value::as_str) {
                Some(t) if !t.is_empty() => vec![agent(json!({"type": "text_delta", "delta": t}))],
                _ => Vec::new(),
            },
            "message" => Vec::new(),
            "thought" | "thinking" => match obj.get("content").or_else(|| obj.get("text")).and_then(Value::as_str) {
                Some(t) if !t.is_empty() => vec![agent(json!({"type": "thinking_delta", "delta": t}))],
                _ => Vec::new(),
            },
            "tool_use" => {
                let (id, name) = (str_of(&v, "tool_id"), str_of(&v, "tool_name"));
                let input = obj.get("parameters").cloned().unwrap_or_else(|| json!({}));
                self.files.on_call(id, name, &input);
                vec![agent(json!({"type": "tool_use", "id": id, "name": name, "input": input}))]
            }
            "tool_result" => {
                let id = str_of(&v, "tool_id");
                let failed = str_of(&v, "status") != "success";
                self.files.on_tool_result(id, failed);
                let content = match obj.get("error").filter(|e| !e.is_null()) {
                    Some(e) if failed => e.get("message").cloned().unwrap_or_else(|| e.clone()),
                    _ => obj.get("output").cloned().unwrap_or_else(|| json!("")),
                };
                vec![agent(json!({"type": "tool_result", "toolUseId": id, "content": content, "isError": failed}))]
            }
            "error" => {
                let label = if str_of(&v, "severity") == "warning" { "warning" } else { "error" };
                vec![agent(json!({"type": "status", "label": label, "detail": str_of(&v, "message")}))]
            }
            "result" => {
                let stats = obj.get("stats").unwrap_or(&Value::Null);
                let mut out = vec![usage(
                    u64_of(stats, "input_tokens"),
                    u64_of(stats, "output_tokens"),
                    &[("durationMs", stats.get("duration_ms"))],
                )];
                out.extend(self.finish());
                if str_of(&v, "status") == "success" {
                    out.push(Parsed::Done);
                } else {
                    let msg = obj.get("error").map(|e| str_of(e, "message")).filter(|m| !m.trim().is_empty());
                    out.push(Parsed::Error(msg.unwrap_or("the Gemini CLI turn failed").to_string()));
                }
                out
            }
            _ => vec![raw(line)],
        }
    }
}
