//! Run commands: create (resolving the snapshot: explicit id, fresh apply, the conversation's, the
//! project's pinned one, else the bundled `od-default` scenario), read, list, signals and responses
//! from outside the executor, devloop history, replay verification, and ending runs a previous
//! process left in flight. The executor itself is `crate::runner`.

use od_events::runs::{RunCreated, RunEnded, RunResponded, SignalRecorded};
use od_events::vocab::{FailureCategory, RunStatus};
use od_events::{Event, Stored, StreamId};
use od_projections::workspace_read::{self as wr, RunFilter};
use od_projections::RunInfo;
use serde_json::{json, Map, Value};

use super::apply::ApplyRequest;
use super::errors::WorkError;
use super::projects::{check_id, exists_or, NewProject, ProjectPlan};
use super::Engine;
use crate::limits::{MAX_AGENT_TIMEOUT_MS, MAX_RUN_LIST_EXAMINED, MAX_WORKING_SET_READ};
use crate::page::{page_keyed, Page, PageReq};
use crate::runner::prompt;
use crate::store::{decode_frame, Append, Expected};

/// The default scenario of runs that name no plugin and whose project pinned none.
pub const DEFAULT_SCENARIO: &str = "od-default";

/// What a run is started with (`POST /api/runs`).
#[derive(Debug, Default, Clone)]
pub struct NewRun {
    pub project_id: Option<String>,
    pub conversation_id: Option<String>,
    pub message: String,
    pub plugin_id: Option<String>,
    pub apply: ApplyRequest,
    pub snapshot_id: Option<String>,
    pub client_request_id: Option<String>,
    /// Agent options: `agent` (`dry-run` | `exec`), `command`, `protocol`, `timeoutMs`, `dryRun`, …
    pub agent: Map<String, Value>,
    /// The creator's exec right (`gate.rs`), recorded with the run for the commands it runs later.
    pub exec: super::gate::ExecRight,
}

/// What a create did.
pub struct Started {
    pub run: RunInfo,
    /// True when `clientRequestId` named an existing run (nothing was written).
    pub reused: bool,
}

fn stream(id: &str) -> Result<StreamId, WorkError> {
    StreamId::typed("run", id).map_err(|e| WorkError::invalid("runId", e.to_string()))
}

/// The project a plan will create, as the projection will show it (for the run's own checks).
fn planned_project(plan: &ProjectPlan) -> od_projections::Project {
    od_projections::Project {
        id: plan.id.clone(),
        name: String::new(),
        dir: String::new(),
        snapshot_id: plan.snapshot_id.clone().unwrap_or_default(),
        metadata_json: String::new(),
        imported_from: String::new(),
        created_at: 0,
        seq: 0,
        conversations: vec![od_projections::Conversation {
            id: plan.conversation_id.clone(),
            title: "main".into(),
            snapshot_id: String::new(),
            created_at: 0,
        }],
        run_count: 0,
    }
}

