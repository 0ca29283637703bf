//! Validation of a merged manifest against the published JSON Schema
//! (`schema/open-design.plugin.v1.json`, draft 2020-12, a verbatim copy of OpenDesign's
//! `docs/schemas/open-design.plugin.v1.json`). Arbitrary schemas (GenUI answers, tool inputs) are
//! checked by a full 2020-12 implementation instead: [`super::validator`].
//!
//! A focused interpreter for exactly the keywords that schema uses (`$ref` to `#/$defs`, `type`,
//! `enum`, `const`, `minLength`, `pattern`, `minimum`, `required`, `properties`,
//! `additionalProperties`, `minProperties`, `items`, `oneOf`/`anyOf`; `format` is an annotation
//! in 2020-12). It stays rather than moving to the validator because of the deviation below,
//! which a conforming implementation cannot make, and because its messages are attributed to the
//! manifest file each value came from. A unit test walks the schema and fails on any keyword or
//! `pattern` this file does not implement, so a schema update cannot be half-checked silently.
//!
//! One deliberate deviation: `oneOf` is checked as `anyOf`. The schema's two `oneOf`s are
//! `useCase.query` (string | locale map: disjoint, so nothing changes) and
//! `context.designSystem`, whose two object branches both accept every `{ref, primary}` object —
//! strict `oneOf` would reject every design-system manifest of the official catalog, which
//! OpenDesign's own (Zod) validator accepts.

use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::sidecar::kind;
use crate::limits::{MAX_SCHEMA_STEPS, MAX_SCHEMA_VIOLATIONS, SCHEMA_ENUM_SHOWN};

const SCHEMA_TEXT: &str = include_str!("schema/open-design.plugin.v1.json");

/// Keywords that only annotate.
#[cfg(test)]
const ANNOTATIONS: &[&str] = &["$schema", "$id", "$comment", "$defs", "title", "description", "format", "default"];
/// Keywords that assert, all implemented below.
#[cfg(test)]
const KEYWORDS: &[&str] = &[
    "$ref",
    "type",
    "enum",
    "const",
    "minLength",
    "pattern",
    "minimum",
    "required",
    "properties",
    "additionalProperties",
    "minProperties",
    "items",
    "oneOf",
    "anyOf",
];
/// A `pattern` implemented as a function.
type Matcher = fn(&str) -> bool;
/// The `pattern`s the schema uses, each implemented without a regex engine.
const PATTERNS: &[(&str, Matcher)] = &[("^[a-z0-9][a-z0-9._-]*$", is_plugin_id)];
/// Deepest schema/instance nesting followed (the schema nests 9 levels).
const MAX_DEPTH: usize = 64;

/// The plugin id pattern `^[a-z0-9][a-z0-9._-]*$`.
pub fn is_plugin_id(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
}

/// One schema violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Violation {
    /// JSON pointer of the offending (or missing) value.
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

fn schema() -> Option<&'static Value> {
    static SCHEMA: OnceLock<Option<Value>> = OnceLock::new();
    SCHEMA.get_or_init(|| serde_json::from_str(SCHEMA_TEXT).ok()).as_ref()
}

/// Validates a manifest; empty when it conforms.
pub(super) fn validate(instance: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    match schema() {
        Some(root) => check(&Root::new(root), root, instance, "", &mut out, 0),
        None => out.push(Violation { pointer: String::new(), message: "the embedded schema does not parse".into() }),
    }
    out
}

fn push(out: &mut Vec<Violation>, pointer: &str, message: String) {
    if out.len() < MAX_SCHEMA_VIOLATIONS {
        out.push(Violation { pointer: pointer.to_string(), message });
    }
}

fn child(pointer: &str, key: &str) -> String {
    format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// The schema being checked against (for `$ref`), and the steps taken so far.
struct Root<'a> {
    schema: &'a Value,
    steps: std::cell::Cell<usize>,
}

impl<'a> Root<'a> {
    fn new(schema: &'a Value) -> Self {
        Root { schema, steps: Default::default() }
    }
    /// Counts a step; false once the budget is spent.
    fn step(&self) -> bool {
        self.steps.set(self.steps.get() + 1);
        self.steps.get() <= MAX_SCHEMA_STEPS
    }
}

