//! OAuth for the MCP servers a plugin declares with a `url` (spec §10.3.1 `oauth.route: mcp`,
//! upstream's `POST /api/mcp/oauth/start`): finding the server's authorization server (RFC 9728
//! protected-resource metadata, then RFC 8414 or OpenID Connect metadata), registering od as a
//! public client where the server allows it (RFC 7591; one registration per issuer and redirect
//! URL, kept owner-only in `credentials/mcp/clients.json`), and a connector-shaped definition for
//! the PKCE flow of `oauth.rs`, with the server's URL as the RFC 8707 resource.
//!
//! Tokens are stored like connector tokens, in `credentials/mcp/<key>.json`, the key derived from
//! the plugin and the server's name; the log records only that the server was authorized.

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::time::Instant;

use super::catalog::ConnectorDef;
use super::credentials::Credentials;
use super::oauth::OAuthError;
use super::outbound::{self, Unreachable};
use crate::net::check_url;

/// Where a server's tokens are kept: `mcp-` and 24 hex digits of a hash of plugin and server
/// (plugin ids may hold `/`, so neither goes into a file name as it is).
pub fn key(plugin_id: &str, server: &str) -> String {
    let h = blake3::hash(format!("{plugin_id}\n{server}").as_bytes()).to_hex();
    format!("mcp-{}", &h[..24])
}

/// The id a pending authorization of a server carries (never a catalog connector's: `:`).
pub fn pending_id(plugin_id: &str, server: &str) -> String {
    format!("mcp:{plugin_id}#{server}")
}

/// What discovery found.
#[derive(Debug, Clone)]
pub struct Discovered {
    pub issuer: String,
    pub authorize_url: String,
    pub token_url: String,
    pub registration_url: Option<String>,
    pub scopes: Vec<String>,
}

/// The URL rule for an endpoint named `what`, as a configuration error naming it.
fn checked(what: &str, url: &str) -> Result<String, OAuthError> {
    check_url(url).map(|_| url.to_string()).map_err(|e| config(format!("{what}: {e}")))
}

fn config(msg: impl Into<String>) -> OAuthError {
    OAuthError::Config(msg.into())
}

/// GETs a JSON document (through `outbound.rs`, like every request of discovery and
/// registration): `None` unless it answered 200 with a JSON object. Redirects are not followed
/// (metadata lives where the discovery rules say; one to plain http is refused by name). A server
/// that cannot be reached, or whose certificate is refused, is an error: the next well-known
/// location is on the same origin and would fail the same way.
fn get_json(url: &str) -> Result<Option<Map<String, Value>>, OAuthError> {
    let out = outbound::client();
    let start = Instant::now();
    let req = outbound::request(&out, "GET", url).map_err(OAuthError::Unreachable)?;
    let res = outbound::answer(&out, url, start, req.set("Accept", "application/json").call())
        .map_err(OAuthError::Unreachable)?;
    if res.status() != 200 {
        return Ok(None);
    }
    let body = outbound::read(&out, url, start, res).map_err(|e| OAuthError::Unreachable(outbound::named(url, e)))?;
    match serde_json::from_slice(&body) {
        Ok(Value::Object(m)) => Ok(Some(m)),
        _ => Ok(None),
    }
}

/// The first of `urls` that answers a JSON object.
fn first_json(urls: &[String]) -> Result<Option<Map<String, Value>>, OAuthError> {
    for u in urls {
        if let Some(m) = get_json(u)? {
            return Ok(Some(m));
        }
    }
    Ok(None)
}

/// `scheme://host[:port]` and the path (without a trailing `/`) of `url`.
fn split(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let path = rest[end..].split(['?', '#']).next().unwrap_or("").trim_end_matches('/').to_string();
    Some((format!("{scheme}://{}", &rest[..end]), path))
}

