//! GenUI commands: raising a declared surface for a run (reusing a remembered answer of its tier
//! when one is still valid: `genui_memory.rs`, with revokes and prefills), requests from the agent
//! (checked against the snapshot's declaration and trigger, refusals recorded), answers (validated
//! against the surface's schema) and timeouts (`onTimeout`). The executor waits; this file records.

use od_events::genui::{SurfaceRefused, SurfaceRequested, SurfaceResponded, SurfaceTimedOut};
use od_events::runs::RunCreated;
use od_events::vocab::{OnTimeout, Persist, SurfaceKind};
use od_events::{Event, StreamId};
use od_projections::workspace_read as wr;
use od_projections::{RunInfo, SurfaceRow};
use serde_json::{json, Value};

use super::errors::WorkError;
use super::Engine;
use crate::limits::{MAX_TIMEOUT_MS, MAX_WORKING_SET_READ};
use crate::page::{page_keyed, Page, PageReq};
use crate::plugins::canonical::canonical_json;
use crate::store::{Append, Fence};

/// Default wait for an answer (spec: 5 minutes).
pub const DEFAULT_TIMEOUT_MS: i64 = 300_000;

/// blake3 of the canonical JSON of a surface's `schema`, or of its `options` when it has no schema
/// ("" when it has neither).
pub fn schema_digest(spec: &Value) -> String {
    match (spec.get("schema"), spec.get("options")) {
        (Some(s), _) if !s.is_null() => blake3::hash(canonical_json(s).as_bytes()).to_hex().to_string(),
        // A choice without a schema is its options: other options are another question.
        (_, Some(o)) if !o.is_null() => {
            blake3::hash(canonical_json(&json!({ "options": o })).as_bytes()).to_hex().to_string()
        }
        _ => String::new(),
    }
}

/// Checks an answer against the surface: its schema if it has one, else what its kind implies.
/// `null` is a skip and always allowed.
pub fn check_answer(spec: &Value, value: &Value) -> Result<(), WorkError> {
    let id = spec["id"].as_str().unwrap_or("").to_string();
    if value.is_null() {
        return Ok(());
    }
    let violations = match spec.get("schema").filter(|s| !s.is_null()) {
        Some(schema) => crate::plugins::validator::validate_value(schema, value),
        None => match (spec["kind"].as_str(), value) {
            (Some("confirmation"), Value::Bool(_)) => vec![],
            (Some("confirmation"), v) if v.get("confirmed").is_some_and(Value::is_boolean) => vec![],
            (Some("confirmation"), _) => vec!["/: a confirmation takes true/false (or {\"confirmed\": bool})".into()],
            (Some("form" | "oauth-prompt"), Value::Object(_)) => vec![],
            (Some("form" | "oauth-prompt"), _) => vec!["/: expected an object".into()],
            (Some("choice"), v) => super::choice_options::not_an_option(spec, v).into_iter().collect(),
            _ => vec![],
        },
    };
    if violations.is_empty() {
        Ok(())
    } else {
        Err(WorkError::InvalidAnswer { surface_id: id, violations })
    }
}

/// Who may answer through the API: `user`, `agent` or `auto`.
fn check_responder(by: &str) -> Result<(), WorkError> {
    match by {
        "user" | "agent" | "auto" => Ok(()),
        _ => Err(WorkError::invalid("respondedBy", format!("{by:?} is not user, agent or auto"))),
    }
}

fn run_stream(id: &str) -> Result<StreamId, WorkError> {
    StreamId::typed("run", id).map_err(|e| WorkError::invalid("runId", e.to_string()))
}

pub(super) fn project_stream(id: &str) -> Result<StreamId, WorkError> {
    StreamId::typed("project", id).map_err(|e| WorkError::invalid("projectId", e.to_string()))
}

/// What raising a surface did.
pub enum Raised {
    /// A remembered answer was reused (`respondedBy: cache`); nothing waits.
    Cached,
    /// A request was recorded; the run waits for it.
    Requested,
}

