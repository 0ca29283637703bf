//! The daemon's HTTP surface and its real clients: guard, connections, SSE, AG-UI, MCP, OAuth, the web UI.
//! One test binary for the area (each file of it is a module), so od is linked once for all of them.

#[path = "../common/mod.rs"]
mod common;

#[path = "../agui_clients.rs"]
mod agui_clients;
#[path = "../api_fuzz_found.rs"]
mod api_fuzz_found;
#[path = "../connectors.rs"]
mod connectors;
#[path = "../daemon.rs"]
mod daemon;
#[path = "../daemon_autostart.rs"]
mod daemon_autostart;
#[path = "../files_modes.rs"]
mod files_modes;
#[path = "../http_connections.rs"]
mod http_connections;
#[path = "../http_guard.rs"]
mod http_guard;
#[path = "../http_integers.rs"]
mod http_integers;
#[path = "../mcp.rs"]
mod mcp;
#[path = "../mcp_oauth.rs"]
mod mcp_oauth;
#[path = "../openapi.rs"]
mod openapi;
#[path = "../paging_lists.rs"]
mod paging_lists;
#[path = "../sse.rs"]
mod sse;
#[path = "../ui_browser.rs"]
mod ui_browser;
#[path = "../ui_genui.rs"]
mod ui_genui;
#[path = "../ui_login.rs"]
mod ui_login;
#[path = "../ui_serve.rs"]
mod ui_serve;
#[path = "../watch_resume.rs"]
mod watch_resume;
