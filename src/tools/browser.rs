//! Browser-action round trips. A call to a browser tool mints an `invocationId`, records
//! `BrowserActionRequested` on the run's stream (where `od run watch` and SSE carry it to the
//! browser) and waits; exactly one `BrowserActionResulted` follows — the browser's result
//! (`POST /api/runs/:runId/actions/:invocationId/result`), `TIMEOUT` on the injected clock, or
//! `SUPERSEDED` by a newer request for the same view of the same session. A result for an unknown
//! invocation, or a second one, is refused. Independent invocations wait side by side.

use od_events::tools::{BrowserActionRequested, BrowserActionResulted};
use od_events::{Event, StreamId};
use od_projections::Browser;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

use super::browser_once::{append_once, version_at};
use super::wire::{refused, result_json, ERROR_CODES};
use super::ToolError;
use super::Tools;
use crate::limits::*;
use crate::page::{Page, PageReq};
use crate::projector::RecordProjector;
use crate::store::{Store, StoreError};

struct Pending {
    run_id: String,
    session_id: String,
    view: String,
    tool: String,
    /// The request's version in the run stream (where a check for its result starts).
    request_version: u64,
    /// Someone is recording this invocation's result right now.
    claimed: bool,
    /// The caller waiting for the result.
    waiter: Option<oneshot::Sender<Value>>,
    /// Dropped when the invocation resolves, which ends its timer.
    _timer_stop: Option<oneshot::Sender<()>>,
}

/// Browser actions waiting in this process.
#[derive(Default)]
pub(crate) struct Actions {
    pending: Mutex<HashMap<String, Pending>>,
}

/// A browser's (or the daemon's) answer to an invocation.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Ok(Value),
    Err { code: String, message: String, details: Value },
}

impl Outcome {
    /// Parses a posted `BrowserActionResult` body (`ok` + `result`, or `error`).
    pub fn from_body(b: &Value, invocation_id: &str, tool: &str) -> Result<Self, ToolError> {
        if b.get("protocolVersion").is_some_and(|v| v != super::PROTOCOL_VERSION) {
            return Err(ToolError::invalid(
                "protocolVersion",
                format!("this daemon speaks {}", super::PROTOCOL_VERSION),
            ));
        }
        if b.get("invocationId").is_some_and(|v| v != invocation_id) {
            return Err(ToolError::invalid("invocationId", "does not match the route"));
        }
        if b.get("tool").is_some_and(|v| v != tool) {
            return Err(ToolError::invalid("tool", format!("invocation {invocation_id} called {tool}")));
        }
        let size = b.to_string().len();
        if size > MAX_ACTION_RESULT_BYTES {
            return Err(ToolError::Limit {
                limit: "MAX_ACTION_RESULT_BYTES",
                value: size,
                max: MAX_ACTION_RESULT_BYTES,
            });
        }
        match (b["ok"].as_bool(), b.get("error")) {
            (Some(true), None) => Ok(Outcome::Ok(b.get("result").cloned().unwrap_or(Value::Null))),
            (Some(false), Some(e)) => {
                let code = e["code"].as_str().unwrap_or("");
                if !ERROR_CODES.contains(&code) {
                    return Err(ToolError::invalid(
                        "error.code",
                        format!("{code:?} is not one of {}", ERROR_CODES.join(" ")),
                    ));
                }
                let message = e["message"].as_str().ok_or_else(|| ToolError::invalid("error.message", "a string"))?;
                Ok(Outcome::Err {
                    code: code.into(),
                    message: message.into(),
                    details: e.get("details").cloned().unwrap_or(Value::Null),
                })
            }
            (Some(true), Some(_)) => Err(ToolError::invalid("error", "an ok result carries no error")),
            (Some(false), None) => Err(ToolError::invalid("error", "a failed result needs {code, message}")),
            (None, _) => Err(ToolError::invalid("ok", "true or false")),
        }
    }

    fn event(
        &self,
        run_id: &str,
        invocation_id: &str,
        tool: &str,
        by: &str,
        superseded_by: &str,
        at: i64,
    ) -> BrowserActionResulted {
        let (ok, result_json, code, message, details) = match self {
            Outcome::Ok(v) => (true, v.to_string(), String::new(), String::new(), String::new()),
            Outcome::Err { code, message, details } => {
                let d = if details.is_null() { String::new() } else { details.to_string() };
                (false, "null".into(), code.clone(), message.clone(), d)
            }
        };
        BrowserActionResulted {
            run_id: run_id.into(),
            invocation_id: invocation_id.into(),
            tool: tool.into(),
            ok,
            result_json,
            error_code: code,
            error_message: message,
            error_details_json: details,
            resolved_by: by.into(),
            superseded_by: superseded_by.into(),
            resulted_at: at,
        }
    }
}

