//! What a project or conversation remembers of GenUI answers: a tier's remembered row, reused
//! when a surface is raised (or invalidated when its schema drifted or it expired), carried into a
//! follow-up, marked on an apply, revoked, and prefilled ahead of any run.

use od_events::genui::{SurfaceInvalidated, SurfacePrefilled, SurfaceRevoked};
use od_events::vocab::{Persist, RespondedBy};
use od_events::Event;
use od_projections::workspace_read as wr;
use od_projections::{RunInfo, SurfaceRow};
use serde_json::{json, Map, Value};

use super::errors::WorkError;
use super::genui::{check_answer, project_stream, schema_digest, stale_reason, Answer, Head};
use super::Engine;
use crate::limits::MAX_WORKING_SET_READ;

impl Engine {
    /// The row a surface's tier remembers in this project (and conversation): none for `run`.
    fn remembered_row(
        &self,
        project_id: &str,
        conversation_id: &str,
        head: &Head,
    ) -> Result<Option<SurfaceRow>, WorkError> {
        if head.persist == Persist::Run {
            return Ok(None);
        }
        let (surface, tier) = (&head.surface_id, head.persist.as_str());
        Ok(self.workspace.read(|w| od_projections::genui::remembered(w, project_id, conversation_id, surface, tier))?)
    }

    /// The surface's remembered answer of its tier (`persist` other than `run`), when still valid;
    /// a stale one is invalidated (its event pushed to `events`).
    pub(super) fn remembered_answer(
        &self,
        run: &RunInfo,
        head: &Head,
        now: i64,
        events: &mut Vec<Event>,
    ) -> Result<Option<(String, &'static str, i64)>, WorkError> {
        let Some(row) = self.remembered_row(&run.project_id, &run.conversation_id, head)? else { return Ok(None) };
        let Some(reason) = stale_reason(&row, &head.digest, now) else {
            return Ok(Some((row.value_json.clone().unwrap_or_else(|| "null".into()), "cache", row.expires_at)));
        };
        events.push(Event::SurfaceInvalidated(SurfaceInvalidated {
            project_id: run.project_id.clone(),
            conversation_id: run.conversation_id.clone(),
            run_id: run.run_id.clone(),
            surface_id: head.surface_id.clone(),
            persist: head.persist.clone(),
            reason: reason.into(),
        }));
        Ok(None)
    }

    /// A follow-up's answers from memory: for each surface `surfaces` declares that is kept per
    /// conversation or project, the answer that tier remembers — still valid, of the same schema
    /// (a choice whose options the agent proposed: one its declared schema still takes) — as a
    /// `genui_surface_response` by `cache` in the new run, so its prompt holds it. Nothing is
    /// asked or invalidated here; a surface the follow-up raises again is checked then.
    pub(crate) fn carried_answers(
        &self,
        surfaces: &[Value],
        run: &od_events::runs::RunCreated,
    ) -> Result<Vec<Event>, WorkError> {
        let mut out = Vec::new();
        for spec in surfaces {
            let head = Head::of(spec);
            let Some(row) = self.remembered_row(&run.project_id, &run.conversation_id, &head)? else { continue };
            let value: Value =
                row.value_json.as_deref().and_then(|v| serde_json::from_str(v).ok()).unwrap_or(Value::Null);
            let open = super::choice_options::awaits_agent_options(spec);
            let fits = match open {
                true => (row.expires_at == 0 || row.expires_at > run.created_at) && check_answer(spec, &value).is_ok(),
                false => stale_reason(&row, &head.digest, run.created_at).is_none(),
            };
            if value.is_null() || !fits {
                continue;
            }
            let answer =
                Answer { value_json: value.to_string(), by: "cache", at: run.created_at, expires_at: row.expires_at };
            out.push(Event::SurfaceResponded(head.answered(run, row.schema_digest.clone(), answer)));
        }
        Ok(out)
    }

