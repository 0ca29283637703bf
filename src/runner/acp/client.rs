//! What od serves an ACP agent as its client: `fs/read_text_file` and `fs/write_text_file` through
//! the safe project file layer, and the decision on each `session/request_permission`.
//!
//! Files: a path is confined to the project folder — an absolute path below it (as given or with
//! its links resolved) or a relative one, cleaned by [`clean_relative`]; anything else is refused
//! with JSON-RPC "invalid params" naming the path. Reads and writes go below the project without
//! following links ([`Root`]). A read of a missing file answers empty content rather than an error
//! (Gemini CLI reads before every write and fails its turn on any error). Every write becomes an
//! artifact with its digest (the executor records the file as written). Both are bounded
//! ([`ACP_MAX_READ_BYTES`], [`ACP_MAX_WRITE_BYTES`]).
//!
//! Permissions, by the run's `permissionMode`: `bypass` allows without asking; `accept-edits`
//! (the default) allows a tool call of kind `edit` whose every location lies inside the project,
//! and asks for anything else; `ask` asks for everything. Asking raises the built-in choice
//! surface `agent-permission-<kind>` whose choices are the agent's options; its answer is
//! remembered per the surface's tier (`permissionTier`: `run` by default, `conversation` or
//! `project`), so a later request of the same kind is answered from it. No answer (skipped, timed
//! out) picks the agent's reject option, never an allow.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;

use serde_json::{json, Value};

use super::conn::RpcError;
pub use crate::agents::options::{PermissionMode, TIERS};
use crate::engine::files::clean_relative;
use crate::engine::safe_fs::{temp_tag, Root, SafeFsError};
use crate::limits::{ACP_MAX_READ_BYTES, ACP_MAX_TRACKED_TOOL_CALLS, ACP_MAX_WRITE_BYTES};
use crate::runner::agent::ArtifactDraft;
use crate::runner::dialects::kinds_for;
use crate::runner::file_tools::project_relative;

/// What od does with a permission request.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Answer at once with this `session/request_permission` result (and why, for the run's log).
    Answer { result: Value, why: String },
    /// Ask the user through this surface.
    Ask(Value),
}

/// A tool call the agent announced: what a later permission request about it is judged by.
#[derive(Debug, Clone, Default)]
struct ToolCall {
    kind: String,
    title: String,
    locations: Vec<String>,
}

/// od's side of one ACP session.
pub struct Client {
    project_dir: PathBuf,
    mode: PermissionMode,
    tier: String,
    calls: HashMap<String, ToolCall>,
}

impl Client {
    pub fn new(project_dir: PathBuf, mode: PermissionMode, tier: String) -> Client {
        Client { project_dir, mode, tier, calls: HashMap::new() }
    }

    /// The project-relative path of `path`, or the JSON-RPC refusal naming it.
    fn confine(&self, path: &str) -> Result<String, RpcError> {
        let rel = project_relative(path, &self.project_dir).map_err(|_| {
            RpcError::invalid_params(format!("path {path:?} is outside the project folder; od refuses it"))
        })?;
        clean_relative(&rel).map_err(|e| RpcError::invalid_params(format!("path {path:?}: {e}")))
    }

    /// `fs/read_text_file`: `{content}` (empty for a missing file), from `line` (1-based) for
    /// `limit` lines when given.
    pub fn read_text_file(&self, params: &Value) -> Result<Value, RpcError> {
        let path = params["path"].as_str().ok_or_else(|| RpcError::invalid_params("path: a string is required"))?;
        let rel = self.confine(path)?;
        let root = Root::open(&self.project_dir).map_err(|e| RpcError::internal(format!("the project folder: {e}")))?;
        let bytes = match root.open_file(&rel) {
            Ok(f) => {
                let mut buf = Vec::new();
                f.take(ACP_MAX_READ_BYTES as u64 + 1)
                    .read_to_end(&mut buf)
                    .map_err(|e| RpcError::internal(format!("{path}: {e}")))?;
                if buf.len() > ACP_MAX_READ_BYTES {
                    return Err(RpcError::invalid_params(format!(
                        "{path} is larger than the {ACP_MAX_READ_BYTES} bytes od reads for an agent"
                    )));
                }
                buf
            }
            Err(SafeFsError::NotFound) => Vec::new(),
            Err(e) => return Err(RpcError::invalid_params(format!("{path}: {e}"))),
        };
        let text = String::from_utf8_lossy(&bytes);
        let from = params["line"].as_u64().map_or(0, |l| l.saturating_sub(1) as usize);
        let content = match (from, params["limit"].as_u64()) {
            (0, None) => text.into_owned(),
            (from, limit) => {
                let lines = text.split_inclusive('\n').skip(from);
                match limit {
                    Some(n) => lines.take(n as usize).collect(),
                    None => lines.collect(),
                }
            }
        };
        Ok(json!({ "content": content }))
    }

