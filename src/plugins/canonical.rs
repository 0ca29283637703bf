//! Canonical JSON: compact, with recursively sorted object keys (arrays keep their order). The
//! bytes every content digest hashes — a compiled schema's cache key here, a snapshot's
//! `manifestSourceDigest`, a GenUI surface's schema digest, a tool descriptor's digest — so it
//! sits at the bottom, where plugins and everything above can use it.

use serde_json::Value;

/// Compact JSON with recursively sorted object keys (arrays keep their order).
pub fn canonical_json(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> =
                keys.iter().map(|k| format!("{}:{}", Value::String((*k).clone()), canonical_json(&m[*k]))).collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(canonical_json).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}