/// Why a remembered answer cannot answer a surface whose schema digest is now `digest`:
/// `schema-drift` (the schema changed), `expired`, or None (it can).
pub(super) fn stale_reason(row: &SurfaceRow, digest: &str, now: i64) -> Option<&'static str> {
    if !row.schema_digest.is_empty() && !digest.is_empty() && row.schema_digest != digest {
        return Some("schema-drift");
    }
    (row.expires_at != 0 && row.expires_at <= now).then_some("expired")
}

impl Engine {
    /// The surfaces a snapshot declares (declared plus auto-derived).
    pub fn snapshot_surfaces(&self, snapshot_id: &str) -> Result<Vec<Value>, WorkError> {
        Ok(self.snapshot(snapshot_id)?["genuiSurfaces"].as_array().cloned().unwrap_or_default())
    }

    pub(super) fn record(&self, stream: StreamId, events: Vec<Event>) -> Result<(), WorkError> {
        self.record_fenced(stream, events, None)
    }

    /// Records `events`, fenced by an executor's lease when it is the executor recording them.
    fn record_fenced(&self, stream: StreamId, events: Vec<Event>, fence: Option<Fence>) -> Result<(), WorkError> {
        self.store.append(Append::new(stream, events).fenced(fence))?;
        self.genui_changed.notify_waiters();
        Ok(())
    }

    /// Raises `spec` in `run` at `stage_id`: reuses a valid remembered answer of its tier, else
    /// records a request (the run is then `awaiting-input`).
    pub fn raise_surface(&self, run: &RunInfo, spec: &Value, stage_id: &str, by: &str) -> Result<Raised, WorkError> {
        self.raise_surface_fenced(run, spec, stage_id, by, None)
    }

    /// [`Self::raise_surface`] by the run's executor, fenced by its lease.
    pub fn raise_surface_fenced(
        &self,
        run: &RunInfo,
        spec: &Value,
        stage_id: &str,
        by: &str,
        fence: Option<Fence>,
    ) -> Result<Raised, WorkError> {
        let surface_id = spec["id"].as_str().unwrap_or("");
        // The executor never asks a surface its run already answered (a resumed stage, a run taken
        // over): the answer stands.
        if fence.is_some() && self.answered_in_run(&run.run_id, surface_id)? {
            return Ok(Raised::Cached);
        }
        // A fork answers with the answer it was given, once.
        let preset = self.fork_answer(&run.run_id, surface_id)?;
        let (events, raised) = self.surface_events(run, spec, stage_id, by, preset.as_ref())?;
        self.record_fenced(run_stream(&run.run_id)?, events, fence)?;
        Ok(raised)
    }

    /// Whether `run`'s own stream records an answer (or a timeout) of `surface_id`.
    fn answered_in_run(&self, run_id: &str, surface_id: &str) -> Result<bool, WorkError> {
        Ok(self.run_events(run_id, 0)?.iter().any(|s| match &s.event {
            Event::SurfaceResponded(e) => e.surface_id == surface_id,
            Event::SurfaceTimedOut(e) => e.surface_id == surface_id,
            _ => false,
        }))
    }

