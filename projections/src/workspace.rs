//! `workspace`: projects, their conversations, applied-plugin snapshots (status and who references
//! them) and runs (status, current stage, idempotency keys, artifacts). One projection, so each
//! event is decoded once for all of them; run event bodies stay in the log (`run:<id>` streams).

use od_events::{Envelope, Event};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

use crate::genui::Genui;
use crate::Projection;

/// One project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    pub id: String,
    pub name: String,
    pub dir: String,
    pub snapshot_id: String,
    pub metadata_json: String,
    pub imported_from: String,
    pub created_at: i64,
    pub conversations: Vec<Conversation>,
    pub run_count: u64,
}

/// One conversation of a project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    pub id: String,
    pub title: String,
    pub snapshot_id: String,
    pub created_at: i64,
}

/// One snapshot's bookkeeping (its body is the `snapshot_recorded` event at `seq`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotInfo {
    pub snapshot_id: String,
    pub plugin_id: String,
    pub plugin_version: String,
    pub manifest_source_digest: String,
    pub plugin_source_digest: String,
    pub applied_at: i64,
    /// `fresh`, `stale` or `expired`.
    pub status: String,
    /// `project:<id>`, `conversation:<id>`, `run:<id>` that use it.
    pub referenced_by: BTreeSet<String>,
    /// When it last became unreferenced (the TTL counts from here); None while referenced.
    pub unreferenced_since: Option<i64>,
    pub seq: u64,
}

/// One run's summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunInfo {
    pub run_id: String,
    pub project_id: String,
    pub conversation_id: String,
    pub client_request_id: String,
    pub snapshot_id: String,
    pub plugin_id: String,
    pub agent: String,
    /// `queued`, `running`, `awaiting-input`, `succeeded`, `failed`, `canceled`.
    pub status: String,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub stage_id: String,
    pub iteration: u32,
    pub reason: String,
    pub failure_category: String,
    pub artifact_count: u32,
    /// Stream version of the run's last event (its event ids are 0..=last_version).
    pub last_version: u64,
}

impl RunInfo {
    /// True once the run ended.
    pub fn is_terminal(&self) -> bool {
        matches!(self.status.as_str(), "succeeded" | "failed" | "canceled")
    }
}

/// One artifact's provenance, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactInfo {
    pub artifact_id: String,
    pub run_id: String,
    pub project_id: String,
    pub path: String,
    pub title: String,
    pub stage_id: String,
    pub source_plugin_snapshot_id: String,
    pub source_task_kind: String,
    pub artifact_kind: String,
    pub render_kind: String,
    pub handoff_kind: String,
    pub parent_artifact_id: String,
    pub export_targets: Vec<String>,
    pub digest: String,
    pub bytes: u64,
    pub recorded_at: i64,
}

/// Projects, snapshots and runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    pub projects: BTreeMap<String, Project>,
    pub snapshots: BTreeMap<String, SnapshotInfo>,
    pub runs: BTreeMap<String, RunInfo>,
    /// clientRequestId → runId.
    pub client_requests: BTreeMap<String, String>,
    /// conversationId → projectId.
    pub conversations: BTreeMap<String, String>,
    pub artifacts: BTreeMap<String, ArtifactInfo>,
    /// GenUI surface rows.
    pub genui: Genui,
}

impl Workspace {
    fn reference(&mut self, snapshot_id: &str, by: String) {
        if let Some(s) = self.snapshots.get_mut(snapshot_id) {
            s.referenced_by.insert(by);
            s.unreferenced_since = None;
        }
    }

    fn unreference(&mut self, snapshot_id: &str, by: &str, at: i64) {
        if let Some(s) = self.snapshots.get_mut(snapshot_id) {
            s.referenced_by.remove(by);
            if s.referenced_by.is_empty() && s.unreferenced_since.is_none() {
                s.unreferenced_since = Some(at);
            }
        }
    }

    fn run_mut(&mut self, run_id: &str, env: &Envelope) -> Option<&mut RunInfo> {
        let r = self.runs.get_mut(run_id)?;
        r.last_version = env.version;
        Some(r)
    }

    fn touch_run(&mut self, run_id: &str, env: &Envelope) {
        self.run_mut(run_id, env);
    }

