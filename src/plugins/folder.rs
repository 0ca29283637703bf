//! Reading a plugin folder within the limits of `plugins/mod.rs`: walking it (sorted, bounded in
//! entries and depth, `.git` skipped), the symlink policy (a link is followed only when its target
//! is a file inside the folder; links that escape, dangle or name a folder are skipped with a
//! warning; FIFOs, sockets and devices are never opened), keeping the three manifest files, and
//! the source digest.
//!
//! Digest: blake3 over, for each file in byte order of its relative path,
//! `u64le(path.len) ‖ path ‖ u64le(content.len) ‖ content`; hex-encoded.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::{
    Diagnostic, CLAUDE_PLUGIN, FOLDER, MAX_FOLDER_BYTES, MAX_FOLDER_DEPTH, MAX_FOLDER_ENTRIES, MAX_MANIFEST_BYTES,
    SIDECAR, SKILL_MD,
};

/// What was read from a folder.
#[derive(Debug, Default)]
pub(super) struct Folder {
    /// The folder's own name (the fallback plugin id).
    pub folder_id: String,
    /// Whether the whole folder was walked (no limit or listing error stopped it).
    pub walked: bool,
    /// Whether any of the three manifest files exists (even if it could not be read).
    pub has_manifest_file: bool,
    /// Relative paths of the files, sorted.
    pub files: Vec<String>,
    /// The source digest; `None` when a limit or read error stopped reading.
    pub digest: Option<String>,
    /// `SKILL.md` bytes.
    pub skill: Option<Vec<u8>>,
    /// `open-design.json` bytes.
    pub sidecar: Option<Vec<u8>>,
    /// `.claude-plugin/plugin.json` bytes.
    pub claude: Option<Vec<u8>>,
}

struct Entry {
    rel: String,
    path: PathBuf,
    len: u64,
}

/// Reads `dir`, pushing a diagnostic for every problem.
pub(super) fn read(dir: &Path, diags: &mut Vec<Diagnostic>) -> Folder {
    let mut folder = Folder::default();
    let root = match fs::canonicalize(dir) {
        Ok(root) if root.is_dir() => root,
        Ok(_) => {
            diags.push(Diagnostic::error("folder-unreadable", FOLDER, format!("{} is not a folder", dir.display())));
            return folder;
        }
        Err(e) => {
            diags.push(Diagnostic::error("folder-unreadable", FOLDER, format!("cannot open {}: {e}", dir.display())));
            return folder;
        }
    };
    folder.folder_id = root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (mut entries, walked) = list(&root, diags);
    folder.walked = walked;
    entries.sort_by(|a, b| a.rel.cmp(&b.rel));
    folder.files = entries.iter().map(|e| e.rel.clone()).collect();
    folder.has_manifest_file = entries.iter().any(|e| is_manifest(&e.rel));
    let within_budget = within_budget(&entries, diags);
    let mut hasher = blake3::Hasher::new();
    let mut read_ok = walked && within_budget;
    let mut budget = MAX_FOLDER_BYTES;
    for entry in &entries {
        let manifest = is_manifest(&entry.rel);
        if !manifest && !read_ok {
            continue;
        }
        let Some(bytes) = read_entry(entry, manifest, budget, diags) else {
            read_ok = false;
            continue;
        };
        budget = budget.saturating_sub(bytes.len() as u64);
        hasher.update(&(entry.rel.len() as u64).to_le_bytes());
        hasher.update(entry.rel.as_bytes());
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
        match entry.rel.as_str() {
            SKILL_MD => folder.skill = Some(bytes),
            SIDECAR => folder.sidecar = Some(bytes),
            CLAUDE_PLUGIN => folder.claude = Some(bytes),
            _ => {}
        }
    }
    if read_ok {
        folder.digest = Some(hasher.finalize().to_hex().to_string());
    }
    folder
}

/// Whether the folder's files together fit [`MAX_FOLDER_BYTES`]; when not, a diagnostic names
/// the largest file.
fn within_budget(entries: &[Entry], diags: &mut Vec<Diagnostic>) -> bool {
    let total: u64 = entries.iter().fold(0u64, |sum, e| sum.saturating_add(e.len));
    if total <= MAX_FOLDER_BYTES {
        return true;
    }
    let largest = entries.iter().max_by_key(|e| e.len).map_or(FOLDER, |e| e.rel.as_str());
    let msg = format!(
        "the folder holds {total} bytes, over the {MAX_FOLDER_BYTES}-byte limit (largest file: {largest}); \
         nothing but the manifests was read"
    );
    diags.push(Diagnostic::error("folder-too-large", largest, msg));
    false
}

