//! Bundled plugins: shipped inside the binary with trust tier `bundled`. They are not log events —
//! the binary is their source — so they are loaded once per engine from a content-addressed copy in
//! the data dir (`plugins/_bundled/<id>/<digest>/`, written only when missing) and listed beside the
//! installed ones. They cannot be installed over, upgraded or uninstalled.

use od_projections::InstalledPlugin;
use std::collections::BTreeMap;
use std::path::Path;

use crate::plugins::bundled::{bundled, materialize};
use crate::plugins::load_folder;

/// Loads every bundled plugin. A bundled plugin that fails to load is a build defect
/// (tests/plugins/bundled_plugins.rs guards it); it is skipped with a message rather than stopping od.
pub fn load_bundled(data_dir: &Path) -> BTreeMap<String, InstalledPlugin> {
    let mut out = BTreeMap::new();
    for b in bundled() {
        let digest = blake3::hash(
            &b.files
                .iter()
                .flat_map(|(p, c)| [p.as_bytes(), b"\0", c.as_bytes(), b"\0"])
                .flatten()
                .copied()
                .collect::<Vec<u8>>(),
        )
        .to_hex();
        let rel = format!("plugins/_bundled/{}/{}", b.id, &digest.as_str()[..16]);
        let dir = data_dir.join(&rel);
        if !dir.join("open-design.json").exists() {
            if let Err(e) = materialize(b, &dir) {
                tracing::warn!("could not write bundled plugin {}: {e}", b.id);
                continue;
            }
        }
        match load_folder(&dir) {
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
            Err(e) => tracing::warn!("bundled plugin {} does not load: {e}", b.id),
        }
    }
    out
}
