//! The SKILL.md adapter (reference §1 table, spec §5.4): the frontmatter of a portable agent
//! skill becomes the SKILL.md manifest layer. `name` ‖ folder id (sanitised to the id pattern);
//! `title` = `en_name` ‖ humanised name; `title_i18n`/`description_i18n` from `en_*`/`zh_*`;
//! `description` = `en_description` ‖ `description`; `version` ‖ "0.0.0"; `tags`;
//! `compat.agentSkills`; `od.kind` = skill; `od.taskKind` ‖ new-generation;
//! `od.mode|platform|scenario`; `od.preview` {type, entry}; `od.useCase.query` =
//! `od.example_prompt` ‖ first line of `description` ‖ first `# ` heading; `od.design_system` →
//! `od.context.designSystem`; `od.craft.requires` → `od.context.craft`; `od.inputs` with type
//! mapping; `od.parameters` kept with a warning; `od.outputs` kept as project-metadata hints;
//! `od.capabilities_required` mapped onto `od.capabilities`.

use serde_json::{json, Map, Value};

use super::claude::sanitize;
use super::frontmatter::{self, FrontmatterError};
use super::vocab::map_legacy_capability;
use super::{Diagnostic, SIDECAR, SKILL_MD, SPEC_VERSION};

/// Builds the SKILL.md layer. A frontmatter that cannot be read is an error when SKILL.md is the
/// manifest, and a warning when `open-design.json` supplies it (the layer is then dropped).
pub(super) fn adapt(bytes: &[u8], folder_id: &str, has_sidecar: bool, diags: &mut Vec<Diagnostic>) -> Option<Value> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        diags.push(Diagnostic::error("invalid-utf8", SKILL_MD, "SKILL.md is not UTF-8 text"));
        return None;
    };
    let report = |diags: &mut Vec<Diagnostic>, err: FrontmatterError| {
        let d = if has_sidecar {
            let msg = format!("{err}; the frontmatter is ignored and {SIDECAR} supplies the manifest");
            Diagnostic::warning("frontmatter-invalid", SKILL_MD, msg)
        } else {
            Diagnostic::error("frontmatter-invalid", SKILL_MD, err.to_string())
        };
        diags.push(d);
    };
    let split = match frontmatter::split(text) {
        Ok(split) => split,
        Err(err) => {
            report(diags, err);
            return None;
        }
    };
    let fm = match split.yaml.map(frontmatter::parse) {
        Some(Ok(map)) => map,
        Some(Err(err)) => {
            report(diags, err);
            return None;
        }
        None => {
            let msg = "no `---` frontmatter: agents that read SKILL.md need at least `name` and `description`";
            diags.push(Diagnostic::warning("frontmatter-missing", SKILL_MD, msg));
            Map::new()
        }
    };
    Some(build(&fm, split.body, folder_id, diags))
}

fn build(fm: &Map<String, Value>, body: &str, folder_id: &str, diags: &mut Vec<Diagnostic>) -> Value {
    let empty = Map::new();
    let od = match fm.get("od") {
        Some(Value::Object(od)) => od,
        Some(other) if !other.is_null() => {
            let msg = "`od` must be a mapping; the OD fields are ignored";
            diags.push(Diagnostic::warning("frontmatter-field-ignored", SKILL_MD, msg).at("od"));
            &empty
        }
        _ => &empty,
    };
    let name = text(fm, "name").map_or_else(|| sanitize(folder_id), str::to_string);
    let mut m = Map::new();
    m.insert("specVersion".into(), json!(SPEC_VERSION));
    m.insert("name".into(), json!(name));
    m.insert("title".into(), json!(text(fm, "en_name").map_or_else(|| humanize(&name), str::to_string)));
    insert_localized(&mut m, "title_i18n", text(fm, "en_name"), text(fm, "zh_name"));
    m.insert("version".into(), json!(version(fm.get("version"))));
    if let Some(d) = text(fm, "en_description").or_else(|| text(fm, "description")) {
        m.insert("description".into(), json!(d));
    }
    insert_localized(&mut m, "description_i18n", text(fm, "en_description"), text(fm, "zh_description"));
    if let Some(Value::Array(tags)) = fm.get("tags") {
        m.insert("tags".into(), Value::Array(tags.iter().filter_map(scalar).map(Value::String).collect()));
    }
    m.insert("compat".into(), json!({ "agentSkills": [{ "path": format!("./{SKILL_MD}") }] }));
    m.insert("od".into(), Value::Object(build_od(fm, od, body, diags)));
    Value::Object(m)
}

