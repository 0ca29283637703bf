//! Validation of a value against an arbitrary JSON Schema — a GenUI surface's `schema` (answers
//! and prefills), a tool's `inputSchema` (tool calls) — and the compile check `od plugin doctor`
//! runs on every surface schema a plugin declares.
//!
//! The validator is [boon](https://docs.rs/boon), a maintained implementation of drafts 2020-12,
//! 2019-09, 7, 6 and 4 that passes the official JSON-Schema-Test-Suite. It was picked over the
//! `jsonschema` crate on build weight: against od's tree boon adds 9 crates (boon, appendlist,
//! fluent-uri, borrow-or-share, regex, regex-automata, regex-syntax, aho-corasick, getrandom 0.3;
//! `url`/`idna` are already here through ureq), `jsonschema` with its default features (HTTP and
//! file resolvers) off still adds 35 (fancy-regex, num-* and fraction, parking_lot, strum,
//! uuid-simd, email_address, …). Both cover what od needs: `pattern`, `format`, `oneOf`, `$ref`,
//! `$defs`, `if`/`then`/`else`, `unevaluated*`, `dependentSchemas`.
//!
//! Settings: a schema without `$schema` is read as draft 2020-12 (one naming another draft is read
//! as that draft); `format` is asserted (date, date-time, time, duration, email, hostname, ipv4,
//! ipv6, uri, uri-reference, iri, uuid, regex, json-pointer, …; unknown formats pass); nothing is
//! ever loaded: a `$ref` resolves inside the schema (or to a bundled metaschema), and one naming
//! a file or a URL does not compile.
//!
//! Compiled schemas are cached by the blake3 digest of their canonical JSON
//! ([`SCHEMA_CACHE_ENTRIES`]), since the same few surfaces and tools are checked again and again.
//!
//! boon does not bound its work, and `anyOf`/`oneOf` through `$ref` can fan out exponentially in
//! the instance's depth (`{"enum":[1],"anyOf":[{"$ref":"#"},{"$ref":"#"}]}`-style schemas held a
//! daemon thread for good). So before validating, [`estimate`] bounds the visits from the schema's
//! shape and the instance's depth and size, and past [`MAX_SCHEMA_STEPS`] the value is refused,
//! naming the limit.
//!
//! Violations are `"<pointer>: <message>"`, one per failing leaf of boon's error tree, at most
//! [`MAX_SCHEMA_VIOLATIONS`], each message at most [`SCHEMA_MESSAGE_CHARS`] characters. A missing
//! required property and a property not allowed are reported at the property's own pointer.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use boon::{Compiler, Draft, ErrorKind, SchemaIndex, Schemas, SchemeUrlLoader, ValidationError};
use serde_json::Value;

use crate::limits::{MAX_SCHEMA_STEPS, MAX_SCHEMA_VIOLATIONS, SCHEMA_CACHE_ENTRIES, SCHEMA_MESSAGE_CHARS};

/// Where the schema being compiled lives (nothing is loaded from there).
const SCHEMA_URL: &str = "urn:od:schema";

/// A compiled schema.
struct Compiled {
    schemas: Schemas,
    index: SchemaIndex,
}

type Cache = Mutex<HashMap<String, Arc<Result<Compiled, String>>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Cache::default)
}

fn compile_uncached(schema: &Value) -> Result<Compiled, String> {
    let mut compiler = Compiler::new();
    compiler.set_default_draft(Draft::V2020_12);
    compiler.enable_format_assertions();
    // No scheme registered: no file or URL is ever read.
    compiler.use_loader(Box::new(SchemeUrlLoader::new()));
    compiler.add_resource(SCHEMA_URL, schema.clone()).map_err(|e| bounded(format!("{e:#}")))?;
    let mut schemas = Schemas::new();
    let index = compiler.compile(SCHEMA_URL, &mut schemas).map_err(|e| bounded(format!("{e:#}")))?;
    Ok(Compiled { schemas, index })
}

