//! Semantic rules the JSON Schema cannot express, checked on the merged manifest (spec §10.1,
//! §10.3.1, §5.3, §9; reference §1 `validate.ts` and §11 doctor): `repeat` without `until`,
//! unparseable `until`, duplicate stage ids, `followUp` naming a stage the pipeline lacks, unknown atoms, surface schemas that do not compile, oauth-prompt surfaces without a
//! declared connector or MCP server, custom components without their capability, relative paths
//! that leave the plugin folder, unknown capabilities and spec versions. Values of the wrong type
//! are skipped here: the schema already reported them.

use serde_json::Value;

use super::merge::{origin, Layer};
use super::until::parse_until;
use super::vocab::{is_known_atom, is_known_capability};
use super::Diagnostic;

struct Sink<'a> {
    layers: &'a [Layer],
    diags: &'a mut Vec<Diagnostic>,
}

impl Sink<'_> {
    fn error(&mut self, code: &str, pointer: String, message: String) {
        let file = origin(self.layers, &pointer);
        self.diags.push(Diagnostic::error(code, file, message).at(pointer));
    }

    fn warning(&mut self, code: &str, pointer: String, message: String) {
        let file = origin(self.layers, &pointer);
        self.diags.push(Diagnostic::warning(code, file, message).at(pointer));
    }
}

/// Checks every rule, pushing diagnostics attributed to the file each value came from.
pub(super) fn check(manifest: &Value, layers: &[Layer], diags: &mut Vec<Diagnostic>) {
    let mut sink = Sink { layers, diags };
    spec_version(manifest, &mut sink);
    plugin_version(manifest, &mut sink);
    pipeline(manifest, &mut sink);
    context_atoms(manifest, &mut sink);
    capabilities(manifest, &mut sink);
    surfaces(manifest, &mut sink);
    paths(manifest, &mut sink);
}

fn array<'a>(manifest: &'a Value, pointer: &str) -> &'a [Value] {
    manifest.pointer(pointer).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn spec_version(manifest: &Value, sink: &mut Sink) {
    if let Some(v) = manifest.get("specVersion").and_then(Value::as_str) {
        if v.split('.').next() != Some("1") {
            let msg = format!("specVersion {v:?} is not a 1.x version; this loader reads plugin spec 1.x");
            sink.warning("spec-version-unsupported", "/specVersion".into(), msg);
        }
    }
}

/// Whether `v` is a SemVer 2.0.0 version: `MAJOR.MINOR.PATCH` (no leading zeros), an optional
/// `-prerelease` and `+build` of dot-separated `[0-9A-Za-z-]` identifiers.
pub fn is_semver(v: &str) -> bool {
    let ident = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    let (rest, build) = v.split_once('+').map_or((v, None), |(r, b)| (r, Some(b)));
    let (core, pre) = rest.split_once('-').map_or((rest, None), |(c, p)| (c, Some(p)));
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| number(p))
        && pre.is_none_or(|p| p.split('.').all(|i| ident(i) && (!i.bytes().all(|b| b.is_ascii_digit()) || number(i))))
        && build.is_none_or(|b| b.split('.').all(ident))
        && v.len() <= 128
}

/// The plugin's `version` is a SemVer version (spec §5: the package version users audit; it is
/// also joined into file names, `<name>-<version>.tgz`, so `9/../../X` must never pass).
fn plugin_version(manifest: &Value, sink: &mut Sink) {
    if let Some(v) = manifest.get("version").and_then(Value::as_str) {
        if !is_semver(v) {
            let msg = format!("version {v:?} is not a SemVer version (MAJOR.MINOR.PATCH, e.g. 1.0.0)");
            sink.error("version-invalid", "/version".into(), msg);
        }
    }
}