fn check(root: &Root, schema: &Value, instance: &Value, ptr: &str, out: &mut Vec<Violation>, depth: usize) {
    let Some(s) = schema.as_object() else {
        if schema == &Value::Bool(false) {
            push(out, ptr, "no value is allowed here".into());
        }
        return;
    };
    if depth > MAX_DEPTH {
        return;
    }
    if !root.step() {
        return push(out, ptr, format!("the schema takes more than {MAX_SCHEMA_STEPS} steps to check"));
    }
    if let Some(target) = s.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
        if let Some(target) = root.schema.pointer(target) {
            check(root, target, instance, ptr, out, depth + 1);
        }
    }
    if let Some(t) = s.get("type") {
        if !type_matches(t, instance) {
            push(out, ptr, format!("expected {}, found {}", describe(t), kind(instance)));
            return;
        }
    }
    if let Some(Value::Array(allowed)) = s.get("enum") {
        if !allowed.contains(instance) {
            let list: Vec<String> = allowed.iter().take(SCHEMA_ENUM_SHOWN).map(|v| v.to_string()).collect();
            let more = if allowed.len() > SCHEMA_ENUM_SHOWN { ", …" } else { "" };
            push(out, ptr, format!("{instance} is not one of {}{more}", list.join(", ")));
        }
    }
    if let Some(c) = s.get("const").filter(|c| *c != instance) {
        push(out, ptr, format!("{instance} must be {c}"));
    }
    match instance {
        Value::String(text) => check_string(s, text, ptr, out),
        Value::Number(n) => {
            if let (Some(min), Some(v)) = (s.get("minimum").and_then(Value::as_f64), n.as_f64()) {
                if v < min {
                    push(out, ptr, format!("{n} is below the minimum {min}"));
                }
            }
            if let (Some(max), Some(v)) = (s.get("maximum").and_then(Value::as_f64), n.as_f64()) {
                if v > max {
                    push(out, ptr, format!("{n} is above the maximum {max}"));
                }
            }
        }
        Value::Object(obj) => check_object(root, s, obj, ptr, out, depth),
        Value::Array(items) => {
            if s.get("minItems").and_then(Value::as_u64).is_some_and(|m| (items.len() as u64) < m) {
                push(out, ptr, format!("needs at least {} items", s["minItems"]));
            }
            if s.get("maxItems").and_then(Value::as_u64).is_some_and(|m| (items.len() as u64) > m) {
                push(out, ptr, format!("takes at most {} items", s["maxItems"]));
            }
            if let Some(item_schema) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(root, item_schema, item, &child(ptr, &i.to_string()), out, depth + 1);
                }
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(branches)) = s.get(key) {
            check_any(root, branches, instance, ptr, out, depth);
        }
    }
}

fn check_string(s: &Map<String, Value>, text: &str, ptr: &str, out: &mut Vec<Violation>) {
    if let Some(min) = s.get("minLength").and_then(Value::as_u64) {
        if (text.chars().count() as u64) < min {
            let msg =
                if min == 1 { "must not be empty".to_string() } else { format!("is shorter than {min} characters") };
            push(out, ptr, msg);
        }
    }
    if let Some(max) = s.get("maxLength").and_then(Value::as_u64) {
        if (text.chars().count() as u64) > max {
            push(out, ptr, format!("is longer than {max} characters"));
        }
    }
    if let Some(pattern) = s.get("pattern").and_then(Value::as_str) {
        let matcher = PATTERNS.iter().find(|(p, _)| *p == pattern).map(|(_, f)| f);
        if matcher.is_some_and(|f| !f(text)) {
            push(out, ptr, format!("{text:?} does not match {pattern}"));
        }
    }
}

fn check_object(
    root: &Root,
    s: &Map<String, Value>,
    obj: &Map<String, Value>,
    ptr: &str,
    out: &mut Vec<Violation>,
    depth: usize,
) {
    if let Some(Value::Array(required)) = s.get("required") {
        for key in required.iter().filter_map(Value::as_str).filter(|k| !obj.contains_key(*k)) {
            push(out, &child(ptr, key), format!("required property {key:?} is missing"));
        }
    }
    if let Some(min) = s.get("minProperties").and_then(Value::as_u64) {
        if (obj.len() as u64) < min {
            push(out, ptr, format!("needs at least {min} entr{}", if min == 1 { "y" } else { "ies" }));
        }
    }
    let properties = s.get("properties").and_then(Value::as_object);
    for (key, value) in obj {
        let at = child(ptr, key);
        match properties.and_then(|p| p.get(key)) {
            Some(prop_schema) => check(root, prop_schema, value, &at, out, depth + 1),
            None => match s.get("additionalProperties") {
                Some(Value::Bool(false)) => push(out, &at, format!("property {key:?} is not allowed")),
                Some(extra @ Value::Object(_)) => check(root, extra, value, &at, out, depth + 1),
                _ => {}
            },
        }
    }
}

