//! Bundle plugins (spec §17.3): a plugin whose `od.kind` is `bundle` carries other plugins in its
//! folder — one per sub-folder of `skills/`, `design-systems/`, `craft/` or `plugins/` that holds a
//! `SKILL.md` or `open-design.json`. Installing the bundle installs the bundle itself and fans
//! every member out into the registry under the namespaced id `<bundle>/<member name>`, so other
//! plugins can reference a member on its own (`context.skills: [{ref: "my-bundle/deck"}]`).
//!
//! Members share the bundle's trust and source kind; every member is validated before anything is
//! written (one bad member fails the whole install, naming its folder). Reinstalling a bundle
//! uninstalls the members it no longer carries; uninstalling it uninstalls them all. A member is
//! upgraded or removed only through its bundle.

use od_events::plugins::PluginUninstalled;
use od_events::Event;
use std::path::{Path, PathBuf};

use super::plugins::{stream, PluginError};
use super::Engine;
use crate::plugins::{load_folder, LoadedPlugin};
use crate::store::Append;

/// The folders of a bundle whose sub-folders are members.
pub const MEMBER_DIRS: [&str; 4] = ["skills", "design-systems", "craft", "plugins"];

/// Whether a merged manifest is a bundle's.
pub fn is_bundle(manifest: &serde_json::Value) -> bool {
    manifest["od"]["kind"] == "bundle"
}

/// The bundle `id` belongs to, when `id` is a member's (`<bundle>/<member>`).
pub fn bundle_of(id: &str) -> Option<&str> {
    id.split_once('/').map(|(b, _)| b)
}

/// The member folders of the bundle at `root`, relative to it, sorted: `skills/deck`, ….
pub fn member_dirs(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for group in MEMBER_DIRS {
        let Ok(rd) = std::fs::read_dir(root.join(group)) else { continue };
        let mut names: Vec<String> = rd
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        for n in names {
            let dir = root.join(group).join(&n);
            if dir.join("SKILL.md").is_file() || dir.join("open-design.json").is_file() {
                out.push(format!("{group}/{n}"));
            }
        }
    }
    out
}

/// A member, loaded and renamed into the bundle's namespace.
pub struct Member {
    pub rel: String,
    pub dir: PathBuf,
    pub loaded: LoadedPlugin,
}

/// Loads every member of the bundle `bundle_id` at `root`; the first invalid member (or two
/// members with one name) fails the whole bundle.
pub fn load_members(root: &Path, bundle_id: &str, source: &str) -> Result<Vec<Member>, PluginError> {
    let mut out: Vec<Member> = Vec::new();
    for rel in member_dirs(root) {
        let dir = root.join(&rel);
        let mut loaded = load_folder(&dir).map_err(|e| PluginError::Invalid {
            path: format!("{source} ({rel})"),
            summary: format!("bundle member {rel}: {e}"),
            diagnostics: e.diagnostics.clone(),
        })?;
        let id = format!("{bundle_id}/{}", loaded.id);
        if let Some(other) = out.iter().find(|m| m.loaded.id == id) {
            return Err(PluginError::Invalid {
                path: source.to_string(),
                summary: format!("bundle members {} and {rel} are both named {:?}", other.rel, loaded.id),
                diagnostics: vec![],
            });
        }
        loaded.manifest["name"] = serde_json::json!(id);
        loaded.id = id;
        out.push(Member { rel, dir, loaded });
    }
    Ok(out)
}

impl Engine {
    /// The installed members of bundle `bundle_id`, by id.
    pub fn bundle_members(&self, bundle_id: &str) -> Result<Vec<String>, PluginError> {
        let prefix = format!("{bundle_id}/");
        Ok(self.registry.read(|r| r.plugins.keys().filter(|k| k.starts_with(&prefix)).cloned().collect())?)
    }

    /// Uninstalls the members of `bundle_id` not in `keep` (events only: the files go with the
    /// bundle's folder or the member's own).
    pub(crate) fn drop_members(&self, bundle_id: &str, keep: &[String]) -> Result<Vec<String>, PluginError> {
        let mut dropped = Vec::new();
        for id in self.bundle_members(bundle_id)? {
            if keep.contains(&id) {
                continue;
            }
            let p = self.plugin(&id)?;
            let e = PluginUninstalled { id: id.clone(), version: p.version };
            self.store.append(Append::new(stream(&id)?, vec![Event::PluginUninstalled(e)]))?;
            let _ = std::fs::remove_dir_all(self.data_dir.join("plugins").join(&id));
            dropped.push(id);
        }
        Ok(dropped)
    }

    /// Refuses changing a member on its own: it is upgraded and removed with its bundle.
    pub(crate) fn refuse_member(&self, id: &str) -> Result<(), PluginError> {
        match bundle_of(id) {
            Some(b) if self.plugin(b).is_ok() => {
                Err(PluginError::BundleMember { id: id.to_string(), bundle: b.to_string() })
            }
            _ => Ok(()),
        }
    }
}
