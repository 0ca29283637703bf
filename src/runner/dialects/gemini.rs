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

use super::{
    agent, artifacts_of, delta, initialized, raw, status, str_of, tool_result, tool_use, u64_of, usage, Parsed,
};
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
                Some(t) if !t.is_empty() => vec![agent(delta(false, t))],
                _ => Vec::new(),
            },
            "message" => Vec::new(),
            "thought" | "thinking" => match obj.get("content").or_else(|| obj.get("text")).and_then(Value::as_str) {
                Some(t) if !t.is_empty() => vec![agent(delta(true, t))],
                _ => Vec::new(),
            },
            "tool_use" => {
                let (id, name) = (str_of(&v, "tool_id"), str_of(&v, "tool_name"));
                let input = obj.get("parameters").cloned().unwrap_or_else(|| json!({}));
                self.files.on_call(id, name, &input);
                vec![agent(tool_use(id, name, input))]
            }
            "tool_result" => {
                let id = str_of(&v, "tool_id");
                let failed = str_of(&v, "status") != "success";
                self.files.on_tool_result(id, failed);
                let content = match obj.get("error").filter(|e| !e.is_null()) {
                    Some(e) if failed => e.get("message").cloned().unwrap_or_else(|| e.clone()),
                    _ => obj.get("output").cloned().unwrap_or_else(|| json!("")),
                };
                vec![agent(tool_result(id, content, failed))]
            }
            "error" => {
                let label = if str_of(&v, "severity") == "warning" { "warning" } else { "error" };
                vec![agent(status(label, Some(json!(str_of(&v, "message")))))]
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

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{Parsed, Protocol};

    #[test]
    fn recorded_gemini_cli_session() {
        let stream = recorded("gemini");
        for protocol in [Protocol::GeminiStreamJson, Protocol::Auto] {
            let (all, p) = parse_all(protocol, &stream);
            assert_eq!(p.protocol(), Protocol::GeminiStreamJson);
            assert_eq!(p.session_id(), Some("a5ae1205-fd1a-4ec7-9496-ef6b0a2747cd"));
            assert_eq!(payloads(&all, "status")[0]["model"], "fake-model");
            assert_eq!(text(&all), "I wrote index.html for you.", "the echoed prompt is not text");
            let uses = payloads(&all, "tool_use");
            assert_eq!((uses.len(), uses[0]["name"].as_str()), (1, Some("write_file")));
            assert_eq!(payloads(&all, "tool_result")[0]["isError"], false);
            let arts: Vec<&str> = artifacts(&all).iter().map(|a| a.path.as_str()).collect();
            assert_eq!(arts, ["index.html"]);
            let u = payloads(&all, "usage")[0];
            assert_eq!((u["usage"]["input_tokens"].as_u64(), u["durationMs"].as_u64()), (Some(200), Some(1154)));
            assert!(payloads(&all, "raw").is_empty());
            assert_eq!(all.last(), Some(&Parsed::Done));
        }
    }

    #[test]
    fn failed_tools_warnings_and_a_failed_result() {
        let lines = [
            r#"{"type":"tool_use","tool_name":"write_file","tool_id":"t1","parameters":{"file_path":"/p/x.html"}}"#,
            r#"{"type":"tool_result","tool_id":"t1","status":"error","error":{"type":"invalid","message":"denied"}}"#,
            r#"{"type":"error","severity":"warning","message":"loop detected"}"#,
            r#"{"type":"result","status":"error","error":{"type":"api","message":"quota exceeded"},"stats":{}}"#,
        ]
        .join("\n");
        let (all, _) = parse_all(Protocol::GeminiStreamJson, &lines);
        assert!(artifacts(&all).is_empty(), "a failed write is no artifact");
        assert_eq!(payloads(&all, "tool_result")[0]["content"], "denied");
        assert_eq!(payloads(&all, "status")[0]["label"], "warning");
        assert_eq!(all.last(), Some(&Parsed::Error("quota exceeded".into())));
    }
}
