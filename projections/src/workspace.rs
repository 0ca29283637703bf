//! `workspace`: projects, their conversations, applied-plugin snapshots (status and who references
//! them), runs (status, current stage, idempotency keys), artifacts and GenUI rows — one small
//! record per entity in [`Records`], plus the indexes the API's lists and filters read (see
//! [`tables`]). One fold, so each event is decoded once for all of them; run event bodies stay in
//! the log (`run:<id>` streams). Reads are in `workspace_read.rs`.

use od_events::vocab::{AgentKind, FailureCategory, RunStatus};
use od_events::{Envelope, Event};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

use crate::genui;
use crate::records::{Key, RecordFold, Records, RecordsExt, RecordsWrite};
use crate::workspace_runs::{
    artifact_recorded, blob_unreferenced, run_created, run_ended, run_forked, stage_started, substrate_staged,
    update_run,
};

/// The tables of the `workspace` records (key parts after the table name; value).
pub mod tables {
    /// `<project id>` → [`super::Project`] (its `conversations` left empty; they are their own records).
    pub const PROJECT: &str = "project";
    /// `<ProjectCreated seq>` → project id: every project, oldest first.
    pub const PROJECTS: &str = "projects";
    /// `<conversation id>` → [`super::ConversationRecord`].
    pub const CONVERSATION: &str = "conversation";
    /// `<project id><ConversationCreated seq>` → conversation id.
    pub const CONVERSATIONS_BY_PROJECT: &str = "conversations_p";
    /// `<snapshot id>` → [`super::SnapshotInfo`] (`referenced_by` left empty; see `SNAPSHOT_REF`).
    pub const SNAPSHOT: &str = "snapshot";
    /// `<snapshot id><referrer>` → referrer (`project:<id>`, `conversation:<id>`, `run:<id>`).
    pub const SNAPSHOT_REF: &str = "snapshot_ref";
    /// `<SnapshotRecorded seq>` → snapshot id.
    pub const SNAPSHOTS: &str = "snapshots";
    /// `<plugin id><seq>` → snapshot id.
    pub const SNAPSHOTS_BY_PLUGIN: &str = "snapshots_pl";
    /// `<project id><seq>` → snapshot id: referenced by the project or one of its runs.
    pub const SNAPSHOTS_BY_PROJECT: &str = "snapshots_p";
    /// `<unreferenced since><seq>` → snapshot id: unreferenced and not expired (what GC reads).
    pub const SNAPSHOTS_UNREFERENCED: &str = "snapshots_u";
    /// `<run id>` → [`super::RunInfo`].
    pub const RUN: &str = "run";
    /// `<RunCreated seq>` → run id (lists read it newest first).
    pub const RUNS: &str = "runs";
    /// `<project id><seq>` → run id.
    pub const RUNS_BY_PROJECT: &str = "runs_p";
    /// `<conversation id><seq>` → run id.
    pub const RUNS_BY_CONVERSATION: &str = "runs_c";
    /// `<status><seq>` → run id (moved when the status changes).
    pub const RUNS_BY_STATUS: &str = "runs_s";
    /// `<seq>` → run id of every run not ended.
    pub const RUNS_ACTIVE: &str = "runs_a";
    /// `<clientRequestId>` → run id.
    pub const CLIENT_REQUEST: &str = "crid";
    /// `<artifact id>` → the seq of its latest `artifact_recorded` (the provenance is that event's,
    /// read from the log on demand: see [`super::ArtifactInfo::from_event`]).
    pub const ARTIFACT: &str = "artifact";
    /// `<project id><seq>` → artifact id.
    pub const ARTIFACTS_BY_PROJECT: &str = "artifacts_p";
    /// `<run id><seq>` → artifact id.
    pub const ARTIFACTS_BY_RUN: &str = "artifacts_r";
    /// `<run id>` → [`super::ForkLink`] of a forked run.
    pub const FORK_OF: &str = "fork_of";
    /// `<parent run id><seq>` → the id of a run forked from it.
    pub const FORKS_BY_PARENT: &str = "forks_p";
    /// `<digest><artifact id>` → project id: every recorded artifact naming blob `<digest>` in a
    /// project that still exists (a blob with no key here is unreferenced).
    pub const BLOB_REFS: &str = "blob_refs";
    /// `<artifact id>` → the digest of its blob.
    pub const ARTIFACT_BLOB: &str = "artifact_blob";
    /// `<project id><seq><index>` → the reference id (`staged:<seq>:<index>`) under which a file a
    /// run of the project staged (`substrate_staged`) holds its blob in [`BLOB_REFS`] /
    /// [`ARTIFACT_BLOB`], so a fork or an import can restore it while the project exists.
    pub const STAGED_BY_PROJECT: &str = "staged_p";
    /// `<digest>` → unix ms since when nothing references it (its last reference went away with a
    /// deleted project, or garbage collection found it unreferenced).
    pub const BLOB_UNREFERENCED: &str = "blob_unref";
    /// `<kind><id as bare bytes>` → id, for `run`, `project`, `conversation` and `snapshot`: the
    /// ids sorted by their text, so the ids starting with a prefix are one range (see
    /// [`crate::records::Key::raw`]).
    pub const IDS: &str = "ids";
}
use tables::*;

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
    /// Filled on read (the first conversations, oldest first); empty in the record.
    pub conversations: Vec<Conversation>,
    pub run_count: u64,
    /// Seq of its `ProjectCreated`.
    #[serde(default)]
    pub seq: u64,
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