    /// The events raising `spec` in `run` records (writing nothing): `preset`'s answer, else a
    /// valid remembered answer of the surface's tier, else a request.
    pub(crate) fn surface_events(
        &self,
        run: &RunInfo,
        spec: &Value,
        stage_id: &str,
        by: &str,
        preset: Option<&Value>,
    ) -> Result<(Vec<Event>, Raised), WorkError> {
        let head = Head::of(spec);
        let now = self.clock.now_ms();
        let mut events = Vec::new();
        let given = match self.given_answer(run, spec, preset)? {
            Some(a) => Some(a),
            None => self.remembered_answer(run, &head, now, &mut events)?,
        };
        // An answer given without asking: the fork's, a connection's, or a remembered one.
        if let Some((value_json, by, expires_at)) = given {
            let digest = head.digest.clone();
            let e = head.answered(run, digest, Answer { value_json, by, at: now, expires_at });
            return Ok((vec![Event::SurfaceResponded(e)], Raised::Cached));
        }
        // A plugin's number: bounded, so the deadline cannot overflow.
        let timeout =
            spec["timeout"].as_i64().filter(|t| *t > 0).unwrap_or(DEFAULT_TIMEOUT_MS).min(MAX_TIMEOUT_MS as i64);
        events.push(Event::SurfaceRequested(SurfaceRequested {
            run_id: run.run_id.clone(),
            project_id: run.project_id.clone(),
            conversation_id: run.conversation_id.clone(),
            snapshot_id: run.snapshot_id.clone(),
            surface_id: head.surface_id,
            kind: head.kind,
            persist: head.persist,
            stage_id: stage_id.into(),
            spec_json: spec.to_string(),
            schema_digest: head.digest,
            requested_at: now,
            timeout_at: now.saturating_add(timeout),
            on_timeout: spec["onTimeout"].as_str().unwrap_or("abort").into(),
            requested_by: by.into(),
        }));
        Ok((events, Raised::Requested))
    }

    /// An answer `spec` needs not ask for (value JSON, by whom, expiry): `preset` (a fork's), a
    /// connector's authorization when its account is connected, an MCP server's when the run's
    /// plugin authorized it.
    fn given_answer(
        &self,
        run: &RunInfo,
        spec: &Value,
        preset: Option<&Value>,
    ) -> Result<Option<(String, &'static str, i64)>, WorkError> {
        if let Some(value) = preset {
            return Ok(Some((value.to_string(), "fork", 0)));
        }
        if let Some(cid) = crate::connectors::surface_connector(spec) {
            if let Some(cred) = self.connectors.credentials.get(cid) {
                let v = json!({ "connectorId": cid, "accountLabel": cred.account_label, "status": "connected" });
                return Ok(Some((v.to_string(), "connector", 0)));
            }
        }
        if let Some(server) = super::mcp_oauth::surface_mcp_server(spec) {
            let plugin = if run.snapshot_id.is_empty() {
                Value::Null
            } else {
                self.snapshot(&run.snapshot_id)?["pluginId"].clone()
            };
            if plugin.as_str().is_some_and(|p| self.mcp_authorized(p, server)) {
                let v = json!({ "mcpServerId": server, "status": "connected" });
                return Ok(Some((v.to_string(), "mcp", 0)));
            }
        }
        Ok(None)
    }

