//! GenUI state inside the `workspace` records: one row per surface request, cached answer, timeout
//! or prefill, in the reference's `genui_surfaces` shape (status pending | resolved | timeout |
//! invalidated), so "what is waiting", "what is remembered" and "what can be revoked" are index
//! reads, never scans of every row.

use od_events::genui::{
    SurfaceInvalidated, SurfacePrefilled, SurfaceRequested, SurfaceResponded, SurfaceRevoked, SurfaceTimedOut,
};
use od_events::vocab::{Persist, RespondedBy, RunStatus, SurfaceKind};
use od_events::Envelope;
use serde::{Deserialize, Serialize};

use crate::records::{Key, Records, RecordsExt, RecordsRead, RecordsWrite};

/// `<row id>` → [`SurfaceRow`]. Row ids are `<run>:<version>` or `<project>:<seq>`, zero-padded.
pub const ROW: &str = "genui";
/// `<run id><row id>` → row id: a run's rows, oldest first.
pub const ROWS_BY_RUN: &str = "genui_r";
/// `<project id><seq>` → row id: a project's rows, oldest first.
pub const ROWS_BY_PROJECT: &str = "genui_p";
/// `<run id><row id>` → row id: a run's pending rows.
pub const PENDING_BY_RUN: &str = "genui_w";
/// `<project><surface><persist><conversation or ""><row id>` → row id: resolved rows (what a
/// cache lookup, an invalidation or a revoke considers).
pub const REMEMBERED: &str = "genui_m";

/// One surface row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SurfaceRow {
    pub id: String,
    pub project_id: String,
    pub conversation_id: String,
    pub run_id: String,
    pub plugin_snapshot_id: String,
    pub surface_id: String,
    pub kind: SurfaceKind,
    pub persist: Persist,
    pub schema_digest: String,
    /// The answer as compact JSON (None while pending or when skipped).
    pub value_json: Option<String>,
    /// `pending`, `resolved`, `timeout` or `invalidated`.
    pub status: String,
    pub responded_by: Option<RespondedBy>,
    pub requested_at: i64,
    pub responded_at: Option<i64>,
    /// 0: never.
    pub expires_at: i64,
    /// 0: none.
    pub timeout_at: i64,
    pub on_timeout: String,
    pub stage_id: String,
    pub spec_json: String,
}

/// The remembered-answer key prefix of a tier.
pub fn remembered_prefix(project_id: &str, surface_id: &str, persist: &str, conversation_id: &str) -> Key {
    let conv = if persist == "conversation" { conversation_id } else { "" };
    Key::new(REMEMBERED).s(project_id).s(surface_id).s(persist).s(conv)
}

fn remembered_key(r: &SurfaceRow) -> Key {
    remembered_prefix(&r.project_id, &r.surface_id, r.persist.as_str(), &r.conversation_id).s(&r.id)
}

/// Writes a row and moves its pending / remembered index entries.
fn save(rec: &mut dyn Records, old: Option<&SurfaceRow>, new: &SurfaceRow) {
    let pending = |r: &SurfaceRow| {
        (r.status == "pending" && !r.run_id.is_empty()).then(|| Key::new(PENDING_BY_RUN).s(&r.run_id).s(&r.id))
    };
    let remembered = |r: &SurfaceRow| (r.status == "resolved").then(|| remembered_key(r));
    for index in [pending, remembered] {
        let (was, is) = (old.and_then(index), index(new));
        if was != is {
            if let Some(k) = was {
                rec.delete(&k);
            }
            if let Some(k) = is {
                rec.put(&k, &new.id);
            }
        }
    }
    rec.put(&Key::new(ROW).s(&new.id), new);
}

/// A new row (indexed by run and project).
fn insert(rec: &mut dyn Records, env: &Envelope, row: SurfaceRow) {
    let old = rec.get::<SurfaceRow>(&Key::new(ROW).s(&row.id));
    if !row.run_id.is_empty() {
        rec.put(&Key::new(ROWS_BY_RUN).s(&row.run_id).s(&row.id), &row.id);
    }
    rec.put(&Key::new(ROWS_BY_PROJECT).s(&row.project_id).n(env.seq), &row.id);
    save(rec, old.as_ref(), &row);
}

