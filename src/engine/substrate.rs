//! The substrate a run's agent works with (spec §14.3, issue 30): before a run's first agent
//! invocation od stages into its working folder the plugin's `stageAt: run-start` assets (at their
//! own paths), its skill context under [`CONTEXT_DIR`] (SKILL.md, the design system file, craft
//! files, context skills' SKILL.md, inherited `compat.*` files, and the files of other installed
//! plugins a reference names — `context_refs.rs` says which), and an MCP configuration naming `od mcp` and the plugin's MCP
//! servers ([`MCP_CONFIG`], or [`MCP_BESIDE`] beside a user's own file — see [`mcp_config`]). Every
//! file comes from the plugin's installed folder, which must still hash to the snapshot's
//! `pluginSourceDigest`; every target path is checked like a project file path, and a path that
//! escapes is refused by name before anything is written. Each file's bytes become a blob, listed
//! in the `substrate_staged` event the runner records, so a fork restores them.

use od_events::runs::{StagedFile, SubstrateStaged};
use serde_json::{json, Map, Value};
use std::path::Path;

use super::context_refs::{context_refs, local_candidates, plugin_files, plugin_target, CtxRef, Origin, Part};
use super::files::clean_relative;
use super::safe_fs::{Root, SafeFsError};
use super::Engine;
use crate::limits::{MAX_PROJECT_FILE_BYTES, MAX_STAGED_BYTES, MAX_STAGED_FILES};

/// The staged context folder, relative to the working folder.
pub const CONTEXT_DIR: &str = ".od/context";
/// The MCP configuration Claude-style agents read, at the working folder's root.
pub const MCP_CONFIG: &str = ".mcp.json";
/// Where od's MCP configuration goes when a user's own `.mcp.json` cannot take od's servers.
pub const MCP_BESIDE: &str = ".od/mcp.json";
/// od's note of the `.mcp.json` it last wrote (digest and server names): what tells od's file
/// from a user's.
pub const STAGED_NOTE: &str = ".od/staged.json";

/// Why a run's substrate could not be staged (nothing is written then).
#[derive(Debug, thiserror::Error)]
pub enum SubstrateError {
    #[error("{field} {path:?} escapes the working folder (or names od's own .od folder); nothing was staged")]
    PathEscapes { field: String, path: String },
    #[error("plugin {plugin}'s installed folder no longer matches the run's snapshot ({why}); nothing was staged")]
    PluginChanged { plugin: String, why: String },
    #[error("{field} {path:?}: {why}; nothing was staged")]
    Unreadable { field: String, path: String, why: String },
    #[error("{what}; nothing was staged")]
    TooMuch { what: String },
    #[error("staging {path}: {why}")]
    Io { path: String, why: String },
}

/// How the agent reaches od's own MCP server: this od binary and the arguments that make it reach
/// this daemon and data dir, scoped to the run.
pub struct OdMcpServer {
    pub command: String,
    pub args: Vec<String>,
}

/// Whether the snapshot's plugin declares anything to stage (context files, assets, MCP servers).
/// Runs of plugins that declare none stage nothing, as before.
pub fn wants_staging(snap: &Value) -> bool {
    let c = &snap["manifest"]["od"]["context"];
    let has = |k: &str| c[k].as_array().is_some_and(|a| !a.is_empty());
    c["designSystem"].is_object() || has("skills") || has("craft") || has("assets") || has("mcp")
}

/// A path a manifest field names: a string, or an object's `path`.
fn path_of(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => Some(s),
        Value::Object(_) => v["path"].as_str(),
        _ => None,
    }
}

/// One file to stage: where it goes, what it is, and its bytes.
struct Planned {
    target: String,
    kind: &'static str,
    source: String,
    bytes: Vec<u8>,
}

/// Reads the plugin file `rel` (no link followed, bounded). `Ok(None)`: not there (or a folder).
fn read_plugin_file(root: &Root, field: &str, rel: &str) -> Result<Option<Vec<u8>>, SubstrateError> {
    let unreadable = |why: String| SubstrateError::Unreadable { field: field.into(), path: rel.into(), why };
    let f = match root.open_file(rel) {
        Ok(f) => f,
        Err(SafeFsError::NotFound | SafeFsError::IsDirectory | SafeFsError::NotADirectory(_)) => return Ok(None),
        Err(e) => return Err(unreadable(e.to_string())),
    };
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_PROJECT_FILE_BYTES as u64 + 1), &mut out)
        .map_err(|e| unreadable(e.to_string()))?;
    if out.len() > MAX_PROJECT_FILE_BYTES {
        return Err(unreadable(format!("larger than MAX_PROJECT_FILE_BYTES ({MAX_PROJECT_FILE_BYTES})")));
    }
    Ok(Some(out))
}

