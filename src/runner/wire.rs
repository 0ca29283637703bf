//! The wire shape of a run's events: `{"event": <name>, "data": <payload>}` as `od run watch` prints
//! it (and, later, SSE frames carry it with `id` = the event's version in the run stream). Names and
//! payloads follow the reference daemon (`start`, `agent`, `pipeline_stage_*`, `end`, …); od's extra
//! facts get their own names. `run_created` is bookkeeping and not on the wire, so the first event a
//! watcher sees of a pipelined run is `pipeline_stage_started`.

use od_events::{Event, Stored};
use serde_json::{json, Value};

fn parsed(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or(Value::Null)
}

/// The `(event name, data)` of a run event; None for events not on the wire.
pub fn encode(stored: &Stored) -> Option<(&'static str, Value)> {
    use Event as E;
    // Each group has its own encoder; a new event kind must be placed in one or left off here.
    match &stored.event {
        E::AgentStarted(_) | E::AgentOutput(_) | E::RunForked(_) | E::PromptComposed(_) | E::SignalRecorded(_) => {
            agent_frame(stored)
        }
        E::StageStarted(_) | E::StageCompleted(_) | E::StageFailed(_) | E::DevloopIteration(_) | E::LoopBroken(_) => {
            stage_frame(stored)
        }
        E::SurfaceRequested(_)
        | E::SurfaceResponded(_)
        | E::SurfaceTimedOut(_)
        | E::SurfaceRefused(_)
        | E::SurfaceInvalidated(_) => surface_frame(stored),
        E::RunResponded(_)
        | E::ArtifactRecorded(_)
        | E::SubstrateStaged(_)
        | E::ConversationMessage(_)
        | E::FollowUpPlanned(_)
        | E::RunEnded(_)
        | E::BrowserActionRequested(_)
        | E::BrowserActionResulted(_) => run_frame(stored),
        // Not on the wire: bookkeeping, or not a run's.
        E::RunCreated(_)
        | E::BlobExpired(_)
        | E::BlobUnreferenced(_)
        | E::ToolRegistered(_)
        | E::ConnectorConnected(_)
        | E::PluginReloaded(_)
        | E::ConnectorDisconnected(_)
        | E::McpServerAuthorized(_)
        | E::McpServerDeauthorized(_)
        | E::ToolRemoved(_)
        | E::ToolsAdvertised(_)
        | E::SurfaceRevoked(_)
        | E::SurfacePrefilled(_)
        | E::DaemonStarted(_)
        | E::DaemonStopped(_)
        | E::LogVerified(_)
        | E::NoteRecorded(_)
        | E::PluginInstalled(_)
        | E::PluginUninstalled(_)
        | E::CapabilitiesGranted(_)
        | E::CapabilitiesRevoked(_)
        | E::MarketplaceAdded(_)
        | E::MarketplaceRefreshed(_)
        | E::MarketplaceTrusted(_)
        | E::MarketplaceRemoved(_)
        | E::SnapshotRecorded(_)
        | E::SnapshotMarkedStale(_)
        | E::SnapshotExpired(_)
        | E::SnapshotBodyRecorded(_)
        | E::ProjectCreated(_)
        | E::ProjectDeleted(_)
        | E::ConversationCreated(_) => None,
    }
}

/// An agent's frames: `start`, its output, a fork, the composed prompt, a signal.
fn agent_frame(stored: &Stored) -> Option<(&'static str, Value)> {
    Some(match &stored.event {
        Event::AgentStarted(e) => (
            "start",
            json!({ "runId": e.run_id, "agentId": e.agent_id, "bin": e.bin, "protocolVersion": 1, "cwd": e.cwd,
                    "stageId": e.stage_id, "iteration": e.iteration, "startedAt": e.started_at }),
        ),
        Event::AgentOutput(e) => {
            let name = match e.channel.as_str() {
                "stdout" => "stdout",
                "stderr" => "stderr",
                _ => "agent",
            };
            let mut data = parsed(&e.payload_json);
            if let Some(o) = data.as_object_mut() {
                o.insert("stageId".into(), json!(e.stage_id));
                o.insert("iteration".into(), json!(e.iteration));
            }
            (name, data)
        }
        Event::RunForked(e) => (
            "run_forked",
            json!({ "runId": e.run_id, "parentRunId": e.parent_run_id, "forkEventId": e.parent_event_id,
                    "at": e.at, "stageId": e.stage_id, "iteration": e.iteration,
                    "answers": parsed(&e.answers_json), "inputs": parsed(&e.inputs_json),
                    "workDir": e.work_dir, "createdAt": e.created_at }),
        ),
        Event::PromptComposed(e) => {
            let mut d = json!({ "runId": e.run_id, "stageId": e.stage_id, "iteration": e.iteration, "digest": e.digest,
                    "bytes": e.bytes });
            // Schema 2 (the stack recorded): its parts, totals, budget and estimator.
            if !e.estimator.is_empty() {
                d["sections"] = serde_json::to_value(&e.sections).unwrap_or(Value::Null);
                d["totalTokens"] = json!(e.total_tokens);
                d["budgetTokens"] = json!(e.budget_tokens);
                d["estimator"] = json!(e.estimator);
                if !e.project_json.is_empty() {
                    d["project"] = parsed(&e.project_json);
                }
            }
            ("prompt_composed", d)
        }
        Event::SignalRecorded(e) => (
            "signal",
            json!({ "runId": e.run_id, "stageId": e.stage_id, "iteration": e.iteration, "name": e.name,
                    "value": parsed(&e.value_json), "source": e.source }),
        ),
        _ => return None,
    })
}

