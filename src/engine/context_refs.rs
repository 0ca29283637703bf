//! The context references of a snapshot's manifest, in prompt-stack order — which file of the
//! plugin (or of another installed plugin) feeds the design system, craft, context skills and
//! inherited (`compat.*`) parts — shared by staging (`substrate.rs`: what to copy into the staged
//! context folder) and by prompt composition (`prompt_context.rs`: which staged file is which
//! part). One list, so the two cannot disagree.
//!
//! The design system: the project's own (`designSystemId` in its metadata, another installed
//! plugin) when it has one, else the plugin's `context.designSystem` `path`, else its `ref` (another
//! installed plugin); the first of these that is found is the one. A context skill is a path in the
//! plugin (a file or a folder's SKILL.md, a bundle member's folder included) or `{ref}` to another
//! installed plugin (its SKILL.md). Another plugin's file is staged at
//! `.od/context/plugins/<id>/<file>` with the source `plugin:<id>@<version>/<file>`.

use od_events::runs::StagedFile;
use serde_json::Value;

use super::files::clean_relative;
use super::substrate::CONTEXT_DIR;

/// The part of the prompt stack a reference feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    DesignSystem,
    Craft,
    Skill,
    Compat,
}

/// Where a reference's file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A path inside the plugin's own folder, as the manifest wrote it.
    Path(String),
    /// Another installed plugin, by id.
    Plugin(String),
}

/// One context reference of the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtxRef {
    pub part: Part,
    /// The manifest field naming it (`od.context.skills[1]`), for errors and `missing`.
    pub field: String,
    pub origin: Origin,
}

/// A path a manifest field names: a string, or an object's `path`.
fn path_of(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => Some(s),
        Value::Object(_) => v["path"].as_str(),
        _ => None,
    }
}

/// The snapshot's context references in stack order (`project_ds`: the project's `designSystemId`).
pub fn context_refs(snap: &Value, project_ds: Option<&str>) -> Vec<CtxRef> {
    let m = &snap["manifest"];
    let c = &m["od"]["context"];
    let mut out = Vec::new();
    let mut push = |part, field: String, origin| out.push(CtxRef { part, field, origin });
    if let Some(id) = project_ds.filter(|id| !id.is_empty()) {
        push(Part::DesignSystem, "project.designSystemId".into(), Origin::Plugin(id.into()));
    }
    if let Some(raw) = c["designSystem"]["path"].as_str() {
        push(Part::DesignSystem, "od.context.designSystem.path".into(), Origin::Path(raw.into()));
    } else if let Some(id) = c["designSystem"]["ref"].as_str() {
        push(Part::DesignSystem, "od.context.designSystem.ref".into(), Origin::Plugin(id.into()));
    }
    for (i, cr) in c["craft"].as_array().into_iter().flatten().enumerate() {
        if let Some(raw) = path_of(cr).or(cr["ref"].as_str()) {
            push(Part::Craft, format!("od.context.craft[{i}]"), Origin::Path(raw.into()));
        }
    }
    for (i, s) in c["skills"].as_array().into_iter().flatten().enumerate() {
        let field = format!("od.context.skills[{i}]");
        match (path_of(s), s["ref"].as_str()) {
            (Some(raw), _) => push(Part::Skill, field, Origin::Path(raw.into())),
            (None, Some(id)) => push(Part::Skill, field, Origin::Plugin(id.into())),
            (None, None) => {}
        }
    }
    let compat = [
        ("compat.agentSkills", &m["compat"]["agentSkills"]),
        ("compat.claudePlugins", &m["compat"]["claudePlugins"]),
        ("od.context.claudePlugins", &c["claudePlugins"]),
    ];
    for (name, list) in compat {
        for (i, e) in list.as_array().into_iter().flatten().enumerate() {
            if let Some(raw) = path_of(e) {
                push(Part::Compat, format!("{name}[{i}]"), Origin::Path(raw.into()));
            }
        }
    }
    out
}

/// The files inside the plugin folder that may hold a local reference at the clean path `rel`,
/// first found wins: the path itself, a folder's index file, or (craft named by id)
/// `craft/<id>.md`.
pub fn local_candidates(part: Part, rel: &str) -> Vec<String> {
    let inside: &[&str] = match part {
        Part::DesignSystem => &["DESIGN.md"],
        Part::Craft => &["SKILL.md", "README.md"],
        Part::Skill => &["SKILL.md"],
        Part::Compat => &[],
    };
    let mut out = vec![rel.to_string()];
    out.extend(inside.iter().map(|f| format!("{rel}/{f}")));
    if part == Part::Craft && !rel.contains('/') {
        out.push(format!("craft/{rel}.md"));
    }
    out
}

