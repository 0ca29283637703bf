//! Connectors inside the engine: listing the catalog with each connector's status, resolving a
//! plugin's `od.connectors` at apply (`connectorsResolved`), connecting an account (the OAuth
//! callback stores the token, records `connector_connected` and answers the `oauth-prompt` surface
//! that asked), disconnecting, and the connector gate every tool call passes (spec §9): the tool
//! token's run, its snapshot, the plugin's trust tier × `connector:<id>`, the declared tools.

use od_events::connectors::{ConnectorConnected, ConnectorDisconnected};
use od_events::vocab::{SourceKind, Trust};
use od_events::{Event, StreamId};
use serde_json::{json, Value};

use super::{Engine, WorkError};
use crate::connectors::call::{self, CallError};
use crate::connectors::credentials::RefreshError;
use crate::connectors::oauth::{self, OAuthError};
use crate::connectors::outbound::Unreachable;
use crate::connectors::redact::Secrets;
use crate::connectors::tool_token::TokenError;
use crate::connectors::{CatalogError, ConnectorDef};
use crate::store::Append;

/// Why a connector request failed; nothing is written when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum ConnectorError {
    #[error("connector {0:?} is not in the connector catalog")]
    NotFound(String),
    #[error("connector {id:?} cannot be connected: {reason}")]
    Unavailable { id: String, reason: String },
    #[error("connector {0:?} is not connected (od connectors connect {0})")]
    NotConnected(String),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    OAuth(#[from] OAuthError),
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error("{reason}")]
    NotGranted { connector_id: String, reason: String },
    #[error("tool {tool:?} of connector {connector_id:?} is not allowed: {reason}")]
    ToolNotAllowed { connector_id: String, tool: String, reason: String },
    #[error(transparent)]
    Gated(#[from] super::tool_gating::ToolGated),
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("the provider answered {status}")]
    Provider { status: u16, body: Value },
    #[error(transparent)]
    Work(#[from] WorkError),
}

/// A failed refresh as the caller sees it: the provider's words with every secret redacted.
pub(super) fn refresh_failed(e: RefreshError, secrets: &Secrets) -> ConnectorError {
    match e {
        RefreshError::OAuth(OAuthError::Provider(m)) => OAuthError::Provider(secrets.redact(&m)).into(),
        RefreshError::OAuth(OAuthError::Config(m)) => OAuthError::Config(secrets.redact(&m)).into(),
        RefreshError::OAuth(OAuthError::Unreachable(u)) => {
            OAuthError::Unreachable(Unreachable { message: secrets.redact(&u.message), ..u }).into()
        }
        RefreshError::OAuth(other) => other.into(),
        RefreshError::Store(e) => WorkError::io("storing the credential", e).into(),
    }
}

/// Keeps (or, on success, forgets) how the authorization of `id` ended, for `lastError`.
pub(super) fn remember(pending: &oauth::PendingAuths, id: &str, failed: Option<&ConnectorError>, now: i64) {
    match failed {
        None => pending.clear_failure(id),
        Some(ConnectorError::OAuth(OAuthError::Unreachable(u))) => {
            pending.record_failure(id, u.code, u.message.clone(), now)
        }
        Some(e) => pending.record_failure(id, None, e.to_string(), now),
    }
}

/// `{code, message}` of the last authorization of `id` that ended without a connection since it
/// was last started (`code`: a TLS refusal's, else null); null when there is none.
pub(super) fn last_error(pending: &oauth::PendingAuths, id: &str, now: i64) -> Value {
    pending.failure(id, now).map_or(Value::Null, |f| json!({ "code": f.code, "message": f.message }))
}

fn stream(id: &str) -> Result<StreamId, WorkError> {
    StreamId::new(format!("connector:{id}")).map_err(|e| WorkError::invalid("connectorId", e.to_string()))
}

impl From<crate::store::StoreError> for ConnectorError {
    fn from(e: crate::store::StoreError) -> Self {
        ConnectorError::Work(e.into())
    }
}

impl Engine {
    fn connector_def(&self, id: &str) -> Result<ConnectorDef, ConnectorError> {
        self.connectors.catalog()?.get(id).cloned().ok_or_else(|| ConnectorError::NotFound(id.into()))
    }

