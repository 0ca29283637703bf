//! Progressive disclosure for agents: instead of the whole catalog, the model sees two meta-tools —
//! `od_list` (names and one-line summaries, filtered by an optional query, in bounded pages) and
//! `od_call` (`describe: true` returns one tool's input schema with no side effect and no approval;
//! otherwise it calls the tool). Approval and input checks key on the **target** tool, never on the
//! meta-tool; an unknown name fails closed. Within one conversation a tool's schema is sent at most
//! once (a later describe returns a short reference), so the model-facing cost of a turn is the two
//! definitions below whatever the catalog size.

use serde_json::{json, Value};
use std::collections::HashMap;

use super::ToolError;
use crate::limits::{DISCLOSURE_LIST_MAX_PAGE, DISCLOSURE_LIST_PAGE};

/// The list meta-tool.
pub const LIST_TOOL: &str = "od_list";
/// The describe/call meta-tool.
pub const CALL_TOOL: &str = "od_call";

/// The two meta-tool definitions (MCP `Tool` shape) — all the model is given up front.
pub fn meta_tools() -> Vec<Value> {
    vec![
        json!({
            "name": LIST_TOOL,
            "description": "List od tools: names with one-line summaries, best matches first. Pass a query to filter (keywords); page with cursor.",
            "inputSchema": { "type": "object", "properties": {
                "query": { "type": "string", "description": "Keywords, e.g. \"create project\"." },
                "cursor": { "type": "string", "description": "nextCursor of the previous page." },
                "limit": { "type": "integer", "minimum": 1, "maximum": DISCLOSURE_LIST_MAX_PAGE }
            } },
            "annotations": { "readOnlyHint": true }
        }),
        json!({
            "name": CALL_TOOL,
            "description": "Use an od tool by the name od_list gave. describe: true returns its input schema (no side effect); otherwise it runs the tool with args.",
            "inputSchema": { "type": "object", "properties": {
                "name": { "type": "string", "description": "Tool name from od_list." },
                "describe": { "type": "boolean", "description": "Only return the tool's input schema." },
                "args": { "type": "object", "description": "The tool's input." }
            }, "required": ["name"] }
        }),
    ]
}

/// Where the catalog and the calls go (the daemon over HTTP for `od mcp`, in memory in benches).
pub trait Backend: Send + Sync {
    /// A page of `{name, summary, surface, readOnly?}` (whole descriptors when `full`) plus
    /// `total`, `truncated`, `nextCursor?`.
    fn search(&self, query: &str, cursor: Option<&str>, limit: usize, full: bool) -> Result<Value, ToolError>;
    /// One tool's full descriptor, or None when no such tool is reachable.
    fn describe(&self, name: &str) -> Result<Option<Value>, ToolError>;
    /// Runs the tool (its result, or a `BrowserActionResult` for a browser tool).
    fn call(&self, descriptor: &Value, input: &Value) -> Result<Value, ToolError>;
}

/// Which tools may run without the user's approval: view-state-only browser tools, read-only
/// `api` tools, and the names or `prefix.*` patterns the user allowed (`*`: everything).
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub allow: Vec<String>,
}

impl Policy {
    /// Whether `d` may run; the reason when not.
    pub fn permits(&self, d: &Value) -> Result<(), String> {
        let name = d["name"].as_str().unwrap_or("");
        if d["surface"] == "browser" || d["readOnly"] == true {
            return Ok(());
        }
        let allowed = self.allow.iter().any(|p| {
            p == "*"
                || p == name
                || p.strip_suffix(".*").is_some_and(|pre| name.starts_with(pre) && name[pre.len()..].starts_with('.'))
        });
        if allowed {
            Ok(())
        } else {
            Err(format!("{name} changes state and needs the user's approval; the user allows it by starting the server with --allow {name} (or a prefix like --allow {}.*)", name.split('.').next().unwrap_or(name)))
        }
    }
}

/// A meta-tool's answer: the JSON the model reads and whether it is an error.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub is_error: bool,
    pub body: Value,
}

fn err(code: &str, message: impl Into<String>) -> Reply {
    Reply { is_error: true, body: json!({ "error": { "code": code, "message": message.into() } }) }
}

/// One conversation's disclosure state: which schemas the model has already been sent.
#[derive(Debug, Default)]
pub struct Conversation {
    described: HashMap<String, String>,
}

fn short_digest(d: &Value) -> String {
    super::descriptor::digest(d)[..12].to_string()
}

impl Conversation {
    /// `od_list {query?, cursor?, limit?}`.
    pub fn list(&mut self, b: &dyn Backend, args: &Value) -> Reply {
        let limit =
            args["limit"].as_u64().map_or(DISCLOSURE_LIST_PAGE, |l| l as usize).clamp(1, DISCLOSURE_LIST_MAX_PAGE);
        match b.search(args["query"].as_str().unwrap_or(""), args["cursor"].as_str(), limit, false) {
            Ok(page) => Reply { is_error: false, body: page },
            Err(e) => err(e.code(), e.to_string()),
        }
    }

