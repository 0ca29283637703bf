//! Bundled plugins: shipped inside the binary with trust tier `bundled`. They are not log events —
//! the binary is their source — so they are loaded once per engine from a content-addressed copy in
//! the data dir (`plugins/_bundled/<id>/<digest>/`) and listed beside the installed ones. The copy
//! is written durably when missing, and verified by its source digest whenever it is loaded: one
//! that does not match (a power cut left it empty, someone edited it) is rebuilt from the binary,
//! with a line in the daemon log and a [`Repair`] for `od doctor`. They cannot be installed over,
//! upgraded or uninstalled.

use od_projections::InstalledPlugin;
use std::collections::BTreeMap;
use std::path::Path;

use super::heal::Repair;
use crate::plugins::bundled::{bundled, materialize, BundledPlugin};
use crate::plugins::{load_folder, LoadedPlugin};

/// Where bundled plugin `b`'s copy lives, relative to the data dir (named by a hash of its
/// embedded files, so a new build's copy never meets an old one's).
pub fn copy_rel(b: &BundledPlugin) -> String {
    let name = blake3::hash(
        &b.files
            .iter()
            .flat_map(|(p, c)| [p.as_bytes(), b"\0", c.as_bytes(), b"\0"])
            .flatten()
            .copied()
            .collect::<Vec<u8>>(),
    )
    .to_hex();
    format!("plugins/_bundled/{}/{}", b.id, &name.as_str()[..16])
}

/// Loads bundled plugin `b`'s copy under `data_dir`, writing it when missing and rebuilding it when
/// it does not load or its digest is not the binary's (then a [`Repair`] says so).
pub fn load_verified(data_dir: &Path, b: &BundledPlugin, now: i64) -> (Result<LoadedPlugin, String>, Option<Repair>) {
    let rel = copy_rel(b);
    let dir = data_dir.join(&rel);
    let want = crate::plugins::bundled::digest(b);
    let problem = if !dir.exists() {
        None
    } else {
        match load_folder(&dir) {
            Ok(p) if p.source_digest == want => return (Ok(p), None),
            Ok(p) => Some(format!(
                "digest mismatch: the copy hashes to {}…, the binary's is {}…",
                &p.source_digest[..12],
                &want[..12]
            )),
            Err(e) => Some(format!("the copy does not load: {e}")),
        }
    };
    if problem.is_some() {
        // Whatever else a damaged copy holds goes with it.
        let _ = std::fs::remove_dir_all(&dir);
    }
    let written = materialize(b, &dir).map_err(|e| format!("could not write bundled plugin {}: {e}", b.id));
    let repair = problem.map(|reason| {
        let r = Repair::new("bundled-plugin", b.id, &rel, reason, written.is_ok(), now);
        r.log();
        r
    });
    if let Err(e) = written {
        return (Err(e), repair);
    }
    (load_folder(&dir).map_err(|e| format!("bundled plugin {} does not load: {e}", b.id)), repair)
}

/// Loads every bundled plugin, verifying (and rebuilding) each copy; the repairs made. A bundled
/// plugin that fails to load is a build defect (tests/plugins/bundled_plugins.rs guards it); it is skipped
/// with a message rather than stopping od.
pub fn load_bundled(data_dir: &Path, now: i64) -> (BTreeMap<String, InstalledPlugin>, Vec<Repair>) {
    let mut out = BTreeMap::new();
    let mut repairs = Vec::new();
    for b in bundled() {
        let rel = copy_rel(b);
        let (loaded, repair) = load_verified(data_dir, b, now);
        repairs.extend(repair);
        match loaded {
            Ok(p) => {
                let title = p.manifest["title"].as_str().unwrap_or(&p.id).to_string();
                out.insert(
                    p.id.clone(),
                    InstalledPlugin {
                        id: p.id,
                        version: p.version,
                        title,
                        source_kind: "bundled".into(),
                        source: format!("bundled:{}", b.id),
                        trust: "bundled".into(),
                        manifest_json: p.manifest.to_string(),
                        source_digest: p.source_digest,
                        fs_path: rel,
                        capabilities_granted: ["prompt:inject".to_string()].into_iter().collect(),
                        warnings_json: serde_json::to_string(&p.diagnostics).unwrap_or_else(|_| "[]".into()),
                        installed_at: 0,
                        updated_at: 0,
                        installed_seq: 0,
                    },
                );
            }
            Err(e) => tracing::warn!("{e}"),
        }
    }
    (out, repairs)
}
