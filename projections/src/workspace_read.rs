//! Reads of the `workspace` records: point lookups and index pages. Every list reads one index in
//! its order, from a cursor key, at most `limit` items — never every record. A page item comes with
//! its cursor key (the index key after the index's prefix), so a caller resumes strictly after it.

use crate::genui::{self, SurfaceRow};
use crate::records::{Key, RecordsExt, RecordsRead};
use crate::workspace::tables::*;
use crate::workspace::{Conversation, ConversationRecord, Project, RunInfo, SnapshotInfo};

/// Items of one page, each with its cursor key.
pub type Keyed<T> = Vec<(Vec<u8>, T)>;

/// Reads `limit` ids of the index under `prefix` past the cursor key `after`, then their records.
fn page<R: RecordsRead + ?Sized, T: serde::de::DeserializeOwned>(
    rec: &R,
    prefix: &Key,
    table: &str,
    after: Option<&[u8]>,
    descending: bool,
    limit: usize,
) -> Keyed<T> {
    let after = after.map(|a| [prefix.0.as_slice(), a].concat());
    rec.ids(prefix, after.as_deref(), descending, limit)
        .into_iter()
        .filter_map(|(k, id)| Some((Key::suffix(&k, prefix).to_vec(), rec.get::<T>(&Key::new(table).s(&id))?)))
        .collect()
}

/// One run.
pub fn run<R: RecordsRead + ?Sized>(rec: &R, id: &str) -> Option<RunInfo> {
    rec.get(&Key::new(RUN).s(id))
}

/// The run a `clientRequestId` created.
pub fn run_by_client_request<R: RecordsRead + ?Sized>(rec: &R, crid: &str) -> Option<String> {
    rec.get(&Key::new(CLIENT_REQUEST).s(crid))
}

/// Which runs a list wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    pub project_id: Option<String>,
    pub conversation_id: Option<String>,
    /// A status, or `active` (not ended).
    pub status: Option<String>,
}

impl RunFilter {
    fn admits(&self, r: &RunInfo) -> bool {
        self.project_id.as_ref().is_none_or(|p| &r.project_id == p)
            && self.conversation_id.as_ref().is_none_or(|c| &r.conversation_id == c)
            && match self.status.as_deref() {
                None => true,
                Some("active") => !r.is_terminal(),
                Some(s) => r.status.as_str() == s,
            }
    }

    /// The index that serves this filter (the most selective one named).
    fn index(&self) -> Key {
        if let Some(c) = &self.conversation_id {
            return Key::new(RUNS_BY_CONVERSATION).s(c);
        }
        if let Some(p) = &self.project_id {
            return Key::new(RUNS_BY_PROJECT).s(p);
        }
        match self.status.as_deref() {
            Some("active") => Key::new(RUNS_ACTIVE),
            Some(s) => Key::new(RUNS_BY_STATUS).s(s),
            None => Key::new(RUNS),
        }
    }
}

/// Runs newest first (by `RunCreated` seq; the cursor key is that seq, 8 bytes BE), past `after`:
/// up to `limit` that pass the filter, reading the filter's index (`examine` bounds how many index
/// entries a page may look at when a second filter narrows the first). Also returns the key of the
/// last entry examined when that bound stopped the read short of `limit` (resume after it).
pub fn runs<R: RecordsRead + ?Sized>(
    rec: &R,
    filter: &RunFilter,
    after: Option<&[u8]>,
    limit: usize,
    examine: usize,
) -> (Keyed<RunInfo>, Option<Vec<u8>>) {
    let prefix = filter.index();
    let mut out = Vec::new();
    let mut cursor = after.map(|a| a.to_vec());
    let mut seen = 0;
    while out.len() < limit && seen < examine {
        let batch: Keyed<RunInfo> = page(rec, &prefix, RUN, cursor.as_deref(), true, (limit - out.len()).max(16));
        if batch.is_empty() {
            break;
        }
        for (k, r) in batch {
            seen += 1;
            cursor = Some(k.clone());
            if filter.admits(&r) && out.len() < limit {
                out.push((k, r));
            }
        }
    }
    let stopped = (out.len() < limit && seen >= examine).then_some(cursor).flatten();
    (out, stopped)
}