    /// An apply in project `project_id` (which must exist): marks each of its surfaces that
    /// project already answered (`persist: project`, valid, same schema) `remembered: true` — a run
    /// there will not ask it again.
    pub fn mark_remembered(&self, project_id: &str, applied: &mut Value) -> Result<(), WorkError> {
        self.project(project_id)?;
        applied["projectId"] = json!(project_id);
        let now = self.clock.now_ms();
        for spec in applied["genuiSurfaces"].as_array_mut().into_iter().flatten() {
            if spec["persist"] != "project" {
                continue;
            }
            let head = Head::of(spec);
            let found = self.remembered_row(project_id, "", &head)?;
            let valid = found.is_some_and(|row| stale_reason(&row, &head.digest, now).is_none());
            spec["remembered"] = json!(valid);
        }
        Ok(())
    }

    /// Invalidates the project's remembered answers (conversation and project tiers) for a surface.
    pub fn revoke_surface(&self, project_id: &str, surface_id: &str) -> Result<usize, WorkError> {
        self.project(project_id)?;
        let n = self.workspace.read(|w| {
            wr::remembered_rows(w, project_id, surface_id, MAX_WORKING_SET_READ)
                .iter()
                .filter(|r| r.status == "resolved" && r.persist != Persist::Run)
                .count()
        })?;
        let e = SurfaceRevoked {
            project_id: project_id.into(),
            surface_id: surface_id.into(),
            revoked_at: self.clock.now_ms(),
        };
        self.record(project_stream(project_id)?, vec![Event::SurfaceRevoked(e)])?;
        Ok(n)
    }

    /// Prefills answers for a project: `values` maps surface ids to answers, all checked against
    /// the surfaces `surfaces` declares before anything is written (all or nothing).
    pub fn prefill(
        &self,
        project_id: &str,
        snapshot_id: &str,
        surfaces: &[Value],
        values: &Map<String, Value>,
        conversation_id: Option<&str>,
        expires_at: i64,
    ) -> Result<Vec<SurfaceRow>, WorkError> {
        let project = self.project(project_id)?;
        if let Some(c) = conversation_id {
            self.conversation_of(&project, c)?;
        }
        if values.is_empty() {
            return Err(WorkError::invalid("values", "give at least one surface id and its answer"));
        }
        let now = self.clock.now_ms();
        let mut events = Vec::new();
        for (sid, value) in values {
            let spec = surfaces
                .iter()
                .find(|s| s["id"] == sid.as_str())
                .ok_or_else(|| WorkError::invalid("values", format!("no surface {sid:?} is declared")))?;
            let persist = spec["persist"].as_str().unwrap_or("run");
            if persist == "run" {
                return Err(WorkError::invalid(
                    "values",
                    format!("{sid} is asked per run (persist: run) and cannot be prefilled"),
                ));
            }
            if persist == "conversation" && conversation_id.is_none() {
                return Err(WorkError::invalid(
                    "conversationId",
                    format!("{sid} is remembered per conversation; name one"),
                ));
            }
            check_answer(spec, value)?;
            events.push(Event::SurfacePrefilled(SurfacePrefilled {
                project_id: project_id.into(),
                conversation_id: conversation_id.unwrap_or("").into(),
                snapshot_id: snapshot_id.into(),
                surface_id: sid.clone(),
                kind: spec["kind"].as_str().unwrap_or("form").into(),
                persist: persist.into(),
                schema_digest: schema_digest(spec),
                value_json: value.to_string(),
                expires_at,
                prefilled_at: now,
            }));
        }
        let n = events.len();
        self.record(project_stream(project_id)?, events)?;
        // The rows just written are the project's newest prefilled ones.
        let mut rows: Vec<SurfaceRow> = self.workspace.read(|w| {
            wr::project_surfaces(w, project_id, None, true, MAX_WORKING_SET_READ)
                .into_iter()
                .map(|(_, r)| r)
                .filter(|r| r.responded_by == Some(RespondedBy::Auto) && r.run_id.is_empty())
                .take(n)
                .collect()
        })?;
        rows.sort_by_key(|r| r.requested_at);
        Ok(rows)
    }
}
