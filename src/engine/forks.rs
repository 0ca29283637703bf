//! Forked runs (issue 16): a run started from another run's recorded state at one of its events.
//! A fork's stream begins with `run_forked` (parent, fork point) and its `run_created`; everything
//! before the fork point is *inherited* — read from the ancestors' streams when needed, never
//! copied — so a fork costs the same whatever the parent's length. This module owns the lineage
//! (a run's history: its ancestors' events up to each fork point, then its own), resolving and
//! checking a fork point, creating the fork, and the fork's own working folder.

use od_events::runs::{RunCreated, RunForked};
use od_events::{Event, Stored, StreamId};
use serde_json::{json, Map, Value};
use std::path::PathBuf;

use super::apply::ApplyRequest;
use super::fork_scan::{check_clean, resolve_in, ForkPoint};
use super::runs::Started;
use super::{Engine, WorkError};
use crate::limits::MAX_FORK_DEPTH;
use crate::store::{Append, Expected};

/// What a fork changes (`od run fork`, `POST /api/runs/{id}/fork`).
#[derive(Debug, Default, Clone)]
pub struct ForkRequest {
    /// `<eventId>`, `<stage>` / `<stage>:<iteration>` (1-based; the fork redoes that iteration),
    /// or `end`.
    pub at: String,
    /// GenUI answers: used when the fork raises the surface (or, for a surface answered before the
    /// fork point, recorded as the fork's new answer).
    pub answers: Map<String, Value>,
    /// Inputs to change (the plugin is applied again with them: a new snapshot).
    pub inputs: Map<String, Value>,
    pub snapshot_id: Option<String>,
    /// The installed plugin version the fork must apply (refused when another is installed).
    pub plugin_version: Option<String>,
    /// Agent options replacing the parent's (empty: the parent's).
    pub agent: Map<String, Value>,
    /// The fork's creator's exec right (`gate.rs`): it runs an inherited agent command again only
    /// with it, and the fork's worker commands are judged by it.
    pub exec: super::gate::ExecRight,
}

/// One run's part of a lineage: its own events, up to the fork point its child inherited.
pub struct Segment {
    pub run_id: String,
    pub events: Vec<Stored>,
}

fn stream(id: &str) -> Result<StreamId, WorkError> {
    StreamId::typed("run", id).map_err(|e| WorkError::invalid("runId", e.to_string()))
}

impl Engine {
    /// The `run_forked` a run's stream starts with (None: not a fork).
    pub fn fork_link(&self, run_id: &str) -> Result<Option<RunForked>, WorkError> {
        let frames = self.store.read_stream(stream(run_id)?.as_str(), 0, 1)?;
        let Some(f) = frames.first() else { return Err(WorkError::RunNotFound(run_id.into())) };
        if f.view().kind() != od_events::EventKind::RunForked.code() {
            return Ok(None);
        }
        match crate::store::decode_frame(f.view())?.event {
            Event::RunForked(e) => Ok(Some(e)),
            _ => Ok(None),
        }
    }

    /// The run's `RunCreated` (a fork's is its second event).
    pub(crate) fn run_created_event(&self, id: &str) -> Result<RunCreated, WorkError> {
        let frames = self.store.read_stream(stream(id)?.as_str(), 0, 2)?;
        for f in &frames {
            if let Event::RunCreated(e) = crate::store::decode_frame(f.view())?.event {
                return Ok(e);
            }
        }
        Err(WorkError::RunNotFound(id.into()))
    }

    /// A run's events from `from` through `upto` (inclusive; None: to its head).
    fn run_events_upto(&self, id: &str, upto: Option<u64>) -> Result<Vec<Stored>, WorkError> {
        let mut out = self.run_events(id, 0)?;
        if let Some(u) = upto {
            out.retain(|s| s.envelope.version <= u);
        }
        Ok(out)
    }

