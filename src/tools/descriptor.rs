//! `AgentToolDescriptor`: parsing and validation (so the dual-track rule is structural — a
//! `browser` tool asserts `viewStateOnly: true` and carries no API; an `api` tool carries both its
//! `/api/*` route and its `od` subcommand), the canonical form and its digest, the searchable
//! parameter text, and the conversion of external tools (an MCP `tools/list`) into `api` tools.

use serde_json::{json, Map, Value};

use super::ToolError;
use crate::limits::{MAX_TOOL_DESCRIPTOR_BYTES, MAX_TOOL_NAME_BYTES};
use crate::plugins::canonical::canonical_json;

/// Fields a descriptor may carry; anything else is dropped from the canonical form.
/// (`view`, `readOnly` and `origin` are od's: what a browser action moves, whether an `api` tool
/// only reads, and where an imported tool came from.)
const FIELDS: &[&str] = &[
    "name",
    "title",
    "description",
    "inputSchema",
    "surface",
    "viewStateOnly",
    "view",
    "api",
    "cli",
    "readOnly",
    "origin",
];

const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];

/// Whether `name` is dot-namespaced: at least two segments of letters, digits, `_` and `-`,
/// starting with a letter.
pub fn valid_name(name: &str) -> bool {
    let mut segs = name.split('.');
    let first_ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    let seg_ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    first_ok && name.len() <= MAX_TOOL_NAME_BYTES && name.contains('.') && segs.all(seg_ok)
}

/// Whether `name` follows the contract's documented strict pattern
/// `^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+$` (od's own tools do).
pub fn strict_name(name: &str) -> bool {
    let seg = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    name.contains('.') && name.split('.').all(seg)
}

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    v[key].as_str().filter(|s| !s.trim().is_empty()).ok_or_else(|| ToolError::invalid(key, "a non-empty string"))
}

fn check_api(d: &Map<String, Value>) -> Result<(), ToolError> {
    let api = d.get("api").ok_or_else(|| ToolError::invalid("api", "an api tool needs {method, route}"))?;
    let method = api["method"].as_str().unwrap_or("");
    if !METHODS.contains(&method) {
        return Err(ToolError::invalid("api.method", format!("{method:?} is not one of {}", METHODS.join(" "))));
    }
    let route = api["route"].as_str().unwrap_or("");
    if !route.starts_with("/api/") {
        return Err(ToolError::invalid("api.route", format!("{route:?} must start with /api/")));
    }
    let sub = d.get("cli").and_then(|c| c["subcommand"].as_str()).unwrap_or("").trim();
    if sub.is_empty() {
        return Err(ToolError::invalid("cli.subcommand", "an api tool needs the od subcommand that does the same"));
    }
    if d.contains_key("viewStateOnly") {
        return Err(ToolError::invalid("viewStateOnly", "only browser tools are view-state-only"));
    }
    Ok(())
}

fn check_browser(d: &Map<String, Value>) -> Result<(), ToolError> {
    if d.get("viewStateOnly") != Some(&Value::Bool(true)) {
        return Err(ToolError::invalid(
            "viewStateOnly",
            "a browser tool must assert viewStateOnly: true (anything that persists is an api tool with a route and an od subcommand)",
        ));
    }
    for k in ["api", "cli"] {
        if d.contains_key(k) {
            return Err(ToolError::invalid(k, "a browser tool has no API route or od subcommand"));
        }
    }
    if d.get("view").is_some_and(|v| !v.is_string()) {
        return Err(ToolError::invalid("view", "a string"));
    }
    Ok(())
}