/// Checks and completes the agent options: the agent chosen by the one rule (`agents.rs`), with
/// its `agentSource`; a catalog agent's options checked against the catalog (`data_dir`'s files
/// included) and its detection (`crate::agents::configure`).
pub(crate) fn agent_config(
    mut a: Map<String, Value>,
    data_dir: &std::path::Path,
    probe: &crate::agents::detect::ProbeEnv,
    clock: &dyn crate::clock::Clock,
) -> Result<Value, WorkError> {
    // Only the engine records a right (`with_exec_right`).
    a.remove(super::gate::MAY_EXEC_KEY);
    let env = super::agents::AgentEnv::from_env();
    let catalog = crate::agents::catalog::Catalog::load(data_dir);
    let ids: Vec<String> = match &catalog {
        Ok(c) => c.agents.iter().map(|d| d.id.clone()).collect(),
        Err(_) => crate::agents::catalog::Catalog::built_in().agents.iter().map(|d| d.id.clone()).collect(),
    };
    super::agents::choose(&mut a, &env, &ids)?;
    let kind = a.get("agent").and_then(Value::as_str).unwrap_or("dry-run").to_string();
    if ["dry-run", "exec"].contains(&kind.as_str()) {
        // od's own agents have no permission mode or reasoning effort to map: asking is a mistake.
        for field in [crate::agents::PERMISSION_KEY, "reasoning"] {
            if a.get(field).is_some_and(|v| !v.is_null()) {
                return Err(WorkError::invalid(
                    field,
                    format!("only a catalog agent takes it (this run's agent is {kind})"),
                ));
            }
        }
    }
    match kind.as_str() {
        "dry-run" => {}
        "exec" => {
            if !a.contains_key("command") {
                if let Some(cmd) = env.od_agent_cmd.clone() {
                    a.insert("command".into(), json!(cmd));
                }
            }
            match a.get("command") {
                Some(Value::String(s)) if !s.trim().is_empty() => {}
                Some(Value::Array(v)) if !v.is_empty() && v.iter().all(Value::is_string) => {}
                _ => {
                    return Err(WorkError::invalid(
                        "agentCommand",
                        "the exec agent needs a command (agentCommand, or OD_AGENT_CMD)",
                    ))
                }
            }
            let p = a.get("protocol").and_then(Value::as_str).unwrap_or("auto");
            if crate::runner::dialects::Protocol::parse(p).is_none() {
                return Err(WorkError::invalid(
                    "agentProtocol",
                    format!("{p:?} is not {}", crate::runner::dialects::PROTOCOL_NAMES),
                ));
            }
        }
        "acp" => {
            // An ACP agent names its own command line (the gate judges it like exec's): an argv
            // array, or a string run by `sh -c` (`od run start --agent-cmd "qwen --acp"`).
            match a.get("command") {
                Some(Value::Array(v))
                    if !v.is_empty() && v.iter().all(|x| x.as_str().is_some_and(|s| !s.is_empty())) => {}
                Some(Value::String(s)) if !s.trim().is_empty() => {}
                _ => {
                    return Err(WorkError::invalid(
                        "agentCommand",
                        "the acp agent needs its command line (an array of strings, or a string run by sh -c)",
                    ))
                }
            }
            crate::runner::acp::AcpOptions::from_config(&Value::Object(a.clone()))
                .map_err(|(field, e)| WorkError::invalid(field, e))?;
        }
        other if ids.iter().any(|id| id == other) => {
            let catalog = catalog.map_err(crate::agents::catalog_error)?;
            let def = catalog.get(other).expect("listed above");
            let d = crate::agents::detect_one(def, probe, clock);
            crate::agents::configure(def, &mut a, &d)?;
        }
        other => {
            return Err(WorkError::invalid(
                "agent",
                format!("{other:?} is not one of {}", super::agents::runnable(&ids).join(", ")),
            ))
        }
    }
    if let Some(script) = a.get("dryRun") {
        crate::runner::dry_run::check_script(script).map_err(|e| WorkError::invalid("dryRun", e))?;
    }
    // Bounded so that `Instant + timeout` cannot overflow (it panics); named as the request names them.
    for (k, field) in [("timeoutMs", "agentTimeoutMs"), ("idleTimeoutMs", "agentIdleTimeoutMs")] {
        if a.get(k).is_some_and(|v| v.as_u64().is_none_or(|n| n == 0 || n > MAX_AGENT_TIMEOUT_MS)) {
            return Err(WorkError::invalid(
                field,
                format!("must be a positive integer of milliseconds, at most {MAX_AGENT_TIMEOUT_MS}"),
            ));
        }
    }
    if let Some(v) = a.get("promptBudgetTokens") {
        crate::runner::prompt::stack::check_budget(v).map_err(|e| WorkError::invalid("promptBudgetTokens", e))?;
    }
    if let Err((key, e)) = crate::runner::output::OutputLimits::default().with_config(&Value::Object(a.clone())) {
        let field = if key == "outputMaxBytes" { "agentOutputMaxBytes" } else { "agentOutputMaxEvents" };
        return Err(WorkError::invalid(field, e));
    }
    a.insert("agent".into(), json!(kind));
    Ok(Value::Object(a))
}

/// The agent options with the creator's exec right recorded (`gate.rs`; absent: denied), replacing
/// whatever an inherited or imported record said.
pub(crate) fn with_exec_right(mut config: Value, right: super::gate::ExecRight) -> Value {
    if let Some(o) = config.as_object_mut() {
        o.remove(super::gate::MAY_EXEC_KEY);
        if right.granted() {
            o.insert(super::gate::MAY_EXEC_KEY.into(), json!(true));
        }
    }
    config
}

