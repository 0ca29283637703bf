//! Requests od makes to other servers: the one URL rule every outbound URL passes
//! ([`url_rule`]: from plugins, marketplaces, OAuth/MCP metadata and `connectors.json`), and the
//! client that applies it to each request, redirect and resolved address ([`outbound`]: deadline,
//! size bound, no redirect to another host). The rule knows nothing of the transport, so a TLS
//! client can reuse it.

pub mod outbound;
pub mod url_rule;

pub use outbound::{Outbound, OutboundError};
pub use url_rule::{check_url, redact, UrlRefused};