/// A manifest path, checked: clean and inside (the plugin folder, and so the context folder).
fn checked(field: &str, raw: &str) -> Result<String, SubstrateError> {
    let escapes = || SubstrateError::PathEscapes { field: field.into(), path: raw.into() };
    let clean = clean_relative(raw).map_err(|_| escapes())?;
    // od's own folder is not a plugin's to write into.
    if clean == ".od" || clean.starts_with(".od/") {
        return Err(escapes());
    }
    Ok(clean)
}

/// Another installed plugin's folder and version, by id (None: not installed).
type OtherPlugin<'a> = &'a dyn Fn(&str) -> Option<(std::path::PathBuf, String)>;

/// The file of another installed plugin a reference names (`Err`: why it is missing).
fn other_plugin(r: &CtxRef, id: &str, other: OtherPlugin) -> Result<Result<Planned, String>, SubstrateError> {
    let Some((dir, version)) = other(id) else {
        return Ok(Err(format!("{} {id} (no such plugin is installed)", r.field)));
    };
    let escapes = || SubstrateError::PathEscapes { field: r.field.clone(), path: id.into() };
    let root = Root::open(&dir).map_err(|e| SubstrateError::Unreadable {
        field: r.field.clone(),
        path: id.into(),
        why: e.to_string(),
    })?;
    for f in plugin_files(r.part) {
        let target = plugin_target(id, f).ok_or_else(escapes)?;
        if let Some(bytes) = read_plugin_file(&root, &r.field, f)? {
            return Ok(Ok(Planned { target, kind: "context", source: format!("plugin:{id}@{version}/{f}"), bytes }));
        }
    }
    Ok(Err(format!("{} {id} (the plugin has no {})", r.field, plugin_files(r.part).join(" or "))))
}

/// Every file to stage but the MCP configuration, and the references not found.
fn plan_files(
    snap: &Value,
    root: &Root,
    project_ds: Option<&str>,
    other: OtherPlugin,
) -> Result<(Vec<Planned>, Vec<String>), SubstrateError> {
    let c = &snap["manifest"]["od"]["context"];
    let mut out: Vec<Planned> = Vec::new();
    let mut missing = Vec::new();
    // Assets: at their own path in the working folder.
    for (i, a) in c["assets"].as_array().into_iter().flatten().enumerate() {
        let field = format!("od.context.assets[{i}]");
        let Some(raw) = path_of(a) else { continue };
        let rel = checked(&field, raw)?;
        match read_plugin_file(root, &field, &rel)? {
            Some(bytes) => out.push(Planned { target: rel.clone(), kind: "asset", source: rel, bytes }),
            None => missing.push(format!("{field} {raw}")),
        }
    }
    // Context: the plugin's SKILL.md, then the design system, craft, context skills and inherited
    // (`compat.*`) files (`context_refs`), each under the context folder at its path in the plugin
    // (a folder stands for its DESIGN.md / SKILL.md), another plugin's under `plugins/<id>/`.
    if let Some(bytes) = read_plugin_file(root, "SKILL.md", "SKILL.md")? {
        let target = format!("{CONTEXT_DIR}/SKILL.md");
        out.push(Planned { target, kind: "context", source: "SKILL.md".into(), bytes });
    }
    let mut design_system = false;
    for r in context_refs(snap, project_ds) {
        if r.part == Part::DesignSystem && design_system {
            continue;
        }
        let found = match &r.origin {
            Origin::Path(raw) => {
                let rel = checked(&r.field, raw)?;
                let mut found = None;
                for cand in local_candidates(r.part, &rel) {
                    if let Some(bytes) = read_plugin_file(root, &r.field, &cand)? {
                        found = Some(Planned {
                            target: format!("{CONTEXT_DIR}/{cand}"),
                            kind: "context",
                            source: cand,
                            bytes,
                        });
                        break;
                    }
                }
                found.ok_or_else(|| format!("{} {raw}", r.field))
            }
            Origin::Plugin(id) => other_plugin(&r, id, other)?,
        };
        match found {
            Ok(p) => {
                design_system |= r.part == Part::DesignSystem;
                if !out.iter().any(|q| q.target == p.target) {
                    out.push(p);
                }
            }
            Err(m) => missing.push(m),
        }
    }
    Ok((out, missing))
}

