//! One ACP session with a started agent: `initialize` (protocol v1, offering `fs.readTextFile` and
//! `fs.writeTextFile`, no terminal), `authenticate` when the agent lists a method the environment
//! can satisfy, `session/new` (cwd = the project folder, od's own MCP server when the staged
//! `.mcp.json` names it), `session/prompt` with the composed prompt. While a request waits, the
//! agent's own traffic is served: `session/update` becomes agent output ([`super::updates`]), `fs/*`
//! and `session/request_permission` are answered ([`super::client`]; a permission asked of the user
//! is answered from its own task, so the session goes on meanwhile). On od's cancel,
//! `session/cancel` is sent and the agent has [`ACP_CANCEL_GRACE_MS`] to stop; waiting permission
//! requests are answered `cancelled`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::process::Child;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::client::{self, Client, Decision};
use super::conn::{Conn, Incoming, RpcError};
use super::updates;
use crate::limits::{ACP_CANCEL_GRACE_MS, ACP_HANDSHAKE_TIMEOUT_MS, ACP_MAX_PENDING_ASKS, ACP_STDERR_TAIL_BYTES};
use crate::runner::agent::{AgentEvent, Ask, AskReply, CancelFlag, EventSink, Invocation};
use crate::runner::output::{status, OutputBudget};

/// The ACP protocol version od speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// Auth methods od can satisfy from the agent's environment: method id → the variable it needs.
const AUTH_FROM_ENV: &[(&str, &str)] = &[
    ("gemini-api-key", "GEMINI_API_KEY"),
    ("openai", "OPENAI_API_KEY"),
    ("openai-api-key", "OPENAI_API_KEY"),
    ("anthropic-api-key", "ANTHROPIC_API_KEY"),
];

/// How a session ended when it did not finish its turn.
#[derive(Debug)]
pub enum Stop {
    /// A request od sent failed (`method`, the agent's error).
    Rpc(String, RpcError),
    /// The agent's process exited while od waited.
    Exited(std::process::ExitStatus),
    Canceled,
    TimedOut(u64),
    /// The agent answered something od cannot go on with.
    Refused(String),
}

/// What the session needs from the invocation's settings.
pub struct Settings {
    pub timeout_ms: u64,
    pub idle_timeout_ms: u64,
    pub auth_method: Option<String>,
    /// The agent's environment (for which auth methods it can satisfy).
    pub env: Vec<(String, String)>,
}

pub struct Session<'a> {
    pub conn: Conn,
    pub incoming: mpsc::UnboundedReceiver<Incoming>,
    pub client: Client,
    pub sink: &'a EventSink,
    pub budget: OutputBudget,
    pub cancel: CancelFlag,
    pub child: &'a mut Child,
    pub settings: Settings,
    /// The stderr lines kept for a crash report (newest last, bounded in bytes).
    pub stderr_tail: VecDeque<String>,
    asks: Arc<AtomicUsize>,
    session_id: Option<String>,
    deadline: Instant,
    last_seen: Instant,
    canceled_at: Option<Instant>,
    open: bool,
    watch_cancel: bool,
}

