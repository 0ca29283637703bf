//! Project files: list, read, write, delete — always inside the project's directory. A path is
//! relative, `/`-separated, with no `..`, no absolute or drive prefix, and no symlink anywhere on
//! the way (resolved component by component with [`super::safe_fs`], so nothing is followed even
//! if a link appears between a check and a write); anything else is refused
//! (`path-escapes-project`) with nothing touched.

use serde_json::{json, Value};
use std::path::{Component, Path, PathBuf};

use super::errors::WorkError;
use super::safe_fs::{Root, SafeFsError};
use super::Engine;
use crate::limits::{MAX_FILE_NAME_BYTES, MAX_PROJECT_FILE_BYTES};

/// Normalises a project-relative path, refusing anything that could leave the directory.
pub fn clean_relative(path: &str) -> Result<String, WorkError> {
    let p = Path::new(path);
    let mut parts = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => {
                let s = s.to_str().ok_or_else(|| WorkError::PathEscapes(path.into()))?;
                if s.len() > MAX_FILE_NAME_BYTES {
                    let msg = format!("{path:?}: a name is at most {MAX_FILE_NAME_BYTES} bytes ({} here)", s.len());
                    return Err(WorkError::invalid("path", msg));
                }
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

/// A [`SafeFsError`] as the command's error, naming the path.
fn fs_error(rel: &str, during: &'static str, e: SafeFsError) -> WorkError {
    match e {
        SafeFsError::Link => WorkError::PathEscapes(rel.into()),
        SafeFsError::NotFound => WorkError::FileNotFound(rel.into()),
        SafeFsError::NotADirectory(part) => WorkError::invalid("path", format!("{rel}: {part} is not a directory")),
        SafeFsError::IsDirectory => WorkError::invalid("path", format!("{rel} is a directory")),
        SafeFsError::NotAFile => WorkError::invalid("path", format!("{rel} is not a regular file")),
        // What the input caused (a name or path too long for the file system, a name it cannot
        // hold, a folder where a file goes) is the caller's to mend: 400 naming the path.
        SafeFsError::Io(e) if input_caused(&e) => WorkError::invalid("path", format!("{rel}: {e}")),
        SafeFsError::Io(e) => WorkError::io(during, e),
    }
}

/// Whether the OS refused because of the path it was given (not because of the machine).
fn input_caused(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENAMETOOLONG | libc::ENOTDIR | libc::EISDIR | libc::EILSEQ | libc::EINVAL | libc::ENOTEMPTY)
    )
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
        let dir = self.project_dir(&p);
        // A folder adopted before the rule held (the data dir, `/`) serves nothing.
        if !p.imported_from.is_empty() {
            super::gate::adoptable(&dir, &self.data_dir, self.config.home.as_deref())?;
        }
        Ok(dir)
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
        let root = self.project_root(project_id)?;
        let during = "reading a project file";
        let root = Root::open(&root).map_err(|e| fs_error(&rel, during, e))?;
        root.read(&rel).map_err(|e| fs_error(&rel, during, e))
    }

    /// Writes a project file (creating directories), atomically via a fresh temp file and rename;
    /// no link on the way, at the target or at the temp name is ever followed.
    pub fn write_file(&self, project_id: &str, path: &str, bytes: &[u8]) -> Result<Value, WorkError> {
        if bytes.len() > MAX_PROJECT_FILE_BYTES {
            return Err(WorkError::invalid(
                "content",
                format!("{} bytes is over the {MAX_PROJECT_FILE_BYTES}-byte limit", bytes.len()),
            ));
        }
        let rel = clean_relative(path)?;
        let root = self.project_root(project_id)?;
        let during = "writing a project file";
        let root = Root::create(&root).map_err(|e| fs_error(&rel, during, e))?;
        root.write_atomic(&rel, bytes, &self.ids.new_id()).map_err(|e| fs_error(&rel, during, e))?;
        Ok(json!({ "path": rel, "size": bytes.len(), "digest": blake3::hash(bytes).to_hex().to_string() }))
    }

    /// Deletes a project file.
    pub fn delete_file(&self, project_id: &str, path: &str) -> Result<Value, WorkError> {
        let rel = clean_relative(path)?;
        let root = self.project_root(project_id)?;
        let during = "deleting a project file";
        let root = Root::open(&root).map_err(|e| fs_error(&rel, during, e))?;
        root.remove(&rel).map_err(|e| fs_error(&rel, during, e))?;
        Ok(json!({ "path": rel, "deleted": true }))
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
