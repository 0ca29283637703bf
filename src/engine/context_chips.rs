//! The context chips of an apply (`ContextItem`s, upstream's `contextItems`): listing them from a
//! manifest, their keys (`<kind>:<ref>`), and the manifest without the ones a person removed
//! (`excludeContext`) — which is what the snapshot, the prompt and the staged folder then see.

use od_projections::InstalledPlugin;
use serde_json::{json, Value};

use super::apply::ApplyError;

/// The manifest an apply works from: the installed one, without the context chips removed.
pub fn applied_manifest(p: &InstalledPlugin, exclude: &[String]) -> Result<Value, ApplyError> {
    let manifest: Value = serde_json::from_str(&p.manifest_json).unwrap_or(Value::Null);
    if exclude.is_empty() {
        return Ok(manifest);
    }
    without_context(&manifest, &context_items(&p.id, "", &manifest["od"], None), exclude)
}

/// A context chip's key: `<kind>:<ref>` (`design-system:DESIGN.md`, `mcp:figma`).
pub fn chip_key(item: &Value) -> String {
    let r = ["id", "path", "name"].iter().find_map(|k| item[*k].as_str()).unwrap_or_default();
    format!("{}:{r}", item["kind"].as_str().unwrap_or_default())
}

/// `manifest` without the context entries `exclude` names (chip keys, each one of `items`'
/// removable chips: not the plugin, not an atom); refused naming `excludeContext/<i>` otherwise.
fn without_context(manifest: &Value, items: &[Value], exclude: &[String]) -> Result<Value, ApplyError> {
    let mut out = manifest.clone();
    let removable: Vec<String> =
        items.iter().filter(|i| i["kind"] != "plugin" && i["kind"] != "atom").map(chip_key).collect();
    for (i, key) in exclude.iter().enumerate() {
        if !removable.contains(key) {
            let message = format!("{key:?} is not a context chip of this plugin (it has: {})", removable.join(", "));
            return Err(ApplyError::Invalid { field: format!("excludeContext/{i}"), message });
        }
        let (kind, r) = key.split_once(':').unwrap_or_default();
        let c = &mut out["od"]["context"];
        let named = |v: &Value| match kind {
            "skill" => ref_of(v).is_some_and(|id| id.trim_start_matches("./") == r),
            "asset" | "craft" | "claude-plugin" => ref_of(v).as_deref() == Some(r),
            "mcp" => v["name"].as_str() == Some(r),
            _ => false,
        };
        let list = match kind {
            "design-system" => {
                c["designSystem"] = Value::Null;
                continue;
            }
            "skill" => "skills",
            "craft" => "craft",
            "asset" => "assets",
            "mcp" => "mcp",
            _ => "claudePlugins",
        };
        if let Some(a) = c[list].as_array_mut() {
            a.retain(|v| !named(v));
        }
    }
    Ok(out)
}

fn label_of(v: &Value, fallback: &str) -> String {
    v["label"].as_str().or(v["title"].as_str()).map_or_else(|| fallback.to_string(), str::to_string)
}

pub(super) fn ref_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(_) => ["id", "ref", "name", "path"].iter().find_map(|k| v[*k].as_str()).map(str::to_string),
        _ => None,
    }
}

/// The context chips of an apply (`ContextItem`s, upstream's `contextItems`): the plugin, its
/// skills, design system, craft, assets, MCP servers, Claude plugins and atoms (context and
/// pipeline), each once.
pub(super) fn context_items(plugin_id: &str, title: &str, od: &Value, pipeline: Option<&Value>) -> Vec<Value> {
    let c = &od["context"];
    let mut out = vec![json!({ "kind": "plugin", "id": plugin_id, "label": title })];
    for s in c["skills"].as_array().into_iter().flatten() {
        if let Some(id) = ref_of(s) {
            let id = id.trim_start_matches("./").to_string();
            out.push(json!({ "kind": "skill", "id": id, "label": label_of(s, &id) }));
        }
    }
    if let Some(ds) = ref_of(&c["designSystem"]) {
        out.push(json!({ "kind": "design-system", "id": ds, "label": label_of(&c["designSystem"], &ds),
            "primary": c["designSystem"]["primary"].as_bool().unwrap_or(false) }));
    }
    for cr in c["craft"].as_array().into_iter().flatten().filter_map(ref_of) {
        out.push(json!({ "kind": "craft", "id": cr, "label": cr }));
    }
    for a in c["assets"].as_array().into_iter().flatten() {
        if let Some(path) = ref_of(a) {
            let label = label_of(a, path.rsplit('/').next().unwrap_or(&path));
            out.push(json!({ "kind": "asset", "path": path, "label": label, "mime": crate::mime::of(&path) }));
        }
    }
    for m in c["mcp"].as_array().into_iter().flatten() {
        if let Some(name) = m["name"].as_str() {
            out.push(json!({ "kind": "mcp", "name": name, "label": label_of(m, name), "command": m["command"] }));
        }
    }
    for cp in c["claudePlugins"].as_array().into_iter().flatten().filter_map(ref_of) {
        out.push(json!({ "kind": "claude-plugin", "id": cp, "label": cp }));
    }
    let stage_atoms = pipeline
        .and_then(|p| p["stages"].as_array())
        .into_iter()
        .flatten()
        .flat_map(|s| s["atoms"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string));
    let mut atoms: Vec<String> =
        c["atoms"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect();
    for a in stage_atoms {
        if !atoms.contains(&a) {
            atoms.push(a);
        }
    }
    for a in atoms {
        out.push(json!({ "kind": "atom", "id": a, "label": a }));
    }
    out
}