    /// The run's lineage, oldest ancestor first: each ancestor's events up to the fork point its
    /// child inherited, then the run's own events.
    pub fn lineage(&self, run_id: &str) -> Result<Vec<Segment>, WorkError> {
        self.ancestry(run_id)?
            .into_iter()
            .map(|(id, upto)| Ok(Segment { events: self.run_events_upto(&id, upto)?, run_id: id }))
            .collect()
    }

    /// The runs of `run_id`'s lineage, oldest first, each with the last event its child inherited
    /// (None for the run itself).
    pub(super) fn ancestry(&self, run_id: &str) -> Result<Vec<(String, Option<u64>)>, WorkError> {
        let mut chain = vec![(run_id.to_string(), None)];
        let mut at = run_id.to_string();
        while let Some(link) = self.fork_link(&at)? {
            if chain.len() > MAX_FORK_DEPTH {
                return Err(WorkError::invalid(
                    "runId",
                    format!("run {run_id} is forked more than {MAX_FORK_DEPTH} deep"),
                ));
            }
            chain.push((link.parent_run_id.clone(), Some(link.parent_event_id)));
            at = link.parent_run_id;
        }
        chain.reverse();
        Ok(chain)
    }

    /// What a run's executor, replay and reads see: its lineage flattened, without an inherited
    /// `end` (a fork after its parent's end goes on from there).
    pub fn run_history(&self, run_id: &str) -> Result<Vec<Stored>, WorkError> {
        let (mut out, own) = self.run_history_parts(run_id)?;
        out.extend(own);
        Ok(out)
    }

    /// [`Engine::run_history`] in its two parts: what the run inherited (its ancestors' events up
    /// to where each was forked, without an `end`; empty for a run that is not a fork), and the
    /// run's own stream. The inherited part never changes once the fork is recorded.
    pub fn run_history_parts(&self, run_id: &str) -> Result<(Vec<Stored>, Vec<Stored>), WorkError> {
        let mut segments = self.lineage(run_id)?;
        let own = segments.pop().map(|s| s.events).unwrap_or_default();
        let inherited =
            segments.into_iter().flat_map(|s| s.events).filter(|s| !matches!(s.event, Event::RunEnded(_))).collect();
        Ok((inherited, own))
    }

    /// The fork's own working folder (None: not a fork; the run works in its project's folder).
    /// Made on first use, holding the latest recorded bytes of every file in the run's history.
    pub fn fork_work_dir(&self, run_id: &str) -> Result<Option<PathBuf>, WorkError> {
        let Some(link) = self.fork_link(run_id)? else { return Ok(None) };
        let dir = self.data_dir.join(super::files::clean_relative(&link.work_dir)?);
        if !dir.exists() {
            let history = self.run_history(run_id)?;
            let (artifacts, _) = crate::engine::resume::artifacts_so_far(&history);
            // What the run staged (assets, context, MCP configuration), then the artifacts over it.
            let mut latest: std::collections::BTreeMap<String, String> = crate::engine::resume::staged_so_far(&history)
                .map(|(_, f)| f.into_iter().collect())
                .unwrap_or_default();
            latest.extend(artifacts.into_iter().map(|(path, (_, digest))| (path, digest)));
            // A recorded path is checked where it is joined: it never leaves the folder.
            for path in latest.keys() {
                if super::files::clean_relative(path)? != *path {
                    return Err(WorkError::PathEscapes(path.clone()));
                }
            }
            // Restored into a temporary folder renamed into place, durably (`write_tree`): a crash
            // or a power cut leaves no half folder.
            let files = latest
                .into_iter()
                .map(|(path, digest)| self.blobs.read(&digest).map(|b| (path, b)).map_err(std::io::Error::other));
            super::plugins::write_tree_from(files, &dir).map_err(|e| WorkError::io("restoring a fork's folder", e))?;
        }
        Ok(Some(dir))
    }

