//! Files an agent writes through its file tools, turned into artifacts like those od's own protocol
//! reports with `artifact` lines: Claude Code's `Write`, `Edit`, `MultiEdit` and `NotebookEdit`;
//! Qwen Code's and Gemini CLI's `write_file`, `replace` and `edit`; OpenCode's `write` and `edit`;
//! Copilot's `create`; Cursor's `writeToolCall` and `editToolCall` ([`FILE_TOOLS`]).
//!
//! A dialect parser ([`super::dialects`]) tells this file each call of those tools (the path in its
//! input's `file_path`, `filePath`, `notebook_path` or `path`) and each result; a dialect whose
//! agent reports a finished write at once (Codex's `file_change`) reports the path completed. A call that completed without error counts, and so does
//! one still without a result when the iteration ends (the file may be written); a call whose
//! result is an error does not. At the end of the iteration (Claude's `result` line, or the end of
//! its output) each path is reported once, in the order first completed, so the executor records
//! the file as it is on disk then — one artifact per path per iteration, whatever number of edits.
//! The executor resolves the path against the project directory ([`project_relative`]) and reads
//! it without following links; a path outside the project is noted, not recorded.

use std::collections::HashMap;
use std::path::{Component, Path};

use serde_json::Value;

use super::agent::ArtifactDraft;
use super::dialects::kinds_for;

/// The agents' tools that write a file (exact names).
pub const FILE_TOOLS: &[&str] = &[
    // Claude Code
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    // Qwen Code, Gemini CLI
    "write_file",
    "replace",
    "edit",
    // OpenCode (and `edit` above)
    "write",
    // GitHub Copilot CLI
    "create",
    // Cursor Agent
    "writeToolCall",
    "editToolCall",
];

/// The `input` fields that may name the written file, tried in order.
const PATH_FIELDS: &[&str] = &["file_path", "filePath", "notebook_path", "path"];

/// Most file-tool calls remembered per iteration (pending and completed paths together); the
/// rest are not recorded. A real iteration writes a few dozen files.
const MAX_TRACKED: usize = 1_000;

/// The file-tool calls of one iteration.
#[derive(Debug, Default)]
pub struct FileTools {
    /// Calls without a result yet: tool_use id → path.
    pending: HashMap<String, String>,
    /// Paths written, first completion first, each once.
    written: Vec<String>,
}

impl FileTools {
    /// Notes a Claude assistant `tool_use` block (`id`, `name`, `input`).
    pub fn on_tool_use(&mut self, block: &Value) {
        let field = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or("");
        self.on_call(field("id"), field("name"), block.get("input").unwrap_or(&Value::Null));
    }

    /// Notes a call of tool `name` with `input`; its result comes later under `id`.
    pub fn on_call(&mut self, id: &str, name: &str, input: &Value) {
        if id.is_empty() || !FILE_TOOLS.contains(&name) {
            return;
        }
        let path =
            PATH_FIELDS.iter().find_map(|f| input.get(*f).and_then(Value::as_str).filter(|p| !p.trim().is_empty()));
        if let Some(path) = path {
            if self.pending.len() + self.written.len() < MAX_TRACKED {
                self.pending.insert(id.to_string(), path.to_string());
            }
        }
    }

    /// Notes a file the agent reports written (a call and its successful result in one).
    pub fn on_written(&mut self, path: &str) {
        if !path.trim().is_empty() && self.pending.len() + self.written.len() < MAX_TRACKED {
            self.complete(path.to_string());
        }
    }

    /// Notes a tool's result (a Claude `tool_result` block, …).
    pub fn on_tool_result(&mut self, tool_use_id: &str, is_error: bool) {
        if let Some(path) = self.pending.remove(tool_use_id) {
            if !is_error {
                self.complete(path);
            }
        }
    }

    fn complete(&mut self, path: String) {
        if !self.written.contains(&path) {
            self.written.push(path);
        }
    }