fn compiled(schema: &Value) -> Arc<Result<Compiled, String>> {
    let key = blake3::hash(super::canonical::canonical_json(schema).as_bytes()).to_hex().to_string();
    if let Some(hit) = cache().lock().expect("schema cache").get(&key) {
        return hit.clone();
    }
    let made = Arc::new(compile_uncached(schema));
    let mut c = cache().lock().expect("schema cache");
    if c.len() >= SCHEMA_CACHE_ENTRIES {
        c.clear();
    }
    c.insert(key, made.clone());
    made
}

/// Why `schema` is not a usable JSON Schema (draft 2020-12 unless it names another), or None.
pub fn compile_error(schema: &Value) -> Option<String> {
    compiled(schema).as_ref().as_ref().err().cloned()
}

/// Validates `instance` against `schema`; `"<pointer>: <message>"` per violation, empty when it
/// conforms. A `null` schema accepts everything (a tool without an `inputSchema`); a schema that
/// does not compile accepts nothing.
pub fn validate_value(schema: &Value, instance: &Value) -> Vec<String> {
    if schema.is_null() {
        return Vec::new();
    }
    let compiled = compiled(schema);
    let c = match compiled.as_ref() {
        Ok(c) => c,
        Err(e) => return vec![format!("/: the schema does not compile: {e}")],
    };
    let cost = estimate(schema, instance);
    if cost > MAX_SCHEMA_STEPS as u64 {
        return vec![format!("/: the schema takes more than {MAX_SCHEMA_STEPS} steps to check this value")];
    }
    match c.schemas.validate(instance, c.index) {
        Ok(()) => Vec::new(),
        Err(e) => {
            let mut out = Vec::new();
            leaves(&e, &mut out);
            out
        }
    }
}

fn bounded(mut s: String) -> String {
    if let Some((cut, _)) = s.char_indices().nth(SCHEMA_MESSAGE_CHARS) {
        s.truncate(cut);
        s.push('…');
    }
    s
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn push(out: &mut Vec<String>, pointer: &str, message: String) {
    if out.len() < MAX_SCHEMA_VIOLATIONS {
        let pointer = if pointer.is_empty() { "/" } else { pointer };
        out.push(bounded(format!("{pointer}: {message}")));
    }
}

/// Flattens boon's error tree into its failing leaves.
fn leaves(e: &ValidationError, out: &mut Vec<String>) {
    if out.len() >= MAX_SCHEMA_VIOLATIONS {
        return;
    }
    if !e.causes.is_empty() {
        for c in &e.causes {
            leaves(c, out);
        }
        return;
    }
    let at = e.instance_location.to_string();
    match &e.kind {
        ErrorKind::Required { want } => {
            for key in want {
                push(out, &format!("{at}/{}", escape(key)), format!("required property {key:?} is missing"));
            }
        }
        ErrorKind::AdditionalProperties { got } => {
            for key in got {
                push(out, &format!("{at}/{}", escape(key)), format!("property {key:?} is not allowed"));
            }
        }
        kind => push(out, &at, kind.to_string()),
    }
}

/// Keywords whose subschema applies to the instance itself.
const IN_PLACE: &[&str] = &["not", "if", "then", "else"];
const IN_PLACE_LISTS: &[&str] = &["allOf", "anyOf", "oneOf"];
const IN_PLACE_MAPS: &[&str] = &["dependentSchemas", "dependencies"];
const REFS: &[&str] = &["$ref", "$dynamicRef", "$recursiveRef"];
/// Keywords whose subschema applies to the instance's children.
const CHILD: &[&str] = &[
    "additionalProperties",
    "propertyNames",
    "contains",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
    "items",
];
/// Keywords whose subschemas apply to different children each (at most one per child).
const CHILD_DISJOINT: &[&str] = &["properties", "prefixItems", "items"];
/// Keywords whose subschemas may all apply to one child.
const CHILD_OVERLAPPING: &[&str] = &["patternProperties"];

/// An upper bound on the schema nodes checking `instance` against `schema` visits: the visits one
/// instance node at each depth can take (through `$ref`s and every applicator, counting all
/// branches), times the instance's node count. Cycles at one location are ended by boon (a
/// reference cycle is an error), so they are counted once.
pub fn estimate(schema: &Value, instance: &Value) -> u64 {
    let (depth, nodes) = shape(instance);
    let mut est = Estimator { root: schema, memo: HashMap::new(), visiting: HashSet::new() };
    est.cost(schema, depth).saturating_mul(nodes)
}

/// (depth, node count) of a JSON value.
fn shape(v: &Value) -> (usize, u64) {
    let inner: Vec<(usize, u64)> = match v {
        Value::Array(items) => items.iter().map(shape).collect(),
        Value::Object(map) => map.values().map(shape).collect(),
        _ => return (0, 1),
    };
    let depth = inner.iter().map(|(d, _)| d + 1).max().unwrap_or(0);
    let nodes = inner.iter().fold(1u64, |n, (_, c)| n.saturating_add(*c));
    (depth, nodes)
}

struct Estimator<'a> {
    root: &'a Value,
    memo: HashMap<(usize, usize), u64>,
    visiting: HashSet<(usize, usize)>,
}

