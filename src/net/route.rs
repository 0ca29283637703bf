//! Route filling: a `{name}` (or `{*name}`) route template filled from a JSON input, each value
//! percent-encoded as one path segment and taken out of the input. Shared by `api` tools
//! (`tools/exec.rs`), connector tools (`connectors/call.rs`) and the plugin asset URLs the engine
//! writes (`engine/apply.rs`).

use serde_json::{Map, Value};

/// A value as text in a URL: a string as it is, anything else as JSON.
pub fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Why a route could not be filled from an input.
#[derive(Debug, PartialEq)]
pub enum RouteGap {
    /// The input is not an object.
    NotObject,
    /// The input lacks (or has null for) this route parameter.
    Missing(String),
    /// The parameter's value would not stay one segment of the route: empty, `.` or `..` (a
    /// client resolves those, so `/items/{id}/detail` with `..` would reach `/detail`).
    NotASegment(String),
}

/// `route` with its `{name}` (or `{*name}`) segments filled from `input`, each percent-encoded and
/// taken out of it; returns the path and the input left over. Shared by api tools and connector
/// tools.
pub fn fill_route(route: &str, input: &Value) -> Result<(String, Map<String, Value>), RouteGap> {
    let mut rest: Map<String, Value> = match input {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        _ => return Err(RouteGap::NotObject),
    };
    let mut path = String::with_capacity(route.len());
    let mut tail = route;
    while let Some(open) = tail.find('{') {
        let close = tail[open..].find('}').map(|c| open + c).unwrap_or(tail.len());
        path.push_str(&tail[..open]);
        let key = tail[open + 1..close].trim_start_matches('*');
        let v = rest.remove(key).filter(|v| !v.is_null()).ok_or_else(|| RouteGap::Missing(key.to_string()))?;
        let text = scalar(&v);
        // `/` and `%` are percent-encoded below, so only these could leave the segment.
        if matches!(text.as_str(), "" | "." | "..") {
            return Err(RouteGap::NotASegment(key.to_string()));
        }
        path.push_str(&super::percent_encode(&text));
        tail = tail.get(close + 1..).unwrap_or("");
    }
    path.push_str(tail);
    Ok((path, rest))
}
