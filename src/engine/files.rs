//! Project files: list, read, write, delete — always inside the project's directory. A path is
//! relative, `/`-separated, with no `..`, no absolute or drive prefix, and no symlink on the way
//! out of the directory; anything else is refused (`path-escapes-project`) with nothing touched.

use serde_json::{json, Value};
use std::path::{Component, Path, PathBuf};

use super::errors::WorkError;
use super::Engine;
use crate::limits::MAX_PROJECT_FILE_BYTES;

/// Normalises a project-relative path, refusing anything that could leave the directory.
pub fn clean_relative(path: &str) -> Result<String, WorkError> {
    let p = Path::new(path);
    let mut parts = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => {
                let s = s.to_str().ok_or_else(|| WorkError::PathEscapes(path.into()))?;
                parts.push(s.to_string());
            }
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(WorkError::PathEscapes(path.into()))
            }
        }
    }
    if parts.is_empty() || path.contains('\0') {
        return Err(WorkError::invalid("path", format!("{path:?} names no file")));
    }
    Ok(parts.join("/"))
}

/// `rel` under `root`, refusing a symlink anywhere on the way (which could point outside).
fn resolve(root: &Path, rel: &str) -> Result<PathBuf, WorkError> {
    let mut at = root.to_path_buf();
    for part in rel.split('/') {
        at.push(part);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(WorkError::PathEscapes(rel.into()));
        }
    }
    Ok(at)
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<Value>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let ft = e.file_type()?;
        let path = e.path();
        let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        if ft.is_dir() {
            walk(root, &path, out)?;
        } else if ft.is_file() {
            let m = e.metadata()?;
            let modified = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as i64);
            out.push(json!({ "path": rel, "size": m.len(), "modifiedAt": modified }));
        }
    }
    Ok(())
}

impl Engine {
    fn project_root(&self, project_id: &str) -> Result<PathBuf, WorkError> {
        let p = self.project(project_id)?;
        Ok(self.project_dir(&p))
    }

    /// Every file of the project (recursively, sorted), with size and mtime.
    pub fn list_files(&self, project_id: &str) -> Result<Vec<Value>, WorkError> {
        let root = self.project_root(project_id)?;
        let mut out = Vec::new();
        if root.exists() {
            walk(&root, &root, &mut out).map_err(|e| WorkError::io("listing project files", e))?;
        }
        Ok(out)
    }

    /// A project file's bytes.
    pub fn read_file(&self, project_id: &str, path: &str) -> Result<Vec<u8>, WorkError> {
        let rel = clean_relative(path)?;
        let full = resolve(&self.project_root(project_id)?, &rel)?;
        match std::fs::read(&full) {
            Ok(b) => Ok(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(WorkError::FileNotFound(rel)),
            Err(e) => Err(WorkError::io("reading a project file", e)),
        }
    }

    /// Writes a project file (creating directories), atomically via a temp file and rename.
    pub fn write_file(&self, project_id: &str, path: &str, bytes: &[u8]) -> Result<Value, WorkError> {
        if bytes.len() > MAX_PROJECT_FILE_BYTES {
            return Err(WorkError::invalid(
                "content",
                format!("{} bytes is over the {MAX_PROJECT_FILE_BYTES}-byte limit", bytes.len()),
            ));
        }
        let rel = clean_relative(path)?;
        let root = self.project_root(project_id)?;
        let full = resolve(&root, &rel)?;
        if full.is_dir() {
            return Err(WorkError::invalid("path", format!("{rel} is a directory")));
        }
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(|e| WorkError::io("creating directories", e))?;
        }
        let tmp = full.with_file_name(format!(".{}.od-tmp", full.file_name().and_then(|n| n.to_str()).unwrap_or("f")));
        std::fs::write(&tmp, bytes).map_err(|e| WorkError::io("writing a project file", e))?;
        std::fs::rename(&tmp, &full).map_err(|e| WorkError::io("writing a project file", e))?;
        Ok(json!({ "path": rel, "size": bytes.len(), "digest": blake3::hash(bytes).to_hex().to_string() }))
    }

    /// Deletes a project file.
    pub fn delete_file(&self, project_id: &str, path: &str) -> Result<Value, WorkError> {
        let rel = clean_relative(path)?;
        let full = resolve(&self.project_root(project_id)?, &rel)?;
        match std::fs::remove_file(&full) {
            Ok(()) => Ok(json!({ "path": rel, "deleted": true })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(WorkError::FileNotFound(rel)),
            Err(e) => Err(WorkError::io("deleting a project file", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_leave_are_refused() {
        for bad in ["../x", "/etc/passwd", "a/../../b", "a/../..", "..", "a/b/../../../c"] {
            assert!(matches!(clean_relative(bad), Err(WorkError::PathEscapes(_))), "{bad}");
        }
        assert_eq!(clean_relative("./a//b/c.txt").unwrap(), "a/b/c.txt");
        assert!(matches!(clean_relative(""), Err(WorkError::Invalid { .. })));
    }
}