    /// Where `at` points in run `run_id`'s lineage (an inherited point names the ancestor that
    /// recorded it).
    pub fn resolve_fork_point(&self, run_id: &str, at: &str) -> Result<ForkPoint, WorkError> {
        resolve_in(&self.lineage_items(run_id)?, run_id, at).map(|(_, p)| p)
    }

    /// Starts a fork of `parent_id` at `req.at` as a `queued` run. Every check comes first (the
    /// point, the snapshot, the agent, each answer against its surface); then `run_forked`,
    /// `run_created` — with a fresh snapshot's events when the inputs change — and the surfaces
    /// the fork waits on land in one atomic append. The parent is not touched.
    pub fn fork_run(&self, parent_id: &str, req: ForkRequest) -> Result<Started, WorkError> {
        self.run_info(parent_id)?;
        let (point, prefix) = self.fork_prefix(parent_id, &req.at)?;
        let owner = self.run_info(&point.run_id)?;
        let created = self.run_created_event(&point.run_id)?;
        let run_id = self.ids.new_id();
        let resume = crate::engine::resume::resume_point(&prefix);
        let mut appends = Vec::new();
        let (snapshot_id, plugin_id, surfaces) = self.fork_snapshot(&req, &owner, &run_id, &mut appends)?;
        let agent_json = self.fork_agent(&req, &created, &point)?;
        // Each answer names a surface the fork's snapshot declares, and fits its schema.
        for (sid, value) in &req.answers {
            let spec = surfaces.iter().find(|s| s["id"] == sid.as_str()).ok_or_else(|| {
                WorkError::invalid("answer", format!("the fork's snapshot declares no surface {sid:?}"))
            })?;
            super::genui::check_answer(spec, value)?;
        }
        let (stage_id, iteration) = resume.as_ref().map(|r| (r.stage_id.clone(), r.iteration)).unwrap_or_default();
        let now = self.clock.now_ms();
        let forked = RunForked {
            run_id: run_id.clone(),
            parent_run_id: point.run_id.clone(),
            parent_event_id: point.event_id,
            at: req.at.trim().to_string(),
            stage_id: stage_id.clone(),
            iteration,
            answers_json: Value::Object(req.answers.clone()).to_string(),
            inputs_json: Value::Object(req.inputs.clone()).to_string(),
            work_dir: format!("forks/{run_id}"),
            created_at: now,
        };
        let run_created = RunCreated {
            run_id: run_id.clone(),
            project_id: owner.project_id.clone(),
            conversation_id: owner.conversation_id.clone(),
            client_request_id: String::new(),
            snapshot_id: snapshot_id.clone(),
            plugin_id,
            message: created.message.clone(),
            agent: agent_json["agent"].as_str().unwrap_or("dry-run").into(),
            agent_config_json: agent_json.to_string(),
            created_at: now,
        };
        let mut own = vec![Event::RunForked(forked), Event::RunCreated(run_created)];
        let fork_info = od_projections::RunInfo {
            run_id: run_id.clone(),
            project_id: owner.project_id.clone(),
            conversation_id: owner.conversation_id.clone(),
            snapshot_id,
            ..Default::default()
        };
        own.extend(self.fork_surfaces(&fork_info, &prefix, &surfaces, &stage_id, &req.answers)?);
        appends.push(Append::new(stream(&run_id)?, own).expect(Expected::NoStream));
        self.append_sharing_bodies(appends)?;
        self.genui_changed.notify_waiters();
        Ok(Started { run: self.run_info(&run_id)?, reused: false, folder: None })
    }