    /// A surface request from the agent (`od ui request`, protocol `genui_request`): allowed only
    /// for a surface the snapshot declares, of its kind, from a stage/atom its trigger allows;
    /// `options` are a choice's options the agent proposes ([`super::choice_options`]). A refusal
    /// is recorded and returned.
    pub fn request_surface(
        &self,
        run_id: &str,
        surface_id: &str,
        kind: Option<&str>,
        atom: Option<&str>,
        options: Option<&Value>,
    ) -> Result<Raised, WorkError> {
        let run = self.run_info(run_id)?;
        if run.is_terminal() {
            return Err(WorkError::RunState { run_id: run_id.into(), status: run.status, message: "it ended".into() });
        }
        let snap = self.snapshot(&run.snapshot_id)?;
        let spec = snap["genuiSurfaces"].as_array().into_iter().flatten().find(|s| s["id"] == surface_id).cloned();
        let stage_atoms: Vec<String> = snap["pipeline"]["stages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["id"] == run.stage_id.as_str())
            .and_then(|s| s["atoms"].as_array())
            .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
            .unwrap_or_default();
        let mut reason = match &spec {
            None => Some(format!("the snapshot declares no surface {surface_id:?}")),
            Some(s) if kind.is_some_and(|k| Some(k) != s["kind"].as_str()) => {
                Some(format!("{surface_id} is a {}, not a {}", s["kind"].as_str().unwrap_or("?"), kind.unwrap_or("")))
            }
            Some(s) => {
                let t = &s["trigger"];
                match (t["stageId"].as_str(), t["atom"].as_str()) {
                    (Some(st), _) if st != run.stage_id => {
                        Some(format!("its trigger allows stage {st:?}, the run is at {:?}", run.stage_id))
                    }
                    (_, Some(a)) if atom.is_some_and(|x| x != a) || !stage_atoms.iter().any(|x| x == a) => {
                        Some(format!("its trigger allows atom {a:?}, which is not the requesting atom of this stage"))
                    }
                    _ => None,
                }
            }
        };
        // The agent's options for a choice (the direction picker's directions) go into the
        // surface it raises; options that do not fit are refused like an undeclared surface.
        let spec = match (&reason, spec) {
            (None, Some(s)) => match super::choice_options::with_options(&s, options) {
                Ok(s) => Some(s),
                Err(why) => {
                    reason = Some(why);
                    None
                }
            },
            (_, s) => s,
        };
        if let Some(reason) = reason {
            let e = SurfaceRefused {
                run_id: run_id.into(),
                surface_id: surface_id.into(),
                kind: kind.unwrap_or("").into(),
                stage_id: run.stage_id.clone(),
                atom: atom.unwrap_or("").into(),
                reason: reason.clone(),
            };
            self.record(run_stream(run_id)?, vec![Event::SurfaceRefused(e)])?;
            return Err(WorkError::SurfaceRefused { surface_id: surface_id.into(), reason });
        }
        let waiting = self.pending_surfaces(run_id)?.iter().any(|r| r.surface_id == surface_id);
        if waiting {
            return Ok(Raised::Requested);
        }
        self.raise_surface(&run, &spec.unwrap_or_default(), &run.stage_id.clone(), "agent")
    }

    /// Answers a waiting surface. The value is checked against the surface first; `null` is no
    /// answer and is refused at the surface's root (a skip is [`skip_surface`](Self::skip_surface)).
    pub fn respond_surface(
        &self,
        run_id: &str,
        surface_id: &str,
        value: Value,
        by: &str,
    ) -> Result<SurfaceRow, WorkError> {
        check_responder(by)?;
        if value.is_null() {
            return Err(WorkError::InvalidAnswer {
                surface_id: surface_id.into(),
                violations: vec!["/: no answer was given (pick one; to pass on it, skip the surface)".into()],
            });
        }
        self.respond_surface_as(run_id, surface_id, value, by)
    }

    /// Passes on a waiting surface on purpose (`od ui respond --skip`, a card's "Not now"): it is
    /// answered `null`, which the run reads as no answer.
    pub fn skip_surface(&self, run_id: &str, surface_id: &str, by: &str) -> Result<SurfaceRow, WorkError> {
        check_responder(by)?;
        self.respond_surface_as(run_id, surface_id, Value::Null, by)
    }

    /// [`respond_surface`](Self::respond_surface) by anyone, `by` unchecked (od's own answers:
    /// `oauth` when a connector's authorization completes).
    pub(crate) fn respond_surface_as(
        &self,
        run_id: &str,
        surface_id: &str,
        value: Value,
        by: &str,
    ) -> Result<SurfaceRow, WorkError> {
        // On a shared log, what other daemons committed (the request itself) is read first.
        self.store.sync_head()?;
        self.run_info(run_id)?;
        let row = self
            .pending_surfaces(run_id)?
            .into_iter()
            .rfind(|r| r.surface_id == surface_id)
            .ok_or_else(|| WorkError::SurfaceNotPending { run_id: run_id.into(), surface_id: surface_id.into() })?;
        let spec: Value = serde_json::from_str(&row.spec_json).unwrap_or(Value::Null);
        check_answer(&spec, &value)?;
        let now = self.clock.now_ms();
        let mut expires_at = spec["expiresInMs"].as_i64().filter(|x| *x > 0).map_or(0, |x| now.saturating_add(x));
        // `OD_GENUI_PROJECT_TTL_DAYS`: project-remembered answers expire (hosted default); the
        // earlier of the two deadlines holds.
        if row.persist == Persist::Project {
            if let Some(days) = self.config.genui_project_ttl_days {
                let ttl = now.saturating_add(days.saturating_mul(86_400_000));
                expires_at = if expires_at == 0 { ttl } else { expires_at.min(ttl) };
            }
        }
        let e = answered_row(&row, Answer { value_json: value.to_string(), by, at: now, expires_at });
        self.record(run_stream(run_id)?, vec![Event::SurfaceResponded(e)])?;
        self.workspace
            .read(|w| wr::surface(w, &row.id))?
            .ok_or_else(|| WorkError::SurfaceNotPending { run_id: run_id.into(), surface_id: surface_id.into() })
    }

    /// Applies a pending surface's `onTimeout` (the run's executor, fenced by its lease); returns
    /// the resolution (`abort`, `default`, `skip`).
    pub fn time_out_surface(&self, row: &SurfaceRow, fence: Option<Fence>) -> Result<String, WorkError> {
        let spec: Value = serde_json::from_str(&row.spec_json).unwrap_or(Value::Null);
        let resolution = match OnTimeout::from(row.on_timeout.as_str()) {
            OnTimeout::Default => OnTimeout::Default,
            OnTimeout::Skip => OnTimeout::Skip,
            OnTimeout::Abort | OnTimeout::Other(_) => OnTimeout::Abort,
        };
        let now = self.clock.now_ms();
        let mut events = vec![Event::SurfaceTimedOut(SurfaceTimedOut {
            run_id: row.run_id.clone(),
            surface_id: row.surface_id.clone(),
            resolution: resolution.clone(),
            timed_out_at: now,
        })];
        if resolution == OnTimeout::Default {
            let value_json = spec.get("default").cloned().unwrap_or(Value::Null).to_string();
            events.push(Event::SurfaceResponded(answered_row(
                row,
                Answer { value_json, by: "timeout", at: now, expires_at: 0 },
            )));
        }
        // One append, in order: the row is marked timed out, then the default lands on it.
        self.record_fenced(run_stream(&row.run_id)?, events, fence)?;
        Ok(resolution.to_string())
    }

    /// The surfaces of a run waiting for an answer, oldest first.
    pub fn pending_surfaces(&self, run_id: &str) -> Result<Vec<SurfaceRow>, WorkError> {
        Ok(self.workspace.read(|w| od_projections::genui::pending(w, run_id, MAX_WORKING_SET_READ))?)
    }

    /// The newest row of `surface_id` in a run.
    pub fn latest_run_surface(&self, run_id: &str, surface_id: &str) -> Result<Option<SurfaceRow>, WorkError> {
        self.run_info(run_id)?;
        Ok(self.workspace.read(|w| {
            wr::run_surfaces(w, run_id, None, true, MAX_WORKING_SET_READ)
                .into_iter()
                .map(|(_, r)| r)
                .find(|r| r.surface_id == surface_id)
        })?)
    }

    /// One page of a run's surface rows, oldest first (by the run's stream version).
    pub fn run_surfaces(&self, run_id: &str, req: &PageReq) -> Result<Page<SurfaceRow>, WorkError> {
        self.run_info(run_id)?;
        let items = self.workspace.read(|w| wr::run_surfaces(w, run_id, req.after.as_deref(), false, req.limit + 1))?;
        Ok(page_keyed("run-genui", req, items, false))
    }

    /// One page of a project's surface rows (remembered answers included), oldest first (by the
    /// seq that created each).
    pub fn project_surfaces(&self, project_id: &str, req: &PageReq) -> Result<Page<SurfaceRow>, WorkError> {
        self.project(project_id)?;
        let items =
            self.workspace.read(|w| wr::project_surfaces(w, project_id, req.after.as_deref(), false, req.limit + 1))?;
        Ok(page_keyed("project-genui", req, items, false))
    }
}

/// The wire shape of a surface row (the reference's camelCase SurfaceRow).
pub fn row_json(r: &SurfaceRow) -> Value {
    let value =
        r.value_json.as_deref().map(|v| serde_json::from_str::<Value>(v).unwrap_or(Value::Null)).unwrap_or(Value::Null);
    json!({
        "id": r.id, "projectId": r.project_id, "conversationId": r.conversation_id, "runId": r.run_id,
        "pluginSnapshotId": r.plugin_snapshot_id, "surfaceId": r.surface_id, "kind": r.kind, "persist": r.persist,
        "schemaDigest": r.schema_digest, "value": value, "status": r.status, "respondedBy": r.responded_by,
        "requestedAt": r.requested_at, "respondedAt": r.responded_at,
        "expiresAt": if r.expires_at == 0 { Value::Null } else { json!(r.expires_at) },
        "timeoutAt": if r.timeout_at == 0 { Value::Null } else { json!(r.timeout_at) }, "stageId": r.stage_id,
    })
}

/// The ids a surface's events carry of its run.
pub(super) struct RunIds<'a> {
    run_id: &'a str,
    project_id: &'a str,
    conversation_id: &'a str,
    snapshot_id: &'a str,
}