/// The pipeline's frames: a stage started, completed or failed, a devloop row, a broken loop.
fn stage_frame(stored: &Stored) -> Option<(&'static str, Value)> {
    Some(match &stored.event {
        Event::StageStarted(e) => (
            "pipeline_stage_started",
            json!({ "kind": "pipeline_stage_started", "runId": e.run_id, "snapshotId": e.snapshot_id,
                    "stageId": e.stage_id, "iteration": e.iteration, "startedAt": e.started_at }),
        ),
        Event::StageCompleted(e) => {
            let mut d = json!({ "kind": "pipeline_stage_completed", "runId": e.run_id, "snapshotId": e.snapshot_id,
                    "stageId": e.stage_id, "iteration": e.iteration, "completedAt": e.completed_at,
                    "converged": e.converged });
            if !e.diff_summary.is_empty() {
                d["diffSummary"] = json!(e.diff_summary);
            }
            ("pipeline_stage_completed", d)
        }
        Event::StageFailed(e) => (
            "pipeline_stage_failed",
            json!({ "kind": "pipeline_stage_failed", "runId": e.run_id, "snapshotId": e.snapshot_id,
                    "stageId": e.stage_id, "iteration": e.iteration, "message": e.message,
                    "action": e.action, "attempt": e.attempt }),
        ),
        Event::DevloopIteration(e) => ("devloop_iteration", devloop_row(stored, e)),
        Event::LoopBroken(e) => (
            "devloop_broken",
            json!({ "runId": e.run_id, "stageId": e.stage_id, "iteration": e.iteration, "requestedBy": e.requested_by }),
        ),
        _ => return None,
    })
}

/// The GenUI surfaces' frames: requested, answered, timed out, refused, invalidated.
fn surface_frame(stored: &Stored) -> Option<(&'static str, Value)> {
    Some(match &stored.event {
        Event::SurfaceRequested(e) => (
            "genui_surface_request",
            json!({ "surfaceId": e.surface_id, "runId": e.run_id, "payload": parsed(&e.spec_json), "kind": e.kind,
                    "persist": e.persist, "stageId": e.stage_id, "requestedAt": e.requested_at,
                    "timeoutAt": e.timeout_at, "onTimeout": e.on_timeout, "requestedBy": e.requested_by }),
        ),
        Event::SurfaceResponded(e) => (
            "genui_surface_response",
            json!({ "surfaceId": e.surface_id, "runId": e.run_id, "value": parsed(&e.value_json),
                    "respondedAt": e.responded_at, "respondedBy": e.responded_by, "persist": e.persist }),
        ),
        Event::SurfaceTimedOut(e) => (
            "genui_surface_timeout",
            json!({ "surfaceId": e.surface_id, "runId": e.run_id, "resolution": e.resolution, "timedOutAt": e.timed_out_at }),
        ),
        Event::SurfaceRefused(e) => (
            "genui_surface_refused",
            json!({ "surfaceId": e.surface_id, "runId": e.run_id, "kind": e.kind, "stageId": e.stage_id,
                    "atom": e.atom, "reason": e.reason }),
        ),
        Event::SurfaceInvalidated(e) => (
            "genui_surface_invalidated",
            json!({ "surfaceId": e.surface_id, "runId": e.run_id, "persist": e.persist, "reason": e.reason }),
        ),
        _ => return None,
    })
}