fn run_stream(run_id: &str) -> Result<StreamId, ToolError> {
    Ok(StreamId::typed("run", run_id)?)
}

/// Resolves invocations a previous process left waiting (their callers are gone with it): those of
/// the runs `free` keeps (on a shared log, runs no other live daemon executes — a call waiting on
/// another daemon is not an orphan).
pub(crate) fn resolve_orphans(
    store: &Store,
    records: &RecordProjector<Browser>,
    now: i64,
    free: impl FnOnce(&[String]) -> Result<Vec<String>, StoreError>,
) -> Result<(), StoreError> {
    let mut orphans = records.read(|r| od_projections::browser::pending(r, MAX_WORKING_SET_READ))?;
    if orphans.is_empty() {
        return Ok(());
    }
    let mut runs: Vec<String> = orphans.iter().map(|i| i.run_id.clone()).collect();
    runs.sort();
    runs.dedup();
    let free = free(&runs)?;
    orphans.retain(|i| free.contains(&i.run_id));
    let lost = Outcome::Err {
        code: "EXECUTION_FAILED".into(),
        message: "od restarted while this action waited; call the tool again".into(),
        details: Value::Null,
    };
    for i in orphans {
        let e = lost.event(&i.run_id, &i.invocation_id, &i.tool, "daemon-restart", "", now);
        let Ok(stream) = StreamId::typed("run", &i.run_id) else { continue };
        let checks = [(i.invocation_id.as_str(), version_at(store, i.seq))];
        let appended = append_once(store, &stream, &checks, |found| {
            if found.is_empty() {
                vec![Event::BrowserActionResulted(e.clone())]
            } else {
                Vec::new()
            }
        });
        match appended {
            // The run ended meanwhile: its end resolved the invocation (the `browser` fold).
            Err(StoreError::RunEnded { .. }) => {}
            other => {
                other?;
            }
        }
    }
    Ok(())
}

/// A superseded invocation: its id, its request's version, its `SUPERSEDED` result.
type Superseded = (String, u64, BrowserActionResulted);

/// What dispatching a call did.
enum Dispatched {
    /// Refused before dispatch (nothing recorded): the failed result.
    Refused(Value),
    /// Recorded; wait on `rx` (and arm a timer for `timeout_at`).
    Waiting { invocation_id: String, timeout_at: i64, rx: oneshot::Receiver<Value>, stop: oneshot::Receiver<()> },
}

impl Tools {
    /// Checks, mints, supersedes and records one browser-tool call (blocking).
    fn dispatch(
        &self,
        run_id: &str,
        name: &str,
        input: &Value,
        timeout_ms: Option<i64>,
    ) -> Result<Dispatched, ToolError> {
        let run = self.engine.run_info(run_id)?;
        if run.is_terminal() {
            return Err(crate::engine::WorkError::RunState {
                run_id: run_id.into(),
                status: run.status,
                message: "browser tools run only in a live run".into(),
            }
            .into());
        }
        let invocation_id = format!("inv_{}", self.engine.ids().new_id());
        let (session_id, view, timeout) = match self.check_call(run_id, name, input, timeout_ms, &invocation_id)? {
            Ok(checked) => checked,
            Err(refused) => return Ok(Dispatched::Refused(refused)),
        };
        let now = self.engine.clock().now_ms();
        let (tx, rx) = oneshot::channel();
        let (stop_tx, stop) = oneshot::channel();
        let pending = Pending {
            run_id: run_id.into(),
            session_id: session_id.clone(),
            view: view.clone(),
            tool: name.into(),
            request_version: 0,
            claimed: false,
            waiter: Some(tx),
            _timer_stop: Some(stop_tx),
        };
        let superseded = self.supersede(&invocation_id, pending, now)?;
        let request = Event::BrowserActionRequested(BrowserActionRequested {
            run_id: run_id.into(),
            invocation_id: invocation_id.clone(),
            session_id,
            tool: name.into(),
            input_json: input.to_string(),
            view,
            requested_at: now,
            timeout_at: now + timeout,
        });
        self.record_request(run_id, &invocation_id, request, superseded)?;
        Ok(Dispatched::Waiting { invocation_id, timeout_at: now + timeout, rx, stop })
    }