/// A conversation's record: the conversation, its project and its seq.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationRecord {
    pub project_id: String,
    pub seq: u64,
    pub conversation: Conversation,
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
    /// `project:<id>`, `conversation:<id>`, `run:<id>` that use it (filled on read, bounded).
    pub referenced_by: BTreeSet<String>,
    /// How many referrers it has.
    #[serde(default)]
    pub ref_count: u64,
    /// When it last became unreferenced (the TTL counts from here); None while referenced.
    pub unreferenced_since: Option<i64>,
    pub seq: u64,
}

/// One run's summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunInfo {
    pub run_id: String,
    pub project_id: String,
    pub conversation_id: String,
    pub client_request_id: String,
    pub snapshot_id: String,
    pub plugin_id: String,
    pub agent: AgentKind,
    pub status: RunStatus,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub stage_id: String,
    pub iteration: u32,
    pub reason: String,
    pub failure_category: FailureCategory,
    pub artifact_count: u32,
    /// Stream version of the run's last event (its event ids are 0..=last_version). Read from the
    /// run's stream head when the run is read; the record keeps its `RunCreated`'s (so the many
    /// events that change nothing else write nothing).
    pub last_version: u64,
    /// Seq of its `RunCreated` (the key of every run index).
    #[serde(default)]
    pub seq: u64,
    /// The run it was forked from (empty: not a fork).
    #[serde(default)]
    pub parent_run_id: String,
    /// The parent's last inherited event (meaningful when `parent_run_id` is set).
    #[serde(default)]
    pub fork_event_id: u64,
}

/// Where a forked run came from (see `od_events::runs::RunForked`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkLink {
    pub parent_run_id: String,
    pub parent_event_id: u64,
    pub stage_id: String,
    pub iteration: u32,
    pub seq: u64,
}

