//! `od plugin scaffold`, `od plugin export` and `od plugin publish` (spec §8.2.1, §14, §17): a
//! starter plugin that passes doctor; exactly what a snapshot used, as a folder or a tar; and a
//! plugin packed into a reproducible archive with its marketplace entry (`integrity`, SRI sha256).

use base64::Engine as _;
use serde_json::{json, Value};
use sha2::Digest;
use std::path::{Path, PathBuf};

use super::conn::path_segment;
use super::error::{CliError, CliResult};
use super::Ctx;

fn io(during: &str, e: impl std::fmt::Display) -> CliError {
    CliError::new("storage-io", format!("{during}: {e}"))
}

/// A plugin id: lowercase letters, digits and `-`.
fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !n.starts_with('-')
}

/// `od plugin scaffold <dir>`: SKILL.md and open-design.json for a plugin named after the folder
/// (or `--name`), refusing a folder that has files; then the doctor's report of it.
pub fn scaffold(ctx: &Ctx, dir: &Path, name: Option<String>, title: Option<String>, task_kind: &str) -> CliResult {
    let name = name.unwrap_or_else(|| dir.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default());
    check_scaffold(dir, &name, task_kind)?;
    let title = title.unwrap_or_else(|| title_of(&name));
    let skill = skill_md(&name, &title);
    let manifest = starter_manifest(&name, &title, task_kind);
    crate::durable::write_file(&dir.join("SKILL.md"), skill.as_bytes()).map_err(|e| io("writing SKILL.md", e))?;
    let bytes = serde_json::to_vec_pretty(&manifest).expect("JSON");
    crate::durable::write_file(&dir.join("open-design.json"), &bytes).map_err(|e| io("writing open-design.json", e))?;
    let report = serde_json::to_value(crate::plugins::doctor(dir)).expect("plain data");
    let v = json!({ "path": dir.display().to_string(), "name": name, "files": ["SKILL.md", "open-design.json"], "doctor": report });
    ctx.print(&v, |v| {
        format!(
            "wrote {}/SKILL.md and open-design.json ({})\nnext: edit SKILL.md, then od plugin install {} --link",
            v["path"].as_str().unwrap_or(""),
            if v["doctor"]["ok"] == true { "doctor: ok" } else { "doctor: problems found" },
            v["path"].as_str().unwrap_or("")
        )
    });
    if report["ok"] != true {
        return Err(CliError::new("plugin-invalid", "the scaffold does not pass doctor"));
    }
    Ok(())
}

/// What scaffold refuses: a name that is no plugin id, an unknown task kind, a folder with files.
fn check_scaffold(dir: &Path, name: &str, task_kind: &str) -> CliResult {
    if !valid_name(name) {
        return Err(CliError::new(
            "usage",
            format!("--name: {name:?} is not a plugin id (lowercase letters, digits, -)"),
        ));
    }
    if !matches!(task_kind, "new-generation" | "code-migration" | "figma-migration" | "tune-collab") {
        return Err(CliError::new(
            "usage",
            format!("--task-kind: {task_kind:?} is not new-generation, code-migration, figma-migration or tune-collab"),
        ));
    }
    if dir.exists() && std::fs::read_dir(dir).map_err(|e| io("reading the folder", e))?.next().is_some() {
        return Err(CliError::new(
            "already-exists",
            format!("{} is not empty; scaffold writes into a new or empty folder", dir.display()),
        ));
    }
    Ok(())
}

/// A title from a plugin id: `my-deck` → `My Deck`.
fn title_of(name: &str) -> String {
    name.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next().map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The starter SKILL.md.
fn skill_md(name: &str, title: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: {title} — describe in one sentence what this plugin makes and when to use it.\n---\n# {title}\n\n\
         Explain to the design agent what to make, for whom, and what a good result looks like.\n\n\
         ## Steps\n\n1. Read the brief: {{{{topic}}}}.\n2. Write the result to `index.html`.\n3. Check it against the brief before you finish.\n"
    )
}

/// The starter open-design.json: one input, a generate stage and a critique loop.
fn starter_manifest(name: &str, title: &str, task_kind: &str) -> Value {
    json!({
        "$schema": "https://open-design.ai/schemas/plugin.v1.json",
        "specVersion": "1.0.0",
        "name": name,
        "title": title,
        "version": "0.1.0",
        "description": format!("{title}: a starter plugin made by od plugin scaffold."),
        "license": "Apache-2.0",
        "compat": { "agentSkills": [ { "path": "./SKILL.md" } ] },
        "od": {
            "kind": "skill",
            "taskKind": task_kind,
            "useCase": { "query": "Make {{topic}}" },
            "inputs": [ { "name": "topic", "label": "Topic", "type": "string", "required": true } ],
            "capabilities": ["prompt:inject", "fs:write"],
            "pipeline": { "stages": [
                { "id": "generate", "atoms": ["file-write"] },
                { "id": "critique", "atoms": ["critique-theater"], "repeat": true, "until": "critique.score>=4 || iterations>=3" }
            ] }
        }
    })
}

