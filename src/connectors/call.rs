//! Calling a connector tool: the HTTP request its definition describes, against the provider's API,
//! with the stored access token. `{name}` path segments are filled from the input (and removed from
//! it); the rest of the input is the query (GET, DELETE) or the JSON body. The request goes
//! through od's outbound client (`outbound.rs`: the URL rule, od's TLS config, the deadline);
//! redirects are not followed (the token must not travel to another host; one to plain http is
//! refused by name), and the answer is bounded. A token that
//! cannot travel in a header is refused before any request, without being quoted; the engine
//! redacts every secret from what a call returns (`redact.rs`).

use serde_json::{Map, Value};

use super::catalog::{ConnectorDef, ToolDef};
use super::credentials::Credential;
use super::outbound::{self, Unreachable};
use crate::limits::MAX_CONNECTOR_RESPONSE_BYTES;
use crate::net::route::{fill_route, scalar, RouteGap};
use crate::net::OutboundError;

/// Why a call did not reach an answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("input.{0}: the tool's path needs it")]
    MissingParam(String),
    #[error("input: expected an object")]
    NotObject,
    /// A path parameter that is not one segment (empty, `.`, `..`): it would leave the tool's route.
    #[error("input.{0}: one segment of the tool's path, not empty, . or ..")]
    NotASegment(String),
    /// The provider gave no answer od accepts: its certificate was refused (`code`), it
    /// redirected to plain http, or it could not be reached (the message names the URL).
    #[error("the provider could not be reached: {0}")]
    Unreachable(Unreachable),
    #[error("the provider's answer is larger than {0} bytes")]
    TooLarge(u64),
    /// The stored access token cannot travel in a header (a control character, a space or
    /// non-ASCII): the call is not made, and the token is never quoted.
    #[error("the stored access token of connector {0:?} is not a valid bearer token; connect the account again (od connectors connect {0})")]
    BadToken(String),
}

/// The path with its `{name}` segments filled, and the input left over.
pub fn fill_path(path: &str, input: &Value) -> Result<(String, Map<String, Value>), CallError> {
    fill_route(path, input).map_err(|gap| match gap {
        RouteGap::NotObject => CallError::NotObject,
        RouteGap::Missing(name) => CallError::MissingParam(name),
        RouteGap::NotASegment(name) => CallError::NotASegment(name),
    })
}

/// Calls `tool` of `d` with `cred`: the provider's status and its answer (JSON, else text).
pub fn call(d: &ConnectorDef, tool: &ToolDef, cred: &Credential, input: &Value) -> Result<(u16, Value), CallError> {
    if !super::oauth::token_ok(&cred.access_token) {
        return Err(CallError::BadToken(d.id.clone()));
    }
    let (path, rest) = fill_path(&tool.path, input)?;
    let url = format!("{}{path}", d.api_base_url.trim_end_matches('/'));
    let out = outbound::client();
    let start = std::time::Instant::now();
    let mut req = outbound::request(&out, &tool.method, &url).map_err(CallError::Unreachable)?;
    for (k, v) in &d.headers {
        req = req.set(k, v);
    }
    if !d.headers.keys().any(|k| k.eq_ignore_ascii_case("accept")) {
        req = req.set("Accept", "application/json");
    }
    req = req.set("Authorization", &format!("Bearer {}", cred.access_token));
    let sent = if matches!(tool.method.as_str(), "GET" | "DELETE") {
        for (k, v) in &rest {
            req = req.query(k, &scalar(v));
        }
        req.call()
    } else {
        req.send_json(Value::Object(rest))
    };
    let res = outbound::answer(&out, &url, start, sent).map_err(CallError::Unreachable)?;
    let status = res.status();
    let bytes = outbound::read(&out, &url, start, res).map_err(|e| match e {
        OutboundError::TooLarge { .. } => CallError::TooLarge(MAX_CONNECTOR_RESPONSE_BYTES),
        other => CallError::Unreachable(outbound::named(&url, other)),
    })?;
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    Ok((status, body))
}

/// The connected account's label: the definition's `account.labelField` of its answer, else the
/// connector's name.
pub fn account_label(d: &ConnectorDef, cred: &Credential) -> String {
    let Some(a) = &d.account else { return d.name.clone() };
    let tool = ToolDef { method: "GET".into(), path: a.path.clone(), description: String::new() };
    let found = match call(d, &tool, cred, &Value::Null) {
        Ok((200..=299, v)) => a
            .label_field
            .split('.')
            .try_fold(&v, |v, k| v.get(k))
            .filter(|l| l.is_string() || l.is_number() || l.is_boolean())
            .map(scalar),
        _ => None,
    };
    found.filter(|s| !s.is_empty()).unwrap_or_else(|| d.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn path_params_fill_and_leave_the_rest() {
        let (p, rest) =
            fill_path("/repos/{owner}/{repo}/pulls", &json!({"owner": "a b", "repo": 7, "title": "t"})).unwrap();
        assert_eq!(p, "/repos/a%20b/7/pulls");
        assert_eq!(Value::Object(rest), json!({"title": "t"}));
        assert!(matches!(fill_path("/x/{id}", &json!({})), Err(CallError::MissingParam(n)) if n == "id"));
        assert!(matches!(fill_path("/x", &json!([1])), Err(CallError::NotObject)));
    }
}