/// The MCP servers od configures: `od` (od's own, always first) and the plugin's, by name. A
/// plugin server named `od` is left out (od's own keeps the name) and reported missing.
fn servers(snap: &Value, od: &OdMcpServer, missing: &mut Vec<String>) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("od".into(), json!({ "command": od.command, "args": od.args }));
    for m in snap["mcpServers"].as_array().into_iter().flatten() {
        let Some(name) = m["name"].as_str().filter(|n| !n.is_empty()) else { continue };
        if out.contains_key(name) {
            missing.push(format!("od.context.mcp {name} (the name is taken)"));
            continue;
        }
        let entry = if let Some(url) = m["url"].as_str() {
            json!({ "type": m["type"].as_str().filter(|t| *t != "stdio").unwrap_or("http"), "url": url })
        } else if let Some(cmd) = m["command"].as_str() {
            let mut e = json!({ "command": cmd });
            if m["args"].is_array() {
                e["args"] = m["args"].clone();
            }
            if m["env"].is_object() {
                e["env"] = m["env"].clone();
            }
            e
        } else {
            missing.push(format!("od.context.mcp {name} (neither a command nor a url)"));
            continue;
        };
        out.insert(name.to_string(), entry);
    }
    out
}

/// Where od's MCP configuration goes and its bytes. The rule: no `.mcp.json` → od writes it. A
/// `.mcp.json` od wrote (its digest is the one in [`STAGED_NOTE`]) → od replaces the servers it
/// wrote there and keeps every other. A user's own `.mcp.json` → od's servers are merged in only
/// when it is a JSON object whose `mcpServers` (if any) is an object naming none of od's servers
/// (the user's entries and keys are kept as they are); otherwise it is left untouched and od
/// writes [`MCP_BESIDE`]. Returns `(path, mode, bytes, names written)`.
fn mcp_config(work: &Root, ours: Map<String, Value>) -> (String, &'static str, Vec<u8>, Vec<String>) {
    let names: Vec<String> = ours.keys().cloned().collect();
    let render = |v: &Value| {
        let mut b = serde_json::to_vec_pretty(v).unwrap_or_default();
        b.push(b'\n');
        b
    };
    let fresh = || json!({ "mcpServers": ours.clone() });
    let existing = match work.read(MCP_CONFIG) {
        Ok(b) => b,
        Err(SafeFsError::NotFound) => return (MCP_CONFIG.into(), "created", render(&fresh()), names),
        Err(_) => return (MCP_BESIDE.into(), "beside-user-file", render(&fresh()), names),
    };
    let digest = blake3::hash(&existing).to_hex().to_string();
    let note: Value = work.read(STAGED_NOTE).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    let owned: Vec<String> = match note[MCP_CONFIG]["digest"].as_str() == Some(digest.as_str()) {
        true => note[MCP_CONFIG]["servers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        false => Vec::new(),
    };
    let beside = (MCP_BESIDE.to_string(), "beside-user-file", render(&fresh()), names.clone());
    let Ok(Value::Object(mut top)) = serde_json::from_slice::<Value>(&existing) else { return beside };
    let mut ms = match top.get("mcpServers") {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return beside,
    };
    for n in &owned {
        ms.shift_remove(n);
    }
    if names.iter().any(|n| ms.contains_key(n)) {
        return beside;
    }
    let theirs = !ms.is_empty() || top.keys().any(|k| k != "mcpServers");
    ms.extend(ours);
    top.insert("mcpServers".into(), Value::Object(ms));
    let mode = if theirs { "merged" } else { "created" };
    (MCP_CONFIG.into(), mode, render(&Value::Object(top)), names)
}

impl Engine {
    /// Stages run `run_id`'s (of project `project_id`) substrate into `work` (its working folder) from the plugin of `snap`
    /// and returns the event recording it; `Ok(None)` when the plugin declares nothing to stage.
    /// Every check and read comes first; the blobs (one batch) and the files are durable before
    /// this returns, the blobs' fsyncs in one round with the files' folders.
    pub fn stage_substrate(
        &self,
        snap: &Value,
        run_id: &str,
        project_id: &str,
        work: &Path,
        od: &OdMcpServer,
    ) -> Result<Option<SubstrateStaged>, SubstrateError> {
        if !wants_staging(snap) {
            return Ok(None);
        }
        let plugin_id = snap["pluginId"].as_str().unwrap_or_default();
        let want = snap["pluginSourceDigest"].as_str().unwrap_or_default();
        let changed = |why: String| SubstrateError::PluginChanged { plugin: plugin_id.into(), why };
        let p = self.plugin(plugin_id).map_err(|e| changed(e.to_string()))?;
        let dir = self.data_dir.join(&p.fs_path);
        // Digest-checked: the installed folder hashes to what the snapshot froze.
        match crate::plugins::load_folder(&dir) {
            Ok(l) if l.source_digest == want => {}
            Ok(l) => return Err(changed(format!("digest {} is not the snapshot's {want}", l.source_digest))),
            Err(_) => return Err(changed("it does not load".into())),
        }
        let root = Root::open(&dir).map_err(|e| changed(e.to_string()))?;
        let project_ds = self.project_design_system(project_id);
        let other = |id: &str| self.plugin(id).ok().map(|o| (self.data_dir.join(&o.fs_path), o.version));
        let (mut files, mut missing) = plan_files(snap, &root, project_ds.as_deref(), &other)?;
        let io = |path: &str, e: &dyn std::fmt::Display| SubstrateError::Io { path: path.into(), why: e.to_string() };
        let work_root = Root::create(work).map_err(|e| io(&work.display().to_string(), &e))?;
        let ours = servers(snap, od, &mut missing);
        let (mcp_path, mode, mcp_bytes, names) = mcp_config(&work_root, ours);
        files.push(Planned { target: mcp_path.clone(), kind: "mcp-config", source: String::new(), bytes: mcp_bytes });
        if files.len() > MAX_STAGED_FILES {
            return Err(SubstrateError::TooMuch {
                what: format!("{} files to stage, more than MAX_STAGED_FILES ({MAX_STAGED_FILES})", files.len()),
            });
        }
        let total: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
        if total > MAX_STAGED_BYTES {
            return Err(SubstrateError::TooMuch {
                what: format!("{total} bytes to stage, more than MAX_STAGED_BYTES ({MAX_STAGED_BYTES})"),
            });
        }
        let mut staged = Vec::with_capacity(files.len());
        // The blobs in one batch, made durable with the folders below (one round of fsyncs).
        let mut blobs = crate::blobs::BlobBatch::default();
        for f in &files {
            let (digest, bytes) = self.blobs.stage(f.bytes.as_slice(), &mut blobs).map_err(|e| io(&f.target, &e))?;
            staged.push(StagedFile {
                path: f.target.clone(),
                kind: f.kind.into(),
                source: f.source.clone(),
                digest,
                bytes,
            });
        }
        let mut syncs = crate::durable::Syncs::new();
        for f in &files {
            let tag = super::safe_fs::temp_tag();
            work_root.write_atomic_in(&f.target, &f.bytes, &tag, &mut syncs).map_err(|e| io(&f.target, &e))?;
        }
        if mcp_path == MCP_CONFIG {
            let digest = staged.last().map(|s| s.digest.clone()).unwrap_or_default();
            let note = json!({ MCP_CONFIG: { "digest": digest, "servers": names, "runId": run_id } });
            let tag = super::safe_fs::temp_tag();
            work_root
                .write_atomic_in(STAGED_NOTE, note.to_string().as_bytes(), &tag, &mut syncs)
                .map_err(|e| io(STAGED_NOTE, &e))?;
        }
        blobs.commit(syncs).map_err(|e| io(&work.display().to_string(), &e))?;
        Ok(Some(SubstrateStaged {
            run_id: run_id.into(),
            project_id: project_id.into(),
            context_dir: CONTEXT_DIR.into(),
            mcp_config: mcp_path,
            mcp_config_mode: mode.into(),
            files: staged,
            missing,
            staged_at: self.clock.now_ms(),
        }))
    }
}
