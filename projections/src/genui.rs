//! GenUI state inside the `workspace` projection: one row per surface request, cached answer,
//! timeout or prefill, in the reference's `genui_surfaces` shape (status pending | resolved |
//! timeout | invalidated), so "what is waiting", "what is remembered" and "what can be revoked"
//! are reads, never guesses.

use od_events::genui::{
    SurfaceInvalidated, SurfacePrefilled, SurfaceRequested, SurfaceResponded, SurfaceRevoked, SurfaceTimedOut,
};
use od_events::Envelope;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    pub kind: String,
    pub persist: String,
    pub schema_digest: String,
    /// The answer as compact JSON (None while pending or when skipped).
    pub value_json: Option<String>,
    /// `pending`, `resolved`, `timeout` or `invalidated`.
    pub status: String,
    pub responded_by: Option<String>,
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

/// Every surface row, by id (`<run>:<version>` or `<project>:<seq>`, zero-padded so a run's rows
/// sort oldest first).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Genui {
    pub rows: BTreeMap<String, SurfaceRow>,
}

impl Genui {
    /// The pending rows of a run.
    pub fn pending<'a>(&'a self, run_id: &'a str) -> impl Iterator<Item = &'a SurfaceRow> + 'a {
        self.rows.values().filter(move |r| r.run_id == run_id && r.status == "pending")
    }

    fn pending_mut(&mut self, run_id: &str, surface_id: &str) -> Option<&mut SurfaceRow> {
        self.rows.values_mut().rev().find(|r| r.run_id == run_id && r.surface_id == surface_id && r.status == "pending")
    }

    pub(crate) fn requested(&mut self, env: &Envelope, e: &SurfaceRequested) {
        let id = format!("{}:{:010}", e.run_id, env.version);
        self.rows.insert(
            id.clone(),
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
                value_json: None,
                status: "pending".into(),
                responded_by: None,
                requested_at: e.requested_at,
                responded_at: None,
                expires_at: 0,
                timeout_at: e.timeout_at,
                on_timeout: e.on_timeout.clone(),
                stage_id: e.stage_id.clone(),
                spec_json: e.spec_json.clone(),
            },
        );
    }

    pub(crate) fn responded(&mut self, env: &Envelope, e: &SurfaceResponded) {
        let value = if e.value_json == "null" { None } else { Some(e.value_json.clone()) };
        if let Some(r) = self.pending_mut(&e.run_id, &e.surface_id) {
            r.status = "resolved".into();
            r.value_json = value;
            r.responded_by = Some(e.responded_by.clone());
            r.responded_at = Some(e.responded_at);
            r.expires_at = e.expires_at;
            return;
        }
        // An answer without a request: reused from the cache.
        let id = format!("{}:{:010}", e.run_id, env.version);
        self.rows.insert(
            id.clone(),
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
            },
        );
    }

    pub(crate) fn timed_out(&mut self, e: &SurfaceTimedOut) {
        if let Some(r) = self.pending_mut(&e.run_id, &e.surface_id) {
            r.status = "timeout".into();
            r.responded_by = Some("timeout".into());
            r.responded_at = Some(e.timed_out_at);
        }
    }

    /// Resolved rows of a tier that a cache lookup would consider.
    fn remembered_mut<'a>(
        &'a mut self,
        project_id: &'a str,
        conversation_id: &'a str,
        surface_id: &'a str,
        persist: &'a str,
    ) -> impl Iterator<Item = &'a mut SurfaceRow> + 'a {
        self.rows.values_mut().filter(move |r| {
            r.status == "resolved"
                && r.surface_id == surface_id
                && r.project_id == project_id
                && r.persist == persist
                && (persist != "conversation" || r.conversation_id == conversation_id)
        })
    }

    pub(crate) fn invalidated(&mut self, e: &SurfaceInvalidated) {
        for r in self.remembered_mut(&e.project_id, &e.conversation_id, &e.surface_id, &e.persist) {
            r.status = "invalidated".into();
        }
    }

    pub(crate) fn revoked(&mut self, e: &SurfaceRevoked) {
        for r in self.rows.values_mut() {
            if r.status == "resolved"
                && r.project_id == e.project_id
                && r.surface_id == e.surface_id
                && r.persist != "run"
            {
                r.status = "invalidated".into();
            }
        }
    }

    pub(crate) fn prefilled(&mut self, env: &Envelope, e: &SurfacePrefilled) {
        let id = format!("{}:{:014}", e.project_id, env.seq);
        self.rows.insert(
            id.clone(),
            SurfaceRow {
                id,
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
                responded_by: Some("auto".into()),
                requested_at: e.prefilled_at,
                responded_at: Some(e.prefilled_at),
                expires_at: e.expires_at,
                timeout_at: 0,
                on_timeout: String::new(),
                stage_id: String::new(),
                spec_json: String::new(),
            },
        );
    }

    /// The newest remembered answer for a surface in a tier (`project` or `conversation`), if any.
    pub fn remembered(
        &self,
        project_id: &str,
        conversation_id: &str,
        surface_id: &str,
        persist: &str,
    ) -> Option<&SurfaceRow> {
        self.rows
            .values()
            .filter(|r| {
                r.status == "resolved"
                    && r.surface_id == surface_id
                    && r.project_id == project_id
                    && r.persist == persist
                    && r.responded_by.as_deref() != Some("timeout")
                    && (persist != "conversation" || r.conversation_id == conversation_id)
            })
            .max_by_key(|r| (r.responded_at, r.id.clone()))
    }
}
