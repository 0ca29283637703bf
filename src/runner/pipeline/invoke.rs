//! One agent invocation of a stage iteration: the prompt composed (its digest recorded), the
//! agent's invocation built (a catalog agent's command line from the catalog as it is now),
//! `start` recorded, then the agent driven while its events are recorded as they come.

use od_events::runs::AgentStarted;
use od_events::Event;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::agent_events::record_agent_events;
use super::{Ctx, IterationOutput};
use crate::engine::prompt;
use crate::limits::AGENT_EVENTS_PER_APPEND;
use crate::runner::agent::{AgentEvent, AgentFailure, CancelFlag, Invocation};
use crate::runner::launch::{previous_session, Prepared};
use crate::runner::{dry_run, exec};
use crate::store::StoreError;

/// What is about to be invoked: the invocation, the agent's name, a catalog agent's prepared
/// command line, and the prompt's `prompt_composed`.
struct Ready {
    inv: Invocation,
    agent: String,
    catalog: Option<Result<Prepared, AgentFailure>>,
    composed: od_events::runs::PromptComposed,
}

/// One agent invocation: prompt digest, `start`, then the agent's events as they come.
pub(super) async fn invoke(
    ctx: &mut Ctx,
    stage_id: &str,
    atoms: &[String],
    i: u32,
    attempt: u32,
    cancel: &CancelFlag,
    out: &mut IterationOutput,
) -> Result<(), AgentFailure> {
    let Ready { inv, agent, catalog, composed } = prepare(ctx, stage_id, atoms, i, attempt)?;
    let started = AgentStarted {
        run_id: ctx.run_id.clone(),
        stage_id: stage_id.into(),
        iteration: i,
        agent_id: agent.clone(),
        bin: bin_of(ctx, &agent, &catalog),
        cwd: ctx.project_dir.to_string_lossy().into(),
        started_at: ctx.now(),
    };
    let failed = |e: StoreError| AgentFailure::Reported(format!("recording the prompt failed: {e}"));
    ctx.submit(vec![Event::PromptComposed(composed), Event::AgentStarted(started)]).map_err(failed)?;
    if agent != "dry-run" {
        // The agent may call back through `od` (signals, answers): the run's stage must be visible.
        ctx.flush().await.map_err(failed)?;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let fut = async {
        match (agent.as_str(), catalog) {
            ("exec", _) => exec::invoke(&inv, &tx, cancel.clone()).await,
            ("acp", _) => crate::runner::acp::invoke(&inv, &tx, cancel.clone()).await,
            (_, Some(prepared)) => exec::invoke_with(&inv, prepared?.exec, &tx, cancel.clone()).await,
            _ => dry_run::invoke(&inv, &tx, cancel.clone()).await,
        }
    };
    let result = drive(ctx, stage_id, i, fut, &mut rx, out).await;
    drop(tx);
    let mut rest = Vec::new();
    while let Ok(e) = rx.try_recv() {
        rest.push(e);
    }
    if !rest.is_empty() {
        record_agent_events(ctx, stage_id, i, rest, "agent", out)
            .await
            .map_err(|e| AgentFailure::Reported(e.reason))?;
    }
    result
}

/// Composes the prompt and builds the invocation (a catalog agent resumes the session its
/// previous iteration of this stage named; its command line is built now, `runner/launch.rs`).
fn prepare(ctx: &Ctx, stage_id: &str, atoms: &[String], i: u32, attempt: u32) -> Result<Ready, AgentFailure> {
    let history = ctx.history().unwrap_or_default();
    let answers = crate::engine::resume::answers_so_far(&history);
    let staged = crate::engine::resume::staged_so_far(&history).map(|(dir, _)| dir);
    let follow_up = ctx.engine.follow_up_context(&history);
    let inputs = prompt::PromptInputs {
        snap: &ctx.snap,
        stage_id,
        iteration: i,
        message: &ctx.message,
        answers: &answers,
        staged: staged.as_deref(),
        follow_up: follow_up.as_ref(),
    };
    let budget = prompt::stack::budget_for(&ctx.config);
    let composed = ctx
        .engine
        .compose_prompt(&inputs, &history, &ctx.project_id, budget, None)
        .map_err(|e| AgentFailure::Reported(format!("composing the prompt: {e}")))?;
    let agent = ctx.config["agent"].as_str().unwrap_or("dry-run").to_string();
    let own = matches!(agent.as_str(), "exec" | "dry-run" | "acp");
    let mut config = ctx.config.clone();
    if let (Some(prev), false) = (i.checked_sub(1), own) {
        if let Some(id) = previous_session(history.iter().map(|s| &s.event), stage_id, prev) {
            config["resumeSessionId"] = json!(id);
        }
    }
    let inv = Invocation {
        run_id: ctx.run_id.clone(),
        project_id: ctx.project_id.clone(),
        project_dir: ctx.project_dir.clone(),
        snapshot_id: ctx.snapshot_id.clone(),
        task_kind: ctx.snap["taskKind"].as_str().unwrap_or("new-generation").into(),
        stage_id: stage_id.into(),
        iteration: i,
        attempt,
        atoms: atoms.to_vec(),
        prompt: composed.text.clone(),
        config,
        daemon_url: ctx.daemon_url.clone(),
        data_dir: ctx.engine.store().dir().to_path_buf(),
        tool_token: ctx.engine.tool_token(&ctx.run_id, &ctx.snapshot_id),
    };
    let catalog = (!own).then(|| {
        crate::runner::launch::prepare(&inv, ctx.engine.data_dir(), &ctx.engine.probe_env(), &**ctx.engine.clock())
    });
    Ok(Ready { inv, agent, catalog, composed: composed.event(&ctx.run_id, stage_id, i) })
}

/// The binary `start` names: exec's and ACP's first word, a catalog agent's resolved binary.
fn bin_of(ctx: &Ctx, agent: &str, catalog: &Option<Result<Prepared, AgentFailure>>) -> String {
    match (agent, catalog) {
        ("exec" | "acp", _) => match &ctx.config["command"] {
            Value::Array(a) => a.first().and_then(Value::as_str).unwrap_or("").to_string(),
            Value::String(s) => s.clone(),
            _ => String::new(),
        },
        (_, Some(Ok(p))) => p.bin.to_string_lossy().into(),
        (_, Some(Err(_))) => ctx.config["agentBin"].as_str().unwrap_or("").to_string(),
        _ => "od:dry-run".into(),
    }
}

/// Drives the agent's future to its end, recording its events as they come.
async fn drive(
    ctx: &mut Ctx,
    stage_id: &str,
    i: u32,
    fut: impl std::future::Future<Output = Result<(), AgentFailure>>,
    rx: &mut mpsc::UnboundedReceiver<AgentEvent>,
    out: &mut IterationOutput,
) -> Result<(), AgentFailure> {
    tokio::pin!(fut);
    loop {
        // In order: the agent's end, its output, and — only when both would wait — sending what
        // is buffered, so watchers see the output while the agent works on.
        tokio::select! {
            biased;
            res = &mut fut => break res,
            Some(first) = rx.recv() => {
                let mut batch = vec![first];
                while batch.len() < AGENT_EVENTS_PER_APPEND {
                    match rx.try_recv() { Ok(e) => batch.push(e), Err(_) => break }
                }
                if let Err(e) = record_agent_events(ctx, stage_id, i, batch, "agent", out).await {
                    // A lost lease cancelled the agent: its group is ended by the agent's own
                    // future, whose end comes next.
                    if !ctx.rec.lost() {
                        break Err(AgentFailure::Reported(e.reason));
                    }
                }
            }
            _ = std::future::ready(()), if ctx.rec.has_buffered() => {
                if let Err(e) = ctx.rec.send() {
                    if !ctx.rec.lost() {
                        break Err(AgentFailure::Reported(format!("recording the agent's output failed: {e}")));
                    }
                }
            }
        }
    }
}