    /// The session, view and timeout of a call of `name` in `run_id`, or the failed result of a
    /// refused one (no session has the tool mounted, the input does not match its schema).
    fn check_call(
        &self,
        run_id: &str,
        name: &str,
        input: &Value,
        timeout_ms: Option<i64>,
        invocation_id: &str,
    ) -> Result<Result<(String, String, i64), Value>, ToolError> {
        let Some((session_id, d)) = self.live_browser_tools(run_id)?.into_iter().find(|(_, d)| d["name"] == name)
        else {
            let msg = format!("no browser session attached to run {run_id} has {name} mounted");
            return Ok(Err(refused(invocation_id, run_id, name, "TOOL_NOT_AVAILABLE", &msg, Value::Null)));
        };
        let size = input.to_string().len();
        if size > MAX_ACTION_INPUT_BYTES {
            return Err(ToolError::Limit { limit: "MAX_ACTION_INPUT_BYTES", value: size, max: MAX_ACTION_INPUT_BYTES });
        }
        let violations = crate::plugins::validator::validate_value(&d["inputSchema"], input);
        if !violations.is_empty() {
            let msg = format!("the input does not match {name}'s inputSchema");
            let details = json!({ "violations": violations });
            return Ok(Err(refused(invocation_id, run_id, name, "INVALID_INPUT", &msg, details)));
        }
        let timeout = timeout_ms.unwrap_or(BROWSER_ACTION_TIMEOUT_MS);
        if !(1..=MAX_BROWSER_ACTION_TIMEOUT_MS).contains(&timeout) {
            return Err(ToolError::invalid("timeoutMs", format!("1..={MAX_BROWSER_ACTION_TIMEOUT_MS}")));
        }
        Ok(Ok((session_id, d["view"].as_str().unwrap_or(name).to_string(), timeout)))
    }

    /// Registers `pending` as `invocation_id` (within the in-flight bounds) and claims the calls
    /// it supersedes: those waiting for the same view of the same session in the same run. Returns
    /// each superseded invocation with its request's version and its `SUPERSEDED` result.
    fn supersede(&self, invocation_id: &str, pending: Pending, now: i64) -> Result<Vec<Superseded>, ToolError> {
        let mut g = self.actions.pending.lock().expect("actions lock");
        let in_run = g.values().filter(|p| p.run_id == pending.run_id && !p.claimed).count();
        if in_run >= MAX_INFLIGHT_ACTIONS_PER_RUN || g.len() >= MAX_INFLIGHT_ACTIONS {
            let (value, max) = if in_run >= MAX_INFLIGHT_ACTIONS_PER_RUN {
                (in_run, MAX_INFLIGHT_ACTIONS_PER_RUN)
            } else {
                (g.len(), MAX_INFLIGHT_ACTIONS)
            };
            return Err(ToolError::Limit { limit: "MAX_INFLIGHT_ACTIONS", value, max });
        }
        let mut superseded = Vec::new();
        let same = |p: &Pending| {
            p.run_id == pending.run_id && p.session_id == pending.session_id && p.view == pending.view && !p.claimed
        };
        for (id, p) in g.iter_mut().filter(|(_, p)| same(p)) {
            p.claimed = true;
            let msg = format!("a newer request ({invocation_id}) for the same view replaced it");
            let out = Outcome::Err { code: "SUPERSEDED".into(), message: msg, details: Value::Null };
            let e = out.event(&pending.run_id, id, &p.tool, "superseded", invocation_id, now);
            superseded.push((id.clone(), p.request_version, e));
        }
        g.insert(invocation_id.to_string(), pending);
        Ok(superseded)
    }

