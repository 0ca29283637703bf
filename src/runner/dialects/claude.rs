//! Claude Code's `--output-format stream-json` (and what speaks it too: Qwen Code's stdout is the
//! same stream; Cursor Agent's adds `tool_call` and `thinking` lines, read by [`super::cursor`]).
//!
//! `system`/`init` → status `initialized` (with `model` and `sessionId`); assistant `text`/
//! `thinking`/`tool_use` blocks → `text_delta`/`thinking_delta`/`tool_use`; user `tool_result`
//! blocks → `tool_result`; `stream_event` text and thinking deltas (`--include-partial-messages`)
//! → deltas, and the complete assistant message that follows them is then not repeated; `result` →
//! `usage`, then done on success or an agent error otherwise. Files written through the file tools
//! (`Write`, `Edit`, `MultiEdit`, `NotebookEdit`, Qwen's `write_file`/`replace`/`edit`, …) become
//! artifacts at the iteration's end ([`crate::runner::file_tools`]).

use super::{agent, delta, initialized, raw, tool_result, tool_use, u64_of, usage, Parsed};
use crate::runner::file_tools::FileTools;
use serde_json::{json, Map, Value};
use std::collections::VecDeque;

/// How many recent Claude message ids remember whether their text was streamed.
const STREAMED_MEMORY: usize = 16;

/// The state of a Claude stream.
#[derive(Debug, Default)]
pub(super) struct Claude {
    /// The message the current `stream_event`s belong to (from `message_start`).
    current_message: String,
    /// Recent message ids whose (text, thinking) were already streamed as deltas.
    streamed: VecDeque<(String, bool, bool)>,
    /// The iteration's file-tool calls, reported as artifacts at its end.
    pub(super) file_tools: FileTools,
}

impl Claude {
    /// The output ended: the artifacts of file-tool calls not yet reported.
    pub(super) fn finish(&mut self) -> Vec<Parsed> {
        super::artifacts_of(&mut self.file_tools)
    }

    pub(super) fn line(&mut self, obj: &Map<String, Value>, line: &str) -> Vec<Parsed> {
        match obj.get("type").and_then(Value::as_str).unwrap_or("") {
            "system" if obj.get("subtype").and_then(Value::as_str) == Some("init") => {
                vec![initialized(obj.get("model"), obj.get("session_id"))]
            }
            "assistant" => self.assistant(obj.get("message").unwrap_or(&Value::Null)),
            "user" => self.user(obj.get("message").unwrap_or(&Value::Null)),
            "stream_event" => self.stream_event(obj.get("event").unwrap_or(&Value::Null)),
            "result" => self.result(obj),
            "tool_call" => super::cursor::tool_call(obj, &mut self.file_tools),
            "thinking" => super::cursor::thinking(obj),
            _ => vec![raw(line)],
        }
    }