impl Engine {
    /// One run's summary.
    pub fn run_info(&self, id: &str) -> Result<RunInfo, WorkError> {
        let run = self.workspace.read(|w| wr::run(w, id))?.ok_or_else(|| WorkError::RunNotFound(id.into()))?;
        self.with_head(run)
    }

    /// The run with `last_version` read from its stream head (its record keeps only its
    /// `RunCreated`'s, so the events that change nothing else write nothing).
    fn with_head(&self, mut run: RunInfo) -> Result<RunInfo, WorkError> {
        if let Some(v) = self.store.stream_version(stream(&run.run_id)?.as_str())? {
            run.last_version = v;
        }
        Ok(run)
    }

    /// One page of runs, newest first (by the seq of their `RunCreated`, so runs created while a
    /// caller pages land before its cursor and never shift a later page), read from the index of
    /// the filter (`status` may be `active`: not ended). A page narrowed by a second filter may
    /// come back short, with a `nextCursor`, after [`MAX_RUN_LIST_EXAMINED`] index entries.
    pub fn runs_page(&self, filter: &RunFilter, req: &PageReq) -> Result<Page<RunInfo>, WorkError> {
        let (items, stopped) =
            self.workspace.read(|w| wr::runs(w, filter, req.after.as_deref(), req.limit + 1, MAX_RUN_LIST_EXAMINED))?;
        let items = items.into_iter().map(|(k, r)| Ok((k, self.with_head(r)?))).collect::<Result<_, WorkError>>()?;
        let mut page = page_keyed("runs", req, items, true);
        if let (None, Some(at)) = (&page.next_cursor, stopped) {
            // The examined bound stopped the read: the next page resumes where it stopped.
            page.next_cursor = Some(crate::page::encode_cursor("runs", &at));
        }
        Ok(page)
    }

    /// The runs not ended (runs in flight: the working set).
    pub fn active_runs(&self) -> Result<Vec<RunInfo>, WorkError> {
        let runs = self.workspace.read(|w| wr::active_runs(w, MAX_WORKING_SET_READ))?;
        runs.into_iter().map(|r| self.with_head(r)).collect()
    }

    /// The run's events from stream version `from`, decoded.
    pub fn run_events(&self, id: &str, from: u64) -> Result<Vec<Stored>, WorkError> {
        let s = stream(id)?;
        let mut out = Vec::new();
        let mut at = from;
        loop {
            let frames = self.store.read_stream(s.as_str(), at, 4096)?;
            if frames.is_empty() {
                break;
            }
            for f in &frames {
                let st = decode_frame(f.view())?;
                at = st.envelope.version + 1;
                out.push(st);
            }
        }
        Ok(out)
    }

    /// The run's `RunCreated` (message and agent options).
    pub fn run_created(&self, id: &str) -> Result<RunCreated, WorkError> {
        self.run_created_event(id)
    }

