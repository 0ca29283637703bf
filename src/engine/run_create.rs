//! Creating a run: the request (`NewRun`), then its checks — the client's request key, the agent
//! options (`runs.rs`), the plugin or snapshot, the project and conversation — and the one atomic
//! append of its events, a new project's and a fresh snapshot's included.

use od_events::runs::RunCreated;
use od_events::Event;
use od_projections::workspace_read as wr;
use od_projections::RunInfo;
use serde_json::{json, Map, Value};

use super::apply::ApplyRequest;
use super::errors::WorkError;
use super::projects::{check_id, exists_or, NewProject, ProjectPlan};
use super::runs::{agent_config, stream, with_exec_right};
use super::Engine;
use crate::store::{Append, Expected};

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
    /// The folder of the project made for this run, still to be made
    /// (`Engine::make_started_folder`, once its executor is on its way: the folder is not on the
    /// path to the run's first event, and the executor makes it too if it gets there first).
    pub folder: Option<std::path::PathBuf>,
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

impl Engine {
    /// Records a new run as `queued` (or returns the run a repeated `clientRequestId` names).
    /// Every check comes first; then the run's events — with a new project's and a fresh
    /// snapshot's — land in one atomic append (all or nothing), then the new project's folder is
    /// made. The caller hands the run to the runner.
    pub fn create_run(&self, req: NewRun) -> Result<Started, WorkError> {
        let crid = req.client_request_id.clone().filter(|c| !c.is_empty());
        if let Some(started) = self.reused_run(crid.as_deref())? {
            return Ok(started);
        }
        let (probe, env) = (self.probe_env(), &self.config.agent);
        let config = agent_config(req.agent.clone(), &self.data_dir, &probe, &*self.clock, env)?;
        let config = with_exec_right(config, req.exec);
        super::agents::check_bypass(&config, req.exec)?;
        // Validate the plugin side before anything is built (the fresh apply is kept: the snapshot
        // below is built from it, not from a second apply).
        let mut applied = None;
        match (req.snapshot_id.as_deref(), &req.plugin_id) {
            (Some(sid), _) => {
                self.resolve_snapshot(Some(sid), None, &req.apply, "", "", true)?;
            }
            (None, Some(pid)) => applied = Some(self.apply(pid, &req.apply)?),
            (None, None) => {}
        }
        let (project, mut new_project) = self.run_project(&req)?;
        let conversation = match req.conversation_id.as_deref() {
            Some(c) => self.conversation_of(&project, c)?,
            None => project
                .conversations
                .first()
                .cloned()
                .ok_or_else(|| WorkError::ConversationNotFound("(none)".into()))?,
        };
        let run_id = self.ids.new_id();
        let mut appends = Vec::new();
        let chosen = self.chosen_snapshot(&req, applied, &project, &conversation, &run_id, &mut appends)?;
        if let Some(plan) = new_project.as_mut() {
            // A project made for a run with a plugin or snapshot pins that snapshot (so the
            // project's next run without one runs it too); its events follow the snapshot's in the
            // append, so the project's reference lands on a recorded snapshot.
            for ev in plan.appends.iter_mut().flat_map(|a| a.events.iter_mut()) {
                if let Event::ProjectCreated(p) = ev {
                    p.snapshot_id = chosen.pin.clone();
                }
            }
            appends.append(&mut plan.appends);
        }
        let (follow_up, surfaces) = match new_project.is_none() {
            true => self.run_follow_up(&req, &chosen, &project.id, &conversation.id, &run_id)?.unzip(),
            false => (None, None),
        };
        let e = RunCreated {
            run_id: run_id.clone(),
            project_id: project.id.clone(),
            conversation_id: conversation.id.clone(),
            client_request_id: crid.clone().unwrap_or_default(),
            snapshot_id: chosen.snapshot_id,
            plugin_id: chosen.plugin_id,
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
        // What the conversation decided goes on holding: its remembered answers, for surfaces a
        // follow-up's stages may not raise again (the direction picked at the first stage).
        if let Some(surfaces) = surfaces {
            events.extend(self.carried_answers(&surfaces, &e)?);
        }
        events.insert(0, Event::RunCreated(e));
        appends.push(Append::new(stream(&run_id)?, events).expect(Expected::NoStream));
        self.commit_run(appends, crid.as_deref(), &project.id, &run_id, new_project.as_ref())
    }

    /// The run a repeated `clientRequestId` names (checked first: bounded, no control characters).
    fn reused_run(&self, crid: Option<&str>) -> Result<Option<Started>, WorkError> {
        let Some(crid) = crid else { return Ok(None) };
        crate::store::check_ident(crid, crate::limits::MAX_CLIENT_REQUEST_ID_BYTES)
            .map_err(|e| WorkError::invalid("clientRequestId", e.to_string()))?;
        match self.workspace.read(|w| wr::run_by_client_request(w, crid))? {
            Some(run_id) => Ok(Some(Started { run: self.run_info(&run_id)?, reused: true, folder: None })),
            None => Ok(None),
        }
    }

    /// The run's project: the one named, else a new one planned (named after the plugin).
    fn run_project(&self, req: &NewRun) -> Result<(od_projections::Project, Option<ProjectPlan>), WorkError> {
        match req.project_id.as_deref() {
            Some(pid) => {
                check_id("projectId", pid)?;
                Ok((self.project(pid)?, None))
            }
            None => {
                let name = req.plugin_id.clone().unwrap_or_else(|| "run".into());
                let plan = self.plan_project(NewProject { name, ..Default::default() })?;
                Ok((planned_project(&plan), Some(plan)))
            }
        }
    }

    /// The run's snapshot: the one named or freshly applied, else the conversation's or the
    /// project's, else the default scenario's (a new snapshot's events pushed to `appends`).
    fn chosen_snapshot(
        &self,
        req: &NewRun,
        applied: Option<Value>,
        project: &od_projections::Project,
        conversation: &od_projections::Conversation,
        run_id: &str,
        appends: &mut Vec<Append>,
    ) -> Result<Chosen, WorkError> {
        let explicit = req.snapshot_id.as_deref().or(req.plugin_id.as_ref().map(|_| ""));
        let chosen = match (explicit, applied, req.plugin_id.as_deref()) {
            // No snapshot named, a plugin applied above: its fresh snapshot.
            (Some(_), Some(applied), Some(pid)) if req.snapshot_id.is_none() && !pid.is_empty() => {
                let (id, append) = self.snapshot_append_applied(pid, &req.apply, applied, &project.id, run_id)?;
                Some(super::projects::SnapshotChoice { id, append: Some(append) })
            }
            (Some(_), _, _) => {
                let (sid, pid) = (req.snapshot_id.as_deref(), req.plugin_id.as_deref());
                self.resolve_snapshot(sid, pid, &req.apply, &project.id, run_id, true)?
            }
            (None, _, _) => None,
        };
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
                    self.snapshot_append(DEFAULT_SCENARIO, &ApplyRequest::default(), &project.id, run_id)?;
                appends.extend(snapshot);
                (sid, DEFAULT_SCENARIO.to_string())
            }
        };
        Ok(Chosen { snapshot_id, plugin_id, pin })
    }

    /// A follow-up's plan (see `conversations.rs` for the rule): a message in an existing project
    /// naming no plugin or snapshot, planned against the run's snapshot.
    fn run_follow_up(
        &self,
        req: &NewRun,
        chosen: &Chosen,
        project_id: &str,
        conversation_id: &str,
        run_id: &str,
    ) -> Result<Option<(od_events::runs::FollowUpPlanned, Vec<Value>)>, WorkError> {
        if req.plugin_id.is_some() || req.snapshot_id.is_some() || req.message.is_empty() {
            return Ok(None);
        }
        let snap = match self.snapshot(&chosen.snapshot_id) {
            Ok(v) => v,
            // A fresh default-scenario snapshot, not recorded yet.
            Err(_) => {
                let applied = self.apply(&chosen.plugin_id, &ApplyRequest::default())?;
                json!({ "pipeline": applied["pipeline"], "genuiSurfaces": applied["genuiSurfaces"] })
            }
        };
        let surfaces = snap["genuiSurfaces"].as_array().cloned().unwrap_or_default();
        Ok(self.plan_follow_up(project_id, conversation_id, &snap, run_id)?.map(|p| (p, surfaces)))
    }

    /// Appends the run's group (keyed by `crid`: a retry gets the first results) and names a new
    /// project's folder to make; a request with the same key that won the race gets its run.
    fn commit_run(
        &self,
        mut appends: Vec<Append>,
        crid: Option<&str>,
        project_id: &str,
        run_id: &str,
        new_project: Option<&ProjectPlan>,
    ) -> Result<Started, WorkError> {
        if let Some(crid) = crid {
            // The group's op id is its first part's; a retry with the key gets the first results.
            appends[0].op_id = Some(format!("run:{crid}"));
        }
        let results = self.append_sharing_bodies(appends).map_err(|e| exists_or(e, project_id))?;
        if results.iter().any(|r| r.deduplicated) {
            // Another request with the same key won the race; return its run.
            let existing = results.iter().find_map(|r| r.stream.strip_prefix("run:").map(str::to_string));
            if let Some(id) = existing {
                return Ok(Started { run: self.run_info(&id)?, reused: true, folder: None });
            }
        }
        let folder = new_project.and_then(|plan| plan.folder.clone());
        Ok(Started { run: self.run_info(run_id)?, reused: false, folder })
    }
}

/// The snapshot a new run runs, its plugin, and what a project made for it pins (empty: none).
struct Chosen {
    snapshot_id: String,
    plugin_id: String,
    pin: String,
}