    /// An assistant message: its text, thinking and tool calls (text and thinking not repeated
    /// when they came as `stream_event` deltas).
    fn assistant(&mut self, msg: &Value) -> Vec<Parsed> {
        let id = msg.get("id").and_then(Value::as_str).unwrap_or("");
        let (text_streamed, thinking_streamed) = self.was_streamed(id);
        let mut out = Vec::new();
        for block in content_blocks(msg) {
            match block.get("type").and_then(Value::as_str) {
                Some("text") if !text_streamed => {
                    if let Some(t) = block.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                        out.push(agent(delta(false, t)));
                    }
                }
                Some("thinking") if !thinking_streamed => {
                    if let Some(t) = block.get("thinking").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                        out.push(agent(delta(true, t)));
                    }
                }
                Some("tool_use") => out.push({
                    self.file_tools.on_tool_use(block);
                    agent(tool_use(
                        block.get("id").cloned().unwrap_or(Value::Null),
                        block.get("name").cloned().unwrap_or(Value::Null),
                        block.get("input").cloned().unwrap_or_else(|| json!({})),
                    ))
                }),
                _ => {}
            }
        }
        out
    }

    /// A user message: the results of the agent's tool calls.
    fn user(&mut self, msg: &Value) -> Vec<Parsed> {
        content_blocks(msg)
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            .map(|b| {
                let is_error = b.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                self.file_tools.on_tool_result(b.get("tool_use_id").and_then(Value::as_str).unwrap_or(""), is_error);
                agent(tool_result(
                    b.get("tool_use_id").cloned().unwrap_or(Value::Null),
                    b.get("content").cloned().unwrap_or_else(|| json!("")),
                    is_error,
                ))
            })
            .collect()
    }

    /// The turn's `result`: usage, the artifacts still owed, then done or an agent error.
    fn result(&mut self, obj: &Map<String, Value>) -> Vec<Parsed> {
        let tokens = obj.get("usage").unwrap_or(&Value::Null);
        let extra = [
            ("costUsd", obj.get("total_cost_usd")),
            ("durationMs", obj.get("duration_ms")),
            ("stopReason", obj.get("stop_reason")),
        ];
        let used = usage(u64_of(tokens, "input_tokens"), u64_of(tokens, "output_tokens"), &extra);
        let subtype = obj.get("subtype").and_then(Value::as_str).unwrap_or("");
        let failed = obj.get("is_error").and_then(Value::as_bool).unwrap_or(false) || subtype != "success";
        let end = if failed { Parsed::Error(result_error(obj, subtype)) } else { Parsed::Done };
        let mut out = vec![used];
        out.extend(self.finish());
        out.push(end);
        out
    }

    fn stream_event(&mut self, event: &Value) -> Vec<Parsed> {
        match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                self.current_message = event.pointer("/message/id").and_then(Value::as_str).unwrap_or("").to_string();
                Vec::new()
            }
            Some("content_block_delta") => {
                let piece = event.get("delta").unwrap_or(&Value::Null);
                let (field, is_text) = match piece.get("type").and_then(Value::as_str) {
                    Some("text_delta") => ("text", true),
                    Some("thinking_delta") => ("thinking", false),
                    _ => return Vec::new(),
                };
                let Some(text) = piece.get(field).and_then(Value::as_str) else { return Vec::new() };
                self.mark_streamed(is_text);
                vec![agent(delta(!is_text, text))]
            }
            _ => Vec::new(),
        }
    }

    fn mark_streamed(&mut self, text: bool) {
        let id = self.current_message.clone();
        let entry = match self.streamed.iter_mut().position(|(m, _, _)| *m == id) {
            Some(i) => &mut self.streamed[i],
            None => {
                if self.streamed.len() >= STREAMED_MEMORY {
                    self.streamed.pop_front();
                }
                self.streamed.push_back((id, false, false));
                let last = self.streamed.len() - 1;
                &mut self.streamed[last]
            }
        };
        if text {
            entry.1 = true;
        } else {
            entry.2 = true;
        }
    }

    /// Whether (text, thinking) of message `id` were streamed; deltas without a known message id
    /// count for any message.
    fn was_streamed(&self, id: &str) -> (bool, bool) {
        self.streamed
            .iter()
            .filter(|(m, _, _)| m.is_empty() || m == id)
            .fold((false, false), |(t, k), (_, t2, k2)| (t || *t2, k || *k2))
    }
}

fn content_blocks(msg: &Value) -> impl Iterator<Item = &Value> {
    msg.get("content").and_then(Value::as_array).into_iter().flatten()
}