    /// Records a new run as `queued` (or returns the run a repeated `clientRequestId` names).
    /// Every check comes first; then the run's events — with a new project's and a fresh
    /// snapshot's — land in one atomic append (all or nothing), then the new project's folder is
    /// made. The caller hands the run to the runner.
    pub fn create_run(&self, req: NewRun) -> Result<Started, WorkError> {
        let crid = req.client_request_id.clone().filter(|c| !c.is_empty());
        if let Some(crid) = crid.as_deref() {
            crate::store::check_ident(crid, crate::limits::MAX_CLIENT_REQUEST_ID_BYTES)
                .map_err(|e| WorkError::invalid("clientRequestId", e.to_string()))?;
            if let Some(run_id) = self.workspace.read(|w| wr::run_by_client_request(w, crid))? {
                return Ok(Started { run: self.run_info(&run_id)?, reused: true });
            }
        }
        let config = with_exec_right(
            agent_config(req.agent.clone(), &self.data_dir, &self.probe_env(), &*self.clock)?,
            req.exec,
        );
        crate::agents::check_bypass(&config, req.exec)?;
        // Validate the plugin side before anything is built (the fresh apply is kept: the snapshot
        // below is built from it, not from a second apply).
        let mut applied = None;
        match req.snapshot_id.as_deref() {
            Some(sid) => {
                self.resolve_snapshot(Some(sid), None, &req.apply, "", "", true)?;
            }
            None => {
                if let Some(pid) = &req.plugin_id {
                    applied = Some(self.apply(pid, &req.apply)?);
                }
            }
        }
        let mut appends = Vec::new();
        let (project, mut new_project) = match req.project_id.as_deref() {
            Some(pid) => {
                check_id("projectId", pid)?;
                (self.project(pid)?, None)
            }
            None => {
                let name = req.plugin_id.clone().unwrap_or_else(|| "run".into());
                let plan = self.plan_project(NewProject { name, ..Default::default() })?;
                (planned_project(&plan), Some(plan))
            }
        };
        let conversation = match req.conversation_id.as_deref() {
            Some(c) => self.conversation_of(&project, c)?,
            None => project
                .conversations
                .first()
                .cloned()
                .ok_or_else(|| WorkError::ConversationNotFound("(none)".into()))?,
        };
        let run_id = self.ids.new_id();
        let explicit = req.snapshot_id.as_deref().or(req.plugin_id.as_ref().map(|_| ""));
        let chosen = match (explicit, applied, req.plugin_id.as_deref()) {
            // No snapshot named, a plugin applied above: its fresh snapshot.
            (Some(_), Some(applied), Some(pid)) if req.snapshot_id.is_none() && !pid.is_empty() => {
                let (id, append) = self.snapshot_append_applied(pid, &req.apply, applied, &project.id, &run_id)?;
                Some(super::projects::SnapshotChoice { id, append: Some(append) })
            }
            (Some(_), _, _) => self.resolve_snapshot(
                req.snapshot_id.as_deref(),
                req.plugin_id.as_deref(),
                &req.apply,
                &project.id,
                &run_id,
                true,
            )?,
            (None, _, _) => None,
        };
        // A project made for a run with a plugin or snapshot pins that snapshot (so the project's
        // next run without one runs it too); its events follow the snapshot's in the append, so
        // the project's reference lands on a recorded snapshot.
        let pin = chosen.as_ref().map(|c| c.id.clone()).unwrap_or_default();
        let (snapshot_id, plugin_id) = match chosen {
            Some(c) => {
                let plugin = match &c.append {
                    // A fresh apply of the plugin named: not in the projection yet.
                    Some(_) => req.plugin_id.clone().unwrap_or_default(),
                    None => self.snapshot_info(&c.id)?.plugin_id,
                };
                appends.extend(c.append.into_iter().flatten());
                (c.id, plugin)
            }
            None if !conversation.snapshot_id.is_empty() || !project.snapshot_id.is_empty() => {
                let sid = match conversation.snapshot_id.is_empty() {
                    true => project.snapshot_id.clone(),
                    false => conversation.snapshot_id.clone(),
                };
                let plugin = self.snapshot_info(&sid)?.plugin_id;
                (sid, plugin)
            }
            None => {
                let (sid, snapshot) =
                    self.snapshot_append(DEFAULT_SCENARIO, &ApplyRequest::default(), &project.id, &run_id)?;
                appends.extend(snapshot);
                (sid, DEFAULT_SCENARIO.to_string())
            }
        };
        if let Some(plan) = new_project.as_mut() {
            for ev in plan.appends.iter_mut().flat_map(|a| a.events.iter_mut()) {
                if let Event::ProjectCreated(p) = ev {
                    p.snapshot_id = pin.clone();
                }
            }
            appends.append(&mut plan.appends);
        }
        // A follow-up (see `conversations.rs` for the rule): planned against the run's snapshot.
        let follow_up = match new_project.is_none()
            && req.plugin_id.is_none()
            && req.snapshot_id.is_none()
            && !req.message.is_empty()
        {
            true => {
                let snap = match self.snapshot(&snapshot_id) {
                    Ok(v) => v,
                    // A fresh default-scenario snapshot, not recorded yet.
                    Err(_) => json!({ "pipeline": self.apply(&plugin_id, &ApplyRequest::default())?["pipeline"] }),
                };
                self.plan_follow_up(&project.id, &conversation.id, &snap, &run_id)?
            }
            false => None,
        };
        let e = RunCreated {
            run_id: run_id.clone(),
            project_id: project.id.clone(),
            conversation_id: conversation.id.clone(),
            client_request_id: crid.clone().unwrap_or_default(),
            snapshot_id,
            plugin_id,
            message: req.message.clone(),
            agent: config["agent"].as_str().unwrap_or("dry-run").into(),
            agent_config_json: config.to_string(),
            created_at: self.clock.now_ms(),
        };
        // The user's message is the conversation's next message; a follow-up's plan lands with it.
        let mut events = Vec::new();
        if !e.message.is_empty() {
            events.push(super::conversations::message(&e, "user", e.message.clone(), e.created_at));
        }
        events.extend(follow_up.map(Event::FollowUpPlanned));
        events.insert(0, Event::RunCreated(e));
        appends.push(Append::new(stream(&run_id)?, events).expect(Expected::NoStream));
        if let Some(crid) = &crid {
            // The group's op id is its first part's; a retry with the key gets the first results.
            appends[0].op_id = Some(format!("run:{crid}"));
        }
        let results = self.append_sharing_bodies(appends).map_err(|e| exists_or(e, &project.id))?;
        if results.iter().any(|r| r.deduplicated) {
            // Another request with the same key won the race; return its run.
            let existing = results.iter().find_map(|r| r.stream.strip_prefix("run:").map(str::to_string));
            if let Some(id) = existing {
                return Ok(Started { run: self.run_info(&id)?, reused: true });
            }
        }
        if let Some(plan) = &new_project {
            self.make_project_folder(plan);
        }
        Ok(Started { run: self.run_info(&run_id)?, reused: false })
    }

