//! The first-party plugins shipped inside the `od` binary: the 13 atom plugins (a SKILL.md prompt
//! fragment plus a manifest each) and the reference scenario plugins (a pipeline per task kind).
//! Their sources live under `bundled/` at the repository root and are embedded at compile time;
//! a plugin reaches the loader by being [`materialize`]d into a folder, so bundled plugins go
//! through exactly the same `load_folder` / `doctor` path as any third-party plugin.
//!
//! `tests/plugins/bundled_plugins.rs` walks `bundled/` and fails when a folder or file there has no entry
//! here, so adding a plugin means adding a `plugin!` line below.

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

/// The plugin's source digest (what `load_folder` computes for a faithful copy of it).
pub fn digest(p: &BundledPlugin) -> String {
    super::tree::digest(p.files.iter().map(|(rel, c)| (*rel, c.as_bytes())))
}

/// Writes the plugin's files under `dir` (created if missing), so it can be loaded as a folder,
/// durably (`crate::durable`: each file fsynced, its folders too, before this returns).
/// Existing files with the same paths are overwritten; nothing else in `dir` is touched.
pub fn materialize(p: &BundledPlugin, dir: &Path) -> io::Result<()> {
    let mut syncs = crate::durable::Syncs::new();
    for (rel, contents) in p.files {
        let rel_path = Path::new(rel);
        if !rel_path.components().all(|c| matches!(c, Component::Normal(_))) {
            let msg = format!("bundled plugin {}: file path {rel:?} is not a plain relative path", p.id);
            return Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
        }
        crate::durable::write_file_in(&dir.join(rel_path), contents.as_bytes(), &mut syncs)?;
    }
    syncs.commit()
}

/// What an atom declares about itself (spec §23.3.1): the `until` signals it emits and the
/// agent-side tools it expects (`None`: it declares none, so it does not limit its stage's tools).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AtomDecl {
    pub until_signals: Vec<String>,
    pub tool_gating: Option<Vec<String>>,
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_string)).collect()
}

/// The declarations of every atom: the bundled atom plugins' `od.atom` (read from their embedded
/// manifests, so the manifests are the one source), and the daemon's built-in atoms
/// ([`super::vocab::BUILTIN_ATOM_SIGNALS`]).
fn atom_decls() -> &'static std::collections::BTreeMap<&'static str, AtomDecl> {
    static DECLS: std::sync::OnceLock<std::collections::BTreeMap<&'static str, AtomDecl>> = std::sync::OnceLock::new();
    DECLS.get_or_init(|| {
        let mut out = std::collections::BTreeMap::new();
        for p in BUNDLED.iter().filter(|p| p.kind == ATOM) {
            let manifest = p.files.iter().find(|(rel, _)| *rel == "open-design.json").map(|(_, c)| *c).unwrap_or("{}");
            let m: serde_json::Value = serde_json::from_str(manifest).unwrap_or_default();
            let atom = &m["od"]["atom"];
            let gating = atom.get("toolGating").filter(|g| g.is_array()).map(strings);
            out.insert(p.id, AtomDecl { until_signals: strings(&atom["untilSignals"]), tool_gating: gating });
        }
        for (id, signals) in super::vocab::BUILTIN_ATOM_SIGNALS {
            out.entry(*id).or_insert_with(|| AtomDecl {
                until_signals: signals.iter().map(|s| s.to_string()).collect(),
                tool_gating: None,
            });
        }
        out
    })
}

/// What atom `id` declares (None: not an atom of the catalog, or one that declares nothing).
pub fn atom_decl(id: &str) -> Option<&'static AtomDecl> {
    atom_decls().get(id)
}

/// The signals a stage with these atoms may name in `until`: `iterations` (the kernel's) and
/// every signal its atoms declare.
pub fn stage_signals<'a>(atoms: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out = vec!["iterations".to_string()];
    for a in atoms {
        for s in atom_decl(a).map(|d| d.until_signals.as_slice()).unwrap_or_default() {
            if !out.contains(s) {
                out.push(s.clone());
            }
        }
    }
    out
}

/// The agent-side tool kinds a stage with these atoms may use: the union of its atoms'
/// `toolGating`, or None (no limit) when any atom declares none.
pub fn stage_tool_gating<'a>(atoms: impl IntoIterator<Item = &'a str>) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let mut any = false;
    for a in atoms {
        any = true;
        let g = atom_decl(a).and_then(|d| d.tool_gating.as_ref())?;
        for t in g {
            if !out.contains(t) {
                out.push(t.clone());
            }
        }
    }
    any.then_some(out)
}

/// The atom that declares `signal`, if one does (for doctor's hint).
pub fn atom_declaring(signal: &str) -> Option<&'static str> {
    atom_decls().iter().find(|(_, d)| d.until_signals.iter().any(|s| s == signal)).map(|(id, _)| *id)
}