    /// `fs/write_text_file`: writes the file (folders made as needed) and returns the artifact to
    /// record.
    pub fn write_text_file(&self, params: &Value) -> Result<ArtifactDraft, RpcError> {
        let path = params["path"].as_str().ok_or_else(|| RpcError::invalid_params("path: a string is required"))?;
        let content =
            params["content"].as_str().ok_or_else(|| RpcError::invalid_params("content: a string is required"))?;
        if content.len() > ACP_MAX_WRITE_BYTES {
            return Err(RpcError::invalid_params(format!(
                "content of {path}: {} bytes, more than the {ACP_MAX_WRITE_BYTES} od writes for an agent",
                content.len()
            )));
        }
        let rel = self.confine(path)?;
        Root::open(&self.project_dir)
            .and_then(|root| root.write_atomic_unsynced(&rel, content.as_bytes(), &temp_tag()))
            .map_err(|e| RpcError::invalid_params(format!("{path}: {e}")))?;
        let (artifact_kind, render_kind) = kinds_for(&rel);
        Ok(ArtifactDraft {
            path: rel,
            artifact_kind: artifact_kind.into(),
            render_kind: render_kind.into(),
            ..ArtifactDraft::default()
        })
    }

    /// Notes a tool call the agent names — a `tool_call` / `tool_call_update`, or the `toolCall` of
    /// a permission request — (kind, title, locations) for later requests. The first time od
    /// hears of an id, returns it as a `tool_call` update: Qwen Code and Gemini CLI announce their
    /// tool calls only inside the permission request and later updates, never as a `tool_call`,
    /// and the run's log would otherwise show results of tools it never saw called.
    pub fn note_tool_call(&mut self, update: &Value) -> Option<Value> {
        let id = update["toolCallId"].as_str()?;
        let first = !self.calls.contains_key(id);
        if first && self.calls.len() >= ACP_MAX_TRACKED_TOOL_CALLS {
            return None;
        }
        let call = self.calls.entry(id.to_string()).or_default();
        merge(call, update);
        first.then(|| {
            let locations: Vec<Value> = call.locations.iter().map(|p| json!({ "path": p })).collect();
            json!({ "sessionUpdate": "tool_call", "toolCallId": id, "title": call.title,
                    "kind": if call.kind.is_empty() { "other" } else { &call.kind },
                    "rawInput": update["rawInput"], "locations": locations })
        })
    }

    /// What to do with a `session/request_permission`.
    pub fn decide(&self, params: &Value) -> Decision {
        let tool = &params["toolCall"];
        let mut call = tool["toolCallId"].as_str().and_then(|id| self.calls.get(id)).cloned().unwrap_or_default();
        merge(&mut call, tool);
        let kind = if call.kind.is_empty() { "other".to_string() } else { call.kind.clone() };
        let options: Vec<Value> = params["options"].as_array().cloned().unwrap_or_default();
        let allow = pick(&options, &["allow_once", "allow_always"]);
        let inside = !call.locations.is_empty() && call.locations.iter().all(|p| self.confine(p).is_ok());
        let allowed_by = match self.mode {
            PermissionMode::Bypass => Some("permissionMode bypass"),
            PermissionMode::AcceptEdits if kind == "edit" && inside => {
                Some("permissionMode accept-edits: an edit inside the project")
            }
            _ => None,
        };
        if let (Some(why), Some(option)) = (allowed_by, allow) {
            return Decision::Answer { result: selected(&option), why: why.to_string() };
        }
        let ids: Vec<Value> = options.iter().map(|o| o["optionId"].clone()).collect();
        let title = if call.title.is_empty() { format!("a {kind} tool call") } else { call.title.clone() };
        Decision::Ask(json!({
            "id": format!("agent-permission-{}", surface_word(&kind)),
            "kind": "choice",
            "persist": self.tier,
            "prompt": format!("The agent asks permission for: {title}"),
            "title": "Agent permission",
            "toolCall": { "toolCallId": tool["toolCallId"], "kind": kind, "title": title, "locations": call.locations },
            "options": options,
            "onTimeout": "skip",
            "schema": { "type": "string", "enum": ids },
        }))
    }
}