/// Unpacks a tar (entries checked to stay below `dir`), durably (each file and folder fsynced
/// before the export is reported).
fn untar(bytes: &[u8], dir: &Path) -> CliResult<Vec<String>> {
    use std::io::Read;
    let mut a = tar::Archive::new(bytes);
    let mut files = Vec::new();
    let mut syncs = crate::durable::Syncs::new();
    for entry in a.entries().map_err(|e| io("reading the export", e))? {
        let mut entry = entry.map_err(|e| io("reading the export", e))?;
        let rel = entry.path().map_err(|e| io("reading the export", e))?.into_owned();
        if !rel.components().all(|c| matches!(c, std::path::Component::Normal(_))) {
            return Err(CliError::new("daemon-error", format!("the export names {}", rel.display())));
        }
        let dst = dir.join(&rel);
        if entry.header().entry_type().is_dir() {
            crate::durable::open_dir(&dst, &mut syncs).map_err(|e| io("creating the folder", e))?;
            continue;
        }
        if !entry.header().entry_type().is_file() {
            return Err(CliError::new(
                "daemon-error",
                format!("the export holds {} that is not a file", rel.display()),
            ));
        }
        let mut body = Vec::new();
        entry.read_to_end(&mut body).map_err(|e| io("reading the export", e))?;
        crate::durable::write_file_in(&dst, &body, &mut syncs).map_err(|e| io("writing the export", e))?;
        files.push(rel.display().to_string());
    }
    syncs.commit().map_err(|e| io("writing the export", e))?;
    Ok(files)
}

/// What `--out` names: an archive file, or a folder.
#[derive(Debug, PartialEq, Eq)]
enum OutKind {
    Tar,
    Tgz,
    Folder,
}

/// `.tar` and `.tgz`/`.tar.gz` are archives; another archive-like name (`.zip`, `.gz`, `.tar.xz`,
/// …) is refused rather than made into a folder of that name; anything else is a folder.
fn out_kind(out: &Path) -> CliResult<OutKind> {
    let name = out.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    if name.ends_with(".tar") {
        return Ok(OutKind::Tar);
    }
    if name.ends_with(".tgz") || name.ends_with(".tar.gz") {
        return Ok(OutKind::Tgz);
    }
    let archive_like = [".zip", ".gz", ".tar.xz", ".txz", ".tar.bz2", ".tbz", ".tbz2", ".xz", ".bz2", ".7z", ".zst"];
    if archive_like.iter().any(|ext| name.ends_with(ext)) {
        return Err(CliError::new(
            "usage",
            format!("--out {}: od writes a .tar or .tgz archive, or a folder", out.display()),
        ));
    }
    Ok(OutKind::Folder)
}

/// `od plugin export --snapshot-id S --as od|skill --out PATH`: a `.tar` path gets the tar itself,
/// a `.tgz` (or `.tar.gz`) path the tar gzipped; any other path is a folder (new or empty) the
/// export is unpacked into.
pub fn export(ctx: &Ctx, snapshot_id: &str, target: &str, out: &Path) -> CliResult {
    let kind = out_kind(out)?;
    let conn = ctx.conn()?;
    let id = ctx.resolve(&conn, "snapshot", snapshot_id)?;
    let bytes =
        conn.get_bytes(&format!("/api/applied-plugins/{}/export?as={}", path_segment(&id), path_segment(target)))?;
    let files = if kind != OutKind::Folder {
        let written = match kind {
            OutKind::Tgz => gzip(&bytes)?,
            _ => bytes.clone(),
        };
        crate::durable::write_file(out, &written).map_err(|e| io("writing the export", e))?;
        vec![out.display().to_string()]
    } else {
        if out.exists() && std::fs::read_dir(out).map_err(|e| io("reading --out", e))?.next().is_some() {
            return Err(CliError::new("already-exists", format!("--out {} is not empty", out.display())));
        }
        crate::durable::open_dir(out, &mut crate::durable::Syncs::new()).map_err(|e| io("creating --out", e))?;
        untar(&bytes, out)?
    };
    let digest = blake3::hash(&bytes).to_hex().to_string();
    let v = json!({ "snapshotId": id, "as": target, "out": out.display().to_string(), "files": files, "digest": digest, "bytes": bytes.len() });
    ctx.print(&v, |v| {
        format!("exported snapshot {id} as {target} to {} ({} files)", v["out"].as_str().unwrap_or(""), files_len(v))
    });
    Ok(())
}

/// `bytes` gzipped (fixed header: the same input gives the same file).
fn gzip(bytes: &[u8]) -> CliResult<Vec<u8>> {
    use std::io::Write;
    let mut gz = flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).map_err(|e| io("compressing the export", e))?;
    gz.finish().map_err(|e| io("compressing the export", e))
}