/// The run's other frames: a response, an artifact, the substrate, the conversation, browser actions, `end`.
fn run_frame(stored: &Stored) -> Option<(&'static str, Value)> {
    Some(match &stored.event {
        Event::RunResponded(e) => (
            "run_responded",
            json!({ "runId": e.run_id, "action": e.action, "payload": parsed(&e.payload_json), "receivedAt": e.received_at }),
        ),
        Event::ArtifactRecorded(e) => ("artifact", serde_json::to_value(e).unwrap_or(Value::Null)),
        Event::SubstrateStaged(e) => ("substrate_staged", serde_json::to_value(e).unwrap_or(Value::Null)),
        Event::ConversationMessage(e) => ("conversation_message", serde_json::to_value(e).unwrap_or(Value::Null)),
        Event::FollowUpPlanned(e) => ("follow_up_planned", serde_json::to_value(e).unwrap_or(Value::Null)),
        Event::RunEnded(e) => {
            let mut d = json!({ "runId": e.run_id, "code": e.code, "status": e.status,
                    "artifactCount": e.artifact_count, "resumable": false, "endedAt": e.ended_at });
            if e.failure_category != od_events::vocab::FailureCategory::None {
                d["failureCategory"] = json!(e.failure_category);
                d["failureDetail"] = json!(e.reason);
            }
            ("end", d)
        }
        Event::BrowserActionRequested(e) => ("browser_action_request", crate::tools::wire::request_json(e)),
        Event::BrowserActionResulted(e) => ("browser_action_result", crate::tools::wire::result_json(e)),
        _ => return None,
    })
}

/// The frames the reference daemon sends besides od's own for one event, after it with the same
/// id: `message_chunk` for each piece of agent text, `genui_state_synced` when an answer is kept
/// beyond the run (conversation or project), and `critique.round_end` for each round of a
/// devloop judged on `critique.score`.
pub fn extras(stored: &Stored) -> Vec<(&'static str, Value)> {
    match &stored.event {
        Event::AgentOutput(e) if e.channel == od_events::vocab::Channel::Agent => {
            let p = parsed(&e.payload_json);
            match (p["type"].as_str(), p["delta"].as_str()) {
                (Some("text_delta"), Some(text)) => vec![(
                    "message_chunk",
                    json!({ "kind": "message_chunk", "runId": e.run_id, "text": text, "stageId": e.stage_id,
                            "iteration": e.iteration }),
                )],
                _ => Vec::new(),
            }
        }
        Event::SurfaceResponded(e)
            if matches!(e.persist, od_events::vocab::Persist::Conversation | od_events::vocab::Persist::Project) =>
        {
            vec![(
                "genui_state_synced",
                json!({ "kind": "genui_state_synced", "surfaceId": e.surface_id, "runId": e.run_id, "persistTier": e.persist }),
            )]
        }
        Event::DevloopIteration(e) => {
            let signals = parsed(&e.signals_json);
            let Some(score) = signals["critique.score"].as_f64() else { return Vec::new() };
            let ship = e.termination == od_events::vocab::Termination::UntilSatisfied;
            vec![(
                "critique.round_end",
                json!({ "runId": e.run_id, "stageId": e.stage_id, "round": e.iteration, "composite": score,
                        "mustFix": [], "decision": if ship { "ship" } else { "continue" },
                        "reason": if e.termination == od_events::vocab::Termination::Continuing { "below the until condition" } else { e.termination.as_str() } }),
            )]
        }
        _ => Vec::new(),
    }
}

/// A devloop row in the reference's `run_devloop_iterations` shape (plus od's decision fields).
pub fn devloop_row(stored: &Stored, e: &od_events::runs::DevloopIteration) -> Value {
    json!({ "id": format!("{}:{}", e.run_id, stored.envelope.version), "runId": e.run_id, "stageId": e.stage_id,
            "iteration": e.iteration, "artifactDiffSummary": e.artifact_diff_summary,
            "critiqueSummary": e.critique_summary, "tokensUsed": e.tokens_used, "endedAt": e.ended_at,
            "signals": parsed(&e.signals_json), "matched": e.matched, "termination": e.termination })
}

/// One ND-JSON line `{"event","data"}` for a run event (the reference's exact two keys).
pub fn line(stored: &Stored) -> Option<String> {
    let (name, data) = encode(stored)?;
    Some(json!({ "event": name, "data": data }).to_string())
}