    /// One connector as listed: its definition's public part, status and account.
    fn connector_json(&self, d: &ConnectorDef) -> Value {
        let cred = self.connectors.credentials.get(&d.id);
        let tools: Vec<Value> = d
            .tools
            .iter()
            .map(|(n, t)| json!({ "name": n, "method": t.method, "description": t.description }))
            .collect();
        json!({
            "id": d.id,
            "name": d.name,
            "status": self.connectors.status(d),
            "reason": d.unavailable_reason(),
            "accountLabel": cred.as_ref().map(|c| c.account_label.clone()),
            "connectedAt": cred.as_ref().map(|c| c.connected_at),
            "scopes": cred.as_ref().map_or_else(|| d.scopes.clone(), |c| c.scopes.clone()),
            "allowedToolNames": d.allowed_tool_names(),
            "tools": tools,
            "authorizeUrl": d.authorize_url,
            "apiBaseUrl": d.api_base_url,
            "pendingAuthorizations": self.connectors.pending.waiting(&d.id, self.clock.now_ms()),
            "lastError": last_error(&self.connectors.pending, &d.id, self.clock.now_ms()),
        })
    }

    /// The catalog with each connector's status (`connected`, `pending`, `unavailable`).
    pub fn connectors_list(&self) -> Result<Vec<Value>, ConnectorError> {
        let catalog = self.connectors.catalog()?;
        Ok(catalog.connectors.values().map(|d| self.connector_json(d)).collect())
    }

    /// One connector.
    pub fn connector_info(&self, id: &str) -> Result<Value, ConnectorError> {
        Ok(self.connector_json(&self.connector_def(id)?))
    }

    /// `od.connectors` resolved against the catalog and credentials (`ConnectorBinding`s):
    /// `{id, tools, required, status, accountLabel?}`. A catalog that cannot be read resolves every
    /// connector `unavailable`.
    pub fn connectors_resolved(&self, od: &Value) -> Vec<Value> {
        if od["connectors"].is_null() {
            return Vec::new();
        }
        let catalog = self.connectors.catalog().unwrap_or_default();
        let mut out = Vec::new();
        for (list, required) in [("required", true), ("optional", false)] {
            for c in od["connectors"][list].as_array().into_iter().flatten() {
                let Some(id) = c["id"].as_str() else { continue };
                let cred = self.connectors.credentials.get(id);
                let status = match catalog.get(id) {
                    Some(d) => self.connectors.status(d),
                    None => "unavailable",
                };
                let mut b = json!({ "id": id, "tools": c["tools"].as_array().cloned().unwrap_or_default(),
                    "required": required, "status": status });
                if let Some(cred) = cred {
                    b["accountLabel"] = json!(cred.account_label);
                }
                out.push(b);
            }
        }
        out
    }

    /// `od plugin doctor` of a folder, with the catalog's checks (spec §5 (a), (b)); a catalog
    /// that cannot be read is reported as a warning.
    /// A bundle's members are checked too, their files named below the bundle (`skills/deck/SKILL.md`).
    pub fn doctor_folder(&self, dir: &std::path::Path) -> crate::plugins::DoctorReport {
        let mut bundle = false;
        let mut report = crate::plugins::doctor_with(dir, |m| {
            bundle = super::bundles::is_bundle(m);
            self.catalog_checks(m)
        });
        if bundle {
            for rel in super::bundles::member_dirs(dir) {
                let member = crate::plugins::doctor_with(&dir.join(&rel), |m| self.catalog_checks(m));
                report.ok &= member.ok;
                report.diagnostics.extend(member.diagnostics.into_iter().map(|mut d| {
                    d.file = format!("{rel}/{}", d.file);
                    d
                }));
            }
        }
        report
    }