/// The ids of runs not ended (at most `limit`), oldest first.
pub fn active_runs<R: RecordsRead + ?Sized>(rec: &R, limit: usize) -> Vec<RunInfo> {
    page(rec, &Key::new(RUNS_ACTIVE), RUN, None, false, limit).into_iter().map(|(_, r)| r).collect()
}

/// One project, with up to `conversations` of its conversations (oldest first).
pub fn project<R: RecordsRead + ?Sized>(rec: &R, id: &str, conversations: usize) -> Option<Project> {
    let mut p: Project = rec.get(&Key::new(PROJECT).s(id))?;
    p.conversations = project_conversations(rec, id, None, conversations).into_iter().map(|(_, c)| c).collect();
    Some(p)
}

/// Projects oldest first (by `ProjectCreated` seq), each with up to `conversations` conversations.
pub fn projects<R: RecordsRead + ?Sized>(
    rec: &R,
    after: Option<&[u8]>,
    limit: usize,
    conversations: usize,
) -> Keyed<Project> {
    let mut v: Keyed<Project> = page(rec, &Key::new(PROJECTS), PROJECT, after, false, limit);
    for (_, p) in &mut v {
        p.conversations = project_conversations(rec, &p.id, None, conversations).into_iter().map(|(_, c)| c).collect();
    }
    v
}

/// One conversation and its project id.
pub fn conversation<R: RecordsRead + ?Sized>(rec: &R, id: &str) -> Option<ConversationRecord> {
    rec.get(&Key::new(CONVERSATION).s(id))
}

/// A project's conversations, oldest first (by `ConversationCreated` seq).
pub fn project_conversations<R: RecordsRead + ?Sized>(
    rec: &R,
    project_id: &str,
    after: Option<&[u8]>,
    limit: usize,
) -> Keyed<Conversation> {
    let v: Keyed<ConversationRecord> =
        page(rec, &Key::new(CONVERSATIONS_BY_PROJECT).s(project_id), CONVERSATION, after, false, limit);
    v.into_iter().map(|(k, c)| (k, c.conversation)).collect()
}

/// One snapshot's bookkeeping, with up to `refs` of its referrers.
pub fn snapshot<R: RecordsRead + ?Sized>(rec: &R, id: &str, refs: usize) -> Option<SnapshotInfo> {
    let mut s: SnapshotInfo = rec.get(&Key::new(SNAPSHOT).s(id))?;
    s.referenced_by = rec.ids(&Key::new(SNAPSHOT_REF).s(id), None, false, refs).into_iter().map(|(_, by)| by).collect();
    Some(s)
}

fn with_refs<R: RecordsRead + ?Sized>(rec: &R, v: Keyed<SnapshotInfo>, refs: usize) -> Keyed<SnapshotInfo> {
    v.into_iter().filter_map(|(k, s)| Some((k, snapshot(rec, &s.snapshot_id, refs)?))).collect()
}

/// Snapshots oldest first (by `SnapshotRecorded` seq), optionally of one plugin.
pub fn snapshots<R: RecordsRead + ?Sized>(
    rec: &R,
    plugin_id: Option<&str>,
    after: Option<&[u8]>,
    limit: usize,
    refs: usize,
) -> Keyed<SnapshotInfo> {
    let prefix = match plugin_id {
        Some(p) => Key::new(SNAPSHOTS_BY_PLUGIN).s(p),
        None => Key::new(SNAPSHOTS),
    };
    with_refs(rec, page(rec, &prefix, SNAPSHOT, after, false, limit), refs)
}

/// Snapshots a project or one of its runs references, oldest first (by `SnapshotRecorded` seq).
pub fn project_snapshots<R: RecordsRead + ?Sized>(
    rec: &R,
    project_id: &str,
    after: Option<&[u8]>,
    limit: usize,
    refs: usize,
) -> Keyed<SnapshotInfo> {
    with_refs(rec, page(rec, &Key::new(SNAPSHOTS_BY_PROJECT).s(project_id), SNAPSHOT, after, false, limit), refs)
}

/// Unreferenced, unexpired snapshots, longest unreferenced first (what GC considers).
pub fn unreferenced_snapshots<R: RecordsRead + ?Sized>(
    rec: &R,
    after: Option<&[u8]>,
    limit: usize,
) -> Keyed<SnapshotInfo> {
    page(rec, &Key::new(SNAPSHOTS_UNREFERENCED), SNAPSHOT, after, false, limit)
}

