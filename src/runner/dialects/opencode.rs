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

use super::{agent, artifacts_of, delta, initialized, raw, str_of, tool_result, tool_use, u64_of, usage, Parsed};
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
                if let Some(t) = part.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                    out.push(agent(delta(kind == "reasoning", t)));
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
            out.push(agent(tool_use(id, name, input)));
        }
        let status = str_of(state, "status");
        if matches!(status, "completed" | "error") {
            let failed = status == "error";
            self.files.on_tool_result(id, failed);
            let content = if failed { state.get("error") } else { state.get("output") };
            out.push(agent(tool_result(id, content.cloned().unwrap_or_else(|| json!("")), failed)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{Parsed, Protocol};

    #[test]
    fn recorded_opencode_session() {
        let stream = recorded("opencode");
        for protocol in [Protocol::OpencodeJson, Protocol::Auto] {
            let (all, p) = parse_all(protocol, &stream);
            assert_eq!(p.protocol(), Protocol::OpencodeJson);
            assert_eq!(p.session_id(), Some("ses_db15a6340ffezZSyjyMU8KCGdB"));
            assert_eq!(payloads(&all, "status").len(), 1, "initialized once");
            assert_eq!(text(&all), "I wrote index.html for you.");
            let uses = payloads(&all, "tool_use");
            assert_eq!((uses.len(), uses[0]["name"].as_str()), (1, Some("write")));
            assert_eq!(payloads(&all, "tool_result")[0]["content"], "Wrote file successfully.");
            let arts = artifacts(&all);
            assert_eq!(arts.len(), 1);
            assert!(arts[0].path.ends_with("/index.html"));
            let u = payloads(&all, "usage");
            assert_eq!(u.len(), 2, "one per step");
            assert_eq!((u[1]["usage"]["output_tokens"].as_u64(), u[1]["costUsd"].as_u64()), (Some(20), Some(0)));
            assert_eq!(u[1]["stopReason"], "stop");
            assert!(payloads(&all, "raw").is_empty());
            assert!(!all.iter().any(|p| matches!(p, Parsed::Error(_))));
        }
    }

    #[test]
    fn a_running_tool_then_its_error_and_a_session_error() {
        let lines = [
            r#"{"type":"tool_use","sessionID":"s","part":{"tool":"edit","callID":"c1","state":{"status":"running","input":{"filePath":"/p/a.css"}}}}"#,
            r#"{"type":"tool_use","sessionID":"s","part":{"tool":"edit","callID":"c1","state":{"status":"error","input":{"filePath":"/p/a.css"},"error":"no match"}}}"#,
            r#"{"type":"reasoning","sessionID":"s","part":{"type":"reasoning","text":"hmm"}}"#,
            r#"{"type":"error","sessionID":"s","error":{"name":"APIError","data":{"message":"rate limited"}}}"#,
        ]
        .join("\n");
        let (all, _) = parse_all(Protocol::OpencodeJson, &lines);
        assert_eq!(payloads(&all, "tool_use").len(), 1, "announced once");
        assert_eq!(payloads(&all, "tool_result")[0]["isError"], true);
        assert!(artifacts(&all).is_empty());
        assert_eq!(payloads(&all, "thinking_delta")[0]["delta"], "hmm");
        assert_eq!(all.last(), Some(&Parsed::Error("rate limited".into())));
    }
}