/// The files of another plugin that may hold a reference, first found wins.
pub fn plugin_files(part: Part) -> &'static [&'static str] {
    match part {
        Part::DesignSystem => &["DESIGN.md", "SKILL.md"],
        _ => &["SKILL.md"],
    }
}

/// Where another plugin's file is staged, relative to the working folder (None: an id that is not
/// a clean relative path cannot name a folder).
pub fn plugin_target(id: &str, file: &str) -> Option<String> {
    let clean = clean_relative(id).ok().filter(|c| c == id && !c.starts_with(".od"))?;
    Some(format!("{CONTEXT_DIR}/plugins/{clean}/{file}"))
}

/// The staged paths that may hold `r`, first found wins.
pub fn staged_candidates(r: &CtxRef) -> Vec<String> {
    match &r.origin {
        Origin::Path(raw) => match clean_relative(raw) {
            Ok(rel) => local_candidates(r.part, &rel).into_iter().map(|c| format!("{CONTEXT_DIR}/{c}")).collect(),
            Err(_) => Vec::new(),
        },
        Origin::Plugin(id) => plugin_files(r.part).iter().filter_map(|f| plugin_target(id, f)).collect(),
    }
}

/// Which staged file feeds which part, in stack order: for each reference the first of its
/// candidates the run staged; one design system (the first found); each file once; the plugin's
/// own SKILL.md is not here (it is the plugin block's instructions).
pub fn classify<'a>(snap: &Value, project_ds: Option<&str>, files: &'a [StagedFile]) -> Vec<(Part, &'a StagedFile)> {
    let own_skill = format!("{CONTEXT_DIR}/SKILL.md");
    let mut out: Vec<(Part, &StagedFile)> = Vec::new();
    for r in context_refs(snap, project_ds) {
        if r.part == Part::DesignSystem && out.iter().any(|(p, _)| *p == Part::DesignSystem) {
            continue;
        }
        let found = staged_candidates(&r)
            .into_iter()
            .find_map(|c| files.iter().find(|f| f.kind == od_events::vocab::StagedKind::Context && f.path == c));
        if let Some(f) = found {
            if f.path != own_skill && !out.iter().any(|(_, g)| g.path == f.path) {
                out.push((r.part, f));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(path: &str) -> StagedFile {
        StagedFile { path: path.into(), kind: "context".into(), source: String::new(), digest: "d".into(), bytes: 1 }
    }

    #[test]
    fn staged_files_are_classified_in_stack_order_and_the_projects_design_system_wins() {
        let snap = json!({ "manifest": { "compat": { "agentSkills": [{ "path": "./SKILL.md" }] }, "od": { "context": {
            "designSystem": { "path": "design" }, "craft": ["typo"], "skills": [{ "path": "skills/a" }, { "ref": "other" }] } } } });
        let files = vec![
            file(".od/context/SKILL.md"),
            file(".od/context/design/DESIGN.md"),
            file(".od/context/craft/typo.md"),
            file(".od/context/skills/a/SKILL.md"),
            file(".od/context/plugins/other/SKILL.md"),
            file(".od/context/plugins/brand/DESIGN.md"),
        ];
        let parts: Vec<(Part, &str)> =
            classify(&snap, None, &files).into_iter().map(|(p, f)| (p, f.path.as_str())).collect();
        assert_eq!(
            parts,
            [
                (Part::DesignSystem, ".od/context/design/DESIGN.md"),
                (Part::Craft, ".od/context/craft/typo.md"),
                (Part::Skill, ".od/context/skills/a/SKILL.md"),
                (Part::Skill, ".od/context/plugins/other/SKILL.md"),
            ]
        );
        let with_project = classify(&snap, Some("brand"), &files);
        assert_eq!(with_project[0].1.path, ".od/context/plugins/brand/DESIGN.md");
        assert_eq!(with_project.iter().filter(|(p, _)| *p == Part::DesignSystem).count(), 1);
        assert_eq!(plugin_target("../x", "SKILL.md"), None);
        assert_eq!(plugin_target(".od", "SKILL.md"), None);
        // A bundle member (`<bundle>/<member>`) gets a folder per segment.
        assert_eq!(plugin_target("kit/deck", "SKILL.md").unwrap(), ".od/context/plugins/kit/deck/SKILL.md");
    }
}