fn pipeline(manifest: &Value, sink: &mut Sink) {
    let mut ids: Vec<&str> = Vec::new();
    for (i, stage) in array(manifest, "/od/pipeline/stages").iter().enumerate() {
        let at = format!("/od/pipeline/stages/{i}");
        let id = stage.get("id").and_then(Value::as_str).unwrap_or("?");
        if stage.get("id").and_then(Value::as_str).is_some() {
            if ids.contains(&id) {
                sink.error("duplicate-stage-id", format!("{at}/id"), format!("stage id {id:?} is used twice"));
            }
            ids.push(id);
        }
        for (j, atom) in stage.get("atoms").and_then(Value::as_array).map_or(&[][..], Vec::as_slice).iter().enumerate()
        {
            if let Some(atom) = atom.as_str().filter(|a| !is_known_atom(a)) {
                let msg = format!("stage {id:?} uses unknown atom {atom:?}; the atom catalog is closed (spec §10)");
                sink.error("unknown-atom", format!("{at}/atoms/{j}"), msg);
            }
        }
        let until = stage.get("until").and_then(Value::as_str);
        if stage.get("repeat") == Some(&Value::Bool(true)) && until.is_none_or(str::is_empty) {
            let msg = format!("stage {id:?} sets repeat: true without an `until` expression; it would never stop");
            sink.error("repeat-without-until", format!("{at}/repeat"), msg);
        }
        if let Some(src) = until.filter(|u| !u.is_empty()) {
            match parse_until(src) {
                Err(e) => {
                    let msg =
                        format!("stage {id:?}: until {src:?} does not parse at column {}: {}", e.column, e.message);
                    sink.error("until-invalid", format!("{at}/until"), msg);
                }
                Ok(expr) => undeclared_signals(stage, id, &expr, &format!("{at}/until"), sink),
            }
        }
    }
    // A follow-up runs the stages named here (`engine/conversations.rs`): each must be one of them.
    // (od's extension: the verbatim upstream schema does not know the field, so its type is checked here.)
    for (i, stage) in array(manifest, "/od/pipeline/stages").iter().enumerate() {
        if stage.get("followUp").is_some_and(|v| !v.is_boolean()) {
            let msg = "followUp of a stage is true or false".to_string();
            sink.error("follow-up-invalid", format!("/od/pipeline/stages/{i}/followUp"), msg);
        }
    }
    let follow_up = manifest.pointer("/od/pipeline/followUp");
    if follow_up.is_some_and(|v| !v.is_array()) {
        let msg = "followUp is a list of stage ids".to_string();
        sink.error("follow-up-invalid", "/od/pipeline/followUp".into(), msg);
    }
    for (j, f) in array(manifest, "/od/pipeline/followUp").iter().enumerate() {
        if !f.is_string() {
            sink.error("follow-up-invalid", format!("/od/pipeline/followUp/{j}"), "a stage id is a string".into());
        }
        if let Some(f) = f.as_str().filter(|f| !ids.contains(f)) {
            let msg = format!(
                "followUp names stage {f:?}, which the pipeline lacks (its stages: {})",
                if ids.is_empty() { "none".to_string() } else { ids.join(", ") }
            );
            sink.error("follow-up-stage-unknown", format!("/od/pipeline/followUp/{j}"), msg);
        }
    }
}

fn context_atoms(manifest: &Value, sink: &mut Sink) {
    for (j, atom) in array(manifest, "/od/context/atoms").iter().enumerate() {
        if let Some(atom) = atom.as_str().filter(|a| !is_known_atom(a)) {
            let msg = format!("od.context.atoms names unknown atom {atom:?}; the atom catalog is closed (spec §10)");
            sink.error("unknown-atom", format!("/od/context/atoms/{j}"), msg);
        }
    }
}

fn capabilities(manifest: &Value, sink: &mut Sink) {
    for (i, cap) in array(manifest, "/od/capabilities").iter().enumerate() {
        if let Some(cap) = cap.as_str().filter(|c| !is_known_capability(c)) {
            let msg = format!("capability {cap:?} is not in the v1 vocabulary; no grant can cover it");
            sink.warning("unknown-capability", format!("/od/capabilities/{i}"), msg);
        }
    }
}

