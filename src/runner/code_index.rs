//! The `code-import` atom's worker: after the agent's iteration it indexes the project's source
//! tree into `code/index.json` — every file's path, size, language (by extension), line count and
//! blake3 digest, sorted by path, with totals per language — and reports it as an artifact, so the
//! stages after it (design-extract, token-map, rewrite-plan) start from a real inventory. Hidden
//! entries, `node_modules`, `target`, `.od` and `code/` itself are skipped; links are not followed.
//! Deterministic: the same tree gives the same bytes.

use serde_json::{json, Map, Value};
use std::path::Path;

use super::agent::{AgentEvent, ArtifactDraft};
use crate::limits::{MAX_CODE_INDEX_FILES, MAX_CODE_INDEX_FILE_BYTES};

/// Where the index is written, relative to the project.
pub const INDEX_PATH: &str = "code/index.json";

/// Folders skipped wherever they are (installed dependencies, caches).
const ANYWHERE: &[&str] = &["node_modules", "__pycache__"];
/// Folders skipped at the project's top (build output, and the index's own folder).
const TOP_LEVEL: &[&str] = &["target", "code", "dist", "build"];

fn language(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "ts" | "tsx" => "typescript",
        "js" | "jsx" | "mjs" | "cjs" => "javascript",
        "rs" => "rust",
        "py" => "python",
        "go" => "go",
        "java" | "kt" => "jvm",
        "swift" => "swift",
        "c" | "h" | "cc" | "cpp" | "hpp" => "c-family",
        "css" | "scss" | "sass" | "less" => "css",
        "html" | "htm" | "vue" | "svelte" => "markup",
        "json" | "yaml" | "yml" | "toml" => "config",
        "md" | "mdx" | "txt" => "text",
        "svg" | "png" | "jpg" | "jpeg" | "gif" | "webp" | "ico" => "asset",
        _ => "other",
    }
}

fn walk(root: &Path, rel: &str, out: &mut Vec<(String, std::fs::Metadata)>, truncated: &mut bool) {
    let dir = if rel.is_empty() { root.to_path_buf() } else { root.join(rel) };
    let Ok(entries) = std::fs::read_dir(&dir) else { return };
    let mut names: Vec<(String, std::fs::Metadata)> = entries
        .flatten()
        .filter_map(|e| Some((e.file_name().into_string().ok()?, std::fs::symlink_metadata(e.path()).ok()?)))
        .collect();
    names.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, meta) in names {
        let skipped_dir = meta.is_dir()
            && (ANYWHERE.contains(&name.as_str()) || (rel.is_empty() && TOP_LEVEL.contains(&name.as_str())));
        if name.starts_with('.') || skipped_dir {
            continue;
        }
        let path = if rel.is_empty() { name } else { format!("{rel}/{name}") };
        if meta.is_dir() {
            walk(root, &path, out, truncated);
        } else if meta.is_file() {
            if out.len() >= MAX_CODE_INDEX_FILES {
                *truncated = true;
                return;
            }
            out.push((path, meta));
        }
    }
}

/// The index of `project_dir` (what `code/index.json` holds).
pub fn index(project_dir: &Path) -> Value {
    let (mut found, mut truncated) = (Vec::new(), false);
    walk(project_dir, "", &mut found, &mut truncated);
    let (mut files, mut langs, mut total) = (Vec::new(), Map::new(), 0u64);
    for (path, meta) in found {
        let lang = language(&path);
        let bytes = meta.len();
        total += bytes;
        let mut f = json!({ "path": path, "bytes": bytes, "language": lang });
        if bytes <= MAX_CODE_INDEX_FILE_BYTES {
            if let Ok(content) = std::fs::read(project_dir.join(&path)) {
                f["digest"] = json!(blake3::hash(&content).to_hex().to_string());
                if std::str::from_utf8(&content).is_ok() {
                    f["lines"] = json!(
                        content.iter().filter(|b| **b == b'\n').count()
                            + usize::from(!content.is_empty() && !content.ends_with(b"\n"))
                    );
                }
            }
        }
        let e = langs.entry(lang).or_insert_with(|| json!({ "files": 0, "bytes": 0 }));
        e["files"] = json!(e["files"].as_u64().unwrap_or(0) + 1);
        e["bytes"] = json!(e["bytes"].as_u64().unwrap_or(0) + bytes);
        files.push(f);
    }
    json!({ "version": 1, "totalFiles": files.len(), "totalBytes": total, "truncated": truncated,
            "languages": langs, "files": files })
}

/// Writes the index into the project and reports it as an artifact.
pub fn code_import(project_dir: &Path) -> Vec<AgentEvent> {
    let v = index(project_dir);
    let status = |detail: String| AgentEvent::Output {
        channel: "agent".into(),
        payload: json!({ "type": "status", "label": "code-import", "detail": detail }),
    };
    let bytes = serde_json::to_vec_pretty(&v).expect("plain JSON");
    let written = crate::engine::safe_fs::Root::open(project_dir)
        .and_then(|root| root.write_atomic_unsynced(INDEX_PATH, &bytes, "code-index"));
    match written {
        Ok(()) => vec![
            status(format!("indexed {} files ({} bytes)", v["totalFiles"], v["totalBytes"])),
            AgentEvent::Artifact(ArtifactDraft {
                path: INDEX_PATH.into(),
                title: "Code index".into(),
                artifact_kind: "code-index".into(),
                render_kind: "json".into(),
                ..Default::default()
            }),
        ],
        Err(e) => vec![status(format!("could not write {INDEX_PATH}: {e}"))],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_the_tree_deterministically_skipping_hidden_and_vendored() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("src/ui")).unwrap();
        std::fs::create_dir_all(p.join("node_modules/x")).unwrap();
        std::fs::create_dir_all(p.join(".git")).unwrap();
        std::fs::write(p.join("src/main.ts"), "a\nb\n").unwrap();
        std::fs::write(p.join("src/ui/app.css"), "x").unwrap();
        std::fs::write(p.join("node_modules/x/i.js"), "no").unwrap();
        std::fs::write(p.join(".git/HEAD"), "no").unwrap();
        let evs = code_import(p);
        assert!(matches!(&evs[1], AgentEvent::Artifact(a) if a.path == INDEX_PATH));
        let v: Value = serde_json::from_slice(&std::fs::read(p.join(INDEX_PATH)).unwrap()).unwrap();
        let paths: Vec<&str> = v["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
        assert_eq!(paths, ["src/main.ts", "src/ui/app.css"]);
        assert_eq!(v["files"][0]["lines"], 2);
        assert_eq!(v["files"][1]["lines"], 1);
        assert_eq!(v["languages"]["typescript"]["files"], 1);
        // The index itself is not indexed the second time, and the bytes are the same.
        let first = std::fs::read(p.join(INDEX_PATH)).unwrap();
        code_import(p);
        assert_eq!(std::fs::read(p.join(INDEX_PATH)).unwrap(), first);
    }
}