impl<'a> Session<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        conn: Conn,
        incoming: mpsc::UnboundedReceiver<Incoming>,
        client: Client,
        sink: &'a EventSink,
        budget: OutputBudget,
        cancel: CancelFlag,
        child: &'a mut Child,
        settings: Settings,
    ) -> Session<'a> {
        let now = Instant::now();
        Session {
            deadline: now + Duration::from_millis(settings.timeout_ms),
            conn,
            incoming,
            client,
            sink,
            budget,
            cancel,
            child,
            settings,
            stderr_tail: VecDeque::new(),
            asks: Arc::new(AtomicUsize::new(0)),
            session_id: None,
            last_seen: now,
            canceled_at: None,
            open: true,
            watch_cancel: true,
        }
    }

    /// The whole turn; `Ok` when the agent ended it normally.
    pub async fn run(&mut self, inv: &Invocation) -> Result<(), Stop> {
        let init = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": { "fs": { "readTextFile": true, "writeTextFile": true }, "terminal": false },
            "clientInfo": { "name": "od", "version": env!("CARGO_PKG_VERSION") },
        });
        let init = self.call("initialize", init, true).await?;
        let version = init["protocolVersion"].as_u64().unwrap_or(0);
        if version != PROTOCOL_VERSION {
            return Err(Stop::Refused(format!(
                "the agent speaks ACP version {version}; od speaks version {PROTOCOL_VERSION}"
            )));
        }
        self.emit(status("acp-initialized", json!({ "protocolVersion": version, "agentInfo": init["agentInfo"] })));
        if let Some(method) = self.auth_method(&init["authMethods"]) {
            self.call("authenticate", json!({ "methodId": method }), true).await?;
            self.emit(status("acp-authenticated", json!({ "methodId": method })));
        }
        let new = json!({ "cwd": inv.project_dir, "mcpServers": mcp_servers(inv) });
        let created = self.call("session/new", new, true).await?;
        let Some(sid) = created["sessionId"].as_str().map(str::to_string) else {
            return Err(Stop::Refused("session/new answered no sessionId".into()));
        };
        self.session_id = Some(sid.clone());
        let prompt = json!({ "sessionId": sid, "prompt": [{ "type": "text", "text": inv.prompt }] });
        let answer = self.call("session/prompt", prompt, false).await?;
        if let Some(u) = updates::prompt_usage(&answer) {
            self.emit(AgentEvent::Output { channel: "agent".into(), payload: u });
        }
        if self.canceled_at.is_some() {
            return Err(Stop::Canceled);
        }
        let reason = answer["stopReason"].as_str().unwrap_or("end_turn");
        match reason {
            "end_turn" => Ok(()),
            "max_tokens" | "max_turn_requests" => {
                self.emit(status("acp-stopped", json!({ "stopReason": reason })));
                Ok(())
            }
            "refusal" => Err(Stop::Refused("the agent refused to continue (stop reason refusal)".into())),
            "cancelled" => Err(Stop::Refused("the agent cancelled its turn without being asked to".into())),
            other => Err(Stop::Refused(format!("unknown stop reason {other:?}"))),
        }
    }

    /// The auth method to use: `authMethod` when the agent lists it, else the first listed one
    /// the environment holds the key of; none when the agent lists none.
    fn auth_method(&self, listed: &Value) -> Option<String> {
        let ids: Vec<&str> = listed.as_array().into_iter().flatten().filter_map(|m| m["id"].as_str()).collect();
        if let Some(m) = self.settings.auth_method.as_deref() {
            return ids.contains(&m).then(|| m.to_string());
        }
        let has = |var: &str| {
            self.settings.env.iter().any(|(k, v)| k == var && !v.is_empty())
                || std::env::var(var).is_ok_and(|v| !v.is_empty())
        };
        ids.iter().find(|id| AUTH_FROM_ENV.iter().any(|(m, var)| m == *id && has(var))).map(|id| id.to_string())
    }

    fn emit(&mut self, ev: AgentEvent) {
        for e in self.budget.admit(ev) {
            let _ = self.sink.send(e);
        }
    }

    /// Sends a request and serves the agent until it is answered, the agent exits, od cancels, or
    /// a timeout passes (`handshake`: the shorter handshake bound too).
    async fn call(&mut self, method: &str, params: Value, handshake: bool) -> Result<Value, Stop> {
        let conn = self.conn.clone();
        let fut = conn.request(method, params);
        tokio::pin!(fut);
        let handshake_by = handshake.then(|| Instant::now() + Duration::from_millis(ACP_HANDSHAKE_TIMEOUT_MS));
        let idle = Duration::from_millis(self.settings.idle_timeout_ms);
        let mut exited: Option<(std::process::ExitStatus, Instant)> = None;
        loop {
            // Waiting for the user is not the agent being silent.
            let idle_at = if self.asks.load(Ordering::Relaxed) > 0 { self.deadline } else { self.last_seen + idle };
            let mut wake = self.deadline.min(idle_at);
            if let Some(h) = handshake_by {
                wake = wake.min(h);
            }
            if let Some(c) = self.canceled_at {
                wake = wake.min(c + Duration::from_millis(ACP_CANCEL_GRACE_MS));
            }
            if let Some((_, at)) = exited {
                wake = wake.min(at + Duration::from_secs(2));
            }
            tokio::select! {
                r = &mut fut => {
                    // What the agent sent before this answer is already queued (one reader, in
                    // order): served before the answer is acted on.
                    while let Ok(m) = self.incoming.try_recv() {
                        self.handle(m);
                    }
                    return r.map_err(|e| match exited {
                        Some((st, _)) if e.is_closed() => Stop::Exited(st),
                        _ => Stop::Rpc(method.to_string(), e),
                    });
                }
                msg = self.incoming.recv(), if self.open => match msg {
                    Some(m) => {
                        self.last_seen = Instant::now();
                        self.handle(m);
                    }
                    None => self.open = false,
                },
                st = self.child.wait(), if exited.is_none() => match st {
                    Ok(st) => exited = Some((st, Instant::now())),
                    Err(e) => return Err(Stop::Refused(format!("waiting for the agent failed: {e}"))),
                },
                changed = self.cancel.changed(), if self.watch_cancel && self.canceled_at.is_none() => {
                    if changed.is_err() {
                        self.watch_cancel = false;
                    } else if *self.cancel.borrow_and_update() {
                        match &self.session_id {
                            Some(sid) => {
                                self.conn.notify("session/cancel", json!({ "sessionId": sid }));
                                self.canceled_at = Some(Instant::now());
                            }
                            None => return Err(Stop::Canceled),
                        }
                    }
                }
                _ = tokio::time::sleep_until(wake) => {
                    let now = Instant::now();
                    if self.canceled_at.is_some_and(|c| now >= c + Duration::from_millis(ACP_CANCEL_GRACE_MS)) {
                        return Err(Stop::Canceled);
                    }
                    if let Some((st, _)) = exited {
                        return Err(Stop::Exited(st));
                    }
                    if handshake_by.is_some_and(|h| now >= h) {
                        return Err(Stop::TimedOut(ACP_HANDSHAKE_TIMEOUT_MS));
                    }
                    let ms = if now >= self.deadline { self.settings.timeout_ms } else { self.settings.idle_timeout_ms };
                    return Err(Stop::TimedOut(ms));
                }
            }
        }
    }

    /// Serves one message from the agent.
    fn handle(&mut self, msg: Incoming) {
        match msg {
            Incoming::Notification { method, params } if method == "session/update" => {
                let update = &params["update"];
                match update["sessionUpdate"].as_str() {
                    Some("tool_call") => {
                        self.client.note_tool_call(update);
                    }
                    Some("tool_call_update") => self.announce(update),
                    _ => {}
                }
                for payload in updates::map(update) {
                    self.emit(AgentEvent::Output { channel: "agent".into(), payload });
                }
            }
            Incoming::Notification { .. } => {}
            Incoming::Junk(line) => {
                self.emit(AgentEvent::Output { channel: "stdout".into(), payload: json!({ "chunk": line }) })
            }
            Incoming::Stderr(line) => {
                self.keep_stderr(&line);
                self.emit(AgentEvent::Output { channel: "stderr".into(), payload: json!({ "chunk": line }) });
            }
            Incoming::Request { id, method, params } => match method.as_str() {
                "fs/read_text_file" => self.conn.respond(id, self.client.read_text_file(&params)),
                "fs/write_text_file" => match self.client.write_text_file(&params) {
                    Ok(draft) => {
                        self.conn.respond(id, Ok(json!({})));
                        let _ = self.sink.send(AgentEvent::Artifact(draft));
                    }
                    Err(e) => {
                        self.emit(status("acp-fs-refused", json!({ "path": params["path"], "error": e.message })));
                        self.conn.respond(id, Err(e));
                    }
                },
                "session/request_permission" => self.permission(id, params),
                other => self.conn.respond(id, Err(RpcError::method_not_found(other))),
            },
        }
    }

    /// Notes a tool call named outside a `tool_call` update, recording it as a `tool_use` the
    /// first time it is seen.
    fn announce(&mut self, tool: &Value) {
        if let Some(call) = self.client.note_tool_call(tool) {
            for payload in updates::map(&call) {
                self.emit(AgentEvent::Output { channel: "agent".into(), payload });
            }
        }
    }

    /// Answers a permission request now (by the permission mode) or asks the user through GenUI.
    fn permission(&mut self, id: Value, params: Value) {
        self.announce(&params["toolCall"]);
        let spec = match self.client.decide(&params) {
            Decision::Answer { result, why } => {
                self.emit(status("acp-permission", json!({ "decision": result["outcome"], "by": why })));
                return self.conn.respond(id, Ok(result));
            }
            Decision::Ask(spec) => spec,
        };
        if self.canceled_at.is_some() || self.asks.load(Ordering::Relaxed) >= ACP_MAX_PENDING_ASKS {
            return self.conn.respond(id, Ok(client::cancelled()));
        }
        self.emit(status("acp-permission-asked", json!({ "surfaceId": spec["id"], "toolCall": spec["toolCall"] })));
        let (reply, answer) = AskReply::new();
        let _ = self.sink.send(AgentEvent::Ask(Ask { spec, reply }));
        let conn = self.conn.clone();
        let asks = self.asks.clone();
        let mut cancel = self.cancel.clone();
        asks.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            let canceled = async {
                loop {
                    if *cancel.borrow_and_update() {
                        return;
                    }
                    if cancel.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
            };
            let result = tokio::select! {
                a = answer => match a {
                    Ok(value) => client::answer_result(&params, value.as_ref()),
                    Err(_) => client::cancelled(),
                },
                _ = canceled => client::cancelled(),
            };
            conn.respond(id, Ok(result));
            asks.fetch_sub(1, Ordering::Relaxed);
        });
    }

    fn keep_stderr(&mut self, line: &str) {
        self.stderr_tail.push_back(line.to_string());
        while self.stderr_tail.iter().map(|l| l.len() + 1).sum::<usize>() > ACP_STDERR_TAIL_BYTES
            && self.stderr_tail.len() > 1
        {
            self.stderr_tail.pop_front();
        }
    }

    /// The kept stderr, oldest first.
    pub fn tail(&self) -> String {
        self.stderr_tail.iter().map(String::as_str).collect::<Vec<_>>().join("\n")
    }
}

/// od's own MCP server as the run's staged `.mcp.json` (or `.od/mcp.json` beside a user's own)
/// names it (`mcpServers.od`), in ACP's stdio shape; none when nothing was staged.
fn mcp_servers(inv: &Invocation) -> Value {
    use crate::engine::substrate::{MCP_BESIDE, MCP_CONFIG};
    let root = crate::engine::safe_fs::Root::open(&inv.project_dir).ok();
    let staged: Vec<Value> = [MCP_CONFIG, MCP_BESIDE]
        .iter()
        .filter_map(|p| root.as_ref()?.read(p).ok())
        .filter_map(|b| serde_json::from_slice::<Value>(&b).ok())
        .collect();
    let od = staged.iter().map(|s| &s["mcpServers"]["od"]).find(|o| o["command"].is_string());
    match od {
        Some(od) => {
            let env: Vec<Value> = od["env"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| v.as_str().map(|v| json!({ "name": k, "value": v })))
                .collect();
            json!([{ "name": "od", "command": od["command"], "args": od["args"].as_array().cloned().unwrap_or_default(), "env": env }])
        }
        None => json!([]),
    }
}