fn build_od(
    fm: &Map<String, Value>,
    od: &Map<String, Value>,
    body: &str,
    diags: &mut Vec<Diagnostic>,
) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("kind".into(), json!("skill"));
    out.insert("taskKind".into(), json!(text(od, "taskKind").unwrap_or("new-generation")));
    for key in ["mode", "platform", "scenario"] {
        if let Some(v) = text(od, key) {
            out.insert(key.into(), json!(v));
        }
    }
    if let Some(Value::Object(p)) = od.get("preview") {
        let preview: Map<String, Value> =
            ["type", "entry"].iter().filter_map(|k| text(p, k).map(|v| (k.to_string(), json!(v)))).collect();
        if !preview.is_empty() {
            out.insert("preview".into(), Value::Object(preview));
        }
    }
    if let Some(query) = example_prompt(fm, od, body) {
        out.insert("useCase".into(), json!({ "query": query }));
    }
    let context = context(od);
    if !context.is_empty() {
        out.insert("context".into(), Value::Object(context));
    }
    if let Some(Value::Array(raw)) = od.get("inputs") {
        let inputs = inputs(raw, diags);
        if !inputs.is_empty() {
            out.insert("inputs".into(), Value::Array(inputs));
        }
    }
    if let Some(params) = od.get("parameters").filter(|v| !v.is_null()) {
        let msg = "od.parameters is kept as adapter metadata; v1 apply renders no live sliders and \
                   the parameters do not become inputs";
        diags.push(Diagnostic::warning("parameters-unmapped", SKILL_MD, msg).at("od.parameters"));
        out.insert("parameters".into(), params.clone());
    }
    if let Some(outputs) = od.get("outputs").and_then(outputs) {
        out.insert("outputs".into(), outputs);
    }
    let caps = capabilities(od.get("capabilities_required"), diags);
    if !caps.is_empty() {
        out.insert("capabilities".into(), Value::Array(caps));
    }
    out
}

/// A trimmed, non-empty string field.
fn text<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
}

/// A scalar as a string (strings, numbers and booleans).
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn version(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "0.0.0".to_string(),
    }
}

fn insert_localized(m: &mut Map<String, Value>, key: &str, en: Option<&str>, zh: Option<&str>) {
    let mut map = Map::new();
    if let Some(en) = en {
        map.insert("en".into(), json!(en));
    }
    if let Some(zh) = zh {
        map.insert("zh-CN".into(), json!(zh));
    }
    if !map.is_empty() {
        m.insert(key.into(), Value::Object(map));
    }
}

/// `blog-post_v2` → "Blog Post V2".
fn humanize(name: &str) -> String {
    name.split(|c: char| c == '-' || c == '_' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars.next().map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn example_prompt(fm: &Map<String, Value>, od: &Map<String, Value>, body: &str) -> Option<String> {
    if let Some(p) = text(od, "example_prompt") {
        return Some(p.to_string());
    }
    let first_line = text(fm, "description").and_then(|d| d.lines().map(str::trim).find(|l| !l.is_empty()));
    if let Some(line) = first_line {
        return Some(line.to_string());
    }
    body.lines()
        .filter_map(|l| l.strip_prefix('#'))
        .filter(|rest| rest.starts_with([' ', '\t']))
        .map(str::trim)
        .find(|h| !h.is_empty())
        .map(str::to_string)
}

fn strings(value: Option<&Value>) -> Vec<Value> {
    match value {
        Some(Value::Array(items)) => items.iter().filter_map(scalar).map(Value::String).collect(),
        _ => Vec::new(),
    }
}

fn context(od: &Map<String, Value>) -> Map<String, Value> {
    let mut ctx = Map::new();
    let design_system = match od.get("design_system") {
        Some(Value::Object(ds)) if ds.get("requires") != Some(&Value::Bool(false)) => {
            let mut d = Map::new();
            if let Some(r) = text(ds, "ref") {
                d.insert("ref".into(), json!(r));
            }
            if let Some(Value::Bool(p)) = ds.get("primary") {
                d.insert("primary".into(), json!(p));
            }
            let sections = strings(ds.get("sections"));
            if !sections.is_empty() {
                d.insert("sections".into(), Value::Array(sections));
            }
            Some(d)
        }
        Some(Value::Bool(true)) => Some(Map::new()),
        _ => None,
    };
    if let Some(d) = design_system {
        ctx.insert("designSystem".into(), Value::Object(d));
    }
    let craft = match od.get("craft") {
        Some(Value::Object(c)) => strings(c.get("requires")),
        other => strings(other),
    };
    if !craft.is_empty() {
        ctx.insert("craft".into(), Value::Array(craft));
    }
    ctx
}

fn inputs(raw: &[Value], diags: &mut Vec<Diagnostic>) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, item) in raw.iter().enumerate() {
        let at = format!("od.inputs[{i}]");
        let Some(obj) = item.as_object() else {
            diags.push(Diagnostic::warning("input-invalid", SKILL_MD, "an input must be a mapping; skipped").at(at));
            continue;
        };
        let Some(name) = text(obj, "name") else {
            diags.push(Diagnostic::warning("input-invalid", SKILL_MD, "an input needs a `name`; skipped").at(at));
            continue;
        };
        let raw_type = text(obj, "type").unwrap_or("string");
        let mapped = match raw_type {
            "integer" => "number",
            "enum" => "select",
            "upload" => "file",
            t @ ("string" | "text" | "select" | "number" | "boolean" | "file") => t,
            other => {
                let msg = format!("input type {other:?} is not in the v1 vocabulary; read as \"string\"");
                diags.push(Diagnostic::warning("input-type-unmapped", SKILL_MD, msg).at(format!("{at}.type")));
                "string"
            }
        };
        let mut field = Map::new();
        field.insert("name".into(), json!(name));
        field.insert("type".into(), json!(mapped));
        for key in ["label", "placeholder"] {
            if let Some(v) = text(obj, key) {
                field.insert(key.into(), json!(v));
            }
        }
        if let Some(Value::Bool(r)) = obj.get("required") {
            field.insert("required".into(), json!(r));
        }
        let options = strings(obj.get("options").or_else(|| obj.get("values")));
        if !options.is_empty() {
            field.insert("options".into(), Value::Array(options));
        }
        for key in ["default", "min", "max"] {
            if let Some(v) = obj.get(key).filter(|v| !v.is_null()) {
                field.insert(key.into(), v.clone());
            }
        }
        out.push(Value::Object(field));
    }
    out
}