/// A project's artifacts, oldest first (by `ArtifactRecorded` seq): for each, the seq of the
/// `artifact_recorded` event that states its provenance (its latest), which the caller reads from
/// the log ([`crate::ArtifactInfo::from_event`]).
pub fn project_artifacts<R: RecordsRead + ?Sized>(
    rec: &R,
    project_id: &str,
    after: Option<&[u8]>,
    limit: usize,
) -> Keyed<u64> {
    page(rec, &Key::new(ARTIFACTS_BY_PROJECT).s(project_id), ARTIFACT, after, false, limit)
}

/// A run's artifacts, oldest first (by `ArtifactRecorded` seq), like [`project_artifacts`].
pub fn run_artifacts<R: RecordsRead + ?Sized>(rec: &R, run_id: &str, after: Option<&[u8]>, limit: usize) -> Keyed<u64> {
    page(rec, &Key::new(ARTIFACTS_BY_RUN).s(run_id), ARTIFACT, after, false, limit)
}

/// The kinds of id [`ids_with_prefix`] resolves.
pub const ID_KINDS: [&str; 4] = ["run", "project", "conversation", "snapshot"];

/// Up to `limit` ids of `kind` (one of [`ID_KINDS`]) that start with `prefix`, in text order: one
/// range read of the ids index, however many ids there are.
pub fn ids_with_prefix<R: RecordsRead + ?Sized>(rec: &R, kind: &str, prefix: &str, limit: usize) -> Vec<String> {
    rec.ids(&crate::workspace::id_key(kind, prefix), None, false, limit).into_iter().map(|(_, id)| id).collect()
}

/// One GenUI row.
pub fn surface<R: RecordsRead + ?Sized>(rec: &R, id: &str) -> Option<SurfaceRow> {
    rec.get(&Key::new(genui::ROW).s(id))
}

/// A run's GenUI rows, oldest first (by row id: the run's stream version), or newest first.
pub fn run_surfaces<R: RecordsRead + ?Sized>(
    rec: &R,
    run_id: &str,
    after: Option<&[u8]>,
    descending: bool,
    limit: usize,
) -> Keyed<SurfaceRow> {
    page(rec, &Key::new(genui::ROWS_BY_RUN).s(run_id), genui::ROW, after, descending, limit)
}

/// A project's GenUI rows, oldest first (by the seq that created each), or newest first.
pub fn project_surfaces<R: RecordsRead + ?Sized>(
    rec: &R,
    project_id: &str,
    after: Option<&[u8]>,
    descending: bool,
    limit: usize,
) -> Keyed<SurfaceRow> {
    page(rec, &Key::new(genui::ROWS_BY_PROJECT).s(project_id), genui::ROW, after, descending, limit)
}

/// The resolved rows of a surface in a project, every tier (what a revoke considers).
pub fn remembered_rows<R: RecordsRead + ?Sized>(
    rec: &R,
    project_id: &str,
    surface_id: &str,
    limit: usize,
) -> Vec<SurfaceRow> {
    rec.ids(&Key::new(genui::REMEMBERED).s(project_id).s(surface_id), None, false, limit)
        .into_iter()
        .filter_map(|(_, id)| surface(rec, &id))
        .collect()
}

/// The run ids of a project, oldest first (at most `limit`).
pub fn project_run_ids<R: RecordsRead + ?Sized>(rec: &R, project_id: &str, limit: usize) -> Vec<String> {
    rec.ids(&Key::new(RUNS_BY_PROJECT).s(project_id), None, false, limit).into_iter().map(|(_, id)| id).collect()
}

/// The ids of the runs forked from `run_id`, oldest first.
pub fn forks_of<R: RecordsRead + ?Sized>(rec: &R, run_id: &str) -> Vec<String> {
    rec.ids(&Key::new(FORKS_BY_PARENT).s(run_id), None, false, usize::MAX).into_iter().map(|(_, id)| id).collect()
}

/// Whether any artifact of an existing project names blob `digest`, and since when it has been
/// unreferenced when none does (None: never referenced and never released).
pub fn blob_references<R: RecordsRead + ?Sized>(rec: &R, digest: &str) -> (bool, Option<i64>) {
    let referenced = !rec.ids(&Key::new(BLOB_REFS).s(digest), None, false, 1).is_empty();
    (referenced, rec.get::<i64>(&Key::new(BLOB_UNREFERENCED).s(digest)))
}