/// `anyOf` (and `oneOf`, see the module doc): passes when one branch has no violation.
fn check_any(root: &Root, branches: &[Value], instance: &Value, ptr: &str, out: &mut Vec<Violation>, depth: usize) {
    let mut reasons = Vec::new();
    for branch in branches {
        let mut scratch = Vec::new();
        check(root, branch, instance, ptr, &mut scratch, depth + 1);
        match scratch.into_iter().next() {
            None => return,
            Some(first) => reasons.push(first.message),
        }
    }
    push(out, ptr, format!("matches none of the allowed forms ({})", reasons.join(" | ")));
}

fn type_matches(t: &Value, instance: &Value) -> bool {
    match t {
        Value::String(name) => is_type(name, instance),
        Value::Array(names) => names.iter().filter_map(Value::as_str).any(|n| is_type(n, instance)),
        _ => true,
    }
}

fn is_type(name: &str, v: &Value) -> bool {
    match name {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => v.as_i64().is_some() || v.as_u64().is_some() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => true,
    }
}

fn describe(t: &Value) -> String {
    let name = |n: &str| match n {
        "object" | "array" | "integer" => format!("an {n}"),
        "null" => "null".to_string(),
        other => format!("a {other}"),
    };
    match t {
        Value::String(n) => name(n),
        Value::Array(ns) => ns.iter().filter_map(Value::as_str).map(name).collect::<Vec<_>>().join(" or "),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Walks the schema: every keyword is implemented or an annotation, every pattern has a matcher.
    fn walk(schema: &Value, path: &str, problems: &mut Vec<String>) {
        let Some(s) = schema.as_object() else { return };
        for (key, value) in s {
            if !KEYWORDS.contains(&key.as_str()) && !ANNOTATIONS.contains(&key.as_str()) {
                problems.push(format!("{path}: keyword {key}"));
            }
            match (key.as_str(), value) {
                ("properties" | "$defs", Value::Object(children)) => {
                    children.iter().for_each(|(k, v)| walk(v, &format!("{path}/{key}/{k}"), problems))
                }
                ("items" | "additionalProperties", v) => walk(v, &format!("{path}/{key}"), problems),
                ("oneOf" | "anyOf", Value::Array(bs)) => bs.iter().for_each(|b| walk(b, path, problems)),
                ("pattern", Value::String(p)) if !PATTERNS.iter().any(|(known, _)| known == p) => {
                    problems.push(format!("{path}: pattern {p}"))
                }
                _ => {}
            }
        }
    }

    #[test]
    fn every_keyword_of_the_published_schema_is_implemented() {
        let root = schema().expect("embedded schema parses");
        let mut problems = Vec::new();
        walk(root, "", &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn violations_carry_pointers() {
        let ok = json!({"specVersion": "1.0.0", "name": "a.b-c", "version": "1", "od": {
            "context": {"designSystem": {"ref": "neon", "primary": true}},
            "useCase": {"query": {"en": "x"}},
            "genui": {"surfaces": [{"id": "s", "kind": "form", "persist": "run", "timeout": 5}]}}});
        assert_eq!(validate(&ok), vec![]);
        let bad = json!({"specVersion": "1.0.0", "name": "Bad Name", "od": {
            "kind": "widget", "useCase": {"query": 3}, "title_i18n": {},
            "genui": {"surfaces": [{"id": "s", "kind": "form", "persist": "run", "timeout": 0}]},
            "inputs": [{"name": ""}]}, "title_i18n": {}});
        let got: Vec<String> = validate(&bad).into_iter().map(|v| v.pointer).collect();
        assert_eq!(
            got,
            [
                "/version",
                "/name",
                "/od/kind",
                "/od/useCase/query",
                "/od/genui/surfaces/0/timeout",
                "/od/inputs/0/name",
                "/title_i18n"
            ]
        );
        assert!(is_plugin_id("0x") && !is_plugin_id("-x") && !is_plugin_id("") && !is_plugin_id("aB"));
    }
}
