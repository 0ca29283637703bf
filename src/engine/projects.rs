//! Projects and conversations: create (optionally applying a plugin, recording its snapshot and
//! pinning it), import an existing folder, list, show, delete. A project owns a directory for its
//! files: `projects/<id>/` under the data dir, or the imported folder itself.

use od_events::projects::{ConversationCreated, ProjectCreated, ProjectDeleted};
use od_events::{Event, StreamId};
use od_projections::workspace_read as wr;
use od_projections::workspace_read::Keyed;
use od_projections::{ArtifactInfo, Conversation, Project};
use serde_json::{Map, Value};
use std::path::PathBuf;

use super::apply::ApplyRequest;
use super::errors::WorkError;
use super::Engine;
use crate::limits::MAX_INLINE_CONVERSATIONS;
use crate::page::{page_keyed, Page, PageReq};
use crate::store::{decode_frame, Append, Expected, StoreError};

/// What a project is created with.
#[derive(Debug, Default, Clone)]
pub struct NewProject {
    /// Client-chosen id (else generated).
    pub id: Option<String>,
    pub name: String,
    pub plugin_id: Option<String>,
    pub apply: ApplyRequest,
    pub snapshot_id: Option<String>,
    pub metadata: Map<String, Value>,
    /// An existing folder to adopt instead of a fresh directory.
    pub import_from: Option<PathBuf>,
    /// The creator's exec right (`gate.rs`): adopting a folder, and the build and test commands
    /// of `metadata`, need it.
    pub exec: super::gate::ExecRight,
}

/// The metadata keys holding commands the `build-test` worker runs.
const COMMAND_KEYS: [&str; 2] = ["buildCommand", "testCommand"];

/// What a create did.
pub struct Created {
    pub project: Project,
    pub conversation_id: String,
    pub snapshot_id: Option<String>,
}

/// Checks a client-supplied id: 1–128 of `[A-Za-z0-9._-]`, starting alphanumeric.
pub fn check_id(field: &str, id: &str) -> Result<(), WorkError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id.as_bytes()[0].is_ascii_alphanumeric()
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(WorkError::invalid(
            field,
            format!("{id:?} must be 1-128 of [A-Za-z0-9._-], starting with a letter or digit"),
        ))
    }
}

/// A snapshot a new project or run uses: its id, and its `snapshot_recorded` when it is a fresh
/// apply still to be written.
pub(crate) struct SnapshotChoice {
    pub id: String,
    /// A fresh snapshot's appends (its body's when new, then its own).
    pub append: Option<Vec<Append>>,
}

/// A project creation, checked and built but not yet written.
pub(crate) struct ProjectPlan {
    pub id: String,
    pub conversation_id: String,
    pub snapshot_id: Option<String>,
    /// The folder to make once the events are durable (none for an import).
    pub(super) folder: Option<PathBuf>,
    /// The snapshot's append (when fresh), then the project's.
    pub appends: Vec<Append>,
}

/// A conflict on the project's stream means the id was taken meanwhile.
pub(crate) fn exists_or(e: StoreError, project_id: &str) -> WorkError {
    match e {
        StoreError::Conflict { stream, .. } if stream.starts_with("project:") => {
            WorkError::Exists { what: "project", id: project_id.into() }
        }
        other => other.into(),
    }
}

fn stream(id: &str) -> Result<StreamId, WorkError> {
    StreamId::typed("project", id).map_err(|e| WorkError::invalid("id", e.to_string()))
}

impl Engine {
    /// The provenance of each artifact in a page of `(cursor key, seq)`: the `artifact_recorded`
    /// event at that seq, read from the log (the records keep only the seq).
    pub fn artifacts_at(&self, seqs: Keyed<u64>) -> Result<Keyed<ArtifactInfo>, WorkError> {
        let mut out = Vec::with_capacity(seqs.len());
        for (key, seq) in seqs {
            let frames = self.store.read_from(seq, 1)?;
            let bad =
                || StoreError::Corrupt { seq, reason: "an artifact record names no artifact_recorded event".into() };
            let f = frames.first().filter(|f| f.seq() == seq).ok_or_else(bad)?;
            let Event::ArtifactRecorded(e) = decode_frame(f.view())?.event else { return Err(bad().into()) };
            out.push((key, ArtifactInfo::from_event(&e)));
        }
        Ok(out)
    }

    /// One project.
    pub fn project(&self, id: &str) -> Result<Project, WorkError> {
        self.workspace
            .read(|w| wr::project(w, id, MAX_INLINE_CONVERSATIONS))?
            .ok_or_else(|| WorkError::ProjectNotFound(id.into()))
    }