fn ids<'a>(manifest: &'a Value, pointers: &[&str], key: &str) -> Vec<&'a str> {
    pointers.iter().flat_map(|p| array(manifest, p)).filter_map(|v| v.get(key).and_then(Value::as_str)).collect()
}

fn surfaces(manifest: &Value, sink: &mut Sink) {
    let connectors = ids(manifest, &["/od/connectors/required", "/od/connectors/optional"], "id");
    let mcp_servers = ids(manifest, &["/od/context/mcp"], "name");
    let has_component_cap = array(manifest, "/od/capabilities").iter().any(|c| c == "genui:custom-component");
    for (i, surface) in array(manifest, "/od/genui/surfaces").iter().enumerate() {
        let at = format!("/od/genui/surfaces/{i}");
        let id = surface.get("id").and_then(Value::as_str).unwrap_or("?");
        if let Some(why) = surface.get("schema").filter(|s| s.is_object()).and_then(super::validator::compile_error) {
            let msg = format!("surface {id:?}: its schema is not a valid JSON Schema (draft 2020-12): {why}");
            sink.error("genui-schema-invalid", format!("{at}/schema"), msg);
        }
        if surface.get("component").is_some_and(Value::is_object) && !has_component_cap {
            let msg = format!("surface {id:?} ships a component but od.capabilities lacks \"genui:custom-component\"");
            sink.error("genui-component-capability", format!("{at}/component"), msg);
        }
        let oauth = surface.get("oauth").and_then(Value::as_object);
        let Some(oauth) = oauth else {
            if surface.get("kind").and_then(Value::as_str) == Some("oauth-prompt") {
                let msg =
                    format!("oauth-prompt surface {id:?} declares no oauth.route, so no provider can be authorised");
                sink.error("oauth-surface-undeclared", at, msg);
            }
            continue;
        };
        let (field, declared, what) = match oauth.get("route").and_then(Value::as_str) {
            Some("connector") => ("connectorId", &connectors, "od.connectors.required/optional"),
            Some("mcp") => ("mcpServerId", &mcp_servers, "od.context.mcp"),
            _ => continue,
        };
        match oauth.get(field).and_then(Value::as_str) {
            None => {
                let msg = format!("surface {id:?}: oauth.route needs oauth.{field}");
                sink.error("oauth-surface-undeclared", format!("{at}/oauth"), msg);
            }
            Some(target) if !declared.contains(&target) => {
                let msg = format!("surface {id:?}: oauth.{field} {target:?} is not declared in {what}");
                sink.error("oauth-surface-undeclared", format!("{at}/oauth/{field}"), msg);
            }
            Some(_) => {}
        }
    }
}

/// Where a manifest holds paths relative to the plugin folder (`*` = every array element).
const PATH_FIELDS: &[&str] = &[
    "/icon",
    "/compat/agentSkills/*/path",
    "/compat/claudePlugins/*/path",
    "/od/preview/entry",
    "/od/preview/poster",
    "/od/preview/video",
    "/od/preview/gif",
    "/od/useCase/exampleOutputs/*/path",
    "/od/context/skills/*/path",
    "/od/context/claudePlugins/*/path",
    "/od/context/designSystem/path",
    "/od/context/assets/*",
    "/od/genui/surfaces/*/component/path",
];

fn paths(manifest: &Value, sink: &mut Sink) {
    for field in PATH_FIELDS {
        let mut found = Vec::new();
        collect(
            manifest,
            field.trim_start_matches('/').split('/').collect::<Vec<_>>().as_slice(),
            String::new(),
            &mut found,
        );
        for (pointer, path) in found {
            if escapes(path) {
                let msg = format!(
                    "path {path:?} leaves the plugin folder (absolute or `..`); only files inside it can be used"
                );
                sink.error("path-escape", pointer, msg);
            }
        }
    }
}