impl<'a> Estimator<'a> {
    fn cost(&mut self, node: &'a Value, depth: usize) -> u64 {
        let Some(s) = node.as_object() else { return 1 };
        let key = (node as *const Value as usize, depth);
        if let Some(c) = self.memo.get(&key) {
            return *c;
        }
        if !self.visiting.insert(key) {
            return 1;
        }
        let cap = MAX_SCHEMA_STEPS as u64 + 1;
        let mut c: u64 = 1;
        for kw in REFS {
            if let Some(target) = s.get(*kw).and_then(Value::as_str).map(|r| self.resolve(r)) {
                c = c.saturating_add(self.cost(target, depth));
            }
        }
        for kw in IN_PLACE {
            if let Some(sub) = s.get(*kw) {
                c = c.saturating_add(self.cost(sub, depth));
            }
        }
        for kw in IN_PLACE_LISTS {
            for sub in s.get(*kw).and_then(Value::as_array).into_iter().flatten() {
                c = c.saturating_add(self.cost(sub, depth));
            }
        }
        for kw in IN_PLACE_MAPS {
            for sub in s.get(*kw).and_then(Value::as_object).into_iter().flat_map(|m| m.values()) {
                c = c.saturating_add(self.cost(sub, depth));
            }
        }
        if depth > 0 {
            for kw in CHILD {
                if let Some(sub) = s.get(*kw).filter(|v| !v.is_array()) {
                    c = c.saturating_add(self.cost(sub, depth - 1));
                }
            }
            for kw in CHILD_DISJOINT {
                let subs: Vec<&Value> = match s.get(*kw) {
                    Some(Value::Object(m)) if *kw == "properties" => m.values().collect(),
                    Some(Value::Array(list)) => list.iter().collect(),
                    _ => Vec::new(),
                };
                let most = subs.into_iter().map(|sub| self.cost(sub, depth - 1)).max().unwrap_or(0);
                c = c.saturating_add(most);
            }
            for kw in CHILD_OVERLAPPING {
                for sub in s.get(*kw).and_then(Value::as_object).into_iter().flat_map(|m| m.values()) {
                    c = c.saturating_add(self.cost(sub, depth - 1));
                }
            }
        }
        let c = c.min(cap);
        self.visiting.remove(&key);
        self.memo.insert(key, c);
        c
    }

    /// The node a reference names: a local pointer or anchor; anything else counts as the root.
    fn resolve(&self, r: &str) -> &'a Value {
        let frag = r.split_once('#').map_or("", |(_, f)| f);
        if frag.is_empty() || frag.starts_with('/') {
            return self.root.pointer(frag).unwrap_or(self.root);
        }
        find_anchor(self.root, frag, 0).unwrap_or(self.root)
    }
}

