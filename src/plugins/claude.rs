//! The `.claude-plugin/plugin.json` adapter: a Claude Code plugin manifest becomes the last (lowest
//! precedence) manifest layer. Mapping (reference §1): `name` sanitised to the plugin id pattern
//! (warning when changed), `version` ‖ "0.0.0", `title` ‖ `displayName` ‖ name, `description`,
//! `compat.claudePlugins`, `od = {kind: skill, taskKind: new-generation}`. Unparseable JSON gives a
//! fallback layer named after the folder, with a warning, as in the reference daemon.

use serde_json::{json, Map, Value};

use super::sidecar::kind;
use super::{Diagnostic, CLAUDE_PLUGIN};

/// Builds the claude-plugin layer.
pub(super) fn adapt(bytes: &[u8], folder_id: &str, diags: &mut Vec<Diagnostic>) -> Value {
    let bytes = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes);
    let obj = match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(obj)) => obj,
        Ok(other) => {
            let msg = format!("must hold a JSON object, found {}; using a fallback manifest", kind(&other));
            diags.push(Diagnostic::warning("manifest-not-object", CLAUDE_PLUGIN, msg));
            return layer(&sanitize(folder_id), None, "0.0.0", None);
        }
        Err(e) => {
            let msg = format!("not valid JSON ({e}); using a fallback manifest");
            diags.push(Diagnostic::warning("manifest-invalid-json", CLAUDE_PLUGIN, msg));
            return layer(&sanitize(folder_id), None, "0.0.0", None);
        }
    };
    let text = |key: &str| obj.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    let raw_name = text("name").unwrap_or(folder_id);
    let name = sanitize(raw_name);
    if name != raw_name {
        let msg = format!("name {raw_name:?} was sanitised to {name:?} to fit the plugin id pattern");
        diags.push(Diagnostic::warning("name-sanitized", CLAUDE_PLUGIN, msg).at("/name"));
    }
    let commands = obj.get("commands").and_then(Value::as_array).map_or(0, Vec::len);
    if commands > 0 {
        let msg = format!(
            "declares {commands} command(s); OD does not register claude-plugin commands, \
             reference them from od.context.claudePlugins"
        );
        diags.push(Diagnostic::warning("claude-commands-unmapped", CLAUDE_PLUGIN, msg).at("/commands"));
    }
    let title = text("title").or_else(|| text("displayName"));
    layer(&name, title, text("version").unwrap_or("0.0.0"), text("description"))
}

fn layer(name: &str, title: Option<&str>, version: &str, description: Option<&str>) -> Value {
    let mut m = Map::new();
    m.insert("specVersion".into(), json!(super::SPEC_VERSION));
    m.insert("name".into(), json!(name));
    m.insert("title".into(), json!(title.unwrap_or(name)));
    m.insert("version".into(), json!(version));
    if let Some(d) = description {
        m.insert("description".into(), json!(d));
    }
    m.insert("compat".into(), json!({ "claudePlugins": [{ "path": format!("./{CLAUDE_PLUGIN}") }] }));
    m.insert("od".into(), json!({ "kind": "skill", "taskKind": "new-generation" }));
    Value::Object(m)
}

/// Lowercases and replaces every character outside `[a-z0-9._-]` with `-`, then drops leading
/// `.`, `_` and `-`; an empty result becomes "plugin".
pub(super) fn sanitize(name: &str) -> String {
    let lowered: String = name
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .collect();
    let trimmed = lowered.trim_start_matches(['.', '_', '-']);
    if trimmed.is_empty() {
        "plugin".to_string()
    } else {
        trimmed.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_fits_the_id_pattern() {
        assert_eq!(sanitize("My Plugin!"), "my-plugin-");
        assert_eq!(sanitize("__x"), "x");
        assert_eq!(sanitize("—"), "plugin");
        assert_eq!(sanitize("open-design"), "open-design");
    }
}