    /// `od plugin doctor <id>`: the installed copy's checks, plus what needs the registry —
    /// `digest.drift` (the installed files, or a linked folder, no longer hash to the recorded
    /// digest) and `context.unresolved` (a context skill or design system naming nothing).
    pub fn doctor_installed(&self, p: &od_projections::InstalledPlugin) -> crate::plugins::DoctorReport {
        use crate::plugins::Diagnostic;
        let dir = self.data_dir.join(&p.fs_path);
        let mut report = self.doctor_folder(&dir);
        let manifest: Value = serde_json::from_str(&p.manifest_json).unwrap_or(Value::Null);
        for msg in self.unresolved_context(&manifest["od"], &dir) {
            report.diagnostics.push(Diagnostic::warning("context.unresolved", "open-design.json", msg));
        }
        let watched = if p.source_kind == SourceKind::Linked && super::bundles::bundle_of(&p.id).is_none() {
            std::path::PathBuf::from(&p.source)
        } else {
            dir
        };
        if let Ok(fresh) = crate::plugins::load_folder(&watched) {
            if fresh.source_digest != p.source_digest {
                let short = |d: &str| d[..12.min(d.len())].to_string();
                let msg = format!(
                    "{} hashes to {}…, not the recorded {}…; snapshots of the recorded version stay as they are{}",
                    watched.display(),
                    short(&fresh.source_digest),
                    short(&p.source_digest),
                    if p.source_kind == SourceKind::Linked {
                        " (the watcher reloads a linked folder once it holds still)"
                    } else {
                        ""
                    }
                );
                report.diagnostics.push(Diagnostic::warning("digest.drift", ".", msg));
            }
        }
        report
    }

    fn catalog_checks(&self, m: &Value) -> Vec<crate::plugins::Diagnostic> {
        let declares = !m["od"]["connectors"].is_null();
        match self.connectors.catalog() {
            Ok(c) => crate::connectors::doctor_checks(m, &c),
            Err(e) if declares => {
                vec![crate::plugins::Diagnostic::warning("connector.catalog", "open-design.json", e.to_string())]
            }
            Err(_) => Vec::new(),
        }
    }

    /// Whether `id` has a stored credential.
    pub fn connector_connected(&self, id: &str) -> bool {
        self.connectors.credentials.get(id).is_some()
    }

    /// Starts connecting `id`: the provider URL to open. `run_id`/`surface_id` name the
    /// `oauth-prompt` surface the connection will answer (it must be waiting, and authorize `id`).
    pub fn connect_start(
        &self,
        id: &str,
        callback_base: &str,
        run_id: &str,
        surface_id: &str,
    ) -> Result<Value, ConnectorError> {
        let d = self.connector_def(id)?;
        if let Some(reason) = d.unavailable_reason() {
            return Err(ConnectorError::Unavailable { id: id.into(), reason });
        }
        if run_id.is_empty() != surface_id.is_empty() {
            let field = if run_id.is_empty() { "runId" } else { "surfaceId" };
            return Err(WorkError::invalid(field, "runId and surfaceId go together").into());
        }
        if !run_id.is_empty() {
            let row =
                self.pending_surfaces(run_id)?.into_iter().rfind(|r| r.surface_id == surface_id).ok_or_else(|| {
                    WorkError::SurfaceNotPending { run_id: run_id.into(), surface_id: surface_id.into() }
                })?;
            let spec: Value = serde_json::from_str(&row.spec_json).unwrap_or(Value::Null);
            if crate::connectors::surface_connector(&spec) != Some(id) {
                let msg = format!("surface {surface_id:?} does not authorize connector {id:?}");
                return Err(WorkError::invalid("surfaceId", msg).into());
            }
        }
        let now = self.clock.now_ms();
        let redirect = format!("{}/api/connectors/oauth/callback/{id}", callback_base.trim_end_matches('/'));
        let (url, state) = self.connectors.pending.start(&d, &redirect, run_id, surface_id, now)?;
        Ok(json!({
            "connectorId": id,
            "authorizeUrl": url,
            "redirectUrl": redirect,
            "state": state,
            "expiresAt": now + crate::limits::PENDING_AUTH_TTL_MS,
        }))
    }

    /// Completes an authorization from the provider's callback (blocking: the token exchange and
    /// the account lookup are HTTP calls): stores the credential, records `connector_connected`,
    /// answers the surface that asked, and returns the connector. A failure after the state was
    /// taken is kept as the connector's `lastError` (memory only) for whoever waits on it.
    pub fn connect_complete(&self, id: &str, state: &str, code: &str) -> Result<Value, ConnectorError> {
        let now = self.clock.now_ms();
        let pending = self.connectors.pending.take(id, state, now)?;
        let done = self.connect_with(id, pending, code, now);
        remember(&self.connectors.pending, id, done.as_ref().err(), now);
        done
    }