    /// The fork point `at` in `parent_id`'s lineage (checked clean), and the state at it: the
    /// owner's history through it, an inherited end aside. The lineage is read once, decoding only
    /// what shapes a run's state.
    fn fork_prefix(&self, parent_id: &str, at: &str) -> Result<(ForkPoint, Vec<Stored>), WorkError> {
        let mut segments = self.lineage_items(parent_id)?;
        let (idx, point) = resolve_in(&segments, parent_id, at)?;
        if idx + 1 == segments.len() {
            check_clean(&point.run_id, &segments[idx].items, point.event_id)?;
        } else {
            // An ancestor's part stops at its child's fork point; the check looks past it.
            check_clean(&point.run_id, &self.own_items(&point.run_id)?, point.event_id)?;
        }
        segments.truncate(idx + 1);
        segments[idx].items.retain(|s| s.version <= point.event_id);
        let prefix: Vec<Stored> = segments
            .into_iter()
            .flat_map(|seg| seg.items)
            .filter_map(|i| i.stored)
            .filter(|s| !matches!(s.event, Event::RunEnded(_)))
            .collect();
        Ok((point, prefix))
    }

    /// The fork's snapshot (id, plugin, GenUI surfaces): the one named, the owner's re-applied
    /// with changed inputs or version (its events pushed to `appends`), else the owner's.
    fn fork_snapshot(
        &self,
        req: &ForkRequest,
        owner: &od_projections::RunInfo,
        run_id: &str,
        appends: &mut Vec<Append>,
    ) -> Result<(String, String, Vec<Value>), WorkError> {
        let base = self.snapshot(&owner.snapshot_id)?;
        if let Some(sid) = req.snapshot_id.as_deref().filter(|s| !s.is_empty()) {
            self.resolve_snapshot(Some(sid), None, &ApplyRequest::default(), "", "", false)?;
            return Ok((sid.to_string(), self.snapshot_info(sid)?.plugin_id, self.snapshot_surfaces(sid)?));
        }
        if req.inputs.is_empty() && req.plugin_version.is_none() {
            let surfaces = base["genuiSurfaces"].as_array().cloned().unwrap_or_default();
            return Ok((owner.snapshot_id.clone(), owner.plugin_id.clone(), surfaces));
        }
        let pid = base["pluginId"].as_str().unwrap_or(&owner.plugin_id).to_string();
        if let Some(v) = &req.plugin_version {
            let installed = self.plugin(&pid)?.version;
            if *v != installed {
                let msg = format!("plugin {pid} is installed at {installed:?}, not {v:?}");
                return Err(WorkError::invalid("pluginVersion", msg));
            }
        }
        let mut inputs = base["inputs"].as_object().cloned().unwrap_or_default();
        inputs.extend(req.inputs.clone());
        let strings = |field: &str| -> Vec<String> {
            base[field].as_array().into_iter().flatten().filter_map(|c| c.as_str().map(String::from)).collect()
        };
        // The grants, and the chips the owner's person removed: they stay removed.
        let (grant_caps, exclude_context) = (strings("capabilitiesGranted"), strings("excludedContext"));
        let apply = ApplyRequest { inputs, grant_caps, locale: None, partial: false, exclude_context };
        let applied = self.apply(&pid, &apply)?;
        let surfaces = applied["genuiSurfaces"].as_array().cloned().unwrap_or_default();
        let (sid, append) = self.snapshot_append_applied(&pid, &apply, applied, &owner.project_id, run_id)?;
        appends.extend(append);
        Ok((sid, pid, surfaces))
    }

    /// The fork's agent options (with its creator's exec right): the request's, else the
    /// owner's — whose supplied command runs again only with the exec right, and never for an
    /// imported run (its command is the bundle author's).
    fn fork_agent(&self, req: &ForkRequest, created: &RunCreated, point: &ForkPoint) -> Result<Value, WorkError> {
        let agent_json = if req.agent.is_empty() {
            let inherited: Value = serde_json::from_str(&created.agent_config_json).unwrap_or(json!({}));
            if inherits_a_command(&inherited) {
                if self.was_imported(&point.run_id)? {
                    let msg = format!(
                        "run {} was imported: its agent command is the bundle author's; name the fork's agent \
                         (agent, agentCommand)",
                        point.run_id
                    );
                    return Err(WorkError::invalid("agentCommand", msg));
                }
                super::gate::pass(req.exec, super::gate::Reach::InheritedAgentCommand, None)?;
            }
            inherited
        } else {
            let (probe, env) = (self.probe_env(), &self.config.agent);
            super::runs::agent_config(req.agent.clone(), &self.data_dir, &probe, &*self.clock, env)?
        };
        let agent_json = super::runs::with_exec_right(agent_json, req.exec);
        super::agents::check_bypass(&agent_json, req.exec)?;
        Ok(agent_json)
    }