    /// One page of projects, oldest first (by the seq of their `ProjectCreated`; new projects land
    /// after every cursor).
    pub fn projects_page(&self, req: &PageReq) -> Result<Page<Project>, WorkError> {
        let items =
            self.workspace.read(|w| wr::projects(w, req.after.as_deref(), req.limit + 1, MAX_INLINE_CONVERSATIONS))?;
        Ok(page_keyed("projects", req, items, false))
    }

    /// One page of a project's conversations, oldest first (by the seq of their
    /// `ConversationCreated`).
    pub fn conversations_page(&self, project_id: &str, req: &PageReq) -> Result<Page<Conversation>, WorkError> {
        self.project(project_id)?;
        let items =
            self.workspace.read(|w| wr::project_conversations(w, project_id, req.after.as_deref(), req.limit + 1))?;
        Ok(page_keyed("conversations", req, items, false))
    }

    /// The ids of a project's runs, oldest first (one project's index, not every run).
    pub fn project_run_ids(&self, project_id: &str) -> Result<Vec<String>, WorkError> {
        Ok(self.workspace.read(|w| wr::project_run_ids(w, project_id, usize::MAX))?)
    }

    /// Conversation `id` of `project` (one of its inline conversations, else its record).
    pub fn conversation_of(&self, project: &Project, id: &str) -> Result<Conversation, WorkError> {
        if let Some(c) = project.conversations.iter().find(|x| x.id == id) {
            return Ok(c.clone());
        }
        match self.workspace.read(|w| wr::conversation(w, id))? {
            Some(c) if c.project_id == project.id => Ok(c.conversation),
            _ => Err(WorkError::ConversationNotFound(id.into())),
        }
    }

    /// The absolute directory of a project.
    pub fn project_dir(&self, p: &Project) -> PathBuf {
        let d = PathBuf::from(&p.dir);
        if d.is_absolute() {
            d
        } else {
            self.data_dir.join(d)
        }
    }

    /// Resolves the snapshot a new project or run uses: an explicit snapshot id (must exist, not be
    /// expired, and — when `refuse_stale` — not be stale), else a fresh apply of `plugin_id`, whose
    /// `snapshot_recorded` the caller writes with its own events.
    pub(crate) fn resolve_snapshot(
        &self,
        snapshot_id: Option<&str>,
        plugin_id: Option<&str>,
        apply: &ApplyRequest,
        project_id: &str,
        run_id: &str,
        refuse_stale: bool,
    ) -> Result<Option<SnapshotChoice>, WorkError> {
        if let Some(sid) = snapshot_id.filter(|s| !s.is_empty()) {
            let info = self.snapshot_info(sid)?;
            if info.status == "expired" {
                return Err(WorkError::SnapshotNotFound(sid.into()));
            }
            if refuse_stale && info.status == "stale" {
                return Err(WorkError::SnapshotStale {
                    snapshot_id: sid.into(),
                    plugin_id: info.plugin_id,
                    snapshot_version: info.plugin_version,
                });
            }
            return Ok(Some(SnapshotChoice { id: sid.to_string(), append: None }));
        }
        match plugin_id.filter(|p| !p.is_empty()) {
            Some(pid) => {
                let (id, append) = self.snapshot_append(pid, apply, project_id, run_id)?;
                Ok(Some(SnapshotChoice { id, append: Some(append) }))
            }
            None => Ok(None),
        }
    }