/// The `session/request_permission` result for a surface's answer: the option it names, or —
/// when nobody answered — the agent's reject option (cancelled when it offers none).
pub fn answer_result(params: &Value, answer: Option<&Value>) -> Value {
    let options: Vec<Value> = params["options"].as_array().cloned().unwrap_or_default();
    let named = answer.and_then(|a| a.as_str().or_else(|| a["optionId"].as_str()));
    if let Some(o) = named.and_then(|id| options.iter().find(|o| o["optionId"] == id)) {
        return selected(o);
    }
    match pick(&options, &["reject_once", "reject_always"]) {
        Some(o) => selected(&o),
        None => cancelled(),
    }
}

/// The result answering a request that was cancelled (od canceled the turn).
pub fn cancelled() -> Value {
    json!({ "outcome": { "outcome": "cancelled" } })
}

fn selected(option: &Value) -> Value {
    json!({ "outcome": { "outcome": "selected", "optionId": option["optionId"] } })
}

/// The first option whose kind is in `kinds`, in the order of `kinds`.
fn pick(options: &[Value], kinds: &[&str]) -> Option<Value> {
    kinds.iter().find_map(|k| options.iter().find(|o| o["kind"] == *k).cloned())
}

fn merge(call: &mut ToolCall, update: &Value) {
    if let Some(k) = update["kind"].as_str() {
        call.kind = k.to_string();
    }
    if let Some(t) = update["title"].as_str() {
        call.title = t.to_string();
    }
    if let Some(locs) = update["locations"].as_array() {
        call.locations = locs.iter().filter_map(|l| l["path"].as_str().map(str::to_string)).collect();
    }
}

/// A tool kind as part of a surface id (ACP kinds are lowercase words; anything else is `other`).
fn surface_word(kind: &str) -> &str {
    if !kind.is_empty() && kind.len() <= 32 && kind.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
        kind
    } else {
        "other"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Value {
        json!([{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
               {"optionId": "always", "name": "Always", "kind": "allow_always"},
               {"optionId": "no", "name": "Reject", "kind": "reject_once"}])
    }

    #[test]
    fn accept_edits_allows_edits_inside_and_asks_for_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let c = Client::new(dir.path().to_path_buf(), PermissionMode::AcceptEdits, "run".into());
        let inside = format!("{}/index.html", dir.path().display());
        let edit = json!({"toolCall": {"toolCallId": "1", "kind": "edit", "locations": [{"path": inside}]}, "options": options()});
        assert!(matches!(c.decide(&edit), Decision::Answer { result, .. } if result["outcome"]["optionId"] == "yes"));
        let outside = json!({"toolCall": {"toolCallId": "2", "kind": "edit", "locations": [{"path": "/etc/passwd"}]}, "options": options()});
        assert!(matches!(c.decide(&outside), Decision::Ask(s) if s["id"] == "agent-permission-edit"));
        let exec =
            json!({"toolCall": {"toolCallId": "3", "kind": "execute", "title": "rm -rf /"}, "options": options()});
        let Decision::Ask(spec) = c.decide(&exec) else { panic!("an execute is asked") };
        assert_eq!(spec["schema"]["enum"], json!(["yes", "always", "no"]));
        let bypass = Client::new(dir.path().to_path_buf(), PermissionMode::Bypass, "run".into());
        assert!(matches!(bypass.decide(&exec), Decision::Answer { .. }));
        let ask = Client::new(dir.path().to_path_buf(), PermissionMode::Ask, "run".into());
        assert!(matches!(ask.decide(&edit), Decision::Ask(_)));
    }

    #[test]
    fn no_answer_rejects_and_a_named_option_is_selected() {
        let p = json!({"options": options()});
        assert_eq!(answer_result(&p, None)["outcome"]["optionId"], "no");
        assert_eq!(answer_result(&p, Some(&json!("always")))["outcome"]["optionId"], "always");
        assert_eq!(answer_result(&json!({"options": []}), None), cancelled());
    }

    #[test]
    fn files_stay_inside_the_project() {
        let dir = tempfile::tempdir().unwrap();
        let c = Client::new(dir.path().to_path_buf(), PermissionMode::Ask, "run".into());
        let abs = format!("{}/a/b.txt", dir.path().display());
        assert_eq!(c.read_text_file(&json!({"path": abs})).unwrap()["content"], "");
        let d = c.write_text_file(&json!({"path": abs, "content": "1\n2\n3\n"})).unwrap();
        assert_eq!(d.path, "a/b.txt");
        assert_eq!(c.read_text_file(&json!({"path": abs, "line": 2, "limit": 1})).unwrap()["content"], "2\n");
        let out = format!("{}/../x.txt", dir.path().display());
        assert_eq!(c.write_text_file(&json!({"path": out, "content": ""})).unwrap_err().code, -32602);
        assert!(c.read_text_file(&json!({"path": "/etc/hostname"})).is_err());
        assert!(c.read_text_file(&json!({"path": "../up"})).is_err());
    }
}