    fn connect_with(&self, id: &str, pending: oauth::Pending, code: &str, now: i64) -> Result<Value, ConnectorError> {
        let d = self.connector_def(id)?;
        let (run_id, surface_id) = (pending.run_id.clone(), pending.surface_id.clone());
        let client = Secrets::of(Some(&d), std::iter::empty());
        let mut cred = oauth::exchange(&d, pending, code, now).map_err(|e| refresh_failed(e.into(), &client))?;
        cred.account_label = call::account_label(&d, &cred);
        self.connectors.credentials.put(id, &cred).map_err(|e| WorkError::io("storing the credential", e))?;
        let e = ConnectorConnected {
            connector_id: id.into(),
            account_label: cred.account_label.clone(),
            scopes: cred.scopes.clone(),
            run_id: run_id.clone(),
            surface_id: surface_id.clone(),
            connected_at: now,
        };
        self.store.append(Append::new(stream(id)?, vec![Event::ConnectorConnected(e)]))?;
        if !run_id.is_empty() {
            let answer = json!({ "connectorId": id, "accountLabel": cred.account_label, "status": "connected" });
            // The run may have moved on meanwhile (answered elsewhere, timed out): the account stays connected.
            match self.respond_surface_as(&run_id, &surface_id, answer, "oauth") {
                Ok(_) | Err(WorkError::SurfaceNotPending { .. }) | Err(WorkError::RunNotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.connector_info(id)
    }

    /// Disconnects `id`: forgets its credential and pending authorizations, records
    /// `connector_disconnected`. Disconnecting what is not connected is an error.
    pub fn disconnect(&self, id: &str) -> Result<Value, ConnectorError> {
        let d = self.connector_def(id)?;
        let cancelled = self.connectors.pending.cancel(id);
        let had = self.connectors.credentials.remove(id).map_err(|e| WorkError::io("removing the credential", e))?;
        if !had {
            if cancelled > 0 {
                return Ok(self.connector_json(&d));
            }
            return Err(ConnectorError::NotConnected(id.into()));
        }
        let e = ConnectorDisconnected {
            connector_id: id.into(),
            reason: "user".into(),
            disconnected_at: self.clock.now_ms(),
        };
        self.store.append(Append::new(stream(id)?, vec![Event::ConnectorDisconnected(e)]))?;
        Ok(self.connector_json(&d))
    }

    /// A tool token for `run_id`, valid for [`TOOL_TOKEN_TTL_MS`](crate::limits::TOOL_TOKEN_TTL_MS).
    pub fn tool_token(&self, run_id: &str, snapshot_id: &str) -> String {
        let exp = self.clock.now_ms().saturating_add(crate::limits::TOOL_TOKEN_TTL_MS);
        self.connectors.tokens.mint(run_id, snapshot_id, exp)
    }

    /// The connector gate (spec §9), re-checked on every call: the token's run is not over, its
    /// plugin is installed, and — for a restricted plugin — `connector:<id>` (or the coarse
    /// `connector`) is granted; the tool is the connector's and among those the plugin declared.
    /// Returns the run and the connector definition.
    fn connector_gate(
        &self,
        token: Option<&str>,
        connector_id: &str,
        tool: &str,
    ) -> Result<(String, ConnectorDef), ConnectorError> {
        let claims = self.connectors.tokens.verify(token.ok_or(TokenError::Missing)?, self.clock.now_ms())?;
        let run = self.run_info(&claims.run_id)?;
        if run.is_terminal() || run.snapshot_id != claims.snapshot_id {
            return Err(TokenError::Expired.into());
        }
        let d = self.connector_def(connector_id)?;
        let not_granted = |reason: String| ConnectorError::NotGranted { connector_id: connector_id.into(), reason };
        if !run.snapshot_id.is_empty() {
            let snap = self.snapshot(&run.snapshot_id)?;
            let plugin_id = snap["pluginId"].as_str().unwrap_or("");
            let trust = match self.plugin(plugin_id) {
                Ok(p) => p.trust,
                Err(_) => return Err(not_granted(format!("plugin {plugin_id:?} of this run is no longer installed"))),
            };
            let granted: Vec<&str> =
                snap["capabilitiesGranted"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let scoped = format!("connector:{connector_id}");
            if trust == Trust::Restricted && !granted.contains(&scoped.as_str()) && !granted.contains(&"connector") {
                return Err(not_granted(format!(
                    "restricted plugin {plugin_id:?} (snapshot {}) lacks \"{scoped}\"; grant it with od plugin trust {plugin_id} --capabilities {scoped}",
                    run.snapshot_id
                )));
            }
            let declared: Vec<&Value> = ["required", "optional"]
                .iter()
                .flat_map(|l| snap["manifest"]["od"]["connectors"][*l].as_array().into_iter().flatten())
                .filter(|c| c["id"] == connector_id)
                .collect();
            if trust == Trust::Restricted && declared.is_empty() {
                return Err(not_granted(format!("plugin {plugin_id:?} does not declare connector {connector_id:?}")));
            }
            let listed: Vec<&str> = declared
                .iter()
                .flat_map(|c| c["tools"].as_array().into_iter().flatten())
                .filter_map(Value::as_str)
                .collect();
            if !listed.is_empty() && !listed.contains(&tool) {
                let reason = format!("the plugin declares only {}", listed.join(", "));
                return Err(ConnectorError::ToolNotAllowed {
                    connector_id: connector_id.into(),
                    tool: tool.into(),
                    reason,
                });
            }
        }
        if !d.tools.contains_key(tool) {
            let reason = format!("its allowedToolNames are {}", d.allowed_tool_names().join(", "));
            return Err(ConnectorError::ToolNotAllowed {
                connector_id: connector_id.into(),
                tool: tool.into(),
                reason,
            });
        }
        self.check_gating(&run.run_id, &format!("{connector_id}.{tool}"), "connector")??;
        Ok((run.run_id, d))
    }

    /// The tools a token's run may call: the connectors its plugin declared, with status.
    pub fn connector_tools_for(&self, token: Option<&str>) -> Result<Value, ConnectorError> {
        let claims = self.connectors.tokens.verify(token.ok_or(TokenError::Missing)?, self.clock.now_ms())?;
        let run = self.run_info(&claims.run_id)?;
        let od = if run.snapshot_id.is_empty() {
            Value::Null
        } else {
            self.snapshot(&run.snapshot_id)?["manifest"]["od"].clone()
        };
        Ok(json!({ "runId": run.run_id, "connectors": self.connectors_resolved(&od) }))
    }

    /// Calls `tool` of `connector_id` for the token's run (blocking: an HTTP call to the provider).
    /// An expired access token is refreshed first when the provider gave a refresh token (one
    /// refresh per credential at a time, `Credentials::fresh`). What the call returns — its
    /// error, the provider's answer — has every token and the client secret redacted.
    pub fn connector_execute(
        &self,
        token: Option<&str>,
        connector_id: &str,
        tool: &str,
        input: &Value,
    ) -> Result<Value, ConnectorError> {
        let (run_id, d) = self.connector_gate(token, connector_id, tool)?;
        let stored = self.connectors.credentials.get(connector_id);
        let mut secrets = Secrets::of(Some(&d), stored.iter());
        let now = self.clock.now_ms();
        let cred = self
            .connectors
            .credentials
            .fresh(connector_id, now, |c| oauth::refresh(&d, c, now))
            .map_err(|e| refresh_failed(e, &secrets))?
            .ok_or_else(|| ConnectorError::NotConnected(connector_id.into()))?;
        secrets.add(&cred.access_token);
        secrets.add(&cred.refresh_token);
        let (status, body) = call::call(&d, &d.tools[tool], &cred, input).map_err(|e| match e {
            CallError::Unreachable(u) => {
                CallError::Unreachable(Unreachable { message: secrets.redact(&u.message), ..u })
            }
            other => other,
        })?;
        // A provider may echo what it was sent: its answer reaches the agent redacted too.
        let body = secrets.redact_json(body);
        if !(200..300).contains(&status) {
            return Err(ConnectorError::Provider { status, body });
        }
        Ok(
            json!({ "ok": true, "runId": run_id, "connectorId": connector_id, "toolName": tool, "status": status, "output": body }),
        )
    }
}
