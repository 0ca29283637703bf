//! Authorizing a plugin's MCP server reached over HTTP (spec §10.3.1 `oauth.route: mcp`): starting
//! the flow for `(plugin, server)` — from an `oauth-prompt` surface of a run, or on its own —
//! completing it from the callback (the token stored owner-only, `mcp_server_authorized` recorded,
//! the surface answered `{mcpServerId}`), the status, removing it, and the bearer token the
//! plugin's tool calls send (refreshed when it expired).

use od_events::connectors::{McpServerAuthorized, McpServerDeauthorized};
use od_events::{Event, StreamId};
use serde_json::{json, Value};

use super::connectors::ConnectorError;
use super::{Engine, WorkError};
use crate::connectors::mcp_oauth::{self, key};
use crate::connectors::oauth;
use crate::store::Append;

/// The path the authorization server sends the browser back to.
pub const MCP_CALLBACK_PATH: &str = "/api/mcp/oauth/callback";

fn stream(plugin_id: &str, server: &str) -> Result<StreamId, WorkError> {
    StreamId::new(format!("mcp-oauth:{}", key(plugin_id, server)))
        .map_err(|e| WorkError::invalid("serverId", e.to_string()))
}

/// The `mcpServerId` a surface authorizes (`oauth.route: mcp`).
pub fn surface_mcp_server(spec: &Value) -> Option<&str> {
    (spec["kind"] == "oauth-prompt" && spec["oauth"]["route"] == "mcp")
        .then(|| spec["oauth"]["mcpServerId"].as_str())
        .flatten()
}

impl Engine {
    /// The plugin's MCP server `server` and its URL (only servers reached over HTTP authorize).
    fn http_mcp_server(&self, plugin_id: &str, server: &str) -> Result<String, ConnectorError> {
        self.http_mcp_server_gated(plugin_id, server, false)
    }

    /// [`Engine::http_mcp_server`], passing the capability gate `/api/tools/index` applies when
    /// `gated` (starting an authorization makes requests to the plugin's URLs).
    fn http_mcp_server_gated(&self, plugin_id: &str, server: &str, gated: bool) -> Result<String, ConnectorError> {
        let p = self.plugin(plugin_id).map_err(|e| WorkError::invalid("pluginId", e.to_string()))?;
        let spec = super::mcp_servers::servers_of(&p).into_iter().find(|s| s["name"] == server).ok_or_else(|| {
            WorkError::invalid("serverId", format!("plugin {plugin_id} declares no MCP server {server:?}"))
        })?;
        let url = spec["url"].as_str().filter(|u| !u.is_empty()).map(str::to_string).ok_or_else(|| {
            let msg =
                format!("MCP server {server:?} of {plugin_id} runs over stdio; only servers with a url authorize");
            ConnectorError::from(WorkError::invalid("serverId", msg))
        })?;
        if gated {
            // A URL server starts no program: only the plugin's capability applies to it.
            let right = crate::engine::gate::ExecRight::Denied;
            super::mcp_servers::gate(&p, &spec, right).map_err(|e| match e {
                WorkError::Apply(a) => WorkError::Apply(a),
                other => WorkError::invalid("serverId", other.to_string()),
            })?;
        }
        Ok(url)
    }