    /// The schema of `d`, or a short reference when this conversation already has it.
    fn schema_of(&mut self, d: &Value) -> Value {
        let name = d["name"].as_str().unwrap_or("").to_string();
        let digest = short_digest(d);
        if self.described.get(&name) == Some(&digest) {
            return json!({ "name": name, "schema": "sent earlier in this conversation", "digest": digest });
        }
        self.described.insert(name.clone(), digest.clone());
        let mut v =
            json!({ "name": name, "description": d["description"], "inputSchema": d["inputSchema"], "digest": digest });
        if d["readOnly"] == true || d["surface"] == "browser" {
            v["readOnly"] = json!(true);
        }
        v
    }

    /// `od_call {name, describe?, args?}`.
    pub fn call(&mut self, b: &dyn Backend, policy: &Policy, args: &Value) -> Reply {
        let Some(name) = args["name"].as_str().filter(|n| !n.is_empty()) else {
            return err("invalid-input", "name: the tool to describe or call");
        };
        if args["describe"] == true {
            return match b.describe(name) {
                Ok(Some(d)) => Reply { is_error: false, body: self.schema_of(&d) },
                Ok(None) => err("tool-not-found", format!("no tool named {name:?}; od_list shows what exists")),
                Err(e) => err(e.code(), e.to_string()),
            };
        }
        let input = args.get("args").cloned().unwrap_or_else(|| json!({}));
        self.run(b, policy, name, &input)
    }

    /// Runs `name` with `input` after the target's checks (shared with the flat catalog).
    pub fn run(&mut self, b: &dyn Backend, policy: &Policy, name: &str, input: &Value) -> Reply {
        let d = match b.describe(name) {
            Ok(Some(d)) => d,
            Ok(None) => return err("tool-not-found", format!("no tool named {name:?}; od_list shows what exists")),
            Err(e) => return err(e.code(), e.to_string()),
        };
        if let Err(reason) = policy.permits(&d) {
            return err("approval-required", reason);
        }
        if !input.is_object() {
            return err("invalid-input", "args: an object");
        }
        let violations = crate::plugins::validator::validate_value(&d["inputSchema"], input);
        if !violations.is_empty() {
            let mut r = err("invalid-input", format!("args do not match {name}'s input schema"));
            r.body["error"]["violations"] = json!(violations);
            r.body["error"]["schema"] = self.schema_of(&d);
            return r;
        }
        match b.call(&d, input) {
            Ok(v) if v["ok"] == false && v.get("invocationId").is_some() => Reply { is_error: true, body: v },
            Ok(v) => Reply { is_error: false, body: v },
            Err(e) => err(e.code(), e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Fake {
        calls: Mutex<Vec<String>>,
    }

    fn d(name: &str, read_only: bool) -> Value {
        json!({ "name": name, "description": "Does it.", "surface": "api", "readOnly": read_only,
                "inputSchema": { "type": "object", "properties": { "n": { "type": "integer" } }, "required": ["n"] } })
    }

    impl Backend for Fake {
        fn search(&self, _q: &str, _c: Option<&str>, _l: usize, _f: bool) -> Result<Value, ToolError> {
            Ok(json!({ "tools": [{ "name": "a.read" }], "total": 1, "truncated": false }))
        }
        fn describe(&self, name: &str) -> Result<Option<Value>, ToolError> {
            Ok(match name {
                "a.read" => Some(d(name, true)),
                "a.write" => Some(d(name, false)),
                _ => None,
            })
        }
        fn call(&self, d: &Value, _i: &Value) -> Result<Value, ToolError> {
            self.calls.lock().unwrap().push(d["name"].as_str().unwrap().into());
            Ok(json!({ "done": true }))
        }
    }

    #[test]
    fn approval_keys_on_the_target_and_schemas_are_sent_once() {
        let b = Fake { calls: Mutex::new(vec![]) };
        let mut c = Conversation::default();
        let none = Policy::default();
        let first = c.call(&b, &none, &json!({ "name": "a.write", "describe": true }));
        assert!(!first.is_error && first.body["inputSchema"].is_object(), "describe needs no approval");
        let again = c.call(&b, &none, &json!({ "name": "a.write", "describe": true }));
        assert_eq!(again.body["schema"], "sent earlier in this conversation");
        let refused = c.call(&b, &none, &json!({ "name": "a.write", "args": { "n": 1 } }));
        assert_eq!(refused.body["error"]["code"], "approval-required");
        let ok = c.call(&b, &none, &json!({ "name": "a.read", "args": { "n": 1 } }));
        assert_eq!((ok.is_error, &ok.body), (false, &json!({ "done": true })));
        let allowed = Policy { allow: vec!["a.*".into()] };
        assert!(!c.call(&b, &allowed, &json!({ "name": "a.write", "args": { "n": 2 } })).is_error);
        assert!(Policy { allow: vec!["ab.*".into()] }.permits(&d("a.write", false)).is_err());
        let bad = c.call(&b, &allowed, &json!({ "name": "a.write", "args": { "n": "x" } }));
        assert_eq!(bad.body["error"]["code"], "invalid-input");
        let unknown = c.call(&b, &Policy { allow: vec!["*".into()] }, &json!({ "name": "nope.x" }));
        assert_eq!(unknown.body["error"]["code"], "tool-not-found");
        assert_eq!(*b.calls.lock().unwrap(), ["a.read", "a.write"]);
    }
}