    fn append_to_run(&self, id: &str, events: Vec<Event>) -> Result<(), WorkError> {
        self.store.append(Append::new(stream(id)?, events))?;
        Ok(())
    }

    /// Ends a run this daemon holds the lease of at `epoch` (a take-over, a recovery): fenced, so
    /// a daemon that took the run since cannot be contradicted. No-op for a run that already ended.
    fn end_run_as(
        &self,
        r: &RunInfo,
        epoch: u64,
        (status, code): (RunStatus, i32),
        category: FailureCategory,
        reason: &str,
    ) -> Result<(), WorkError> {
        if self.run_info(&r.run_id)?.is_terminal() {
            return Ok(());
        }
        let e = RunEnded {
            run_id: r.run_id.clone(),
            status,
            code,
            reason: reason.into(),
            failure_category: category,
            artifact_count: r.artifact_count,
            ended_at: self.clock.now_ms(),
        };
        let fence = self.leases.fence(&r.run_id, epoch);
        match self.store.append(Append::new(stream(&r.run_id)?, vec![Event::RunEnded(e)]).fenced(fence)) {
            Ok(_) | Err(crate::store::StoreError::RunEnded { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Records a signal reported from outside the executor (`od run signal`).
    pub fn record_signal(&self, id: &str, name: &str, value: Value) -> Result<RunInfo, WorkError> {
        let run = self.active_run(id, "signals are only taken while it runs")?;
        if name.is_empty()
            || name.len() > 64
            || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
        {
            return Err(WorkError::invalid("name", format!("{name:?} is not a signal name")));
        }
        if !(value.is_number() || value.is_boolean()) {
            return Err(WorkError::invalid("value", "a signal is a number or true/false"));
        }
        let e = SignalRecorded {
            run_id: id.into(),
            stage_id: run.stage_id.clone(),
            iteration: run.iteration,
            name: name.into(),
            value_json: value.to_string(),
            source: "cli".into(),
        };
        self.append_to_run(id, vec![Event::SignalRecorded(e)])?;
        self.run_info(id)
    }

    fn active_run(&self, id: &str, why: &str) -> Result<RunInfo, WorkError> {
        let run = self.run_info(id)?;
        if run.is_terminal() {
            return Err(WorkError::RunState { run_id: id.into(), status: run.status, message: why.into() });
        }
        Ok(run)
    }

    /// Records a user response (`od run respond`): `{"action":"break-loop"}` leaves the current
    /// devloop after the iteration in progress.
    pub fn respond(&self, id: &str, body: &Value) -> Result<RunInfo, WorkError> {
        let action =
            body["action"].as_str().ok_or_else(|| WorkError::invalid("action", "missing (e.g. \"break-loop\")"))?;
        let action = od_events::vocab::ResponseAction::parse(action);
        if action != od_events::vocab::ResponseAction::BreakLoop {
            return Err(WorkError::invalid("action", format!("{:?} is not a known action (break-loop)", action.as_str())));
        }
        self.active_run(id, "it no longer takes responses")?;
        let e = RunResponded {
            run_id: id.into(),
            action,
            payload_json: body.to_string(),
            received_at: self.clock.now_ms(),
        };
        self.append_to_run(id, vec![Event::RunResponded(e)])?;
        self.run_info(id)
    }

    /// Ends a run that is not executing anywhere (queued in a dead process, or canceled before it
    /// started). No-op for a run that already ended.
    pub fn end_run(
        &self,
        id: &str,
        status: RunStatus,
        category: FailureCategory,
        reason: &str,
    ) -> Result<RunInfo, WorkError> {
        let run = self.run_info(id)?;
        if run.is_terminal() {
            return Ok(run);
        }
        let e = RunEnded {
            run_id: id.into(),
            code: if status == RunStatus::Canceled { 130 } else { 1 },
            status,
            reason: reason.into(),
            failure_category: category,
            artifact_count: run.artifact_count,
            ended_at: self.clock.now_ms(),
        };
        self.append_to_run(id, vec![Event::RunEnded(e)])?;
        self.run_info(id)
    }

    /// Sorts the runs a previous process left unfinished: those that were executing an agent are
    /// ended as failed (the agent's process and state are gone); those still `queued` or
    /// `awaiting-input` (stopped at a clean point, nothing lost) are returned to be resumed.
    /// Agent process groups a killed process left running are ended first
    /// ([`crate::runner::orphans`]); the run's end reason names the group
    /// (`agentProcessGroupEnded: <pgid>`).
    pub fn recover_interrupted_runs(&self) -> Result<Vec<String>, WorkError> {
        let orphans = crate::runner::orphans::end_recorded(self.store.dir());
        // Another daemon's commits become visible first (a no-op for the embedded log).
        self.store.sync_head()?;
        let mut resume = Vec::new();
        let mut projects = std::collections::BTreeSet::new();
        for r in self.active_runs()? {
            // A run another live daemon executes is that daemon's (shared log only).
            let Some(epoch) = self.leases.take(&r.run_id)? else {
                continue;
            };
            // Its project copies were not yet made durable (a run does that before it ends).
            projects.insert(r.project_id.clone());
            let mut reason = "od stopped while this run's agent was working; such runs are not resumed because the agent's process and state were lost".to_string();
            if let Some(pgid) = orphans.get(&r.run_id) {
                reason.push_str(&format!(
                    "; agentProcessGroupEnded: {pgid} (the agent was still running unsupervised: SIGTERM, then SIGKILL after {} ms)",
                    crate::limits::ORPHAN_AGENT_GRACE_MS
                ));
            }
            if self.recover_run(&r, epoch, FailureCategory::DaemonRestart, &reason)? {
                resume.push(r.run_id);
            } else {
                self.leases.release(&r.run_id);
            }
        }
        self.heal_copies_of(projects);
        Ok(resume)
    }

    /// Applies the restart semantics to `r`, whose executor is gone: a run that was queued, waiting
    /// for an answer, or answered while parked resumes (true); one whose agent was working ends
    /// `failed` with `category` and `reason` (false).
    fn recover_run(&self, r: &RunInfo, epoch: u64, category: FailureCategory, reason: &str) -> Result<bool, WorkError> {
        // A cancel asked for while its executor could not hear it (stalled, or gone) is final.
        let cancel_asked = self
            .run_events(&r.run_id, 0)?
            .iter()
            .any(|s| matches!(&s.event, Event::RunResponded(e) if e.action == od_events::vocab::ResponseAction::Cancel));
        if cancel_asked {
            self.end_run_as(r, epoch, (RunStatus::Canceled, 130), FailureCategory::Canceled, "canceled by the user")?;
            return Ok(false);
        }
        // A run parked for an answer that got it while no executor held it is still at a clean
        // point: its last event is that answer.
        let answered_while_parked = r.status == RunStatus::Running
            && self.store.read_stream(stream(&r.run_id)?.as_str(), r.last_version, 1)?.first().is_some_and(|f| {
                matches!(f.view().kind(), k if k == od_events::EventKind::SurfaceResponded.code() || k == od_events::EventKind::SurfaceTimedOut.code())
            });
        if matches!(r.status, RunStatus::Queued | RunStatus::AwaitingInput) || answered_while_parked {
            return Ok(true);
        }
        self.end_run_as(r, epoch, (RunStatus::Failed, 1), category, reason)?;
        Ok(false)
    }

    /// Takes over `run_id` from a daemon that stopped heart-beating (shared log): with its lease
    /// taken and the log read up to the database's head, the restart semantics apply. `Some(true)`:
    /// resume it here; `Some(false)`: it ended (or had already ended); `None`: a live daemon holds it.
    pub fn take_over(&self, run_id: &str) -> Result<Option<bool>, WorkError> {
        let Some(epoch) = self.leases.take(run_id)? else {
            return Ok(None);
        };
        self.store.sync_head()?;
        let r = self.run_info(run_id)?;
        let reason = format!(
            "the daemon executing this run stopped heart-beating for {} ms while its agent was working; the agent's process and state were lost with it, so the run is not resumed",
            self.lease_ttl_ms
        );
        let resume = !r.is_terminal() && self.recover_run(&r, epoch, FailureCategory::DaemonLost, &reason)?;
        if !resume {
            self.leases.release(run_id);
        }
        Ok(Some(resume))
    }

    /// Asks the daemon executing `id` elsewhere to cancel it: a `run_responded` with action
    /// `cancel`, which that daemon follows in the log.
    pub fn request_cancel(&self, id: &str) -> Result<(), WorkError> {
        self.active_run(id, "it has ended")?;
        let e = RunResponded {
            run_id: id.into(),
            action: od_events::vocab::ResponseAction::Cancel,
            payload_json: "{\"action\":\"cancel\"}".into(),
            received_at: self.clock.now_ms(),
        };
        self.append_to_run(id, vec![Event::RunResponded(e)])?;
        Ok(())
    }

    /// The run's devloop rows, in order.
    pub fn devloop_iterations(&self, id: &str) -> Result<Vec<Value>, WorkError> {
        self.run_info(id)?;
        Ok(self
            .run_history(id)?
            .iter()
            .filter_map(|s| match &s.event {
                Event::DevloopIteration(e) => Some(crate::runner::wire::devloop_row(s, e)),
                _ => None,
            })
            .collect())
    }

    /// Recomposes every stage prompt of the run from its recorded snapshot and compares each with
    /// the digest recorded when it was sent. A fork's inherited prompts are recomposed from the
    /// snapshot and message of the ancestor that recorded them (its `inherited` part), its own from
    /// its own — each with the answers its history held then.
    pub fn verify_replay(&self, id: &str) -> Result<Value, WorkError> {
        let run = self.run_info(id)?;
        let snap = self.snapshot(&run.snapshot_id)?;
        let segments = self.lineage(id)?;
        let last = segments.len() - 1;
        let mut history: Vec<Stored> = Vec::new();
        let (mut own, mut inherited) = (Vec::new(), Vec::new());
        for (k, seg) in segments.into_iter().enumerate() {
            let created = self.run_created(&seg.run_id)?;
            let seg_snap = match k == last {
                true => snap.clone(),
                false => self.snapshot(&created.snapshot_id)?,
            };
            for s in seg.events {
                if let Event::PromptComposed(e) = &s.event {
                    let answers = crate::runner::resume::answers_so_far(&history);
                    let staged = crate::runner::resume::staged_so_far(&history).map(|(dir, _)| dir);
                    let follow_up = self.follow_up_context(&history);
                    let inputs = prompt::PromptInputs {
                        snap: &seg_snap,
                        stage_id: &e.stage_id,
                        iteration: e.iteration,
                        message: &created.message,
                        answers: &answers,
                        staged: staged.as_deref(),
                        follow_up: follow_up.as_ref(),
                    };
                    let check = self.replay_check(&seg.run_id, s.envelope.version, e, &created, &inputs, &history);
                    match k == last {
                        true => own.push(check),
                        false => inherited.push(check),
                    }
                }
                if k == last || !matches!(s.event, Event::RunEnded(_)) {
                    history.push(s);
                }
            }
        }
        let all_ok = |c: &[Value]| c.iter().all(|c| c["identical"] == true);
        let ok = all_ok(&own) && all_ok(&inherited);
        let mut out = json!({ "ok": ok, "runId": id, "snapshotId": run.snapshot_id, "pluginId": run.plugin_id,
            "snapshotStatus": snap["status"], "prompts": own });
        if !run.parent_run_id.is_empty() {
            out["inherited"] = json!({ "parentRunId": run.parent_run_id, "forkEventId": run.fork_event_id,
                "ok": all_ok(&inherited), "prompts": inherited });
        }
        Ok(out)
    }
}
