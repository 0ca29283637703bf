//! The error of agent-tool commands (catalog, advertisements, calls, browser-action results). Each
//! variant maps to one stable code: the HTTP envelope's `code` and the CLI's exit code.

use crate::engine::apply::ApplyError;
use crate::engine::WorkError;
use crate::store::StoreError;

/// Why a tool command failed. Nothing is written when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// A descriptor, query or request field is malformed.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// No tool of this name is registered (or live in the run).
    #[error("no tool named {0:?}")]
    NotFound(String),
    /// No invocation of this id exists in the run.
    #[error("run {run_id} has no browser action {invocation_id}")]
    InvocationNotFound { run_id: String, invocation_id: String },
    /// The invocation already has its result (a duplicate or late result).
    #[error("browser action {invocation_id} already has its result ({status})")]
    InvocationResolved { invocation_id: String, status: String },
    /// The tool exists but od has no way to run it (a catalog-only import).
    #[error("tool {name} cannot be called: {reason}")]
    NotExecutable { name: String, reason: String },
    /// The tool ran and failed.
    #[error("tool {name} failed: {message}")]
    Failed { name: String, message: String, status: u16 },
    /// A plugin MCP server could not be started or did not answer.
    #[error("MCP server {server} of plugin {plugin_id}: {message}")]
    Server { plugin_id: String, server: String, message: String },
    /// A plugin MCP server reached over HTTP was refused by TLS: its certificate (untrusted, for
    /// another host, expired), a redirect to plain http, or no TLS client; `code` says which
    /// (`tls-untrusted`, `tls-wrong-host`, `tls-expired`, `tls-certificate`, `tls-downgrade`,
    /// `tls-setup`) and the message names the URL.
    #[error("MCP server {server} of plugin {plugin_id}: {message}")]
    ServerTls { plugin_id: String, server: String, code: &'static str, message: String },
    /// A plugin MCP server reached over HTTP wants an authorization (none stored, or refused).
    #[error("MCP server {server} of plugin {plugin_id} needs authorization: od mcp oauth start --plugin {plugin_id} --server {server}")]
    McpNotAuthorized { plugin_id: String, server: String },
    /// A bound in `limits.rs` was exceeded.
    #[error("{limit} exceeded: {value} > {max}")]
    Limit { limit: &'static str, value: usize, max: usize },
    #[error(transparent)]
    Work(#[from] WorkError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ToolError {
    /// A field-level validation error.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        ToolError::Invalid { field: field.to_string(), message: message.into() }
    }

    /// Stable code for the error envelope.
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::Invalid { .. } => "invalid-input",
            ToolError::NotFound(_) => "tool-not-found",
            ToolError::InvocationNotFound { .. } => "invocation-not-found",
            ToolError::InvocationResolved { .. } => "invocation-resolved",
            ToolError::NotExecutable { .. } => "tool-not-executable",
            ToolError::Failed { .. } => "tool-failed",
            ToolError::Server { .. } => "mcp-server-failed",
            ToolError::ServerTls { code, .. } => code,
            ToolError::McpNotAuthorized { .. } => "mcp-not-authorized",
            ToolError::Limit { .. } => "limit-exceeded",
            ToolError::Work(e) => e.code(),
            ToolError::Apply(ApplyError::CapabilitiesRequired { .. }) => "capabilities-required",
            ToolError::Apply(ApplyError::MissingInput { .. }) => "missing-input",
            ToolError::Apply(ApplyError::Invalid { .. }) => "invalid-input",
            ToolError::Apply(ApplyError::Plugin(p)) => p.code(),
            ToolError::Store(e) => e.code(),
        }
    }
}

impl From<od_events::StreamIdError> for ToolError {
    fn from(e: od_events::StreamIdError) -> Self {
        ToolError::invalid("id", e.to_string())
    }
}