fn files_len(v: &Value) -> usize {
    v["files"].as_array().map_or(0, Vec::len)
}

/// A folder as a reproducible `.tgz`: its files sorted by path below `<name>/`, with fixed mode,
/// owner and time (hidden entries skipped).
fn pack(dir: &Path, name: &str) -> CliResult<Vec<u8>> {
    let mut files = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in std::fs::read_dir(dir.join(&rel)).map_err(|e| io("reading the plugin", e))?.flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            if n.starts_with('.') {
                continue;
            }
            let meta = std::fs::symlink_metadata(e.path()).map_err(|e| io("reading the plugin", e))?;
            if meta.is_dir() {
                stack.push(rel.join(&n));
            } else if meta.is_file() {
                files.push(rel.join(&n));
            }
        }
    }
    files.sort();
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut b = tar::Builder::new(gz);
    for rel in &files {
        let bytes = std::fs::read(dir.join(rel)).map_err(|e| io("reading the plugin", e))?;
        let mut h = tar::Header::new_ustar();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, Path::new(name).join(rel), bytes.as_slice()).map_err(|e| io("packing", e))?;
    }
    b.into_inner().and_then(|gz| gz.finish()).map_err(|e| io("packing", e))
}

/// `od plugin publish <folder> --to <marketplace folder | index .json>`: checks the plugin with
/// doctor, packs it (`<name>-<version>.tgz` beside the index), and writes or replaces its entry
/// in `open-design-marketplace.json` with the archive's `integrity` and the manifest's digest.
pub fn publish(ctx: &Ctx, folder: &Path, to: &Path) -> CliResult {
    let report = crate::plugins::doctor(folder);
    if !report.ok {
        let v = serde_json::to_value(&report).expect("plain data");
        return Err(CliError::new("plugin-invalid", format!("{} does not pass doctor", folder.display())).with_data(v));
    }
    let loaded = crate::plugins::load_folder(folder).map_err(|e| CliError::new("plugin-invalid", e.to_string()))?;
    let (index, dir) = if to.extension().is_some_and(|e| e == "json") {
        (to.to_path_buf(), to.parent().map(Path::to_path_buf).unwrap_or_default())
    } else {
        (to.join("open-design-marketplace.json"), to.to_path_buf())
    };
    let archive_name = format!("{}-{}.tgz", loaded.id, loaded.version);
    // Joined below the marketplace folder: one plain file name, whatever the manifest says.
    let one_name =
        matches!(Path::new(&archive_name).components().collect::<Vec<_>>()[..], [std::path::Component::Normal(_)]);
    if !one_name || !crate::plugins::is_semver(&loaded.version) {
        let msg = format!("version {:?}: {archive_name:?} would not be a file in {}", loaded.version, dir.display());
        return Err(CliError::new("invalid-input", msg));
    }
    crate::durable::open_dir(&dir, &mut crate::durable::Syncs::new())
        .map_err(|e| io("creating the marketplace folder", e))?;
    let bytes = pack(folder, &loaded.id)?;
    crate::durable::write_file(&dir.join(&archive_name), &bytes).map_err(|e| io("writing the archive", e))?;
    let integrity =
        format!("sha256-{}", base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(&bytes)));
    let mut idx: Value = match std::fs::read(&index) {
        Ok(b) => serde_json::from_slice(&b)
            .map_err(|e| CliError::new("invalid-input", format!("--to {}: not JSON: {e}", index.display())))?,
        Err(_) => {
            json!({ "specVersion": "1.0.0", "name": dir.file_name().map_or("local".into(), |n| n.to_string_lossy().to_string()),
                          "version": "1.0.0", "plugins": [] })
        }
    };
    let m = &loaded.manifest;
    let entry = json!({
        "name": loaded.id, "version": loaded.version, "source": format!("./{archive_name}"),
        "title": m["title"], "description": m["description"], "tags": m["tags"],
        "integrity": integrity, "manifestDigest": loaded.source_digest,
        "dist": { "type": "tgz", "archive": format!("./{archive_name}"), "integrity": integrity, "manifestDigest": loaded.source_digest },
    });
    let plugins = idx["plugins"]
        .as_array_mut()
        .ok_or_else(|| CliError::new("invalid-input", "--to: the index has no plugins array"))?;
    plugins.retain(|p| !(p["name"] == loaded.id.as_str() && p["version"] == loaded.version.as_str()));
    plugins.push(entry.clone());
    crate::durable::write_file(&index, &serde_json::to_vec_pretty(&idx).expect("JSON"))
        .map_err(|e| io("writing the index", e))?;
    let v = json!({ "index": index.display().to_string(), "archive": dir.join(&archive_name).display().to_string(), "entry": entry });
    ctx.print(&v, |v| {
        format!("published {}@{} to {} ({})", loaded.id, loaded.version, v["index"].as_str().unwrap_or(""), integrity)
    });
    Ok(())
}