fn collect<'a>(value: &'a Value, segments: &[&str], pointer: String, out: &mut Vec<(String, &'a str)>) {
    let Some((first, rest)) = segments.split_first() else {
        if let Some(s) = value.as_str() {
            out.push((pointer, s));
        }
        return;
    };
    if *first == "*" {
        for (i, item) in value.as_array().map_or(&[][..], Vec::as_slice).iter().enumerate() {
            collect(item, rest, format!("{pointer}/{i}"), out);
        }
    } else if let Some(next) = value.get(*first) {
        collect(next, rest, format!("{pointer}/{first}"), out);
    }
}

/// Absolute paths, drive letters and `..` segments escape; URLs (`scheme://`, `data:`) are not paths.
fn escapes(path: &str) -> bool {
    if path.contains("://") || path.starts_with("data:") {
        return false;
    }
    let drive = path.len() >= 2 && path.as_bytes()[0].is_ascii_alphabetic() && path.as_bytes()[1] == b':';
    path.starts_with(['/', '\\']) || drive || path.split(['/', '\\']).any(|seg| seg == "..")
}

/// `until` may name only `iterations` and the signals the stage's atoms declare
/// (`od.atom.untilSignals`, spec §23.3.1): a signal no atom of the stage emits would never arrive.
fn undeclared_signals(stage: &Value, id: &str, expr: &super::until::UntilExpr, at: &str, sink: &mut Sink) {
    let atoms: Vec<&str> =
        stage.get("atoms").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let known = super::bundled::stage_signals(atoms.iter().copied());
    let mut reported: Vec<&str> = Vec::new();
    for c in expr.any.iter().flatten() {
        if known.contains(&c.signal) || reported.contains(&c.signal.as_str()) {
            continue;
        }
        reported.push(&c.signal);
        let hint = match super::bundled::atom_declaring(&c.signal) {
            Some(a) => format!(" (the {a} atom declares it)"),
            None => String::new(),
        };
        let msg = format!(
            "stage {id:?}: until names {:?}, which none of its atoms ({}) declares{hint}; it may name {}",
            c.signal,
            if atoms.is_empty() { "none".to_string() } else { atoms.join(", ") },
            known.join(", ")
        );
        sink.error("until-signal-undeclared", at.to_string(), msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follow_up_must_name_stages_of_the_pipeline_and_be_well_typed() {
        let diags = |pipeline: serde_json::Value| {
            let mut out = Vec::new();
            check(&serde_json::json!({ "od": { "pipeline": pipeline } }), &[], &mut out);
            out.into_iter().map(|d| (d.code, d.pointer.unwrap_or_default())).collect::<Vec<_>>()
        };
        let stages = serde_json::json!([{ "id": "a", "atoms": [] }, { "id": "b", "atoms": [], "followUp": true }]);
        assert_eq!(diags(serde_json::json!({ "stages": stages, "followUp": ["b"] })), vec![]);
        assert_eq!(
            diags(serde_json::json!({ "stages": stages, "followUp": ["b", "zz", 3] })),
            vec![
                ("follow-up-stage-unknown".to_string(), "/od/pipeline/followUp/1".to_string()),
                ("follow-up-invalid".to_string(), "/od/pipeline/followUp/2".to_string()),
            ]
        );
        assert_eq!(
            diags(serde_json::json!({ "stages": [{ "id": "a", "atoms": [], "followUp": "yes" }], "followUp": "a" })),
            vec![
                ("follow-up-invalid".to_string(), "/od/pipeline/stages/0/followUp".to_string()),
                ("follow-up-invalid".to_string(), "/od/pipeline/followUp".to_string()),
            ]
        );
    }

    #[test]
    fn escaping_paths() {
        for p in ["../x", "a/../../x", "/etc/passwd", "C:\\x", "a\\..\\..\\x"] {
            assert!(escapes(p), "{p}");
        }
        for p in ["./SKILL.md", "assets/a..b.png", "https://x/../y", "index.html", "..."] {
            assert!(!escapes(p), "{p}");
        }
    }
}
