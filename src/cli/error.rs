//! CLI errors and exit codes. stderr carries the envelope `{"error":{code,message,data}}`.
//!
//! | exit | meaning |
//! |---|---|
//! | 0 | ok |
//! | 1 | generic error, or a code not in this table |
//! | 2 | usage / invalid input (including a non-loopback bind without OD_API_TOKEN, or with one but neither TLS nor `--tls-terminated-by-proxy` (`tls-required`), a `--tls-cert`/`--tls-key` that cannot be used (`tls-config`), a path escaping the project, an ambiguous id prefix, a malformed `OD_OUTBOUND_ALLOW`/`OD_OUTBOUND_DENY` entry, a URL refused by the outbound rule: `url-refused`, a malformed proxy variable: `proxy-config`) |
//! | 3 | daemon unreachable (an explicit `--daemon-url`/`OD_DAEMON_URL` did not answer) |
//! | 4 | the daemon failed internally (`internal`, HTTP 500) |
//! | 64 | daemon not running (`od daemon status|stop` with none); an HTTP error without an error code (`daemon-error`) |
//! | 70 | a connector cannot be connected: no `clientId` configured (upstream's provider-not-configured) |
//! | 65 | plugin, marketplace, snapshot, tool, browser action or browser session not found |
//! | 66 | capabilities required (the structured error names `required`, `granted`, `missing`); a connector not granted, or a tool its stage's atoms do not allow (`tool-gated`) |
//! | 67 | missing input (names the fields) |
//! | 68 | project (or conversation) not found |
//! | 69 | run not found |
//! | 72 | snapshot stale (its plugin changed; re-apply) |
//! | 73 | a GenUI surface awaits an answer (`--no-wait`); stderr names it |
//! | 74 | an authorization is pending: a connector is not connected, or its authorization ended without a connection |
//! | 75 | a tool token is missing, forged or expired (`od connectors tools|execute` outside a run) |
//! | 76 | conflict: expected version, an id that exists, a run in the wrong state, a second action result, a copy target that is not a prefix of the source (`log-copy-diverged`) |
//! | 77 | a limit was exceeded (including a request body over its limit) |
//! | 78 | the log failed verification (corruption) |
//! | 79 | the store cannot write: disk full, I/O error, poisoned |
//! | 80 | the data dir is locked by another od process that did not let go (`data-dir-locked`) |
//! | 81 | a daemon could not be started or did not answer (`daemon-failed`, `bind-failed`) |
//! | 82 | the log's database could not be reached (`store-unreachable`) |
//! | 83 | this data dir's daemon id is held by another live daemon on the shared log (`daemon-id-in-use`: a copied data dir); start with `--new-daemon-id` to mint a new one |
//! | 84 | a server's certificate refused (`tls-untrusted`, `tls-wrong-host`, `tls-expired`, `tls-certificate`), a redirect from https to http refused (`tls-downgrade`), no TLS client (`tls-setup`: an unreadable `OD_CA_FILE`, no trusted roots); the message names the URL or the setting, nothing was written |

use serde_json::{json, Value};

/// An error the CLI reports and exits with.
#[derive(Debug)]
pub struct CliError {
    pub code: String,
    pub message: String,
    pub data: Value,
}

impl CliError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self { code: code.to_string(), message: message.into(), data: Value::Null }
    }

    /// The same error carrying `data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = data;
        self
    }

    /// Builds an error from an API error envelope (or a bare body).
    pub fn from_body(status: u16, body: &str) -> Self {
        let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        match v.get("error") {
            Some(e) => Self {
                code: e["code"].as_str().unwrap_or("daemon-error").to_string(),
                message: e["message"].as_str().unwrap_or("").to_string(),
                data: e.get("data").cloned().unwrap_or(Value::Null),
            },
            None => Self::new("daemon-error", format!("HTTP {status}: {body}")),
        }
    }

    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self.code.as_str() {
            "usage" | "invalid-input" | "token-required" | "invalid-capability" | "store-config" | "proxy-config" => 2,
            "tls-required" | "tls-config" => 2,
            // A URL od was given broke the outbound URL rule or the address policy.
            "url-refused" => 2,
            "daemon-unreachable" => 3,
            // The daemon answered an error it could not name (an internal failure): upstream's 4.
            "internal" => 4,
            // An HTTP error whose body carries no error code: upstream's fallback.
            "daemon-error" => 64,
            "daemon-not-running" => 64,
            "plugin-not-found" | "source-not-found" | "marketplace-not-found" | "snapshot-not-found" => 65,
            "tool-not-found" | "invocation-not-found" | "session-not-found" => 65,
            "capabilities-required" | "connector-not-granted" | "connector-tool-not-allowed" | "tool-gated" => 66,
            "connector-not-found" => 65,
            "connector-unavailable" => 70,
            "connector-not-connected" | "oauth-state-unknown" | "mcp-not-authorized" => 74,
            "tool-token-missing" | "tool-token-invalid" | "tool-token-expired" => 75,
            "missing-input" => 67,
            "project-not-found" | "conversation-not-found" => 68,
            "run-not-found" => 69,
            "snapshot-stale" => 72,
            "path-escapes-project" | "invalid-answer" | "genui-surface-refused" | "ambiguous-id" => 2,
            "genui-surface-awaiting" => 73,
            "expected-version-conflict" | "already-exists" | "run-state" | "invocation-resolved" => 76,
            "run-ended" | "lease-lost" | "daemon-running" => 76,
            "log-copy-diverged" => 76,
            "limit-exceeded" | "payload-too-large" | "too-many-attempts" => 77,
            "log-corrupted" => 78,
            "storage-full" | "storage-io" | "store-poisoned" => 79,
            "data-dir-locked" => 80,
            "daemon-failed" | "bind-failed" => 81,
            "store-unreachable" => 82,
            "daemon-id-in-use" => 83,
            // A TLS peer refused (src/net/tls.rs: CertProblem::code), a redirect from https to
            // http refused, or no TLS client could be set up (a CA file that cannot be read).
            "tls-untrusted" | "tls-wrong-host" | "tls-expired" | "tls-certificate" | "tls-downgrade" | "tls-setup" => {
                84
            }
            _ => 1,
        }
    }

    /// Prints the envelope to stderr.
    /// The envelope on stderr, `{"error":{code,message,data}}` — for programs (`--json`, a pipe).
    pub fn report(&self) {
        eprintln!("{}", json!({ "error": { "code": self.code, "message": self.message, "data": self.data } }));
    }

    /// For a person at a terminal: the message, then the code with its exit status, then what
    /// `data` names, a line each (objects and arrays compact).
    pub fn report_human(&self) {
        eprintln!("{}", self.human_text());
    }

    fn human_text(&self) -> String {
        let mut out = format!(
            "od: {}
  ({}, exit {})",
            self.message,
            self.code,
            self.exit_code()
        );
        for (k, v) in self.data.as_object().into_iter().flatten().filter(|(_, v)| !v.is_null()) {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            out.push_str(&format!("\n  {k}: {v}"));
        }
        out
    }
}

impl From<anyhow::Error> for CliError {
    fn from(e: anyhow::Error) -> Self {
        CliError::new("error", format!("{e:#}"))
    }
}

pub type CliResult<T = ()> = Result<T, CliError>;