    /// A surface of the run got answered (or timed out): back to `running` when none waits.
    fn after_answer(&mut self, run_id: &str, env: &Envelope) {
        let waiting = self.genui.pending(run_id).next().is_some();
        if let Some(r) = self.run_mut(run_id, env) {
            if r.status == "awaiting-input" && !waiting {
                r.status = "running".into();
            }
        }
    }
}

impl Projection for Workspace {
    const NAME: &'static str = "workspace";
    const VERSION: u32 = 2;

    fn apply(&mut self, env: &Envelope, event: &Event) {
        let at = env.recorded_at;
        match event {
            Event::SnapshotRecorded(e) => {
                self.snapshots.insert(
                    e.snapshot_id.clone(),
                    SnapshotInfo {
                        snapshot_id: e.snapshot_id.clone(),
                        plugin_id: e.plugin_id.clone(),
                        plugin_version: e.plugin_version.clone(),
                        manifest_source_digest: e.manifest_source_digest.clone(),
                        plugin_source_digest: e.plugin_source_digest.clone(),
                        applied_at: e.applied_at,
                        status: "fresh".into(),
                        referenced_by: BTreeSet::new(),
                        unreferenced_since: Some(e.applied_at),
                        seq: env.seq,
                    },
                );
                if !e.project_id.is_empty() && e.run_id.is_empty() {
                    self.reference(&e.snapshot_id, format!("project:{}", e.project_id));
                }
                if !e.run_id.is_empty() {
                    self.reference(&e.snapshot_id, format!("run:{}", e.run_id));
                }
            }
            Event::SnapshotMarkedStale(e) => {
                if let Some(s) = self.snapshots.get_mut(&e.snapshot_id) {
                    if s.status == "fresh" {
                        s.status = "stale".into();
                    }
                }
            }
            Event::SnapshotExpired(e) => {
                if let Some(s) = self.snapshots.get_mut(&e.snapshot_id) {
                    s.status = "expired".into();
                }
            }
            Event::ProjectCreated(e) => {
                self.projects.insert(
                    e.project_id.clone(),
                    Project {
                        id: e.project_id.clone(),
                        name: e.name.clone(),
                        dir: e.dir.clone(),
                        snapshot_id: e.snapshot_id.clone(),
                        metadata_json: e.metadata_json.clone(),
                        imported_from: e.imported_from.clone(),
                        created_at: at,
                        conversations: Vec::new(),
                        run_count: 0,
                    },
                );
                if !e.snapshot_id.is_empty() {
                    self.reference(&e.snapshot_id, format!("project:{}", e.project_id));
                }
            }
            Event::ProjectDeleted(e) => {
                if let Some(p) = self.projects.remove(&e.project_id) {
                    let by = format!("project:{}", p.id);
                    self.unreference(&p.snapshot_id, &by, at);
                    for c in &p.conversations {
                        self.conversations.remove(&c.id);
                        self.unreference(&c.snapshot_id, &format!("conversation:{}", c.id), at);
                    }
                }
            }
            Event::ConversationCreated(e) => {
                if let Some(p) = self.projects.get_mut(&e.project_id) {
                    p.conversations.push(Conversation {
                        id: e.conversation_id.clone(),
                        title: e.title.clone(),
                        snapshot_id: e.snapshot_id.clone(),
                        created_at: at,
                    });
                    self.conversations.insert(e.conversation_id.clone(), e.project_id.clone());
                }
                if !e.snapshot_id.is_empty() {
                    self.reference(&e.snapshot_id, format!("conversation:{}", e.conversation_id));
                }
            }
            Event::RunCreated(e) => {
                self.runs.insert(
                    e.run_id.clone(),
                    RunInfo {
                        run_id: e.run_id.clone(),
                        project_id: e.project_id.clone(),
                        conversation_id: e.conversation_id.clone(),
                        client_request_id: e.client_request_id.clone(),
                        snapshot_id: e.snapshot_id.clone(),
                        plugin_id: e.plugin_id.clone(),
                        agent: e.agent.clone(),
                        status: "queued".into(),
                        created_at: e.created_at,
                        started_at: None,
                        ended_at: None,
                        stage_id: String::new(),
                        iteration: 0,
                        reason: String::new(),
                        failure_category: String::new(),
                        artifact_count: 0,
                        last_version: env.version,
                    },
                );
                if !e.client_request_id.is_empty() {
                    self.client_requests.insert(e.client_request_id.clone(), e.run_id.clone());
                }
                if let Some(p) = self.projects.get_mut(&e.project_id) {
                    p.run_count += 1;
                }
                if !e.snapshot_id.is_empty() {
                    self.reference(&e.snapshot_id, format!("run:{}", e.run_id));
                }
            }
            Event::StageStarted(e) => {
                if let Some(r) = self.run_mut(&e.run_id, env) {
                    if r.status == "queued" {
                        r.status = "running".into();
                        r.started_at = Some(e.started_at);
                    }
                    r.stage_id = e.stage_id.clone();
                    r.iteration = e.iteration;
                }
            }
            Event::ArtifactRecorded(e) => {
                if let Some(r) = self.run_mut(&e.run_id, env) {
                    r.artifact_count += 1;
                }
                self.artifacts.insert(
                    e.artifact_id.clone(),
                    ArtifactInfo {
                        artifact_id: e.artifact_id.clone(),
                        run_id: e.run_id.clone(),
                        project_id: e.project_id.clone(),
                        path: e.path.clone(),
                        title: e.title.clone(),
                        stage_id: e.stage_id.clone(),
                        source_plugin_snapshot_id: e.source_plugin_snapshot_id.clone(),
                        source_task_kind: e.source_task_kind.clone(),
                        artifact_kind: e.artifact_kind.clone(),
                        render_kind: e.render_kind.clone(),
                        handoff_kind: e.handoff_kind.clone(),
                        parent_artifact_id: e.parent_artifact_id.clone(),
                        export_targets: e.export_targets.clone(),
                        digest: e.digest.clone(),
                        bytes: e.bytes,
                        recorded_at: e.recorded_at,
                    },
                );
            }
            Event::RunEnded(e) => {
                if let Some(r) = self.run_mut(&e.run_id, env) {
                    r.status = e.status.clone();
                    r.ended_at = Some(e.ended_at);
                    r.reason = e.reason.clone();
                    r.failure_category = e.failure_category.clone();
                }
            }
            Event::AgentStarted(e) => self.touch_run(&e.run_id, env),
            Event::AgentOutput(e) => self.touch_run(&e.run_id, env),
            Event::PromptComposed(e) => self.touch_run(&e.run_id, env),
            Event::SignalRecorded(e) => self.touch_run(&e.run_id, env),
            Event::StageCompleted(e) => self.touch_run(&e.run_id, env),
            Event::StageFailed(e) => self.touch_run(&e.run_id, env),
            Event::DevloopIteration(e) => self.touch_run(&e.run_id, env),
            Event::LoopBroken(e) => self.touch_run(&e.run_id, env),
            Event::RunResponded(e) => self.touch_run(&e.run_id, env),
            Event::SurfaceRequested(e) => {
                self.genui.requested(env, e);
                if let Some(r) = self.run_mut(&e.run_id, env) {
                    r.status = "awaiting-input".into();
                }
            }
            Event::SurfaceResponded(e) => {
                self.genui.responded(env, e);
                self.after_answer(&e.run_id, env);
            }
            Event::SurfaceTimedOut(e) => {
                self.genui.timed_out(e);
                self.after_answer(&e.run_id, env);
            }
            Event::SurfaceInvalidated(e) => {
                self.genui.invalidated(e);
                self.touch_run(&e.run_id, env);
            }
            Event::SurfaceRefused(e) => self.touch_run(&e.run_id, env),
            Event::SurfaceRevoked(e) => self.genui.revoked(e),
            Event::SurfacePrefilled(e) => self.genui.prefilled(env, e),
            Event::BrowserActionRequested(e) => self.touch_run(&e.run_id, env),
            Event::BrowserActionResulted(e) => self.touch_run(&e.run_id, env),
            Event::DaemonStarted(_)
            | Event::DaemonStopped(_)
            | Event::LogVerified(_)
            | Event::NoteRecorded(_)
            | Event::PluginInstalled(_)
            | Event::PluginUninstalled(_)
            | Event::CapabilitiesGranted(_)
            | Event::CapabilitiesRevoked(_)
            | Event::MarketplaceAdded(_)
            | Event::MarketplaceRefreshed(_)
            | Event::MarketplaceTrusted(_)
            | Event::MarketplaceRemoved(_)
            | Event::ToolRegistered(_)
            | Event::ToolRemoved(_)
            | Event::ToolsAdvertised(_)
            | Event::SnapshotBodyRecorded(_) => {}
        }
    }
}
