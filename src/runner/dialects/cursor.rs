//! Cursor Agent's `--output-format stream-json`: Claude Code's stream (`system`/`init`, `user`,
//! `assistant`, `result`, read by [`super::claude`]) plus two kinds of line of its own, parsed here:
//!
//! - `tool_call` with `subtype` `started` / `completed`, `call_id`, and `tool_call` holding one
//!   `<kind>ToolCall` object (`writeToolCall`, `editToolCall`, `readToolCall`, `shellToolCall`, …,
//!   or `function` with `name` and `arguments`) with its `args` and, once completed, its `result`
//!   (`success`, or `error`/`rejected`) → `tool_use` / `tool_result`; a completed `writeToolCall`
//!   or `editToolCall` (its `args.path`) becomes an artifact at the iteration's end;
//! - `thinking` with `subtype` `delta` and `text` → `thinking_delta`.
//!
//! Cursor Agent is not on npm, so these follow its documented format (no real recording).

use super::claude::Claude;
use super::{agent, delta, tool_result, tool_use, Parsed};
use crate::runner::file_tools::FileTools;
use serde_json::{json, Map, Value};

/// A parser for Cursor's stream: Claude's, which hands `tool_call` and `thinking` lines here.
pub(super) fn parser() -> Claude {
    Claude::default()
}

/// A `tool_call` line.
pub(super) fn tool_call(obj: &Map<String, Value>, files: &mut FileTools) -> Vec<Parsed> {
    let id = obj.get("call_id").and_then(Value::as_str).unwrap_or("");
    let Some((kind, call)) = obj.get("tool_call").and_then(Value::as_object).and_then(|m| m.iter().next()) else {
        return Vec::new();
    };
    // `function` calls name themselves; the others are `<name>ToolCall`.
    let name = match kind.as_str() {
        "function" => call.get("name").and_then(Value::as_str).unwrap_or("function").to_string(),
        k => k.strip_suffix("ToolCall").unwrap_or(k).to_string(),
    };
    let args = call.get("args").or_else(|| call.get("arguments")).cloned().unwrap_or_else(|| json!({}));
    match obj.get("subtype").and_then(Value::as_str) {
        Some("started") => {
            files.on_call(id, kind, &args);
            vec![agent(tool_use(id, name, args))]
        }
        Some("completed") => {
            let result = call.get("result").unwrap_or(&Value::Null);
            let ok = result.get("success");
            files.on_tool_result(id, ok.is_none());
            let content = ok.or_else(|| result.get("error")).or_else(|| result.get("rejected")).unwrap_or(result);
            vec![agent(tool_result(id, content.clone(), ok.is_none()))]
        }
        _ => Vec::new(),
    }
}

/// A `thinking` line.
pub(super) fn thinking(obj: &Map<String, Value>) -> Vec<Parsed> {
    match (obj.get("subtype").and_then(Value::as_str), obj.get("text").and_then(Value::as_str)) {
        (Some("delta"), Some(t)) if !t.is_empty() => vec![agent(delta(true, t))],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::Protocol;
    use serde_json::json;

    /// A session in Cursor's documented stream-json format: init, the prompt, text, a write, a
    /// read, a failed shell command, the result.
    const STREAM: &str = r#"{"type":"system","subtype":"init","apiKeySource":"login","cwd":"/p","session_id":"c0ffee","model":"Claude 4 Sonnet","permissionMode":"default"}
{"type":"user","message":{"role":"user","content":[{"type":"text","text":"Make a page"}]},"session_id":"c0ffee"}
{"type":"thinking","subtype":"delta","text":"A page.","session_id":"c0ffee"}
{"type":"thinking","subtype":"completed","session_id":"c0ffee"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Writing index.html."}]},"session_id":"c0ffee"}
{"type":"tool_call","subtype":"started","call_id":"call_1","tool_call":{"writeToolCall":{"args":{"path":"/p/index.html","fileText":"<h1>hi</h1>","toolCallId":"call_1"}}},"session_id":"c0ffee"}
{"type":"tool_call","subtype":"completed","call_id":"call_1","tool_call":{"writeToolCall":{"args":{"path":"/p/index.html","fileText":"<h1>hi</h1>","toolCallId":"call_1"},"result":{"success":{"path":"/p/index.html","linesCreated":1,"fileSize":11}}}},"session_id":"c0ffee"}
{"type":"tool_call","subtype":"started","call_id":"call_2","tool_call":{"readToolCall":{"args":{"path":"/p/index.html"}}},"session_id":"c0ffee"}
{"type":"tool_call","subtype":"completed","call_id":"call_2","tool_call":{"readToolCall":{"args":{"path":"/p/index.html"},"result":{"success":{"content":"<h1>hi</h1>","totalLines":1}}}},"session_id":"c0ffee"}
{"type":"tool_call","subtype":"started","call_id":"call_3","tool_call":{"editToolCall":{"args":{"path":"/p/style.css"}}},"session_id":"c0ffee"}
{"type":"tool_call","subtype":"completed","call_id":"call_3","tool_call":{"editToolCall":{"args":{"path":"/p/style.css"},"result":{"error":{"errorMessage":"no such file"}}}},"session_id":"c0ffee"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":" Done."}]},"session_id":"c0ffee"}
{"type":"result","subtype":"success","duration_ms":1234,"duration_api_ms":1200,"is_error":false,"result":"Writing index.html. Done.","session_id":"c0ffee","request_id":"r1"}"#;

    #[test]
    fn a_documented_session() {
        let (all, p) = parse_all(Protocol::CursorStreamJson, STREAM);
        assert_eq!(p.session_id(), Some("c0ffee"));
        assert_eq!(text(&all), "Writing index.html. Done.");
        assert_eq!(payloads(&all, "thinking_delta")[0]["delta"], "A page.");
        let uses: Vec<(&str, &str)> = payloads(&all, "tool_use")
            .iter()
            .map(|u| (u["id"].as_str().unwrap(), u["name"].as_str().unwrap()))
            .collect();
        assert_eq!(uses, [("call_1", "write"), ("call_2", "read"), ("call_3", "edit")]);
        let results: Vec<bool> = payloads(&all, "tool_result").iter().map(|r| r["isError"] == true).collect();
        assert_eq!(results, [false, false, true]);
        assert_eq!(payloads(&all, "tool_result")[2]["content"], json!({"errorMessage": "no such file"}));
        let arts: Vec<&str> = artifacts(&all).iter().map(|a| a.path.as_str()).collect();
        assert_eq!(arts, ["/p/index.html"], "the failed edit is not an artifact");
        assert_eq!(payloads(&all, "usage")[0]["durationMs"], 1234);
        assert_eq!(all.last(), Some(&super::super::Parsed::Done));
    }
}
