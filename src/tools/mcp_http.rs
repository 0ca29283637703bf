//! A minimal blocking MCP client over the Streamable HTTP transport, for plugin MCP servers
//! declared with a `url`: every JSON-RPC message is a POST to that URL (`Accept: application/json,
//! text/event-stream`); the answer is a JSON body or an event stream read until the response with
//! the request's id. The session id the server hands out at `initialize` (`Mcp-Session-Id`) and
//! the negotiated protocol version are sent with every later message; a bearer token, when the
//! server was authorized, with every message. A 401 is its own error, so the caller can say how
//! to authorize.
//!
//! Every message goes through od's outbound client (`net/outbound.rs`: the URL rule, the checked
//! resolver, od's TLS config, the deadline, the answer bound); no redirect is followed, and a
//! server that could not be reached, whose certificate was refused or that redirected to plain
//! http is [`HttpMcpError::Unreachable`], named (`connectors/outbound.rs`).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::time::{Duration, Instant};

use super::mcp_client::{McpSession, CLIENT_PROTOCOL_VERSION};
use crate::connectors::outbound::{self, Unreachable};
use crate::limits::MAX_CONNECTOR_RESPONSE_BYTES;
use crate::net::Outbound;

/// Why a session could not start.
#[derive(Debug)]
pub enum HttpMcpError {
    /// The server wants a (new) bearer token.
    Unauthorized,
    /// No answer od accepts: a refused certificate or downgrade (`code`), or no connection.
    Unreachable(Unreachable),
    Other(String),
}

/// A session with a remote MCP server.
pub struct McpHttp {
    out: Outbound,
    agent: ureq::Agent,
    url: String,
    bearer: Option<String>,
    session: Option<String>,
    protocol: Option<String>,
    next_id: u64,
    deadline: Instant,
}

impl McpHttp {
    /// Opens a session with the server at `url` (`initialize`, then `notifications/initialized`);
    /// everything must finish within `timeout`.
    pub fn connect(url: &str, bearer: Option<String>, timeout: Duration) -> Result<Self, HttpMcpError> {
        // The URL rule: no userinfo, plain http only to loopback, never od's own API.
        let checked = crate::net::check_url(url).map_err(|e| HttpMcpError::Other(e.to_string()))?;
        let out = Outbound::new(timeout, MAX_CONNECTOR_RESPONSE_BYTES);
        let agent = out.agent(&checked).map_err(|e| HttpMcpError::Unreachable(outbound::named(url, e)))?;
        let mut c = Self {
            out,
            agent,
            url: url.to_string(),
            bearer,
            session: None,
            protocol: None,
            next_id: 1,
            deadline: Instant::now() + timeout,
        };
        let init = json!({ "protocolVersion": CLIENT_PROTOCOL_VERSION, "capabilities": {},
                           "clientInfo": { "name": "od", "version": env!("CARGO_PKG_VERSION") } });
        let r = c.post("initialize", Some(init))?;
        c.protocol = r["protocolVersion"].as_str().map(str::to_string);
        c.post("notifications/initialized", None)?;
        Ok(c)
    }

    /// Posts one message; for a request (`params` given) its result.
    fn post(&mut self, method: &str, params: Option<Value>) -> Result<Value, HttpMcpError> {
        if Instant::now() >= self.deadline {
            return Err(HttpMcpError::Other(format!("no answer to {method} in time")));
        }
        let id = params.is_some().then(|| {
            self.next_id += 1;
            self.next_id - 1
        });
        let msg = match (&params, id) {
            (Some(p), Some(id)) => json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": p }),
            _ => json!({ "jsonrpc": "2.0", "method": method }),
        };
        let mut req = self
            .agent
            .post(&self.url)
            .set("Content-Type", "application/json")
            .set("Accept", "application/json, text/event-stream");
        if let Some(t) = &self.bearer {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        if let Some(s) = &self.session {
            req = req.set("Mcp-Session-Id", s);
        }
        if let Some(p) = &self.protocol {
            req = req.set("MCP-Protocol-Version", p);
        }
        let start = Instant::now();
        let res = match req.send_string(&msg.to_string()) {
            Ok(r) => r,
            Err(ureq::Error::Status(401, _)) => return Err(HttpMcpError::Unauthorized),
            Err(ureq::Error::Status(code, _)) => {
                return Err(HttpMcpError::Other(format!("{method}: the server answered HTTP {code}")))
            }
            Err(e) => {
                let u = outbound::named(&self.url, self.out.error(&crate::net::redact(&self.url), start, e));
                return Err(HttpMcpError::Unreachable(Unreachable {
                    message: format!("{method}: {}", u.message),
                    ..u
                }));
            }
        };
        outbound::refuse_downgrade(&self.url, &res).map_err(HttpMcpError::Unreachable)?;
        if let Some(s) = res.header("mcp-session-id") {
            self.session = Some(s.to_string());
        }
        let Some(id) = id else { return Ok(Value::Null) };
        let sse = res.header("content-type").is_some_and(|t| t.starts_with("text/event-stream"));
        let reader = res.into_reader().take(MAX_CONNECTOR_RESPONSE_BYTES);
        let answer = if sse { from_stream(reader, id) } else { from_body(reader) };
        let answer = answer.map_err(|e| HttpMcpError::Other(format!("{method}: {e}")))?;
        if answer["id"] != id {
            return Err(HttpMcpError::Other(format!("{method}: the answer is not to this request")));
        }
        if let Some(e) = answer.get("error") {
            let msg = format!("{method}: {} ({})", e["message"].as_str().unwrap_or("error"), e["code"]);
            return Err(HttpMcpError::Other(msg));
        }
        Ok(answer["result"].clone())
    }
}

fn from_body(mut r: impl Read) -> Result<Value, String> {
    let mut body = Vec::new();
    r.read_to_end(&mut body).map_err(|e| e.to_string())?;
    serde_json::from_slice(&body).map_err(|e| format!("the answer is not JSON: {e}"))
}

/// Reads server-sent events until the JSON-RPC response with `id`.
fn from_stream(r: impl Read, id: u64) -> Result<Value, String> {
    let mut data = String::new();
    for line in BufReader::new(r).lines() {
        let line = line.map_err(|e| e.to_string())?;
        if let Some(d) = line.strip_prefix("data:") {
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
            data.push('\n');
            continue;
        }
        if line.is_empty() && !data.is_empty() {
            let msg: Option<Value> = serde_json::from_str(data.trim_end()).ok();
            data.clear();
            if let Some(m) = msg.filter(|m| m["id"] == id && m.get("method").is_none()) {
                return Ok(m);
            }
        }
    }
    Err("the event stream ended without the answer".into())
}

impl McpSession for McpHttp {
    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.post(method, Some(params)).map_err(|e| match e {
            HttpMcpError::Unauthorized => format!("{method}: the server refused the token (HTTP 401)"),
            HttpMcpError::Unreachable(u) => u.message,
            HttpMcpError::Other(m) => m,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_answer_out_of_an_event_stream() {
        let s = concat!(
            "event: message\n",
            "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n",
            "data: {\"jsonrpc\":\"2.0\",\"id\":7,\n",
            "data: \"result\":{\"ok\":true}}\n\n"
        );
        assert_eq!(from_stream(s.as_bytes(), 7).unwrap()["result"]["ok"], true);
        assert!(from_stream("data: {\"id\":1}\n\n".as_bytes(), 2).is_err());
    }
}
