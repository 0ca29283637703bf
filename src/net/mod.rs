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