    /// Starts authorizing `server` of `plugin_id` (blocking: discovery and client registration are
    /// HTTP calls). With a run, the plugin is the run's, and `surface_id` must be a waiting
    /// `oauth-prompt` naming this server.
    pub fn mcp_oauth_start(
        &self,
        plugin_id: Option<&str>,
        server: &str,
        callback_base: &str,
        run_id: &str,
        surface_id: &str,
    ) -> Result<Value, ConnectorError> {
        if run_id.is_empty() != surface_id.is_empty() {
            let field = if run_id.is_empty() { "runId" } else { "surfaceId" };
            return Err(WorkError::invalid(field, "runId and surfaceId go together").into());
        }
        let plugin_id = if run_id.is_empty() {
            plugin_id
                .filter(|p| !p.is_empty())
                .ok_or_else(|| WorkError::invalid("pluginId", "required without a runId"))?
                .to_string()
        } else {
            let run = self.run_info(run_id)?;
            let row =
                self.pending_surfaces(run_id)?.into_iter().rfind(|r| r.surface_id == surface_id).ok_or_else(|| {
                    WorkError::SurfaceNotPending { run_id: run_id.into(), surface_id: surface_id.into() }
                })?;
            let spec: Value = serde_json::from_str(&row.spec_json).unwrap_or(Value::Null);
            if surface_mcp_server(&spec) != Some(server) {
                let msg = format!("surface {surface_id:?} does not authorize MCP server {server:?}");
                return Err(WorkError::invalid("surfaceId", msg).into());
            }
            let of_run = self.snapshot(&run.snapshot_id)?["pluginId"].as_str().unwrap_or("").to_string();
            if plugin_id.is_some_and(|p| !p.is_empty() && p != of_run) {
                return Err(WorkError::invalid("pluginId", format!("run {run_id} uses plugin {of_run}")).into());
            }
            of_run
        };
        let url = self.http_mcp_server_gated(&plugin_id, server, true)?;
        let redirect = format!("{}{MCP_CALLBACK_PATH}", callback_base.trim_end_matches('/'));
        let found = mcp_oauth::discover(&url)?;
        let client_id = mcp_oauth::client_id(&self.connectors.mcp_credentials, &found, &redirect)?;
        let def = mcp_oauth::definition(&plugin_id, server, &url, &found, client_id);
        let now = self.clock.now_ms();
        let (authorize_url, state) = self.connectors.pending.start(&def, &redirect, run_id, surface_id, now)?;
        Ok(json!({
            "pluginId": plugin_id, "serverId": server, "url": url, "issuer": found.issuer,
            "authorizeUrl": authorize_url, "redirectUrl": redirect, "redirectUri": redirect, "state": state,
            "expiresAt": now + crate::limits::PENDING_AUTH_TTL_MS,
        }))
    }

    /// Completes an authorization from the callback (blocking): stores the token, records
    /// `mcp_server_authorized`, answers the surface that asked.
    pub fn mcp_oauth_complete(&self, state: &str, code: &str) -> Result<Value, ConnectorError> {
        let now = self.clock.now_ms();
        let pending = self.connectors.pending.take_if(state, now, |id| id.starts_with("mcp:"))?;
        let id = pending.connector_id.clone();
        let done = self.mcp_authorize_with(pending, code, now);
        super::connectors::remember(&self.connectors.pending, &id, done.as_ref().err(), now);
        done
    }