    /// The iteration ended: every path written (calls still without a result included), each once.
    pub fn take(&mut self) -> Vec<ArtifactDraft> {
        let mut unanswered: Vec<String> = self.pending.drain().map(|(_, p)| p).collect();
        unanswered.sort();
        for p in unanswered {
            self.complete(p);
        }
        std::mem::take(&mut self.written)
            .into_iter()
            .map(|path| {
                let (artifact_kind, render_kind) = kinds_for(&path);
                ArtifactDraft {
                    title: String::new(),
                    artifact_kind: artifact_kind.into(),
                    render_kind: render_kind.into(),
                    path,
                    ..ArtifactDraft::default()
                }
            })
            .collect()
    }
}

/// `path` (absolute, or relative to the project directory) relative to `project_dir`, or why not:
/// an absolute path must lie below the project directory (as given, or with its links resolved).
/// The result may still hold `..`; the caller's [`crate::engine::files::clean_relative`] refuses it.
pub fn project_relative(path: &str, project_dir: &Path) -> Result<String, String> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Ok(path.to_string());
    }
    let real = std::fs::canonicalize(project_dir).ok();
    for base in std::iter::once(project_dir).chain(real.as_deref()) {
        if let Ok(rest) = p.strip_prefix(base) {
            if rest.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir)) {
                return Ok(rest.to_string_lossy().into_owned());
            }
        }
    }
    Err(format!("{path}: outside the project directory; not recorded as an artifact"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn use_(id: &str, name: &str, input: Value) -> Value {
        json!({"type": "tool_use", "id": id, "name": name, "input": input})
    }

    #[test]
    fn completed_writes_are_reported_once_per_path_at_the_end() {
        let mut t = FileTools::default();
        t.on_tool_use(&use_("1", "Write", json!({"file_path": "/p/index.html"})));
        t.on_tool_use(&use_("2", "Edit", json!({"file_path": "/p/index.html"})));
        t.on_tool_use(&use_("3", "Write", json!({"file_path": "/p/bad.css"})));
        t.on_tool_use(&use_("4", "Read", json!({"file_path": "/p/other.md"})));
        t.on_tool_use(&use_("5", "NotebookEdit", json!({"notebook_path": "/p/n.ipynb"})));
        t.on_tool_result("1", false);
        t.on_tool_result("2", false);
        t.on_tool_result("3", true);
        t.on_call("6", "write_file", &json!({"file_path": "/p/qwen.html"}));
        t.on_call("7", "write", &json!({"filePath": "/p/opencode.md"}));
        t.on_call("8", "read_file", &json!({"file_path": "/p/read.md"}));
        t.on_call("", "write", &json!({"filePath": "/p/no-id.md"}));
        t.on_tool_result("6", false);
        t.on_tool_result("7", false);
        t.on_tool_result("8", false);
        t.on_written("/p/codex.css");
        t.on_written("/p/index.html");
        let got: Vec<(String, String)> = t.take().into_iter().map(|d| (d.path, d.artifact_kind)).collect();
        assert_eq!(
            got,
            [
                ("/p/index.html".to_string(), "html".to_string()),
                ("/p/qwen.html".to_string(), "html".to_string()),
                ("/p/opencode.md".to_string(), "markdown".to_string()),
                ("/p/codex.css".to_string(), "file".to_string()),
                ("/p/n.ipynb".to_string(), "file".to_string())
            ]
        );
        assert!(t.take().is_empty());
    }

    #[test]
    fn only_paths_below_the_project_are_relative() {
        let dir = tempfile::tempdir().unwrap();
        let proj = dir.path();
        assert_eq!(project_relative(&format!("{}/a/index.html", proj.display()), proj), Ok("a/index.html".into()));
        assert_eq!(project_relative("index.html", proj), Ok("index.html".into()));
        assert!(project_relative("/etc/passwd", proj).is_err());
        assert!(project_relative(&format!("{}/../x", proj.display()), proj).is_err());
    }
}
