//! Requests od makes to other servers: the one URL rule every outbound URL passes
//! ([`url_rule`]: from plugins, marketplaces, OAuth/MCP metadata and `connectors.json`), the
//! address policy it applies to every literal and resolved address ([`policy`]: link-local and
//! cloud metadata never, loopback and private ranges by the daemon's exposure, the operator's
//! allow and deny lists), and the client that applies both to each request, redirect and resolved
//! address ([`outbound`]: deadline, size bound, no redirect to another host), over rustls
//! configured in one place ([`tls`]: what od trusts, how a refused certificate is named),
//! through the proxy the environment names ([`proxy`]: curl's variables and NO_PROXY rule), with
//! a read timeout under TLS ([`stall`]).

pub mod outbound;
pub mod policy;
pub mod proxy;
pub mod route;
pub mod stall;
pub mod tls;
pub mod url_rule;

pub use outbound::{Outbound, OutboundError};
pub use url_rule::{check_target, check_url, redact, refused_in, UrlRefused};

/// Percent-encodes everything but RFC 3986's unreserved characters, so `s` can stand as one URL
/// path segment or user-info part (`community/registry-starter` → `community%2Fregistry-starter`).
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