    /// The surfaces the fork waits on: those still waiting at the fork point wait again (or take
    /// the fork's answer); a surface answered before it takes the fork's new answer.
    fn fork_surfaces(
        &self,
        fork: &od_projections::RunInfo,
        prefix: &[Stored],
        surfaces: &[Value],
        stage_id: &str,
        answers: &Map<String, Value>,
    ) -> Result<Vec<Event>, WorkError> {
        let mut out = Vec::new();
        let (pending, answered) = surfaces_at(prefix);
        for (sid, spec, stage) in &pending {
            out.extend(self.surface_events(fork, spec, stage, "fork", answers.get(sid))?.0);
        }
        for (sid, value) in answers {
            if pending.iter().all(|(p, _, _)| p != sid) && answered.contains(sid) {
                let spec = surfaces.iter().find(|s| s["id"] == sid.as_str()).cloned().unwrap_or(Value::Null);
                out.extend(self.surface_events(fork, &spec, stage_id, "fork", Some(value))?.0);
            }
        }
        Ok(out)
    }

    /// The fork's answer to `surface_id`, unless the fork already recorded one of its own.
    pub(crate) fn fork_answer(&self, run_id: &str, surface_id: &str) -> Result<Option<Value>, WorkError> {
        let Some(link) = self.fork_link(run_id)? else { return Ok(None) };
        let answers: Map<String, Value> = serde_json::from_str(&link.answers_json).unwrap_or_default();
        let Some(v) = answers.get(surface_id) else { return Ok(None) };
        let used = self.run_events(run_id, 0)?.iter().any(|s| {
            matches!(&s.event, Event::SurfaceResponded(e) if e.surface_id == surface_id && e.responded_by == od_events::vocab::RespondedBy::Fork)
        });
        Ok((!used).then(|| v.clone()))
    }

    /// The runs forked from `run_id`, oldest first.
    pub fn forks_of(&self, run_id: &str) -> Result<Vec<String>, WorkError> {
        Ok(self.workspace.read(|w| od_projections::workspace_read::forks_of(w, run_id))?)
    }
}

/// Whether inherited agent options run a command (or environment) someone supplied.
fn inherits_a_command(config: &Value) -> bool {
    config["agent"] == "exec" && super::gate::supplied_command(config)
}

/// The surfaces waiting at the end of `events` (id, spec, stage), and the ids of those answered.
type Waiting = (String, Value, String);
fn surfaces_at(events: &[Stored]) -> (Vec<Waiting>, Vec<String>) {
    let mut pending: Vec<Waiting> = Vec::new();
    let mut answered: Vec<String> = Vec::new();
    for s in events {
        match &s.event {
            Event::SurfaceRequested(e) => {
                pending.retain(|(id, _, _)| *id != e.surface_id);
                let spec = serde_json::from_str(&e.spec_json).unwrap_or(Value::Null);
                pending.push((e.surface_id.clone(), spec, e.stage_id.clone()));
            }
            Event::SurfaceResponded(e) => {
                pending.retain(|(id, _, _)| *id != e.surface_id);
                answered.push(e.surface_id.clone());
            }
            Event::SurfaceTimedOut(e) => pending.retain(|(id, _, _)| *id != e.surface_id),
            _ => {}
        }
    }
    (pending, answered)
}
