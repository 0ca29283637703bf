//! Connectors (spec §5, §9, §10.3.1): the catalog of providers a plugin may call through od, the
//! OAuth 2.0 + PKCE flow that connects an account, the owner-only credential storage its tokens
//! live in, scoped tool tokens for runs, and the provider calls themselves — every request through
//! od's one outbound client (`outbound.rs`). The engine side
//! (events, surfaces, the capability gate) is `engine/connectors.rs`.

pub mod call;
pub mod catalog;
pub mod credentials;
pub mod mcp_oauth;
pub mod oauth;
pub mod outbound;
pub mod redact;
pub mod tool_token;

use serde_json::Value;
use std::path::{Path, PathBuf};

pub use catalog::{Catalog, CatalogError, ConnectorDef};
pub use credentials::{Credential, Credentials};

use crate::plugins::Diagnostic;

/// The process's connector state: where credentials and the catalog file are, the pending
/// authorizations, and the tool-token key.
pub struct Connectors {
    pub data_dir: PathBuf,
    pub credentials: Credentials,
    /// Tokens of plugin MCP servers reached over HTTP (`credentials/mcp/`).
    pub mcp_credentials: Credentials,
    pub pending: oauth::PendingAuths,
    pub tokens: tool_token::ToolTokens,
}

impl Connectors {
    /// Connectors whose credentials and catalog file live in `data_dir` (the daemon's own dir).
    pub fn new(data_dir: &Path) -> Self {
        Self {
            data_dir: data_dir.to_path_buf(),
            credentials: Credentials::new(data_dir),
            mcp_credentials: Credentials::in_folder(data_dir, "mcp"),
            pending: Default::default(),
            tokens: Default::default(),
        }
    }

    /// The catalog as it is now (the file is re-read, so an edit needs no restart).
    pub fn catalog(&self) -> Result<Catalog, CatalogError> {
        Catalog::load(&self.data_dir)
    }

    /// `connected` (a credential is stored), `pending` (configured, not connected) or
    /// `unavailable` (not configured).
    pub fn status(&self, d: &ConnectorDef) -> &'static str {
        if self.credentials.get(&d.id).is_some() {
            "connected"
        } else if d.unavailable_reason().is_some() {
            "unavailable"
        } else {
            "pending"
        }
    }
}

/// The connector a surface authorizes: `oauth.route: connector` with `oauth.connectorId`, or the
/// automatic surface's `connector.id`.
pub fn surface_connector(spec: &Value) -> Option<&str> {
    if spec["kind"] != "oauth-prompt" {
        return None;
    }
    if spec["oauth"]["route"] == "connector" {
        return spec["oauth"]["connectorId"].as_str();
    }
    spec["connector"]["id"].as_str()
}

/// Doctor checks (a) and (b) of spec §5 against the catalog: every declared connector exists, and
/// its `tools[]` are among the connector's `allowedToolNames`. (Check (c), an oauth surface naming
/// an undeclared connector, needs no catalog: `plugins/rules.rs`.)
pub fn doctor_checks(manifest: &Value, catalog: &Catalog) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for list in ["required", "optional"] {
        for (i, c) in manifest["od"]["connectors"][list].as_array().into_iter().flatten().enumerate() {
            let at = format!("/od/connectors/{list}/{i}");
            let Some(id) = c["id"].as_str() else { continue };
            let Some(def) = catalog.get(id) else {
                let known: Vec<&str> = catalog.connectors.keys().map(String::as_str).collect();
                let msg = format!("connector {id:?} is not in the connector catalog ({})", known.join(", "));
                out.push(Diagnostic::error("connector.unknown", "open-design.json", msg).at(format!("{at}/id")));
                continue;
            };
            for (j, t) in c["tools"].as_array().into_iter().flatten().enumerate() {
                let Some(t) = t.as_str() else { continue };
                if !def.tools.contains_key(t) {
                    let msg = format!(
                        "connector {id:?} has no tool {t:?} (its allowedToolNames: {})",
                        def.allowed_tool_names().join(", ")
                    );
                    out.push(
                        Diagnostic::error("connector.tool-not-allowed", "open-design.json", msg)
                            .at(format!("{at}/tools/{j}")),
                    );
                }
            }
        }
    }
    out
}
