//! Merging manifest layers (reference §1, `merge.ts`): layers in order sidecar, SKILL.md adapter,
//! claude adapter; objects deep-merge and the first value set is never overwritten;
//! `compat.agentSkills` and `compat.claudePlugins` are unioned by `path`. Also answers which
//! layer (file) a value of the merged manifest came from.

use serde_json::{Map, Value};

/// One source of manifest fields.
#[derive(Debug, Clone)]
pub(super) struct Layer {
    /// The file it was read from (`open-design.json`, `SKILL.md`, `.claude-plugin/plugin.json`).
    pub file: &'static str,
    /// Its manifest fields, an object in `open-design.json` shape.
    pub value: Value,
}

const COMPAT_LISTS: [&str; 2] = ["agentSkills", "claudePlugins"];

/// Merges the layers and defaults `specVersion`.
pub(super) fn merge(layers: &[Layer]) -> Value {
    let mut merged = Map::new();
    for layer in layers {
        if let Value::Object(obj) = &layer.value {
            fill(&mut merged, obj, true);
        }
    }
    for list in COMPAT_LISTS {
        if let Some(union) = union(layers, list) {
            if let Some(Value::Object(compat)) = merged.get_mut("compat") {
                compat.insert(list.into(), union);
            } else if !merged.contains_key("compat") {
                let mut compat = Map::new();
                compat.insert(list.into(), union);
                merged.insert("compat".into(), Value::Object(compat));
            }
        }
    }
    if !merged.contains_key("specVersion") {
        merged.insert("specVersion".into(), Value::String(super::SPEC_VERSION.into()));
    }
    Value::Object(merged)
}

/// Copies what `target` lacks from `source`, recursing into objects present on both sides.
/// At the root, the compat lists are left to [`union`].
fn fill(target: &mut Map<String, Value>, source: &Map<String, Value>, root: bool) {
    for (key, value) in source {
        if root && key == "compat" {
            if let Value::Object(compat) = value {
                let rest: Map<String, Value> =
                    compat.iter().filter(|(k, _)| !COMPAT_LISTS.contains(&k.as_str())).map(clone_entry).collect();
                match target.get_mut("compat") {
                    Some(Value::Object(existing)) => fill(existing, &rest, false),
                    Some(_) => {}
                    None => {
                        target.insert(key.clone(), Value::Object(rest));
                    }
                }
            } else if !target.contains_key(key) {
                target.insert(key.clone(), value.clone());
            }
            continue;
        }
        match (target.get_mut(key), value) {
            (Some(Value::Object(existing)), Value::Object(incoming)) => fill(existing, incoming, false),
            (Some(_), _) => {}
            (None, _) => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}

fn clone_entry((k, v): (&String, &Value)) -> (String, Value) {
    (k.clone(), v.clone())
}

/// The union by `path` of one compat list over all layers, in layer order. Entries without a
/// string `path` are kept as they are so validation reports them. `None` when no layer has it.
fn union(layers: &[Layer], list: &str) -> Option<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let mut any = false;
    for layer in layers {
        match layer.value.pointer(&format!("/compat/{list}")) {
            Some(Value::Array(items)) => {
                any = true;
                for item in items {
                    match item.get("path").and_then(Value::as_str) {
                        Some(path) if seen.iter().any(|p| p == path) => {}
                        Some(path) => {
                            seen.push(path.to_string());
                            out.push(item.clone());
                        }
                        None => out.push(item.clone()),
                    }
                }
            }
            // A non-array list in the first layer that has one wins as-is, so the schema sees it.
            Some(other) if !any => return Some(other.clone()),
            _ => {}
        }
    }
    any.then_some(Value::Array(out))
}

/// The file of the first layer holding the value at `pointer` (or, for a missing value, at the
/// nearest parent); the first layer's file when none does.
pub(super) fn origin(layers: &[Layer], pointer: &str) -> &'static str {
    let mut p = pointer;
    while !p.is_empty() {
        if let Some(layer) = layers.iter().find(|l| l.value.pointer(p).is_some()) {
            return layer.file;
        }
        p = &p[..p.rfind('/').unwrap_or(0)];
    }
    layers.first().map_or(super::FOLDER, |l| l.file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn layer(file: &'static str, value: Value) -> Layer {
        Layer { file, value }
    }

    #[test]
    fn first_value_wins_objects_deep_merge_compat_unions() {
        let layers = [
            layer(
                "open-design.json",
                json!({"name": "a", "od": {"kind": "scenario"}, "compat": {"agentSkills": [{"path": "./SKILL.md"}]}}),
            ),
            layer(
                "SKILL.md",
                json!({"name": "b", "title": "B", "od": {"kind": "skill", "mode": "deck"}, "compat": {"agentSkills": [{"path": "./SKILL.md"}]}}),
            ),
            layer(
                ".claude-plugin/plugin.json",
                json!({"compat": {"claudePlugins": [{"path": "./.claude-plugin/plugin.json"}]}}),
            ),
        ];
        let m = merge(&layers);
        assert_eq!(m["name"], "a");
        assert_eq!(m["title"], "B");
        assert_eq!(m["od"], json!({"kind": "scenario", "mode": "deck"}));
        assert_eq!(m["compat"]["agentSkills"].as_array().unwrap().len(), 1);
        assert_eq!(m["compat"]["claudePlugins"].as_array().unwrap().len(), 1);
        assert_eq!(m["specVersion"], "1.0.0");
        assert_eq!(origin(&layers, "/title"), "SKILL.md");
        assert_eq!(origin(&layers, "/od/kind"), "open-design.json");
        assert_eq!(origin(&layers, "/od/mode"), "SKILL.md");
        assert_eq!(origin(&layers, "/version"), "open-design.json");
    }
}