    /// Checks a new project (or import) and builds its events — its snapshot's, then its own with
    /// a first conversation — writing nothing.
    pub(crate) fn plan_project(&self, req: NewProject) -> Result<ProjectPlan, WorkError> {
        let id = match &req.id {
            Some(id) => {
                check_id("id", id)?;
                id.clone()
            }
            None => self.ids.new_id(),
        };
        if self.workspace.read(|w| wr::project(w, &id, 0).is_some())? {
            return Err(WorkError::Exists { what: "project", id });
        }
        for key in COMMAND_KEYS.iter().filter(|k| req.metadata.contains_key(**k)) {
            let field = format!("metadata.{key}");
            super::gate::pass(req.exec, super::gate::Reach::WorkerCommand { field: &field }, None)?;
        }
        let (dir, imported_from) = match &req.import_from {
            Some(src) => {
                super::gate::pass(req.exec, super::gate::Reach::AdoptFolder, None)?;
                let abs =
                    src.canonicalize().map_err(|e| WorkError::invalid("path", format!("{}: {e}", src.display())))?;
                if !abs.is_dir() {
                    return Err(WorkError::invalid("path", format!("{} is not a directory", abs.display())));
                }
                super::gate::adoptable(&abs, &self.data_dir, self.config.home.as_deref())?;
                let s = abs.to_string_lossy().to_string();
                (s.clone(), s)
            }
            None => (format!("projects/{id}"), String::new()),
        };
        let snapshot =
            self.resolve_snapshot(req.snapshot_id.as_deref(), req.plugin_id.as_deref(), &req.apply, &id, "", false)?;
        let name = if req.name.trim().is_empty() { id.clone() } else { req.name.clone() };
        let conversation_id = self.ids.new_id();
        let folder = imported_from.is_empty().then(|| self.data_dir.join(&dir));
        let snapshot_id = snapshot.as_ref().map(|s| s.id.clone());
        let events = vec![
            Event::ProjectCreated(ProjectCreated {
                project_id: id.clone(),
                name,
                dir,
                snapshot_id: snapshot_id.clone().unwrap_or_default(),
                metadata_json: Value::Object(req.metadata).to_string(),
                imported_from,
            }),
            Event::ConversationCreated(ConversationCreated {
                conversation_id: conversation_id.clone(),
                project_id: id.clone(),
                title: "main".into(),
                snapshot_id: String::new(),
            }),
        ];
        let mut appends: Vec<Append> = snapshot.and_then(|s| s.append).into_iter().flatten().collect();
        appends.push(Append::new(stream(&id)?, events).expect(Expected::NoStream));
        Ok(ProjectPlan { id, conversation_id, snapshot_id, folder, appends })
    }

    /// After a planned project's events are durable: its folder, durably (best effort — a run or a
    /// file write makes it again when it is missing).
    pub(crate) fn make_project_folder(&self, plan: &ProjectPlan) {
        if let Some(folder) = &plan.folder {
            let _ = super::safe_fs::Root::create(folder);
        }
    }

    /// [`Engine::make_project_folder`] without its fsyncs, for a project made by a run's start:
    /// the run's executor owes them and pays them with the run's files, before anything in the
    /// folder is acknowledged (`runner::pipeline::load`), so the start's answer waits for none.
    pub(crate) fn make_started_folder(&self, started: &super::run_create::Started) {
        if let Some(folder) = &started.folder {
            let _ = super::safe_fs::Root::create_in(folder, &mut crate::durable::Syncs::new());
        }
    }

    /// Creates (or imports) a project with a first conversation: every check first, then its
    /// events (with a fresh snapshot's) in one atomic append, then its folder.
    pub fn create_project(&self, req: NewProject) -> Result<Created, WorkError> {
        let mut plan = self.plan_project(req)?;
        let appends = std::mem::take(&mut plan.appends);
        self.append_sharing_bodies(appends).map_err(|e| exists_or(e, &plan.id))?;
        self.make_project_folder(&plan);
        Ok(Created {
            project: self.project(&plan.id)?,
            conversation_id: plan.conversation_id,
            snapshot_id: plan.snapshot_id,
        })
    }

    /// Starts a conversation in a project.
    pub fn create_conversation(
        &self,
        project_id: &str,
        title: &str,
        snapshot_id: Option<&str>,
    ) -> Result<String, WorkError> {
        self.project(project_id)?;
        if let Some(s) = snapshot_id {
            self.snapshot_info(s)?;
        }
        let id = self.ids.new_id();
        let e = ConversationCreated {
            conversation_id: id.clone(),
            project_id: project_id.into(),
            title: title.into(),
            snapshot_id: snapshot_id.unwrap_or("").into(),
        };
        self.store.append(Append::new(stream(project_id)?, vec![Event::ConversationCreated(e)]))?;
        Ok(id)
    }

    /// Deletes a project (refused while one of its runs is active). Its directory is removed when
    /// od created it; an imported folder is left alone.
    pub fn delete_project(&self, id: &str) -> Result<Project, WorkError> {
        let p = self.project(id)?;
        let active = self.active_runs()?.into_iter().find(|r| r.project_id == id);
        if let Some(r) = active {
            return Err(WorkError::RunState {
                run_id: r.run_id,
                status: r.status,
                message: format!("project {id} has an active run; cancel it first"),
            });
        }
        let runs = self.project_run_ids(id)?;
        self.store
            .append(Append::new(stream(id)?, vec![Event::ProjectDeleted(ProjectDeleted { project_id: id.into() })]))?;
        if p.imported_from.is_empty() {
            let _ = std::fs::remove_dir_all(self.project_dir(&p));
        }
        // The working folders of its forks go too (each is rebuilt from the log if ever needed).
        for run_id in runs {
            let _ = std::fs::remove_dir_all(self.data_dir.join("forks").join(run_id));
        }
        Ok(p)
    }
}