fn find_anchor<'a>(v: &'a Value, name: &str, depth: usize) -> Option<&'a Value> {
    if depth > 64 {
        return None;
    }
    match v {
        Value::Object(m) => {
            if ["$anchor", "$dynamicAnchor", "$recursiveAnchor"]
                .iter()
                .any(|k| m.get(*k).and_then(Value::as_str) == Some(name))
            {
                return Some(v);
            }
            m.values().find_map(|c| find_anchor(c, name, depth + 1))
        }
        Value::Array(items) => items.iter().find_map(|c| find_anchor(c, name, depth + 1)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pattern_format_one_of_and_refs_are_checked() {
        let color = json!({"type": "object", "properties": {"color": {"type": "string", "pattern": "^#[0-9a-f]{6}$"}}});
        let v = validate_value(&color, &json!({"color": "red"}));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].starts_with("/color: ") && v[0].contains("does not match pattern"), "{v:?}");
        assert!(validate_value(&color, &json!({"color": "#00ff00"})).is_empty());

        let email = json!({"properties": {"to": {"type": "string", "format": "email"}}});
        assert!(validate_value(&email, &json!({"to": "not an address"}))[0].starts_with("/to: "));
        assert!(validate_value(&email, &json!({"to": "a@example.com"})).is_empty());

        // 5 is both a multiple of 5 and below 10: oneOf wants exactly one.
        let one = json!({"oneOf": [{"type": "integer", "multipleOf": 5}, {"type": "integer", "maximum": 10}]});
        assert!(!validate_value(&one, &json!(5)).is_empty());
        assert!(validate_value(&one, &json!(15)).is_empty());

        let refs = json!({"$defs": {"size": {"enum": ["s", "m", "l"]}},
            "type": "object", "required": ["size"], "properties": {"size": {"$ref": "#/$defs/size"}}});
        assert!(validate_value(&refs, &json!({"size": "xl"}))[0].starts_with("/size: "));
        assert_eq!(validate_value(&refs, &json!({})), ["/size: required property \"size\" is missing"]);
    }

    #[test]
    fn schemas_that_do_not_compile_are_named_and_accept_nothing() {
        for bad in [json!({"type": "strng"}), json!({"pattern": "(unclosed"}), json!({"$ref": "file:///etc/passwd"})] {
            assert!(compile_error(&bad).is_some(), "{bad}");
            assert!(validate_value(&bad, &json!("x"))[0].starts_with("/: the schema does not compile"), "{bad}");
        }
        assert_eq!(compile_error(&json!({"type": "string", "format": "date"})), None);
        assert!(validate_value(&Value::Null, &json!({"anything": 1})).is_empty());
    }

    #[test]
    fn a_schema_that_fans_out_is_refused_within_the_step_budget() {
        // Each level fails its `enum` and tries both branches: exponential in the depth.
        let schema = json!({"enum": [1], "anyOf": [
            {"properties": {"a": {"$ref": "#"}}}, {"properties": {"a": {"$ref": "#"}}}]});
        let mut deep = json!(2);
        for _ in 0..40 {
            deep = json!({ "a": deep });
        }
        let v = validate_value(&schema, &deep);
        assert!(v.iter().any(|m| m.contains(&format!("more than {MAX_SCHEMA_STEPS} steps"))), "{v:?}");
        assert_eq!(validate_value(&schema, &json!(1)), Vec::<String>::new());
    }

    #[test]
    fn violations_are_bounded() {
        let schema = json!({"type": "array", "items": {"enum": (0..400).collect::<Vec<_>>()}});
        let v = validate_value(&schema, &json!(vec![1000; 2000]));
        assert_eq!(v.len(), MAX_SCHEMA_VIOLATIONS);
        assert!(v.iter().all(|m| m.chars().count() <= SCHEMA_MESSAGE_CHARS + 1), "{}", v[0]);
        assert!(v[0].starts_with("/0: "), "{}", v[0]);
    }
}
