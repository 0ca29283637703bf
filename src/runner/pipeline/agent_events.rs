//! What an agent (or an atom worker) produced, turned into the run's events: output lines, signals
//! (noted for the devloop), artifacts — each streamed into the blob store, durable (in one batch
//! with the others) before the append carrying its `artifact_recorded`, its project copy noted
//! for the fsyncs the run pays before it ends
//! (`Ctx::sync_copies`) — and surface requests, which the engine records and the stage then waits
//! on (or, for an agent's [`crate::runner::agent::Ask`], the agent itself waits on).

use od_events::runs::{AgentOutput, ArtifactRecorded, SignalRecorded};
use od_events::Event;
use serde_json::json;

use super::{store_end, Ctx, Ending, IterationOutput};
use crate::runner::agent::AgentEvent;

/// Turns agent/worker events into run events and records them in one append.
pub(super) async fn record_agent_events(
    ctx: &mut Ctx,
    stage_id: &str,
    i: u32,
    batch: Vec<AgentEvent>,
    source: &str,
    out: &mut IterationOutput,
) -> Result<(), Ending> {
    let mut events = Vec::with_capacity(batch.len());
    // Whatever the source, each item is shaped to fit one stored event (see `output::fit`).
    for e in batch.into_iter().flat_map(crate::runner::output::fit) {
        match e {
            AgentEvent::Output { channel, payload } => {
                if payload["type"] == "usage" {
                    let u = &payload["usage"];
                    out.tokens += u["input_tokens"].as_u64().unwrap_or(0) + u["output_tokens"].as_u64().unwrap_or(0);
                }
                events.push(Event::AgentOutput(AgentOutput {
                    run_id: ctx.run_id.clone(),
                    stage_id: stage_id.into(),
                    iteration: i,
                    channel: channel.into(),
                    payload_json: payload.to_string(),
                }));
            }
            AgentEvent::Signal { name, value } => {
                if !(value.is_number() || value.is_boolean()) {
                    continue;
                }
                if name == "critique.score" {
                    out.critique.push(format!("critique.score={value}"));
                }
                ctx.rec.note_signal(name.clone(), value.clone());
                events.push(Event::SignalRecorded(SignalRecorded {
                    run_id: ctx.run_id.clone(),
                    stage_id: stage_id.into(),
                    iteration: i,
                    name,
                    value_json: value.to_string(),
                    source: source.into(),
                }));
            }
            AgentEvent::Artifact(d) => events.push(artifact_event(ctx, stage_id, i, d, out)),
            AgentEvent::Ask(ask) => {
                // An agent waiting on the user (an ACP permission request): raised like a surface
                // the stage waits on, answered back from its own task so the agent's output goes
                // on being recorded. What the agent said before it goes first.
                ctx.record(std::mem::take(&mut events)).await.map_err(store_end)?;
                crate::runner::awaiting::answer_ask(ctx, stage_id, ask).await;
            }
            AgentEvent::SurfaceRequest { surface_id, kind, atom, options } => {
                // Recorded by the engine either way (a refusal is an event too); the executor then
                // waits for it like for a surface raised at the stage's entry. What the agent said
                // before it goes first.
                ctx.record(std::mem::take(&mut events)).await.map_err(store_end)?;
                let engine = ctx.engine.clone();
                let run_id = ctx.run_id.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    engine.request_surface(&run_id, &surface_id, kind.as_deref(), atom.as_deref(), options.as_ref())
                })
                .await;
            }
        }
    }
    if events.is_empty() {
        return Ok(());
    }
    ctx.submit(events).map_err(store_end)?;
    Ok(())
}

/// An `artifact_recorded` for a file the agent wrote, or a warning when the path is unusable.
fn artifact_event(
    ctx: &mut Ctx,
    stage_id: &str,
    i: u32,
    d: crate::runner::agent::ArtifactDraft,
    out: &mut IterationOutput,
) -> Event {
    let warn = |msg: String| {
        Event::AgentOutput(AgentOutput {
            run_id: ctx.run_id.clone(),
            stage_id: stage_id.into(),
            iteration: i,
            channel: "agent".into(),
            payload_json: json!({ "type": "status", "label": "artifact-rejected", "detail": msg }).to_string(),
        })
    };
    // Claude's file tools name absolute paths; od's protocol names paths relative to the project.
    let named = match crate::runner::file_tools::project_relative(&d.path, &ctx.project_dir) {
        Ok(p) => p,
        Err(e) => return warn(e),
    };
    let rel = match crate::engine::files::clean_relative(&named) {
        Ok(r) => r,
        Err(e) => return warn(e.to_string()),
    };
    // Read below the project without following links (a link could name a secret or a device),
    // streamed into the blob store by digest (an artifact can be big), staged in the recorder's
    // batch: durable, with the others of the batch, before the append carrying this event is sent
    // (`Recorder::send`), so the run's files can be read back as they were.
    let file = crate::engine::safe_fs::Root::open(&ctx.project_dir).and_then(|root| root.open_file(&rel));
    let stored = match file {
        Ok(f) => ctx.engine.blobs().stage(f, &mut ctx.rec.blob_batch()).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let (digest, size) = match stored {
        Ok(d) => d,
        Err(e) => return warn(format!("{rel}: {e}")),
    };
    // The project's copy of a recorded artifact is made durable before the run ends
    // (`Ctx::sync_copies`); a rejected one (a link, a device) is not the run's to keep.
    ctx.copies.insert(rel.clone());
    let id = ctx.engine.ids().new_id();
    let (parent, diff) = match ctx.artifacts.get(&rel) {
        Some((pid, old)) if *old == digest => (pid.clone(), format!("{rel}: unchanged")),
        Some((pid, _)) => (pid.clone(), format!("{rel}: changed ({size} bytes)")),
        None => (d.parent_artifact_id.clone(), format!("{rel}: new ({size} bytes)")),
    };
    out.diffs.push(diff);
    ctx.artifacts.insert(rel.clone(), (id.clone(), digest.clone()));
    ctx.artifact_count += 1;
    Event::ArtifactRecorded(ArtifactRecorded {
        run_id: ctx.run_id.clone(),
        project_id: ctx.project_id.clone(),
        artifact_id: id,
        path: rel.clone(),
        title: if d.title.is_empty() { rel } else { d.title },
        stage_id: stage_id.into(),
        source_plugin_snapshot_id: ctx.snapshot_id.clone(),
        source_task_kind: ctx.snap["taskKind"].as_str().unwrap_or("new-generation").into(),
        artifact_kind: d.artifact_kind,
        render_kind: d.render_kind,
        handoff_kind: d.handoff_kind,
        parent_artifact_id: parent,
        export_targets: d.export_targets,
        digest,
        bytes: size,
        recorded_at: ctx.now(),
    })
}
