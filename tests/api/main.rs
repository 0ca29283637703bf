//! The daemon's HTTP surface and its real clients: guard, connections, SSE, AG-UI, MCP, OAuth, the web UI.
//! One test binary for the area (each file of it is a module), so od is linked once for all of them.

#[path = "../common/mod.rs"]
mod common;

mod agents_catalog;
mod agui_clients;
mod api_fuzz_found;
mod connectors;
mod connectors_https;
mod daemon;
mod daemon_autostart;
mod files_modes;
mod gate;
mod hostile_connectors;
mod http_connections;
mod http_guard;
mod http_integers;
mod mcp;
mod mcp_oauth;
mod openapi;
mod outbound;
mod outbound_policy;
mod paging_lists;
mod run_agent_default;
mod sse;
mod tls_serve;
mod ui_browser;
mod ui_genui;
mod ui_login;
mod ui_serve;
mod watch_resume;
