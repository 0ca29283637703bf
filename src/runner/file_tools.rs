//! Files an agent writes through Claude Code's file tools (`Write`, `Edit`, `MultiEdit`,
//! `NotebookEdit`), turned into artifacts like those od's own protocol reports with `artifact`
//! lines.
//!
//! The stream-json parser tells this file each `tool_use` of those tools (its `file_path`, or
//! `notebook_path`) and each `tool_result`. A call that completed without error counts, and so does
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
use super::protocol::kinds_for;

/// Claude Code's tools that write a file, and the `input` field naming it.
const FILE_TOOLS: &[(&str, &str)] =
    &[("Write", "file_path"), ("Edit", "file_path"), ("MultiEdit", "file_path"), ("NotebookEdit", "notebook_path")];

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
    /// Notes an assistant `tool_use` block.
    pub fn on_tool_use(&mut self, block: &Value) {
        let name = block.get("name").and_then(Value::as_str).unwrap_or("");
        let Some((_, field)) = FILE_TOOLS.iter().find(|(tool, _)| *tool == name) else { return };
        let path =
            block.get("input").and_then(|i| i.get(*field)).and_then(Value::as_str).filter(|p| !p.trim().is_empty());
        let (Some(id), Some(path)) = (block.get("id").and_then(Value::as_str), path) else { return };
        if self.pending.len() + self.written.len() < MAX_TRACKED {
            self.pending.insert(id.to_string(), path.to_string());
        }
    }

    /// Notes a user `tool_result` block.
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
        let got: Vec<(String, String)> = t.take().into_iter().map(|d| (d.path, d.artifact_kind)).collect();
        assert_eq!(
            got,
            [("/p/index.html".to_string(), "html".to_string()), ("/p/n.ipynb".to_string(), "file".to_string())]
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