fn update(rec: &mut dyn Records, id: &str, f: impl FnOnce(&mut SurfaceRow)) {
    let Some(old) = rec.get::<SurfaceRow>(&Key::new(ROW).s(id)) else { return };
    let mut new = old.clone();
    f(&mut new);
    save(rec, Some(&old), &new);
}

/// The pending rows of a run, oldest first (at most `limit`).
pub fn pending<R: RecordsRead + ?Sized>(rec: &R, run_id: &str, limit: usize) -> Vec<SurfaceRow> {
    rec.ids(&Key::new(PENDING_BY_RUN).s(run_id), None, false, limit)
        .into_iter()
        .filter_map(|(_, id)| rec.get(&Key::new(ROW).s(&id)))
        .collect()
}

/// The newest pending row of `run_id` for `surface_id`.
fn pending_id(rec: &dyn Records, run_id: &str, surface_id: &str) -> Option<String> {
    let prefix = Key::new(PENDING_BY_RUN).s(run_id);
    rec.ids(&prefix, None, true, usize::MAX)
        .into_iter()
        .map(|(_, id)| id)
        .find(|id| rec.get::<SurfaceRow>(&Key::new(ROW).s(id)).is_some_and(|r| r.surface_id == surface_id))
}

fn new_row(id: String, e: &SurfaceResponded, value: Option<String>) -> SurfaceRow {
    SurfaceRow {
        id,
        project_id: e.project_id.clone(),
        conversation_id: e.conversation_id.clone(),
        run_id: e.run_id.clone(),
        plugin_snapshot_id: e.snapshot_id.clone(),
        surface_id: e.surface_id.clone(),
        kind: e.kind.clone(),
        persist: e.persist.clone(),
        schema_digest: e.schema_digest.clone(),
        value_json: value,
        status: "resolved".into(),
        responded_by: Some(e.responded_by.clone()),
        requested_at: e.responded_at,
        responded_at: Some(e.responded_at),
        expires_at: e.expires_at,
        timeout_at: 0,
        on_timeout: String::new(),
        stage_id: String::new(),
        spec_json: String::new(),
    }
}

/// A surface was raised: a pending row, and its run waits for the answer.
pub(crate) fn requested(rec: &mut dyn Records, env: &Envelope, e: &SurfaceRequested) {
    requested_row(rec, env, e);
    crate::workspace_runs::update_run(rec, &e.run_id, |r| r.status = RunStatus::AwaitingInput);
}

fn requested_row(rec: &mut dyn Records, env: &Envelope, e: &SurfaceRequested) {
    let row = SurfaceRow {
        id: format!("{}:{:010}", e.run_id, env.version),
        project_id: e.project_id.clone(),
        conversation_id: e.conversation_id.clone(),
        run_id: e.run_id.clone(),
        plugin_snapshot_id: e.snapshot_id.clone(),
        surface_id: e.surface_id.clone(),
        kind: e.kind.clone(),
        persist: e.persist.clone(),
        schema_digest: e.schema_digest.clone(),
        value_json: None,
        status: "pending".into(),
        responded_by: None,
        requested_at: e.requested_at,
        responded_at: None,
        expires_at: 0,
        timeout_at: e.timeout_at,
        on_timeout: e.on_timeout.to_string(),
        stage_id: e.stage_id.clone(),
        spec_json: e.spec_json.clone(),
    };
    insert(rec, env, row);
}

/// A surface got its answer: its row resolves, and its run goes on when nothing else waits.
pub(crate) fn responded(rec: &mut dyn Records, env: &Envelope, e: &SurfaceResponded) {
    responded_row(rec, env, e);
    after_answer(rec, &e.run_id);
}