impl RunInfo {
    /// True once the run ended.
    pub fn is_terminal(&self) -> bool {
        self.status.is_terminal()
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

impl ArtifactInfo {
    /// The provenance an `artifact_recorded` event states (the records keep only its seq).
    pub fn from_event(e: &od_events::runs::ArtifactRecorded) -> Self {
        Self {
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
        }
    }
}

/// The `workspace` fold (its state is the records).
#[derive(Debug, Clone, Copy, Default)]
pub struct Workspace;

/// The GC index key of a snapshot, when it belongs there.
fn unref_key(s: &SnapshotInfo) -> Option<Key> {
    let since = s.unreferenced_since?;
    (s.status != "expired" && s.ref_count == 0).then(|| Key::new(SNAPSHOTS_UNREFERENCED).i(since).n(s.seq))
}

/// Writes a snapshot record and moves its GC index entry.
fn save_snapshot(rec: &mut dyn Records, old: Option<&SnapshotInfo>, new: &SnapshotInfo) {
    let (was, is) = (old.and_then(unref_key), unref_key(new));
    if was != is {
        if let Some(k) = was {
            rec.delete(&k);
        }
        if let Some(k) = &is {
            rec.put(k, &new.snapshot_id);
        }
    }
    rec.put(&Key::new(SNAPSHOT).s(&new.snapshot_id), new);
}

fn update_snapshot(rec: &mut dyn Records, id: &str, f: impl FnOnce(&mut SnapshotInfo)) {
    let Some(old) = rec.get::<SnapshotInfo>(&Key::new(SNAPSHOT).s(id)) else { return };
    let mut new = old.clone();
    f(&mut new);
    if new != old {
        save_snapshot(rec, Some(&old), &new);
    }
}

/// `by` now uses snapshot `id` (`project` is the project it counts for, if any).
pub(crate) fn reference(rec: &mut dyn Records, id: &str, by: String, project: &str) {
    let Some(seq) = rec.get::<SnapshotInfo>(&Key::new(SNAPSHOT).s(id)).map(|s| s.seq) else { return };
    if !project.is_empty() {
        rec.put(&Key::new(SNAPSHOTS_BY_PROJECT).s(project).n(seq), &id);
    }
    let k = Key::new(SNAPSHOT_REF).s(id).s(&by);
    if rec.has(&k) {
        return;
    }
    rec.put(&k, &by);
    update_snapshot(rec, id, |s| {
        s.ref_count += 1;
        s.unreferenced_since = None;
    });
}

fn unreference(rec: &mut dyn Records, id: &str, by: &str, at: i64) {
    let k = Key::new(SNAPSHOT_REF).s(id).s(by);
    if !rec.has(&k) {
        return;
    }
    rec.delete(&k);
    update_snapshot(rec, id, |s| {
        s.ref_count = s.ref_count.saturating_sub(1);
        if s.ref_count == 0 && s.unreferenced_since.is_none() {
            s.unreferenced_since = Some(at);
        }
    });
}

fn snapshot_recorded(rec: &mut dyn Records, env: &Envelope, e: &od_events::snapshots::SnapshotRecorded) {
    let info = SnapshotInfo {
        snapshot_id: e.snapshot_id.clone(),
        plugin_id: e.plugin_id.clone(),
        plugin_version: e.plugin_version.clone(),
        manifest_source_digest: e.manifest_source_digest.clone(),
        plugin_source_digest: e.plugin_source_digest.clone(),
        applied_at: e.applied_at,
        status: "fresh".into(),
        referenced_by: BTreeSet::new(),
        ref_count: 0,
        unreferenced_since: Some(e.applied_at),
        seq: env.seq,
    };
    let old = rec.get::<SnapshotInfo>(&Key::new(SNAPSHOT).s(&e.snapshot_id));
    save_snapshot(rec, old.as_ref(), &info);
    rec.put(&Key::new(SNAPSHOTS).n(env.seq), &e.snapshot_id);
    rec.put(&id_key("snapshot", &e.snapshot_id), &e.snapshot_id);
    rec.put(&Key::new(SNAPSHOTS_BY_PLUGIN).s(&e.plugin_id).n(env.seq), &e.snapshot_id);
    if !e.project_id.is_empty() && e.run_id.is_empty() {
        reference(rec, &e.snapshot_id, format!("project:{}", e.project_id), &e.project_id);
    }
    if !e.run_id.is_empty() {
        reference(rec, &e.snapshot_id, format!("run:{}", e.run_id), &e.project_id);
    }
}

fn project_created(rec: &mut dyn Records, env: &Envelope, e: &od_events::projects::ProjectCreated) {
    let p = Project {
        id: e.project_id.clone(),
        name: e.name.clone(),
        dir: e.dir.clone(),
        snapshot_id: e.snapshot_id.clone(),
        metadata_json: e.metadata_json.clone(),
        imported_from: e.imported_from.clone(),
        created_at: env.recorded_at,
        conversations: Vec::new(),
        run_count: 0,
        seq: env.seq,
    };
    if let Some(old) = rec.get::<Project>(&Key::new(PROJECT).s(&p.id)) {
        rec.delete(&Key::new(PROJECTS).n(old.seq));
    }
    rec.put(&Key::new(PROJECT).s(&p.id), &p);
    rec.put(&Key::new(PROJECTS).n(env.seq), &p.id);
    rec.put(&id_key("project", &p.id), &p.id);
    if !e.snapshot_id.is_empty() {
        reference(rec, &e.snapshot_id, format!("project:{}", e.project_id), &e.project_id);
    }
}

fn project_deleted(rec: &mut dyn Records, env: &Envelope, id: &str) {
    let Some(p) = rec.get::<Project>(&Key::new(PROJECT).s(id)) else { return };
    rec.delete(&Key::new(PROJECT).s(id));
    rec.delete(&Key::new(PROJECTS).n(p.seq));
    rec.delete(&id_key("project", id));
    unreference_blobs(rec, env, id);
    unreference(rec, &p.snapshot_id, &format!("project:{id}"), env.recorded_at);
    let prefix = Key::new(CONVERSATIONS_BY_PROJECT).s(id);
    for (k, cid) in rec.ids(&prefix, None, false, usize::MAX) {
        rec.delete_raw(&k);
        if let Some(c) = rec.get::<ConversationRecord>(&Key::new(CONVERSATION).s(&cid)) {
            rec.delete(&Key::new(CONVERSATION).s(&cid));
            rec.delete(&id_key("conversation", &cid));
            let by = format!("conversation:{cid}");
            unreference(rec, &c.conversation.snapshot_id, &by, env.recorded_at);
        }
    }
}

fn conversation_created(rec: &mut dyn Records, env: &Envelope, e: &od_events::projects::ConversationCreated) {
    if rec.has(&Key::new(PROJECT).s(&e.project_id)) {
        let c = ConversationRecord {
            project_id: e.project_id.clone(),
            seq: env.seq,
            conversation: Conversation {
                id: e.conversation_id.clone(),
                title: e.title.clone(),
                snapshot_id: e.snapshot_id.clone(),
                created_at: env.recorded_at,
            },
        };
        rec.put(&Key::new(CONVERSATION).s(&e.conversation_id), &c);
        rec.put(&Key::new(CONVERSATIONS_BY_PROJECT).s(&e.project_id).n(env.seq), &e.conversation_id);
        rec.put(&id_key("conversation", &e.conversation_id), &e.conversation_id);
    }
    if !e.snapshot_id.is_empty() {
        reference(rec, &e.snapshot_id, format!("conversation:{}", e.conversation_id), "");
    }
}

/// A deleted project's artifacts no longer hold their blobs; a blob whose last reference went
/// away is unreferenced from then on.
fn unreference_blobs(rec: &mut dyn Records, env: &Envelope, project_id: &str) {
    let mut ids = rec.ids(&Key::new(ARTIFACTS_BY_PROJECT).s(project_id), None, false, usize::MAX);
    ids.extend(rec.ids(&Key::new(STAGED_BY_PROJECT).s(project_id), None, false, usize::MAX));
    for (_, artifact_id) in ids {
        let blob_key = Key::new(ARTIFACT_BLOB).s(&artifact_id);
        let Some(digest) = rec.get::<String>(&blob_key) else { continue };
        rec.delete(&blob_key);
        rec.delete(&Key::new(BLOB_REFS).s(&digest).s(&artifact_id));
        if rec.ids(&Key::new(BLOB_REFS).s(&digest), None, false, 1).is_empty() {
            rec.put(&Key::new(BLOB_UNREFERENCED).s(&digest), &env.recorded_at);
        }
    }
}

fn mark_stale(s: &mut SnapshotInfo) {
    if s.status == "fresh" {
        s.status = "stale".into();
    }
}

/// The key of `id` in the [`IDS`] index of `kind`.
pub(crate) fn id_key(kind: &str, id: &str) -> Key {
    Key::new(IDS).s(kind).raw(id)
}

impl RecordFold for Workspace {
    const NAME: &'static str = "workspace";
    const VERSION: u32 = 9;

    fn apply(rec: &mut dyn Records, env: &Envelope, event: &Event) {
        match event {
            Event::SnapshotRecorded(e) => snapshot_recorded(rec, env, e),
            Event::SnapshotMarkedStale(e) => update_snapshot(rec, &e.snapshot_id, mark_stale),
            Event::SnapshotExpired(e) => update_snapshot(rec, &e.snapshot_id, |s| s.status = "expired".into()),
            Event::ProjectCreated(e) => project_created(rec, env, e),
            Event::ProjectDeleted(e) => project_deleted(rec, env, &e.project_id),
            Event::ConversationCreated(e) => conversation_created(rec, env, e),
            Event::RunCreated(e) => run_created(rec, env, e),
            Event::RunForked(e) => run_forked(rec, env, e),
            Event::BlobExpired(e) => rec.delete(&Key::new(BLOB_UNREFERENCED).s(&e.digest)),
            Event::BlobUnreferenced(e) => blob_unreferenced(rec, e),
            Event::StageStarted(e) => update_run(rec, &e.run_id, |r| stage_started(r, e)),
            Event::ArtifactRecorded(e) => artifact_recorded(rec, env, e),
            Event::RunEnded(e) => update_run(rec, &e.run_id, |r| run_ended(r, e)),
            // A run's other events change nothing its record holds (its `last_version` is read
            // from its stream head).
            Event::SubstrateStaged(e) => substrate_staged(rec, env, e),
            Event::AgentStarted(_)
            | Event::AgentOutput(_)
            | Event::PromptComposed(_)
            | Event::SignalRecorded(_)
            | Event::StageCompleted(_)
            | Event::StageFailed(_)
            | Event::DevloopIteration(_)
            | Event::LoopBroken(_)
            | Event::RunResponded(_)
            | Event::SurfaceRefused(_)
            | Event::BrowserActionRequested(_)
            | Event::ConversationMessage(_)
            | Event::FollowUpPlanned(_)
            | Event::BrowserActionResulted(_) => {}
            Event::SurfaceRequested(e) => genui::requested(rec, env, e),
            Event::SurfaceResponded(e) => genui::responded(rec, env, e),
            Event::SurfaceTimedOut(e) => genui::timed_out(rec, e),
            Event::SurfaceInvalidated(e) => genui::invalidated(rec, e),
            Event::SurfaceRevoked(e) => genui::revoked(rec, e),
            Event::SurfacePrefilled(e) => genui::prefilled(rec, env, e),
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
            | Event::ConnectorConnected(_)
            | Event::PluginReloaded(_)
            | Event::ConnectorDisconnected(_)
            | Event::McpServerAuthorized(_)
            | Event::McpServerDeauthorized(_)
            | Event::ToolRemoved(_)
            | Event::ToolsAdvertised(_)
            | Event::SnapshotBodyRecorded(_) => {}
        }
    }
}