    /// Records the request with the superseded calls' results (each once: a superseded invocation
    /// whose result another daemon recorded meanwhile keeps that one) and hands those results to
    /// their callers; on failure nothing stays registered or claimed.
    fn record_request(
        &self,
        run_id: &str,
        invocation_id: &str,
        request: Event,
        superseded: Vec<Superseded>,
    ) -> Result<(), ToolError> {
        let checks: Vec<(&str, u64)> = superseded.iter().map(|(id, v, _)| (id.as_str(), *v)).collect();
        let appended = append_once(self.engine.store(), &run_stream(run_id)?, &checks, |found| {
            let mut evs: Vec<Event> = superseded
                .iter()
                .filter(|(id, _, _)| !found.contains_key(id))
                .map(|(_, _, e)| Event::BrowserActionResulted(e.clone()))
                .collect();
            evs.push(request.clone());
            evs
        });
        let mut g = self.actions.pending.lock().expect("actions lock");
        let once = match appended {
            Ok(once) => once,
            Err(e) => {
                g.remove(invocation_id);
                for (id, _, _) in &superseded {
                    if let Some(p) = g.get_mut(id) {
                        p.claimed = false;
                    }
                }
                return Err(e.into());
            }
        };
        if let (Some(p), Some(r)) = (g.get_mut(invocation_id), &once.appended) {
            p.request_version = r.last_version;
        }
        for (id, _, e) in &superseded {
            let e = once.existing.get(id).unwrap_or(e);
            if let Some(w) = g.remove(id).and_then(|p| p.waiter) {
                let _ = w.send(result_json(e));
            }
        }
        Ok(())
    }

    /// Claims `invocation_id` of `run_id` for recording its result: its tool, and where a check
    /// for an earlier result starts (`Ok`: the request's version, known here; `Err`: its seq, for
    /// a call another daemon dispatched). Refused when it is unknown, resolved or being recorded.
    fn claim(&self, run_id: &str, invocation_id: &str) -> Result<(String, Result<u64, u64>), ToolError> {
        let mut g = self.actions.pending.lock().expect("actions lock");
        let claimed = match g.get_mut(invocation_id) {
            Some(p) if p.run_id == run_id && !p.claimed => {
                p.claimed = true;
                (p.tool.clone(), Ok(p.request_version))
            }
            Some(p) if p.run_id == run_id => {
                return Err(ToolError::InvocationResolved {
                    invocation_id: invocation_id.into(),
                    status: "being recorded".into(),
                })
            }
            _ => {
                let found = self.browser.read(|r| od_projections::browser::invocation(r, invocation_id))?;
                match found {
                    Some(i) if i.run_id == run_id && i.status != "pending" => {
                        return Err(ToolError::InvocationResolved {
                            invocation_id: invocation_id.into(),
                            status: i.status,
                        })
                    }
                    Some(i) if i.run_id == run_id => {
                        let p = Pending {
                            run_id: i.run_id,
                            session_id: i.session_id,
                            view: i.view,
                            tool: i.tool.clone(),
                            request_version: 0,
                            claimed: true,
                            waiter: None,
                            _timer_stop: None,
                        };
                        g.insert(invocation_id.into(), p);
                        (i.tool, Err(i.seq))
                    }
                    _ => {
                        return Err(ToolError::InvocationNotFound {
                            run_id: run_id.into(),
                            invocation_id: invocation_id.into(),
                        })
                    }
                }
            }
        };
        Ok(claimed)
    }

    /// Records the one result of `invocation_id` and hands it to the waiting caller (blocking).
    pub fn resolve_action(
        &self,
        run_id: &str,
        invocation_id: &str,
        outcome: Outcome,
        by: &str,
    ) -> Result<Value, ToolError> {
        let (tool, from) = self.claim(run_id, invocation_id)?;
        // A result posted to a daemon that did not dispatch the call: its request's version from its seq.
        let from = from.unwrap_or_else(|seq| version_at(self.engine.store(), seq));
        let e = outcome.event(run_id, invocation_id, &tool, by, "", self.engine.clock().now_ms());
        let appended = run_stream(run_id).and_then(|stream| {
            Ok(append_once(self.engine.store(), &stream, &[(invocation_id, from)], |found| {
                if found.is_empty() {
                    vec![Event::BrowserActionResulted(e.clone())]
                } else {
                    Vec::new()
                }
            })?)
        });
        let mut g = self.actions.pending.lock().expect("actions lock");
        let once = match appended {
            Ok(once) => once,
            Err(err) => {
                if let Some(p) = g.get_mut(invocation_id) {
                    p.claimed = false;
                }
                return Err(err);
            }
        };
        let waiter = g.remove(invocation_id).and_then(|p| p.waiter);
        if let Some(prev) = once.existing.get(invocation_id) {
            // Recorded elsewhere (another daemon) first: that one is the result.
            if let Some(w) = waiter {
                let _ = w.send(result_json(prev));
            }
            let status = if prev.ok { "ok" } else { "error" };
            return Err(ToolError::InvocationResolved { invocation_id: invocation_id.into(), status: status.into() });
        }
        let v = result_json(&e);
        if let Some(w) = waiter {
            let _ = w.send(v.clone());
        }
        Ok(v)
    }