impl<'a> From<&'a RunInfo> for RunIds<'a> {
    fn from(r: &'a RunInfo) -> Self {
        RunIds {
            run_id: &r.run_id,
            project_id: &r.project_id,
            conversation_id: &r.conversation_id,
            snapshot_id: &r.snapshot_id,
        }
    }
}

impl<'a> From<&'a RunCreated> for RunIds<'a> {
    fn from(r: &'a RunCreated) -> Self {
        RunIds {
            run_id: &r.run_id,
            project_id: &r.project_id,
            conversation_id: &r.conversation_id,
            snapshot_id: &r.snapshot_id,
        }
    }
}

/// What a `surface_responded` says beyond the surface and its run.
pub(super) struct Answer<'a> {
    pub(super) value_json: String,
    pub(super) by: &'a str,
    pub(super) at: i64,
    pub(super) expires_at: i64,
}

/// An answer to the surface a row holds (its ids from the row).
fn answered_row(row: &SurfaceRow, answer: Answer) -> SurfaceResponded {
    SurfaceResponded {
        run_id: row.run_id.clone(),
        project_id: row.project_id.clone(),
        conversation_id: row.conversation_id.clone(),
        snapshot_id: row.plugin_snapshot_id.clone(),
        surface_id: row.surface_id.clone(),
        kind: row.kind.clone(),
        persist: row.persist.clone(),
        schema_digest: row.schema_digest.clone(),
        value_json: answer.value_json,
        responded_by: answer.by.into(),
        responded_at: answer.at,
        expires_at: answer.expires_at,
    }
}