fn responded_row(rec: &mut dyn Records, env: &Envelope, e: &SurfaceResponded) {
    let value = if e.value_json == "null" { None } else { Some(e.value_json.clone()) };
    if let Some(id) = pending_id(rec, &e.run_id, &e.surface_id) {
        update(rec, &id, |r| {
            r.status = "resolved".into();
            r.value_json = value;
            r.responded_by = Some(e.responded_by.clone());
            r.responded_at = Some(e.responded_at);
            r.expires_at = e.expires_at;
        });
        return;
    }
    // An answer without a request: reused from the cache.
    let row = new_row(format!("{}:{:010}", e.run_id, env.version), e, value);
    insert(rec, env, row);
}

/// A surface timed out: its row says so, and its run goes on when nothing else waits.
pub(crate) fn timed_out(rec: &mut dyn Records, e: &SurfaceTimedOut) {
    if let Some(id) = pending_id(rec, &e.run_id, &e.surface_id) {
        update(rec, &id, |r| {
            r.status = "timeout".into();
            r.responded_by = Some(RespondedBy::Timeout);
            r.responded_at = Some(e.timed_out_at);
        });
    }
    after_answer(rec, &e.run_id);
}

/// A surface of the run got answered (or timed out): back to `running` when none waits.
fn after_answer(rec: &mut dyn Records, run_id: &str) {
    let waiting = !pending(rec, run_id, 1).is_empty();
    crate::workspace_runs::update_run(rec, run_id, |r| {
        if r.status == RunStatus::AwaitingInput && !waiting {
            r.status = RunStatus::Running;
        }
    });
}

fn invalidate_all(rec: &mut dyn Records, prefix: &Key, keep: impl Fn(&SurfaceRow) -> bool) {
    for (_, id) in rec.ids(prefix, None, false, usize::MAX) {
        let Some(r) = rec.get::<SurfaceRow>(&Key::new(ROW).s(&id)) else { continue };
        if r.status == "resolved" && !keep(&r) {
            update(rec, &id, |r| r.status = "invalidated".into());
        }
    }
}

pub(crate) fn invalidated(rec: &mut dyn Records, e: &SurfaceInvalidated) {
    let prefix = remembered_prefix(&e.project_id, &e.surface_id, e.persist.as_str(), &e.conversation_id);
    invalidate_all(rec, &prefix, |_| false);
}

pub(crate) fn revoked(rec: &mut dyn Records, e: &SurfaceRevoked) {
    let prefix = Key::new(REMEMBERED).s(&e.project_id).s(&e.surface_id);
    invalidate_all(rec, &prefix, |r| r.persist == Persist::Run);
}

pub(crate) fn prefilled(rec: &mut dyn Records, env: &Envelope, e: &SurfacePrefilled) {
    let row = SurfaceRow {
        id: format!("{}:{:014}", e.project_id, env.seq),
        project_id: e.project_id.clone(),
        conversation_id: e.conversation_id.clone(),
        run_id: String::new(),
        plugin_snapshot_id: e.snapshot_id.clone(),
        surface_id: e.surface_id.clone(),
        kind: e.kind.clone(),
        persist: e.persist.clone(),
        schema_digest: e.schema_digest.clone(),
        value_json: Some(e.value_json.clone()),
        status: "resolved".into(),
        responded_by: Some(RespondedBy::Auto),
        requested_at: e.prefilled_at,
        responded_at: Some(e.prefilled_at),
        expires_at: e.expires_at,
        timeout_at: 0,
        on_timeout: String::new(),
        stage_id: String::new(),
        spec_json: String::new(),
    };
    insert(rec, env, row);
}

/// The newest remembered answer for a surface in a tier (`project` or `conversation`), if any.
pub fn remembered<R: RecordsRead + ?Sized>(
    rec: &R,
    project_id: &str,
    conversation_id: &str,
    surface_id: &str,
    persist: &str,
) -> Option<SurfaceRow> {
    let prefix = remembered_prefix(project_id, surface_id, persist, conversation_id);
    rec.ids(&prefix, None, false, usize::MAX)
        .into_iter()
        .filter_map(|(_, id)| rec.get::<SurfaceRow>(&Key::new(ROW).s(&id)))
        .filter(|r| r.responded_by != Some(RespondedBy::Timeout))
        .max_by_key(|r| (r.responded_at, r.id.clone()))
}