fn result_error(obj: &Map<String, Value>, subtype: &str) -> String {
    if let Some(r) = obj.get("result").and_then(Value::as_str).filter(|r| !r.trim().is_empty()) {
        return r.to_string();
    }
    let errors: Vec<&str> =
        obj.get("errors").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    if !errors.is_empty() {
        return errors.join("; ");
    }
    if subtype.is_empty() {
        "the agent's result reported an error".to_string()
    } else {
        subtype.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{LineParser, Protocol};
    use super::*;

    fn claude() -> LineParser {
        LineParser::new(Protocol::ClaudeStreamJson)
    }

    #[test]
    fn claude_init_and_messages() {
        let mut p = claude();
        assert_eq!(
            p.feed(r#"{"type":"system","subtype":"init","model":"claude-x","session_id":"s","tools":[]}"#),
            vec![out(json!({"type":"status","label":"initialized","model":"claude-x","sessionId":"s"}))]
        );
        let line = r#"{"type":"system","subtype":"compact_boundary"}"#;
        assert_eq!(p.feed(line), vec![raw(line)]);
        assert_eq!(
            p.feed(
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"thinking","thinking":"plan"},{"type":"text","text":"Hello"},{"type":"tool_use","id":"tu1","name":"Write","input":{"file_path":"a.html"}}],"usage":{"input_tokens":3}},"session_id":"s"}"#
            ),
            vec![
                out(json!({"type":"thinking_delta","delta":"plan"})),
                out(json!({"type":"text_delta","delta":"Hello"})),
                out(json!({"type":"tool_use","id":"tu1","name":"Write","input":{"file_path":"a.html"}})),
            ]
        );
        assert_eq!(
            p.feed(
                r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":"written","is_error":false}]}}"#
            ),
            vec![out(json!({"type":"tool_result","toolUseId":"tu1","content":"written","isError":false}))]
        );
        assert_eq!(
            p.feed(
                r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"tu2","content":[{"type":"text","text":"no"}],"is_error":true}]}}"#
            ),
            vec![out(json!({"type":"tool_result","toolUseId":"tu2","content":[{"type":"text","text":"no"}],"isError":true}))]
        );
        // A user message that is just the prompt (string content) yields nothing.
        assert_eq!(p.feed(r#"{"type":"user","message":{"content":"do it"}}"#), vec![]);
    }

    #[test]
    fn claude_result_success_and_errors() {
        let mut p = claude();
        assert_eq!(
            p.feed(
                r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","duration_ms":1500,"total_cost_usd":0.25,"usage":{"input_tokens":100,"output_tokens":20,"cache_read_input_tokens":5},"stop_reason":"end_turn"}"#
            ),
            vec![
                out(json!({"type":"usage","usage":{"input_tokens":100,"output_tokens":20},"costUsd":0.25,"durationMs":1500,"stopReason":"end_turn"})),
                Parsed::Done,
            ]
        );
        let r = p.feed(r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 500"}"#);
        assert_eq!(r[1], Parsed::Error("API Error: 500".into()));
        let r = p.feed(r#"{"type":"result","subtype":"error_max_turns","is_error":false,"duration_ms":1}"#);
        assert_eq!(
            r,
            vec![
                out(json!({"type":"usage","usage":{"input_tokens":0,"output_tokens":0},"durationMs":1})),
                Parsed::Error("error_max_turns".into())
            ]
        );
        let r = p.feed(r#"{"type":"result","subtype":"error_during_execution","errors":["a","b"]}"#);
        assert_eq!(r[1], Parsed::Error("a; b".into()));
        let r = p.feed(r#"{"type":"result"}"#);
        assert!(matches!(r[1], Parsed::Error(_)));
    }

    #[test]
    fn claude_partial_messages_are_not_repeated() {
        let mut p = claude();
        let ev = |e: &str| format!(r#"{{"type":"stream_event","event":{e},"session_id":"s"}}"#);
        assert_eq!(p.feed(&ev(r#"{"type":"message_start","message":{"id":"m1","content":[]}}"#)), vec![]);
        assert_eq!(
            p.feed(&ev(r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#)),
            vec![]
        );
        assert_eq!(
            p.feed(&ev(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}"#)),
            vec![out(json!({"type":"text_delta","delta":"Hel"}))]
        );
        assert_eq!(
            p.feed(&ev(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}"#)),
            vec![out(json!({"type":"text_delta","delta":"lo"}))]
        );
        assert_eq!(
            p.feed(&ev(
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{"}}"#
            )),
            vec![]
        );
        // The full message: its text was streamed, its tool_use was not.
        assert_eq!(
            p.feed(r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Hello"},{"type":"tool_use","id":"t","name":"Bash","input":{}}]}}"#),
            vec![out(json!({"type":"tool_use","id":"t","name":"Bash","input":{}}))]
        );
        // A later message that was not streamed is emitted in full.
        assert_eq!(
            p.feed(r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"Bye"}]}}"#),
            vec![out(json!({"type":"text_delta","delta":"Bye"}))]
        );
        // Thinking deltas stream too, and suppress only the thinking block.
        p.feed(&ev(r#"{"type":"message_start","message":{"id":"m3"}}"#));
        assert_eq!(
            p.feed(&ev(r#"{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"hmm"}}"#)),
            vec![out(json!({"type":"thinking_delta","delta":"hmm"}))]
        );
        assert_eq!(
            p.feed(r#"{"type":"assistant","message":{"id":"m3","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"T"}]}}"#),
            vec![out(json!({"type":"text_delta","delta":"T"}))]
        );
    }

    #[test]
    fn claude_malformed_lines() {
        let mut p = claude();
        for line in [
            r#"{"type":"assistant"}"#,
            r#"{"type":"assistant","message":{"content":"text"}}"#,
            r#"{"type":"assistant","message":{"content":[1,null,{"type":"text"},{"type":"text","text":7}]}}"#,
            r#"{"type":"user","message":null}"#,
            r#"{"type":"stream_event"}"#,
            r#"{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta"}}}"#,
            r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":5}}}"#,
        ] {
            assert_eq!(p.feed(line), vec![], "{line}");
        }
        assert_eq!(p.feed("not json"), vec![raw("not json")]);
        assert_eq!(p.feed(r#"{"type":"rate_limit_event"}"#), vec![raw(r#"{"type":"rate_limit_event"}"#)]);
    }

    /// One real session per CLI speaking Claude's stream (recorded by `tests/runs/real_agents.rs`).
    fn recorded_session(cli: &str, write_tool: &str) {
        let stream = recorded(cli);
        for protocol in [Protocol::ClaudeStreamJson, Protocol::Auto] {
            let (all, p) = parse_all(protocol, &stream);
            assert_eq!(p.protocol(), Protocol::ClaudeStreamJson, "{cli}");
            assert!(p.session_id().is_some_and(|s| !s.is_empty()), "{cli}");
            assert_eq!(payloads(&all, "status")[0]["label"], "initialized");
            assert_eq!(text(&all), "I wrote index.html for you.", "{cli}");
            let uses = payloads(&all, "tool_use");
            assert_eq!((uses.len(), uses[0]["name"].as_str()), (1, Some(write_tool)), "{cli}");
            assert_eq!(payloads(&all, "tool_result")[0]["isError"], false);
            let arts = artifacts(&all);
            assert_eq!(arts.len(), 1, "{cli}");
            assert!(arts[0].path.ends_with("/index.html") && arts[0].artifact_kind == "html", "{cli}: {arts:?}");
            let u = payloads(&all, "usage");
            assert_eq!(
                (u[0]["usage"]["input_tokens"].as_u64(), u[0]["usage"]["output_tokens"].as_u64()),
                (Some(200), Some(40))
            );
            assert!(payloads(&all, "raw").is_empty(), "{cli}: every line understood");
            assert_eq!(all.last(), Some(&Parsed::Done), "{cli}");
        }
    }

    #[test]
    fn recorded_claude_code_session() {
        recorded_session("claude", "Write");
    }

    #[test]
    fn recorded_qwen_code_session_records_its_write_file() {
        recorded_session("qwen", "write_file");
    }
}
