//! `session/update` notifications turned into od's agent output (channel `agent`), in the shapes
//! od's own protocol and the stream-json parser record:
//!
//! | ACP `sessionUpdate` | od payload |
//! |---|---|
//! | `agent_message_chunk` (text content) | `text_delta` |
//! | `agent_thought_chunk` | `thinking_delta` |
//! | `tool_call` | `tool_use` `{id, name: title, kind, input: rawInput, locations}` |
//! | `tool_call_update` completed / failed | `tool_result` `{toolUseId, content, isError}` |
//! | an id first named by a `tool_call_update` or a permission request | `tool_use` (by the session) |
//! | `plan` | `status` `plan` with the entries |
//! | `usage_update` | `usage` (context `used`/`size`, `cost`) |
//! | a prompt answer's `usage` | `usage` with `input_tokens`/`output_tokens` |
//!
//! Other updates (the user's own chunks, mode and command lists) are not recorded.

use crate::runner::dialects::{delta, status, tool_result, tool_use};
use serde_json::{json, Value};

/// The od payloads one `session/update`'s `update` becomes.
pub fn map(update: &Value) -> Vec<Value> {
    let text = |c: &Value| match c["type"].as_str() {
        Some("text") => c["text"].as_str().map(str::to_string),
        Some("resource_link") => c["uri"].as_str().map(|u| format!("[{u}]")),
        _ => None,
    };
    match update["sessionUpdate"].as_str().unwrap_or("") {
        "agent_message_chunk" => text(&update["content"]).map(|t| delta(false, &t)).into_iter().collect(),
        "agent_thought_chunk" => text(&update["content"]).map(|t| delta(true, &t)).into_iter().collect(),
        "tool_call" => {
            let input = if update["rawInput"].is_null() { json!({}) } else { update["rawInput"].clone() };
            let mut call = tool_use(&update["toolCallId"], update["title"].as_str().unwrap_or(""), input);
            call["kind"] = json!(update["kind"].as_str().unwrap_or("other"));
            call["locations"] = json!(update["locations"].as_array().cloned().unwrap_or_default());
            vec![call]
        }
        "tool_call_update" => match update["status"].as_str() {
            Some(st @ ("completed" | "failed")) => {
                let content: Vec<String> = update["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| match c["type"].as_str() {
                        Some("content") => text(&c["content"]),
                        Some("diff") => c["path"].as_str().map(|p| format!("(diff of {p})")),
                        Some("terminal") => c["terminalId"].as_str().map(|t| format!("(terminal {t})")),
                        _ => None,
                    })
                    .collect();
                let content = if content.is_empty() { update["rawOutput"].clone() } else { json!(content.join("\n")) };
                vec![tool_result(&update["toolCallId"], content, st == "failed")]
            }
            _ => Vec::new(),
        },
        "plan" => vec![status("plan", Some(update["entries"].clone()))],
        "usage_update" => {
            let mut p = json!({"type": "usage", "usage": {"input_tokens": 0, "output_tokens": 0},
                "contextUsed": update["used"], "contextSize": update["size"]});
            if let Some(amount) = update["cost"]["amount"].as_f64() {
                p["cost"] = json!({"amount": amount, "currency": update["cost"]["currency"]});
                if update["cost"]["currency"] == "USD" {
                    p["costUsd"] = json!(amount);
                }
            }
            vec![p]
        }
        _ => Vec::new(),
    }
}

/// The `usage` payload of a `session/prompt` answer's `usage` (token counts of the turn), if any.
pub fn prompt_usage(answer: &Value) -> Option<Value> {
    let u = answer.get("usage").filter(|u| u.is_object())?;
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    Some(json!({"type": "usage", "usage": {"input_tokens": n("inputTokens"), "output_tokens": n("outputTokens")},
        "totalTokens": u["totalTokens"], "stopReason": answer["stopReason"]}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_become_od_payloads() {
        let chunk = json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}});
        assert_eq!(map(&chunk), [json!({"type": "text_delta", "delta": "hi"})]);
        let thought = json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hm"}});
        assert_eq!(map(&thought)[0]["type"], "thinking_delta");
        let call = json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Write x", "kind": "edit"});
        assert_eq!(map(&call)[0]["type"], "tool_use");
        assert_eq!(map(&call)[0]["id"], "t1");
        let pending = json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress"});
        assert!(map(&pending).is_empty());
        let done = json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": "no"}}]});
        assert_eq!(map(&done), [json!({"type": "tool_result", "toolUseId": "t1", "content": "no", "isError": true})]);
        let usage = json!({"sessionUpdate": "usage_update", "used": 10, "size": 100, "cost": {"amount": 0.5, "currency": "USD"}});
        assert_eq!(map(&usage)[0]["costUsd"], 0.5);
        assert!(map(&json!({"sessionUpdate": "available_commands_update"})).is_empty());
        let answer =
            json!({"stopReason": "end_turn", "usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}});
        assert_eq!(prompt_usage(&answer).unwrap()["usage"]["output_tokens"], 4);
        assert!(prompt_usage(&json!({"stopReason": "end_turn"})).is_none());
    }
}
