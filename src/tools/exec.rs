//! Calling an `api` tool through its declared route: the HTTP request an input makes (path
//! parameters filled and encoded, the rest as query string or JSON body, or one field as the raw
//! body), and what a response means (JSON as is, text as a string, an error envelope as a failure).
//! Pure: the daemon sends the request to its own router, `od mcp` over its connection.

use serde_json::{json, Value};

use super::ToolError;
use crate::net::percent_encode;
pub use crate::net::route::{fill_route, scalar, RouteGap};

/// One HTTP request.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpCall {
    pub method: String,
    /// Path and query.
    pub path: String,
    pub body: Body,
}

/// A request body.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    None,
    Json(Value),
    Raw(Vec<u8>),
}

/// The request `input` makes for the api tool `d`.
pub fn plan(d: &Value, input: &Value) -> Result<HttpCall, ToolError> {
    let name = d["name"].as_str().unwrap_or("");
    let method = d["api"]["method"].as_str().unwrap_or("GET").to_string();
    let route = d["api"]["route"].as_str().unwrap_or("");
    let (mut path, mut rest) = fill_route(route, input).map_err(|gap| match gap {
        RouteGap::NotObject => ToolError::invalid("input", "an object"),
        RouteGap::Missing(key) => {
            ToolError::invalid(&format!("input.{key}"), format!("{name} needs {key} (part of its route {route})"))
        }
        RouteGap::NotASegment(key) => ToolError::invalid(
            &format!("input.{key}"),
            format!("{key} is one segment of the route {route}: not empty, . or .."),
        ),
    })?;
    let body_field = d["api"]["bodyField"].as_str();
    let body = if let Some(f) = body_field {
        Body::Raw(scalar(rest.remove(f).as_ref().unwrap_or(&json!(""))).into_bytes())
    } else if matches!(method.as_str(), "GET" | "DELETE") {
        let q: Vec<String> = rest
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(&scalar(v))))
            .collect();
        if !q.is_empty() {
            path.push('?');
            path.push_str(&q.join("&"));
        }
        Body::None
    } else {
        Body::Json(Value::Object(rest))
    };
    Ok(HttpCall { method, path, body })
}

/// What a response means for the caller: the JSON (or text) on success; the envelope's code and
/// message as a failure otherwise.
pub fn interpret(name: &str, status: u16, content_type: &str, bytes: &[u8]) -> Result<Value, ToolError> {
    let parsed: Option<Value> = serde_json::from_slice(bytes).ok();
    if (200..300).contains(&status) {
        return Ok(match parsed {
            Some(v) if content_type.contains("json") => v,
            _ => match std::str::from_utf8(bytes) {
                Ok(text) => json!({ "text": text }),
                Err(_) => json!({ "bytes": bytes.len(), "note": "binary content is not shown" }),
            },
        });
    }
    let message = match &parsed {
        Some(v) if v["error"].is_object() => format!(
            "{}: {}",
            v["error"]["code"].as_str().unwrap_or("error"),
            v["error"]["message"].as_str().unwrap_or("")
        ),
        _ => String::from_utf8_lossy(bytes).chars().take(500).collect(),
    };
    Err(ToolError::Failed { name: name.to_string(), message, status })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(method: &str, route: &str) -> Value {
        json!({ "name": "t.x", "api": { "method": method, "route": route } })
    }

    #[test]
    fn path_params_query_and_bodies() {
        let c = plan(
            &d("GET", "/api/projects/{projectId}/files/{path}"),
            &json!({ "projectId": "p 1", "path": "a/b.txt" }),
        )
        .unwrap();
        assert_eq!(c.path, "/api/projects/p%201/files/a%2Fb.txt");
        let c = plan(&d("GET", "/api/runs"), &json!({ "status": "active", "projectId": null })).unwrap();
        assert_eq!((c.path.as_str(), c.body), ("/api/runs?status=active", Body::None));
        let c =
            plan(&d("POST", "/api/runs/{runId}/signals"), &json!({ "runId": "r", "name": "x", "value": 4 })).unwrap();
        assert_eq!(c.body, Body::Json(json!({ "name": "x", "value": 4 })));
        assert!(plan(&d("POST", "/api/runs/{runId}/cancel"), &json!({})).is_err());
        let mut w = d("PUT", "/api/projects/{projectId}/files/{path}");
        w["api"]["bodyField"] = json!("content");
        let c = plan(&w, &json!({ "projectId": "p", "path": "x", "content": "hi" })).unwrap();
        assert_eq!(c.body, Body::Raw(b"hi".to_vec()));
    }

    #[test]
    fn responses() {
        assert_eq!(interpret("t", 200, "application/json", br#"{"a":1}"#).unwrap(), json!({ "a": 1 }));
        assert_eq!(interpret("t", 200, "application/octet-stream", b"hello").unwrap(), json!({ "text": "hello" }));
        let e = interpret(
            "t",
            404,
            "application/json",
            br#"{"error":{"code":"run-not-found","message":"run r does not exist"}}"#,
        );
        assert!(
            matches!(e, Err(ToolError::Failed { status: 404, message, .. }) if message.starts_with("run-not-found"))
        );
    }
}