/// One file's bytes, within what is left of the folder's `budget` (and a manifest's own limit);
/// None, with a diagnostic, when it is too large, grew while read, or cannot be read.
fn read_entry(entry: &Entry, manifest: bool, budget: u64, diags: &mut Vec<Diagnostic>) -> Option<Vec<u8>> {
    if manifest && entry.len > MAX_MANIFEST_BYTES {
        let msg = format!("{} bytes, over the {MAX_MANIFEST_BYTES}-byte limit for a manifest file", entry.len);
        diags.push(Diagnostic::error("file-too-large", &entry.rel, msg));
        return None;
    }
    let cap = if manifest { MAX_MANIFEST_BYTES.min(budget) } else { budget };
    match read_capped(&entry.path, cap) {
        Ok(Some(bytes)) => Some(bytes),
        Ok(None) => {
            let msg = format!("the file grew past the read limit of {cap} bytes while it was read");
            diags.push(Diagnostic::error("folder-too-large", &entry.rel, msg));
            None
        }
        Err(e) => {
            diags.push(Diagnostic::error("file-unreadable", &entry.rel, format!("cannot read: {e}")));
            None
        }
    }
}

fn is_manifest(rel: &str) -> bool {
    matches!(rel, SKILL_MD | SIDECAR | CLAUDE_PLUGIN)
}

/// Reads at most `cap` bytes; `Ok(None)` when the file holds more.
fn read_capped(path: &Path, cap: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    fs::File::open(path)?.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= cap).then_some(bytes))
}

/// Lists the regular files under `root` (and in-folder links to files). The flag is false when a
/// limit stopped the walk.
fn list(root: &Path, diags: &mut Vec<Diagnostic>) -> (Vec<Entry>, bool) {
    let mut out = Vec::new();
    let mut seen = 0usize;
    let mut stack = vec![(root.to_path_buf(), String::new(), 0usize)];
    while let Some((dir, prefix, depth)) = stack.pop() {
        let shown = if prefix.is_empty() { FOLDER } else { prefix.as_str() };
        let room = MAX_FOLDER_ENTRIES + 1 - seen;
        let mut children: Vec<fs::DirEntry> = match fs::read_dir(&dir) {
            Ok(rd) => rd.filter_map(Result::ok).take(room).collect(),
            Err(e) => {
                diags.push(Diagnostic::error("folder-unreadable", shown, format!("cannot list: {e}")));
                return (out, false);
            }
        };
        seen += children.len();
        if seen > MAX_FOLDER_ENTRIES {
            let msg = format!("the folder holds more than {MAX_FOLDER_ENTRIES} files, folders and links");
            diags.push(Diagnostic::error("too-many-files", shown, msg));
            return (out, false);
        }
        children.sort_by_key(|c| c.file_name());
        for child in children {
            let name = child.file_name();
            let Some(name) = name.to_str() else {
                let msg = format!("a name in this folder is not UTF-8: {}", name.to_string_lossy());
                diags.push(Diagnostic::error("invalid-path", shown, msg));
                return (out, false);
            };
            let rel = if prefix.is_empty() { name.to_string() } else { format!("{prefix}/{name}") };
            let path = child.path();
            let Ok(kind) = child.file_type() else { continue };
            if kind.is_dir() {
                if name == ".git" {
                    continue;
                }
                if depth + 1 > MAX_FOLDER_DEPTH {
                    let msg = format!("folders nest deeper than {MAX_FOLDER_DEPTH} levels");
                    diags.push(Diagnostic::error("folder-too-deep", &rel, msg));
                    return (out, false);
                }
                stack.push((path, rel, depth + 1));
            } else if kind.is_file() {
                let len = child.metadata().map_or(0, |m| m.len());
                out.push(Entry { rel, path, len });
            } else if kind.is_symlink() {
                if let Some(entry) = follow_link(root, rel, &path, diags) {
                    out.push(entry);
                }
            } else {
                diags.push(Diagnostic::warning("special-file-skipped", &rel, "not a regular file; skipped"));
            }
        }
    }
    (out, true)
}

/// A link is kept only when it resolves to a regular file inside the folder.
fn follow_link(root: &Path, rel: String, path: &Path, diags: &mut Vec<Diagnostic>) -> Option<Entry> {
    let target = match fs::canonicalize(path) {
        Ok(target) => target,
        Err(_) => {
            diags.push(Diagnostic::warning("symlink-broken", &rel, "symbolic link with no target; skipped"));
            return None;
        }
    };
    if !target.starts_with(root) {
        let msg = "symbolic link points outside the plugin folder; skipped (nothing outside the folder is read)";
        diags.push(Diagnostic::warning("symlink-escape", &rel, msg));
        return None;
    }
    match fs::metadata(&target) {
        Ok(md) if md.is_file() => Some(Entry { rel, path: target, len: md.len() }),
        _ => {
            let msg = "symbolic link to a folder or special file inside the plugin; skipped";
            diags.push(Diagnostic::warning("symlink-skipped", &rel, msg));
            None
        }
    }
}
