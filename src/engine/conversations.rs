//! Conversations and follow-up runs (issue 30 item 3): a conversation's messages (each run's user
//! message and agent reply, `conversation_message` in the run's stream), the follow-up rule (which
//! stages a follow-up runs, recorded as `follow_up_planned` with the run), and a follow-up's
//! context (the earlier messages and artifacts its prompts carry). Everything is derived from
//! recorded events, so `od run replay --verify` derives the same context.
//!
//! **The rule.** A run is a follow-up when it is started in an existing project's conversation that
//! already has an ended run, with a message, and names neither a plugin nor a snapshot (naming one
//! starts afresh). It runs the plugin's declared follow-up stages — `od.pipeline.followUp: ["id", …]`,
//! else the stages with `followUp: true` — in pipeline order; a plugin that declares none gets the
//! pipeline's **last stage only**, never the whole pipeline again. It builds on the ended ones of
//! the conversation's newest [`MAX_FOLLOW_UP_RUNS`] runs, oldest first.

use od_events::runs::{ConversationMessage, FollowUpPlanned};
use od_events::{Event, Stored};
use serde_json::{json, Value};

use super::errors::WorkError;
use super::Engine;
use crate::engine::prompt::{FollowUpContext, PriorArtifact, PriorMessage};
use crate::limits::{MAX_AGENT_REPLY_BYTES, MAX_CONVERSATION_RUNS_LISTED, MAX_FOLLOW_UP_RUNS, MAX_RUN_LIST_EXAMINED};
use od_projections::workspace_read::{self as wr, RunFilter};

/// `rule` of a follow-up that runs the plugin's declared follow-up stages.
pub const RULE_DECLARED: &str = "declared";
/// `rule` of a follow-up of a plugin that declares none: the pipeline's last stage only.
pub const RULE_LAST_STAGE: &str = "last-stage";