/// Validates `v` and returns its canonical form (known fields only).
pub fn parse(v: &Value) -> Result<Value, ToolError> {
    let obj = v.as_object().ok_or_else(|| ToolError::invalid("tool", "a descriptor object"))?;
    let name = field(v, "name")?;
    if !valid_name(name) {
        return Err(ToolError::invalid(
            "name",
            format!("{name:?} must be dot-namespaced (e.g. `projects.create`): segments of letters, digits, _ and -, at most {MAX_TOOL_NAME_BYTES} bytes"),
        ));
    }
    field(v, "description")?;
    let schema = &v["inputSchema"];
    if schema["type"] != "object" {
        return Err(ToolError::invalid("inputSchema", "a JSON Schema object with \"type\": \"object\""));
    }
    let d: Map<String, Value> =
        obj.iter().filter(|(k, _)| FIELDS.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
    match v["surface"].as_str() {
        Some("api") => check_api(&d)?,
        Some("browser") => check_browser(&d)?,
        _ => return Err(ToolError::invalid("surface", "`api` or `browser`")),
    }
    if d.get("readOnly").is_some_and(|r| !r.is_boolean()) {
        return Err(ToolError::invalid("readOnly", "a boolean"));
    }
    let out = Value::Object(d);
    let size = canonical_json(&out).len();
    if size > MAX_TOOL_DESCRIPTOR_BYTES {
        return Err(ToolError::Limit {
            limit: "MAX_TOOL_DESCRIPTOR_BYTES",
            value: size,
            max: MAX_TOOL_DESCRIPTOR_BYTES,
        });
    }
    Ok(out)
}

/// blake3 of the canonical JSON.
pub fn digest(d: &Value) -> String {
    blake3::hash(canonical_json(d).as_bytes()).to_hex().to_string()
}

/// Parameter names and descriptions of the input schema (two levels deep), for search.
pub fn keywords(d: &Value) -> String {
    let mut out = Vec::new();
    fn walk(schema: &Value, depth: u8, out: &mut Vec<String>) {
        let Some(props) = schema["properties"].as_object() else { return };
        for (k, p) in props {
            out.push(k.clone());
            if let Some(desc) = p["description"].as_str() {
                out.push(desc.to_string());
            }
            if depth < 1 {
                walk(p, depth + 1, out);
                walk(&p["items"], depth + 1, out);
            }
        }
    }
    walk(&d["inputSchema"], 0, &mut out);
    let mut s = out.join(" ");
    if s.len() > 4096 {
        let mut cut = 4096;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// The first sentence (or line) of a description, at most `max` characters.
pub fn summary(description: &str, max: usize) -> String {
    let line = description.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let sentence = match line.find(". ") {
        Some(i) => &line[..=i],
        None => line,
    };
    if sentence.chars().count() <= max {
        return sentence.to_string();
    }
    let cut: String = sentence.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", cut.trim_end())
}

/// Turns an external tool (an MCP `tools/list` entry, or a descriptor) into an `api` descriptor
/// named `<namespace>.<name>` (or its own name without a namespace), reached through
/// `POST /api/tools/<name>/call` and `od tools call <name>`.
pub fn from_external(t: &Value, namespace: Option<&str>, origin: Value) -> Result<Value, ToolError> {
    let own = field(t, "name")?;
    let name = match namespace {
        Some(ns) => format!("{ns}.{own}"),
        None => own.to_string(),
    };
    let description = t["description"].as_str().filter(|d| !d.trim().is_empty()).unwrap_or(own);
    let schema = match &t["inputSchema"] {
        Value::Object(_) => t["inputSchema"].clone(),
        _ => json!({ "type": "object" }),
    };
    let read_only = t["readOnly"].as_bool().or_else(|| t["annotations"]["readOnlyHint"].as_bool()).unwrap_or(false);
    let mut d = json!({
        "name": name, "description": description, "inputSchema": schema, "surface": "api",
        "api": { "method": "POST", "route": format!("/api/tools/{name}/call") },
        "cli": { "subcommand": format!("tools call {name}") },
        "readOnly": read_only, "origin": origin,
    });
    if let Some(title) = t["title"].as_str() {
        d["title"] = json!(title);
    }
    parse(&d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(name: &str) -> Value {
        json!({ "name": name, "description": "Does it.", "inputSchema": { "type": "object" }, "surface": "api",
                "api": { "method": "GET", "route": "/api/x" }, "cli": { "subcommand": "x list" } })
    }

    #[test]
    fn the_dual_track_rule_is_structural() {
        assert!(parse(&api("x.list")).is_ok());
        let mut no_cli = api("x.list");
        no_cli.as_object_mut().unwrap().remove("cli");
        assert!(matches!(parse(&no_cli), Err(ToolError::Invalid { field, .. }) if field == "cli.subcommand"));
        let browser =
            json!({ "name": "ui.go", "description": "Go.", "inputSchema": { "type": "object" }, "surface": "browser" });
        assert!(matches!(parse(&browser), Err(ToolError::Invalid { field, .. }) if field == "viewStateOnly"));
        let mut b = browser.clone();
        b["viewStateOnly"] = json!(true);
        assert!(parse(&b).is_ok());
        b["api"] = json!({ "method": "GET", "route": "/api/x" });
        assert!(parse(&b).is_err());
        let mut bad_route = api("x.list");
        bad_route["api"]["route"] = json!("/x");
        assert!(parse(&bad_route).is_err());
    }

    #[test]
    fn names_and_summaries() {
        assert!(valid_name("bfcl.calc_Simple_Interest") && !valid_name("single") && !valid_name("a..b"));
        assert!(!valid_name("1a.b") && !valid_name("a.b c"));
        assert!(strict_name("projects.create") && !strict_name("projects.Create"));
        assert_eq!(summary("Lists runs. Filter by status.", 90), "Lists runs.");
        assert_eq!(summary("abcdef", 4), "abc…");
        let t = json!({ "name": "air_quality", "description": "Air.", "annotations": { "readOnlyHint": true },
                        "inputSchema": { "type": "object", "properties": { "city": { "type": "string", "description": "Town name" } } } });
        let d = from_external(&t, Some("bfcl"), json!({ "kind": "import" })).unwrap();
        assert_eq!(d["name"], "bfcl.air_quality");
        assert_eq!(d["readOnly"], true);
        assert_eq!(d["api"]["route"], "/api/tools/bfcl.air_quality/call");
        assert_eq!(keywords(&d), "city Town name");
        assert_ne!(digest(&d), digest(&api("x.list")));
    }
}