/// What every event about a surface repeats of its spec.
pub(super) struct Head {
    pub(super) surface_id: String,
    pub(super) persist: Persist,
    pub(super) kind: SurfaceKind,
    pub(super) digest: String,
}

impl Head {
    /// An answer to this surface of run `run` (a `RunInfo` or its `RunCreated`), given without
    /// asking it.
    pub(super) fn answered<'r>(
        self,
        run: impl Into<RunIds<'r>>,
        schema_digest: String,
        answer: Answer,
    ) -> SurfaceResponded {
        let run = run.into();
        SurfaceResponded {
            run_id: run.run_id.into(),
            project_id: run.project_id.into(),
            conversation_id: run.conversation_id.into(),
            snapshot_id: run.snapshot_id.into(),
            surface_id: self.surface_id,
            kind: self.kind,
            persist: self.persist,
            schema_digest,
            value_json: answer.value_json,
            responded_by: answer.by.into(),
            responded_at: answer.at,
            expires_at: answer.expires_at,
        }
    }

    pub(super) fn of(spec: &Value) -> Self {
        Head {
            surface_id: spec["id"].as_str().unwrap_or("").to_string(),
            persist: Persist::from(spec["persist"].as_str().unwrap_or("run")),
            kind: SurfaceKind::from(spec["kind"].as_str().unwrap_or("confirmation")),
            digest: schema_digest(spec),
        }
    }
}
