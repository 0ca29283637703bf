//! The recorded inputs of a run's prompt stack, read back from the log and the blob store: the
//! project's facts (its `project_created`), and the texts of the staged context files the run's
//! `substrate_staged` lists — which one feeds which part decided by `context_refs`, each read by
//! its digest. Used alike when a stage's prompt is composed and when `od run replay --verify`
//! recomposes it, so both see the same texts whatever happened to the plugin folder since.

use od_events::projects::ProjectCreated;
use od_events::{Event, Stored, StreamId};
use serde_json::Value;

use super::context_refs::{classify, Part};
use super::Engine;
use crate::engine::prompt::stack::{Doc, ProjectFacts, StackContext};
use crate::store::decode_frame;

impl Engine {
    /// The project's `project_created` event, from the log (None: not in this log — a run imported
    /// without its project — or unreadable).
    pub(crate) fn project_created(&self, project_id: &str) -> Option<ProjectCreated> {
        let s = StreamId::typed("project", project_id).ok()?;
        let frames = self.store.read_stream(s.as_str(), 0, 1).ok()?;
        match decode_frame(frames.first()?.view()).ok()?.event {
            Event::ProjectCreated(e) => Some(e),
            _ => None,
        }
    }

    /// The project's own design system (`designSystemId` in its metadata), when it names one.
    pub(crate) fn project_design_system(&self, project_id: &str) -> Option<String> {
        let e = self.project_created(project_id)?;
        let m: Value = serde_json::from_str(&e.metadata_json).ok()?;
        m["designSystemId"].as_str().filter(|d| !d.is_empty()).map(String::from)
    }

    /// The project facts a prompt names: from the log, else (`recorded`) what the prompt recorded.
    pub fn project_facts(&self, project_id: &str, recorded: Option<ProjectFacts>) -> Option<ProjectFacts> {
        match self.project_created(project_id) {
            Some(e) => {
                let m: Value = serde_json::from_str(&e.metadata_json).unwrap_or(Value::Null);
                let ds = m["designSystemId"].as_str().unwrap_or_default().to_string();
                Some(ProjectFacts { id: e.project_id, name: e.name, folder: e.dir, design_system: ds })
            }
            None => recorded,
        }
    }

    /// The stack inputs of a stage iteration of a run whose history (so far) is `history`: the
    /// project's facts and the staged context texts, read by digest. Err names a staged file whose
    /// blob cannot be read.
    pub fn stack_context(
        &self,
        snap: &Value,
        history: &[Stored],
        project: Option<ProjectFacts>,
        budget: u64,
    ) -> Result<StackContext, String> {
        let mut cx = StackContext { budget, ..StackContext::default() };
        let staged = history.iter().rev().find_map(|s| match &s.event {
            Event::SubstrateStaged(e) => Some(e),
            _ => None,
        });
        if let Some(staged) = staged {
            let project_ds = project.as_ref().map(|p| p.design_system.as_str()).filter(|d| !d.is_empty());
            for (part, f) in classify(snap, project_ds, &staged.files) {
                let bytes = self
                    .blobs
                    .read(&f.digest)
                    .map_err(|e| format!("the staged {} (blob {}) cannot be read: {e}", f.path, f.digest))?;
                let source = match f.source.starts_with("plugin:") {
                    true => format!("{} ({})", f.path, f.source),
                    false => f.path.clone(),
                };
                let doc = Doc { source, digest: f.digest.clone(), text: String::from_utf8_lossy(&bytes).into_owned() };
                match part {
                    Part::DesignSystem => cx.design_system = Some(doc),
                    Part::Craft => cx.craft.push(doc),
                    Part::Skill => cx.skills.push(doc),
                    Part::Compat => cx.compat.push(doc),
                }
            }
        }
        cx.project = project;
        Ok(cx)
    }
}

impl Engine {
    /// A stage iteration's prompt of a run whose history so far is `history`: the stack inputs
    /// read back (the project's facts from the log, else `recorded_project`), fitted to `budget`
    /// — or the legacy layout for a snapshot frozen before the stack. The one call the executor
    /// and replay make.
    pub fn compose_prompt(
        &self,
        inp: &crate::engine::prompt::PromptInputs,
        history: &[Stored],
        project_id: &str,
        budget: u64,
        recorded_project: Option<ProjectFacts>,
    ) -> Result<crate::engine::prompt::stack::Composed, String> {
        use crate::engine::prompt::stack;
        if !stack::is_stack(inp.snap) {
            return Ok(stack::compose(inp, None));
        }
        let project = self.project_facts(project_id, recorded_project);
        let cx = self.stack_context(inp.snap, history, project, budget)?;
        Ok(stack::compose(inp, Some(&cx)))
    }
}

impl Engine {
    /// One prompt of `od run replay --verify`: recomposed from what the run recorded before it (the
    /// budget and, for a run imported without its project, the project facts the record names;
    /// a record from before the stack was recorded uses the run's agent budget), compared with the
    /// recorded digest, with the recomposed sections (and whether they match the recorded ones).
    pub(crate) fn replay_check(
        &self,
        run_id: &str,
        event_id: u64,
        e: &od_events::runs::PromptComposed,
        created: &od_events::runs::RunCreated,
        inp: &crate::engine::prompt::PromptInputs,
        history: &[Stored],
    ) -> Value {
        use crate::engine::prompt::{digest, stack};
        let budget = match e.estimator.is_empty() {
            true => stack::budget_for(&serde_json::from_str(&created.agent_config_json).unwrap_or(Value::Null)),
            false => e.budget_tokens,
        };
        let recorded_project = ProjectFacts::from_json(&e.project_json);
        let mut check = serde_json::json!({ "runId": run_id, "eventId": event_id, "stageId": e.stage_id,
            "iteration": e.iteration, "recorded": e.digest });
        match self.compose_prompt(inp, history, &created.project_id, budget, recorded_project) {
            Ok(c) => {
                let d = digest(&c.text);
                check["recomposed"] = serde_json::json!(d);
                check["bytes"] = serde_json::json!(c.text.len());
                check["identical"] = serde_json::json!(d == e.digest);
                if !e.estimator.is_empty() {
                    check["sectionsIdentical"] = serde_json::json!(c.sections == e.sections);
                    check["totalTokens"] = serde_json::json!(c.total_tokens);
                    check["budgetTokens"] = serde_json::json!(c.budget_tokens);
                }
                check["sections"] = serde_json::to_value(&c.sections).unwrap_or(Value::Null);
            }
            Err(why) => {
                check["identical"] = serde_json::json!(false);
                check["error"] = serde_json::json!(why);
            }
        }
        check
    }
}