    fn mcp_authorize_with(&self, pending: oauth::Pending, code: &str, now: i64) -> Result<Value, ConnectorError> {
        let def = pending.def.clone();
        let (plugin_id, server) =
            def.id["mcp:".len()..].split_once('#').map(|(p, s)| (p.to_string(), s.to_string())).unwrap_or_default();
        let (run_id, surface_id) = (pending.run_id.clone(), pending.surface_id.clone());
        let mut cred = oauth::exchange(&def, pending, code, now)?;
        cred.account_label = def.api_base_url.clone();
        cred.token_url = def.token_url.clone();
        cred.client_id = def.client_id.clone();
        cred.resource = def.resource.clone();
        self.connectors
            .mcp_credentials
            .put(&key(&plugin_id, &server), &cred)
            .map_err(|e| WorkError::io("storing the credential", e))?;
        let issuer = def.authorize_url.split('/').take(3).collect::<Vec<_>>().join("/");
        let e = McpServerAuthorized {
            plugin_id: plugin_id.clone(),
            server: server.clone(),
            url: def.api_base_url.clone(),
            issuer,
            scopes: cred.scopes.clone(),
            run_id: run_id.clone(),
            surface_id: surface_id.clone(),
            authorized_at: now,
        };
        self.store.append(Append::new(stream(&plugin_id, &server)?, vec![Event::McpServerAuthorized(e)]))?;
        if !run_id.is_empty() {
            let answer = json!({ "mcpServerId": server, "status": "connected" });
            match self.respond_surface_as(&run_id, &surface_id, answer, "oauth") {
                Ok(_) | Err(WorkError::SurfaceNotPending { .. }) | Err(WorkError::RunNotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.mcp_oauth_status(&plugin_id, &server)
    }

    /// `{pluginId, serverId, connected, expiresAt, scope, savedAt}` (upstream's status shape).
    pub fn mcp_oauth_status(&self, plugin_id: &str, server: &str) -> Result<Value, ConnectorError> {
        let url = self.http_mcp_server(plugin_id, server)?;
        let cred = self.connectors.mcp_credentials.get(&key(plugin_id, server));
        let waiting = self.connectors.pending.waiting(&mcp_oauth::pending_id(plugin_id, server), self.clock.now_ms());
        Ok(json!({
            "pluginId": plugin_id, "serverId": server, "url": url, "connected": cred.is_some(),
            "expiresAt": cred.as_ref().map(|c| c.expires_at).filter(|e| *e != 0),
            "scope": cred.as_ref().map(|c| c.scopes.join(" ")),
            "savedAt": cred.as_ref().map(|c| c.connected_at),
            "pendingAuthorizations": waiting,
            "lastError": super::connectors::last_error(&self.connectors.pending, &mcp_oauth::pending_id(plugin_id, server), self.clock.now_ms()),
        }))
    }

    /// Forgets the server's token and pending authorizations; records `mcp_server_deauthorized`.
    pub fn mcp_oauth_disconnect(&self, plugin_id: &str, server: &str) -> Result<Value, ConnectorError> {
        self.http_mcp_server(plugin_id, server)?;
        let cancelled = self.connectors.pending.cancel(&mcp_oauth::pending_id(plugin_id, server));
        let had = self
            .connectors
            .mcp_credentials
            .remove(&key(plugin_id, server))
            .map_err(|e| WorkError::io("removing the credential", e))?;
        if !had && cancelled == 0 {
            return Err(ConnectorError::NotConnected(format!("{plugin_id}#{server}")));
        }
        if had {
            let e = McpServerDeauthorized {
                plugin_id: plugin_id.into(),
                server: server.into(),
                reason: "user".into(),
                deauthorized_at: self.clock.now_ms(),
            };
            self.store.append(Append::new(stream(plugin_id, server)?, vec![Event::McpServerDeauthorized(e)]))?;
        }
        self.mcp_oauth_status(plugin_id, server)
    }

    /// Whether `server` of `plugin_id` holds a token.
    pub fn mcp_authorized(&self, plugin_id: &str, server: &str) -> bool {
        self.connectors.mcp_credentials.get(&key(plugin_id, server)).is_some()
    }

    /// The bearer token calls to the server send (None: not authorized), refreshed first when it
    /// expired and the server gave a refresh token (blocking).
    pub fn mcp_bearer(&self, plugin_id: &str, server: &str) -> Result<Option<String>, ConnectorError> {
        let k = key(plugin_id, server);
        let store = &self.connectors.mcp_credentials;
        let Some(stored) = store.get(&k) else { return Ok(None) };
        let now = self.clock.now_ms();
        let refresh = |c: &crate::connectors::Credential| {
            // A refresh needs only the token endpoint, the client and the resource it stored.
            let found = mcp_oauth::Discovered {
                issuer: String::new(),
                authorize_url: c.token_url.clone(),
                token_url: c.token_url.clone(),
                registration_url: None,
                scopes: c.scopes.clone(),
            };
            let def = mcp_oauth::definition(plugin_id, server, &c.resource, &found, c.client_id.clone());
            oauth::refresh(&def, c, now)
        };
        let secrets = crate::connectors::redact::Secrets::of(None, [&stored]);
        let Some(cred) = store.fresh(&k, now, refresh).map_err(|e| super::connectors::refresh_failed(e, &secrets))?
        else {
            return Ok(None);
        };
        if !oauth::token_ok(&cred.access_token) {
            // Stored before tokens were checked on arrival; never quoted.
            let why = format!(
                "the stored token of MCP server {server:?} of plugin {plugin_id:?} is not a valid bearer token; \
                 authorize it again (od mcp oauth start)"
            );
            return Err(crate::connectors::oauth::OAuthError::Config(why).into());
        }
        Ok(Some(cred.access_token))
    }
}