/// `od.outputs` as `{primary?, secondary?[]}` hints; a bare string is the primary output and a
/// list is primary-then-secondary.
fn outputs(raw: &Value) -> Option<Value> {
    let (primary, secondary) = match raw {
        Value::String(s) => (Some(s.clone()), Vec::new()),
        Value::Array(_) => {
            let mut all = strings(Some(raw)).into_iter();
            let primary = all.next().and_then(|v| v.as_str().map(str::to_string));
            (primary, all.collect())
        }
        Value::Object(o) => {
            let secondary = match o.get("secondary") {
                Some(Value::String(s)) => vec![json!(s)],
                other => strings(other),
            };
            (o.get("primary").and_then(scalar), secondary)
        }
        _ => (None, Vec::new()),
    };
    let mut out = Map::new();
    if let Some(p) = primary {
        out.insert("primary".into(), json!(p));
    }
    if !secondary.is_empty() {
        out.insert("secondary".into(), Value::Array(secondary));
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

fn capabilities(raw: Option<&Value>, diags: &mut Vec<Diagnostic>) -> Vec<Value> {
    let items: Vec<&Value> = match raw {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(v @ Value::String(_)) => vec![v],
        _ => Vec::new(),
    };
    let mut out: Vec<Value> = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let mapped = item.as_str().and_then(map_legacy_capability);
        match mapped {
            Some(cap) if !out.iter().any(|v| v == cap.as_str()) => out.push(json!(cap)),
            Some(_) => {}
            None => {
                let msg = format!(
                    "capability {item} cannot be expressed in the v1 capability vocabulary; kept as an adapter warning"
                );
                let at = format!("od.capabilities_required[{i}]");
                diags.push(Diagnostic::warning("unknown-capability", SKILL_MD, msg).at(at));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn humanize_names() {
        assert_eq!(humanize("blog-post_v2"), "Blog Post V2");
        assert_eq!(humanize("--"), "");
    }

    #[test]
    fn maps_the_od_block() {
        let text = "---\nname: demo\nen_name: Demo\nzh_name: 演示\ndescription: |\n  First line.\n  Second.\nod:\n  \
                    inputs:\n    - name: n\n      type: integer\n      min: 1\n    - name: c\n      type: enum\n      \
                    values: [a, b]\n    - name: x\n      type: color\n  parameters: [{name: p}]\n  outputs:\n    \
                    primary: index.html\n  capabilities_required: [file_write, node-runtime]\n  design_system:\n    \
                    requires: true\n---\nbody\n";
        let mut diags = Vec::new();
        let layer = adapt(text.as_bytes(), "folder", false, &mut diags).unwrap();
        assert_eq!(layer["name"], "demo");
        assert_eq!(layer["title"], "Demo");
        assert_eq!(layer["title_i18n"]["zh-CN"], "演示");
        assert_eq!(layer["version"], "0.0.0");
        assert_eq!(layer["od"]["useCase"]["query"], "First line.");
        assert_eq!(layer["od"]["inputs"][0], json!({"name": "n", "type": "number", "min": 1}));
        assert_eq!(layer["od"]["inputs"][1]["options"], json!(["a", "b"]));
        assert_eq!(layer["od"]["inputs"][2]["type"], "string");
        assert_eq!(layer["od"]["outputs"], json!({"primary": "index.html"}));
        assert_eq!(layer["od"]["capabilities"], json!(["fs:write"]));
        assert_eq!(layer["od"]["context"]["designSystem"], json!({}));
        let codes: Vec<&str> = diags.iter().map(|d| d.code.as_str()).collect();
        assert_eq!(codes, ["input-type-unmapped", "parameters-unmapped", "capability.unknown"]);
    }
}