    /// On a shared log: resolves the invocations left waiting by daemons that are gone (this one's
    /// previous process included), those of runs no other live daemon holds.
    pub fn resolve_browser_orphans(&self) -> Result<(), StoreError> {
        if !self.engine.leases().shared() {
            return Ok(());
        }
        resolve_orphans(self.engine.store(), &self.browser, self.engine.clock().now_ms(), |runs| {
            self.engine.leases().free(runs)
        })
    }

    /// Hands a result another daemon recorded to the caller waiting here, if one is (shared log;
    /// the signal follower calls it for every `BrowserActionResulted`). An invocation this process
    /// is recording itself is left to that recording. Returns whether a caller got it.
    pub(crate) fn deliver_action_result(&self, e: &BrowserActionResulted) -> bool {
        let mut g = self.actions.pending.lock().expect("actions lock");
        match g.get(&e.invocation_id) {
            Some(p) if p.run_id == e.run_id && !p.claimed && p.waiter.is_some() => {}
            _ => return false,
        }
        // Dropping the entry drops its timer's stop sender, which ends the timer.
        let Some(w) = g.remove(&e.invocation_id).and_then(|p| p.waiter) else { return false };
        w.send(result_json(e)).is_ok()
    }

    /// The tool an invocation of `run_id` called (for checking a posted result).
    pub fn action_tool(&self, run_id: &str, invocation_id: &str) -> Result<String, ToolError> {
        let found = self.browser.read(|r| od_projections::browser::invocation(r, invocation_id))?;
        match found {
            Some(i) if i.run_id == run_id => Ok(i.tool),
            _ => Err(ToolError::InvocationNotFound { run_id: run_id.into(), invocation_id: invocation_id.into() }),
        }
    }

    /// A run's browser actions, oldest first (by request seq), one page.
    pub fn run_actions(&self, run_id: &str, req: &PageReq) -> Result<Page<Value>, ToolError> {
        self.engine.run_info(run_id)?;
        let items = self
            .browser
            .read(|r| od_projections::browser::run_invocations(r, run_id, req.after.as_deref(), req.limit + 1))?;
        Ok(crate::page::page_keyed("actions", req, items, false).map(|i| super::wire::invocation_json(&i)))
    }
}

/// Calls a browser tool in a run: dispatches it and waits for its one result (the browser's, a
/// `TIMEOUT` on the engine's clock, or `SUPERSEDED`). Returns the `BrowserActionResult`. When the
/// daemon stops first the caller gets `Closed` (the next start resolves the invocation).
pub async fn call(
    tools: Arc<Tools>,
    run_id: String,
    name: String,
    input: Value,
    timeout_ms: Option<i64>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<Value, ToolError> {
    let t = tools.clone();
    let (rid, n) = (run_id.clone(), name.clone());
    let d = tokio::task::spawn_blocking(move || t.dispatch(&rid, &n, &input, timeout_ms))
        .await
        .map_err(|e| ToolError::invalid("call", e.to_string()))??;
    let (invocation_id, timeout_at, rx, stop) = match d {
        Dispatched::Refused(v) => return Ok(v),
        Dispatched::Waiting { invocation_id, timeout_at, rx, stop } => (invocation_id, timeout_at, rx, stop),
    };
    spawn_timer(Arc::downgrade(&tools), run_id, invocation_id, timeout_at, stop);
    tokio::select! {
        r = rx => r.map_err(|_| ToolError::Store(StoreError::Closed)),
        _ = shutdown.wait_for(|stopping| *stopping) => Err(ToolError::Store(StoreError::Closed)),
    }
}

fn spawn_timer(
    tools: std::sync::Weak<Tools>,
    run_id: String,
    invocation_id: String,
    at: i64,
    stop: oneshot::Receiver<()>,
) {
    let Some(t) = tools.upgrade() else { return };
    let sleep = t.engine.clock().sleep_until(at);
    drop(t);
    tokio::spawn(async move {
        tokio::select! {
            _ = sleep => {}
            _ = stop => return,
        }
        let Some(t) = tools.upgrade() else { return };
        let out = Outcome::Err {
            code: "TIMEOUT".into(),
            message: "no result arrived before the deadline".into(),
            details: Value::Null,
        };
        let _ = tokio::task::spawn_blocking(move || t.resolve_action(&run_id, &invocation_id, out, "timeout")).await;
    });
}