/// Discovers the authorization server of the MCP server at `server_url`. Without
/// protected-resource metadata the server's own origin is taken as the authorization server
/// (what MCP clients did before RFC 9728).
pub fn discover(server_url: &str) -> Result<Discovered, OAuthError> {
    checked("MCP server URL", server_url)?;
    let (origin, path) = split(server_url).ok_or_else(|| config(format!("{server_url:?} is not a URL")))?;
    let prm = first_json(&[
        format!("{origin}/.well-known/oauth-protected-resource{path}"),
        format!("{origin}/.well-known/oauth-protected-resource"),
    ])?;
    let issuer = prm
        .as_ref()
        .and_then(|m| m.get("authorization_servers"))
        .and_then(|a| a.get(0))
        .and_then(Value::as_str)
        .map_or_else(|| origin.clone(), |s| s.trim_end_matches('/').to_string());
    let scopes: Vec<String> = prm
        .as_ref()
        .and_then(|m| m.get("scopes_supported"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    checked("authorization server", &issuer)?;
    let (as_origin, as_path) = split(&issuer).ok_or_else(|| config(format!("{issuer:?} is not a URL")))?;
    let meta = first_json(&[
        format!("{as_origin}/.well-known/oauth-authorization-server{as_path}"),
        format!("{as_origin}/.well-known/openid-configuration{as_path}"),
        format!("{issuer}/.well-known/openid-configuration"),
    ])?
    .ok_or_else(|| config(format!("authorization server {issuer} publishes no RFC 8414 or OpenID metadata")))?;
    let field = |k: &str| meta.get(k).and_then(Value::as_str).map(str::to_string);
    let endpoint = |k: &str| -> Result<String, OAuthError> {
        let u = field(k).ok_or_else(|| config(format!("authorization server {issuer} names no {k}")))?;
        checked(k, &u)
    };
    let methods: Vec<&str> = meta
        .get("code_challenge_methods_supported")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !methods.is_empty() && !methods.contains(&"S256") {
        return Err(config(format!("authorization server {issuer} does not support PKCE S256")));
    }
    Ok(Discovered {
        issuer: field("issuer").unwrap_or_else(|| issuer.clone()),
        authorize_url: endpoint("authorization_endpoint")?,
        token_url: endpoint("token_endpoint")?,
        registration_url: field("registration_endpoint").map(|u| checked("registration_endpoint", &u)).transpose()?,
        scopes,
    })
}

const CLIENTS: &str = "clients";

/// od's client id at `d.issuer` for `redirect_uri`: the one registered before, or a new RFC 7591
/// registration as a public client (`token_endpoint_auth_method: none`, PKCE).
pub fn client_id(store: &Credentials, d: &Discovered, redirect_uri: &str) -> Result<String, OAuthError> {
    let mut clients: BTreeMap<String, String> =
        store.read_private(CLIENTS).and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    let at = format!("{} {redirect_uri}", d.issuer);
    if let Some(id) = clients.get(&at) {
        return Ok(id.clone());
    }
    let reg = d.registration_url.as_deref().ok_or_else(|| {
        config(format!("authorization server {} offers no dynamic client registration (RFC 7591)", d.issuer))
    })?;
    let body = json!({
        "client_name": "od", "redirect_uris": [redirect_uri], "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"], "token_endpoint_auth_method": "none",
    });
    let (out, start) = (outbound::client(), Instant::now());
    let unreachable = |e: Unreachable| {
        OAuthError::Unreachable(Unreachable { message: format!("client registration: {}", e.message), ..e })
    };
    let req = outbound::request(&out, "POST", reg).map_err(unreachable)?;
    let res = outbound::answer(&out, reg, start, req.send_json(body)).map_err(unreachable)?;
    if res.status() >= 300 {
        return Err(OAuthError::Provider(format!("client registration answered HTTP {}", res.status())));
    }
    let bytes = outbound::read(&out, reg, start, res).map_err(|e| unreachable(outbound::named(reg, e)))?;
    let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let id = v["client_id"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| OAuthError::Provider("client registration returned no client_id".into()))?
        .to_string();
    clients.insert(at, id.clone());
    store
        .write_private(CLIENTS, &serde_json::to_vec(&clients).expect("a map serialises"))
        .map_err(|e| config(format!("storing the client registration: {e}")))?;
    Ok(id)
}

/// The definition the PKCE flow of `oauth.rs` runs with.
pub fn definition(plugin_id: &str, server: &str, url: &str, d: &Discovered, client_id: String) -> ConnectorDef {
    ConnectorDef {
        id: pending_id(plugin_id, server),
        name: server.to_string(),
        authorize_url: d.authorize_url.clone(),
        token_url: d.token_url.clone(),
        api_base_url: url.to_string(),
        client_id,
        client_secret_env: String::new(),
        scopes: d.scopes.clone(),
        headers: BTreeMap::new(),
        account: None,
        tools: BTreeMap::new(),
        resource: url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_urls() {
        assert_ne!(key("a/b", "c"), key("a", "b/c"));
        assert_eq!(key("p", "s").len(), 28);
        assert_eq!(split("http://127.0.0.1:8/mcp/").unwrap(), ("http://127.0.0.1:8".into(), "/mcp".into()));
        assert_eq!(split("https://x.example").unwrap(), ("https://x.example".into(), String::new()));
        assert!(matches!(discover("http://example.com/mcp"), Err(OAuthError::Config(_))));
    }
}
