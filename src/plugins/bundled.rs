//! The first-party plugins shipped inside the `od` binary: the 13 atom plugins (a SKILL.md prompt
//! fragment plus a manifest each) and the reference scenario plugins (a pipeline per task kind).
//! Their sources live under `bundled/` at the repository root and are embedded at compile time;
//! a plugin reaches the loader by being [`materialize`]d into a folder, so bundled plugins go
//! through exactly the same `load_folder` / `doctor` path as any third-party plugin.
//!
//! `tests/bundled_plugins.rs` walks `bundled/` and fails when a folder or file there has no entry
//! here, so adding a plugin means adding a `plugin!` line below.

use std::fs;
use std::io;
use std::path::{Component, Path};

/// A plugin embedded in the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BundledPlugin {
    /// The plugin id: its folder name and its manifest `name`.
    pub id: &'static str,
    /// `atom` or `scenario` (the manifest's `od.kind`).
    pub kind: &'static str,
    /// `(path relative to the plugin folder, '/'-separated; contents)`, sorted by path.
    pub files: &'static [(&'static str, &'static str)],
}

/// The `kind` of atom plugins.
pub const ATOM: &str = "atom";
/// The `kind` of scenario plugins.
pub const SCENARIO: &str = "scenario";

/// One bundled plugin: `bundled/<group>/<id>/{SKILL.md, open-design.json}`.
macro_rules! plugin {
    ($kind:expr, $group:literal, $id:literal) => {
        BundledPlugin {
            id: $id,
            kind: $kind,
            files: &[
                (
                    "SKILL.md",
                    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/bundled/", $group, "/", $id, "/SKILL.md")),
                ),
                (
                    "open-design.json",
                    include_str!(concat!(
                        env!("CARGO_MANIFEST_DIR"),
                        "/bundled/",
                        $group,
                        "/",
                        $id,
                        "/open-design.json"
                    )),
                ),
            ],
        }
    };
}

/// Sorted by kind, then id.
static BUNDLED: &[BundledPlugin] = &[
    plugin!(ATOM, "atoms", "build-test"),
    plugin!(ATOM, "atoms", "code-import"),
    plugin!(ATOM, "atoms", "critique-theater"),
    plugin!(ATOM, "atoms", "design-extract"),
    plugin!(ATOM, "atoms", "diff-review"),
    plugin!(ATOM, "atoms", "direction-picker"),
    plugin!(ATOM, "atoms", "discovery-question-form"),
    plugin!(ATOM, "atoms", "figma-extract"),
    plugin!(ATOM, "atoms", "handoff"),
    plugin!(ATOM, "atoms", "patch-edit"),
    plugin!(ATOM, "atoms", "rewrite-plan"),
    plugin!(ATOM, "atoms", "todo-write"),
    plugin!(ATOM, "atoms", "token-map"),
    plugin!(SCENARIO, "scenarios", "od-code-migration"),
    plugin!(SCENARIO, "scenarios", "od-default"),
    plugin!(SCENARIO, "scenarios", "od-design-refine"),
    plugin!(SCENARIO, "scenarios", "od-figma-migration"),
    plugin!(SCENARIO, "scenarios", "od-media-generation"),
    plugin!(SCENARIO, "scenarios", "od-new-generation"),
    plugin!(SCENARIO, "scenarios", "od-tune-collab"),
];

/// Every bundled plugin, sorted by kind then id.
pub fn bundled() -> &'static [BundledPlugin] {
    BUNDLED
}

/// The bundled plugin with this id, if any.
pub fn find(id: &str) -> Option<&'static BundledPlugin> {
    BUNDLED.iter().find(|p| p.id == id)
}

/// Writes the plugin's files under `dir` (created if missing), so it can be loaded as a folder.
/// Existing files with the same paths are overwritten; nothing else in `dir` is touched.
pub fn materialize(p: &BundledPlugin, dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    for (rel, contents) in p.files {
        let rel_path = Path::new(rel);
        if !rel_path.components().all(|c| matches!(c, Component::Normal(_))) {
            let msg = format!("bundled plugin {}: file path {rel:?} is not a plain relative path", p.id);
            return Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
        }
        let path = dir.join(rel_path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&path, contents)?;
    }
    Ok(())
}