/// The stage ids a pipeline runs (a snapshot without stages runs one stage, `run`, as the executor does).
fn stage_ids(snap: &Value) -> Vec<String> {
    let ids: Vec<String> = snap["pipeline"]["stages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["id"].as_str().map(String::from))
        .collect();
    if ids.is_empty() {
        vec!["run".into()]
    } else {
        ids
    }
}

/// The follow-up stages a pipeline declares: `followUp: [ids]` on the pipeline, else its stages
/// with `followUp: true` (the plugin validator refuses ids the pipeline lacks).
pub fn declared_follow_up(pipeline: &Value) -> Vec<String> {
    match pipeline["followUp"].as_array() {
        Some(ids) => ids.iter().filter_map(|i| i.as_str().map(String::from)).collect(),
        None => pipeline["stages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["followUp"] == true)
            .filter_map(|s| s["id"].as_str().map(String::from))
            .collect(),
    }
}

/// The stages a follow-up of `snap` runs, in pipeline order, and the rule that chose them.
pub fn follow_up_stages(snap: &Value) -> (Vec<String>, &'static str) {
    let all = stage_ids(snap);
    let declared = declared_follow_up(&snap["pipeline"]);
    let chosen: Vec<String> = all.iter().filter(|id| declared.contains(id)).cloned().collect();
    if chosen.is_empty() {
        (all.last().cloned().into_iter().collect(), RULE_LAST_STAGE)
    } else {
        (chosen, RULE_DECLARED)
    }
}

/// The run's follow-up plan, if its history holds one (a fork inherits its parent's).
pub fn plan_in(history: &[Stored]) -> Option<&FollowUpPlanned> {
    history.iter().rev().find_map(|s| match &s.event {
        Event::FollowUpPlanned(p) => Some(p),
        _ => None,
    })
}

/// The stages the executor runs: a follow-up's planned ones, else all of them.
pub fn stages_to_run(history: &[Stored], all: Vec<Value>) -> Vec<Value> {
    match plan_in(history) {
        Some(p) => {
            all.into_iter().filter(|s| s["id"].as_str().is_some_and(|id| p.stages.iter().any(|x| x == id))).collect()
        }
        None => all,
    }
}

/// The agent's reply in a run's own events: its agent text output joined (a new invocation starts
/// a new line), trimmed, cut to [`MAX_AGENT_REPLY_BYTES`] at a character boundary.
pub fn agent_reply<'a>(own: impl IntoIterator<Item = &'a Event>) -> String {
    let mut out = String::new();
    let mut at: Option<(String, u32)> = None;
    for ev in own {
        let Event::AgentOutput(e) = ev else { continue };
        if e.channel != od_events::vocab::Channel::Agent {
            continue;
        }
        let p: Value = serde_json::from_str(&e.payload_json).unwrap_or(Value::Null);
        let (Some("text_delta"), Some(delta)) = (p["type"].as_str(), p["delta"].as_str()) else { continue };
        let here = (e.stage_id.clone(), e.iteration);
        if at.as_ref().is_some_and(|a| *a != here) && !out.ends_with('\n') {
            out.push('\n');
        }
        at = Some(here);
        out.push_str(delta);
        if out.len() > MAX_AGENT_REPLY_BYTES {
            break;
        }
    }
    let text = out.trim();
    if text.len() <= MAX_AGENT_REPLY_BYTES {
        return text.to_string();
    }
    let mut cut = MAX_AGENT_REPLY_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

/// A conversation message event.
pub fn message(created: &od_events::runs::RunCreated, role: &str, text: String, at: i64) -> Event {
    Event::ConversationMessage(ConversationMessage {
        conversation_id: created.conversation_id.clone(),
        project_id: created.project_id.clone(),
        message_id: format!("{}:{role}", created.run_id),
        role: role.into(),
        run_id: created.run_id.clone(),
        text,
        at,
    })
}

fn message_json(m: &ConversationMessage) -> Value {
    json!({ "messageId": m.message_id, "conversationId": m.conversation_id, "projectId": m.project_id,
            "runId": m.run_id, "role": m.role, "text": m.text, "at": m.at })
}

impl Engine {
    /// The newest `limit` runs of a conversation (read from its run index), oldest first, and
    /// whether older ones were left out.
    fn conversation_runs(
        &self,
        project_id: &str,
        conversation_id: &str,
        limit: usize,
    ) -> Result<(Vec<od_projections::RunInfo>, bool), WorkError> {
        let filter = RunFilter {
            project_id: Some(project_id.into()),
            conversation_id: Some(conversation_id.into()),
            status: None,
        };
        let (items, _) =
            self.workspace.read(|w| wr::runs(w, &filter, None, limit + 1, limit + 1 + MAX_RUN_LIST_EXAMINED))?;
        let truncated = items.len() > limit;
        let mut runs: Vec<od_projections::RunInfo> = items.into_iter().take(limit).map(|(_, r)| r).collect();
        runs.reverse();
        Ok((runs, truncated))
    }

    /// The plan of a follow-up run `run_id` in `conversation_id` of `snap` (None: the conversation
    /// has no ended run, so this run is its first).
    pub(super) fn plan_follow_up(
        &self,
        project_id: &str,
        conversation_id: &str,
        snap: &Value,
        run_id: &str,
    ) -> Result<Option<FollowUpPlanned>, WorkError> {
        let (runs, _) = self.conversation_runs(project_id, conversation_id, MAX_FOLLOW_UP_RUNS)?;
        let builds_on: Vec<String> = runs.into_iter().filter(|r| r.is_terminal()).map(|r| r.run_id).collect();
        if builds_on.is_empty() {
            return Ok(None);
        }
        let (stages, rule) = follow_up_stages(snap);
        Ok(Some(FollowUpPlanned {
            run_id: run_id.into(),
            conversation_id: conversation_id.into(),
            stages,
            rule: rule.into(),
            builds_on,
            planned_at: self.clock.now_ms(),
        }))
    }

    /// What a follow-up's prompts carry of its conversation (None: not a follow-up): the messages
    /// and the artifacts (latest per path) of the runs its plan builds on, all ended before it was
    /// created — so the pipeline and replay read the same.
    pub fn follow_up_context(&self, history: &[Stored]) -> Option<FollowUpContext> {
        let plan = plan_in(history)?;
        let mut f = FollowUpContext::default();
        for run in &plan.builds_on {
            // A run the log no longer holds (an import without it) contributes nothing.
            for s in self.run_events(run, 0).unwrap_or_default() {
                match s.event {
                    Event::ConversationMessage(m) => {
                        f.messages.push(PriorMessage { run_id: m.run_id, role: m.role.to_string(), text: m.text })
                    }
                    Event::ArtifactRecorded(a) => {
                        f.artifacts.retain(|x| x.path != a.path);
                        f.artifacts.push(PriorArtifact {
                            run_id: a.run_id,
                            path: a.path,
                            digest: a.digest,
                            bytes: a.bytes,
                        });
                    }
                    _ => {}
                }
            }
        }
        Some(f)
    }

    /// A conversation's messages, oldest first (`GET /api/projects/:id/conversations/:cid/messages`),
    /// with each run's follow-up plan beside its messages.
    pub fn conversation_messages(&self, project_id: &str, conversation_id: &str) -> Result<Value, WorkError> {
        super::projects::check_id("projectId", project_id)?;
        let project = self.project(project_id)?;
        self.conversation_of(&project, conversation_id)?;
        let (runs, truncated) = self.conversation_runs(project_id, conversation_id, MAX_CONVERSATION_RUNS_LISTED)?;
        let mut messages = Vec::new();
        let mut plans = Vec::new();
        for r in &runs {
            for s in self.run_events(&r.run_id, 0)? {
                match &s.event {
                    Event::ConversationMessage(m) => messages.push(message_json(m)),
                    Event::FollowUpPlanned(p) => plans.push(serde_json::to_value(p).unwrap_or(Value::Null)),
                    _ => {}
                }
            }
        }
        Ok(json!({ "projectId": project_id, "conversationId": conversation_id, "messages": messages,
                   "followUps": plans, "truncated": truncated }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_stages_win_in_pipeline_order_else_the_last_stage_only() {
        let snap = |p: Value| json!({ "pipeline": p });
        let stages = json!([{ "id": "a" }, { "id": "b" }, { "id": "c" }]);
        assert_eq!(follow_up_stages(&snap(json!({ "stages": stages }))), (vec!["c".to_string()], RULE_LAST_STAGE));
        let listed = json!({ "stages": stages, "followUp": ["c", "b"] });
        assert_eq!(follow_up_stages(&snap(listed)), (vec!["b".to_string(), "c".to_string()], RULE_DECLARED));
        let flagged = json!({ "stages": [{ "id": "a" }, { "id": "b", "followUp": true }, { "id": "c" }] });
        assert_eq!(follow_up_stages(&snap(flagged)), (vec!["b".to_string()], RULE_DECLARED));
        assert_eq!(follow_up_stages(&json!({})), (vec!["run".to_string()], RULE_LAST_STAGE));
    }

    #[test]
    fn a_long_reply_is_cut_at_a_character_boundary() {
        let out = |delta: &str, stage: &str| {
            Event::AgentOutput(od_events::runs::AgentOutput {
                run_id: "r".into(),
                stage_id: stage.into(),
                iteration: 0,
                channel: "agent".into(),
                payload_json: json!({ "type": "text_delta", "delta": delta }).to_string(),
            })
        };
        assert_eq!(agent_reply(&[out("Hel", "a"), out("lo", "a"), out("Bye", "b")]), "Hello\nBye");
        let long = "é".repeat(MAX_AGENT_REPLY_BYTES);
        let r = agent_reply(&[out(&long, "a")]);
        assert!(r.len() <= MAX_AGENT_REPLY_BYTES + "…".len() && r.ends_with('…'), "{}", r.len());
    }
}
