//! One stage of the pipeline, iteration by iteration: its plan (`repeat`, `until`, atoms,
//! `onFailure`), each iteration's `pipeline_stage_started` (and the run-start surfaces), the agent
//! attempts under the stage's failure rule, the atom workers, and the devloop row with the
//! `until` verdict and the loop's termination.

use od_events::runs::{DevloopIteration, LoopBroken, StageCompleted, StageFailed, StageStarted};
use od_events::Event;
use serde_json::{json, Map, Value};

use super::agent_events::record_agent_events;
use super::invoke::invoke;
use super::{stop_ending, store_end, Ctx, Ending, IterationOutput};
use crate::limits::STAGE_RETRY_ATTEMPTS;
use crate::plugins::until::{parse_until, Literal, UntilExpr};
use crate::runner::agent::{AgentFailure, CancelFlag};
use crate::runner::{awaiting, code_index, workers};

/// A stage as the executor runs it.
struct Plan {
    id: String,
    repeat: bool,
    on_failure: String,
    until: Option<UntilExpr>,
    /// Iterations at most (1 for a stage that does not repeat).
    max: u32,
    atoms: Vec<String>,
}

impl Plan {
    /// Reads the stage; a repeating stage without a parsing `until` fails the run.
    fn of(stage: &Value, ceiling: u32) -> Result<Plan, Ending> {
        let id = stage["id"].as_str().unwrap_or("stage").to_string();
        let repeat = stage["repeat"].as_bool().unwrap_or(false);
        let until = match (repeat, stage["until"].as_str()) {
            (false, _) => None,
            (true, None) => {
                return Err(Ending::failed("pipeline-config", format!("stage {id} repeats without `until`")))
            }
            (true, Some(src)) => Some(parse_until(src).map_err(|e| {
                Ending::failed("pipeline-config", format!("stage {id}: `until` {src:?} does not parse at {e}"))
            })?),
        };
        Ok(Plan {
            on_failure: stage["onFailure"].as_str().unwrap_or("abort").to_string(),
            max: if repeat { ceiling } else { 1 },
            atoms: stage["atoms"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(String::from))
                .collect(),
            id,
            repeat,
            until,
        })
    }
}

/// How an iteration's agent attempts ended.
enum Attempts {
    /// The agent did its work (or a resumed iteration had already invoked it).
    Done,
    /// The stage's `onFailure` is `skip`: the stage is over, recorded as skipped.
    Skipped,
}

/// Runs one stage to convergence, the ceiling, a break, a skip — or returns how the run ends.
pub(super) async fn run_stage(
    ctx: &mut Ctx,
    stage: &Value,
    first: bool,
    ceiling: u32,
    cancel: CancelFlag,
) -> Result<(), Ending> {
    let plan = Plan::of(stage, ceiling)?;
    let resume = ctx.resume.take().filter(|r| r.stage_id == plan.id);
    let (from, mut resumed, mut invoked) = match &resume {
        // The iteration's devloop row is recorded: the next iteration starts afresh.
        Some(r) if r.completed.is_some() => (r.iteration + 1, false, false),
        Some(r) => (r.iteration, true, r.invoked),
        None => (0, false, false),
    };
    for i in from..plan.max {
        if let Some(end) = stop_ending(&cancel, ctx) {
            return Err(end);
        }
        if !std::mem::take(&mut resumed) {
            start_iteration(ctx, &plan, stage, i, first).await?;
        }
        awaiting::wait_for_answers(ctx, &cancel).await?;
        let mut out = IterationOutput::default();
        if !std::mem::take(&mut invoked) {
            if let Attempts::Skipped = attempt(ctx, &plan, i, &cancel, &mut out).await? {
                return Ok(());
            }
        }
        awaiting::wait_for_answers(ctx, &cancel).await?;
        run_workers(ctx, &plan, i, &mut out).await?;
        if conclude(ctx, &plan, i, &out).await? {
            return Ok(());
        }
    }
    Ok(())
}

/// Records `pipeline_stage_started` of iteration `i` (and, at the stage's first, raises its
/// entry surfaces).
async fn start_iteration(ctx: &mut Ctx, plan: &Plan, stage: &Value, i: u32, first: bool) -> Result<(), Ending> {
    let started = StageStarted {
        run_id: ctx.run_id.clone(),
        snapshot_id: ctx.snapshot_id.clone(),
        stage_id: plan.id.clone(),
        iteration: i,
        started_at: ctx.now(),
    };
    ctx.submit(vec![Event::StageStarted(started)]).map_err(store_end)?;
    // An agent that never waits (the dry-run one) would hold this runtime thread for the whole
    // run: other tasks — this run's watchers among them — get a turn at each stage.
    tokio::task::yield_now().await;
    if i == 0 {
        awaiting::raise_entry_surfaces(ctx, stage, first).await?;
    }
    Ok(())
}

/// Invokes the agent, again under `onFailure: retry` (up to [`STAGE_RETRY_ATTEMPTS`]); each
/// failure is a `pipeline_stage_failed` saying what follows (retry, skip or abort).
async fn attempt(
    ctx: &mut Ctx,
    plan: &Plan,
    i: u32,
    cancel: &CancelFlag,
    out: &mut IterationOutput,
) -> Result<Attempts, Ending> {
    let mut attempt = 1;
    loop {
        let f = match invoke(ctx, &plan.id, &plan.atoms, i, attempt, cancel, out).await {
            Ok(()) => return Ok(Attempts::Done),
            Err(AgentFailure::Canceled) => {
                return Err(stop_ending(cancel, ctx).unwrap_or_else(|| Ending::failed("canceled", "canceled")))
            }
            Err(f) => f,
        };
        let action = match plan.on_failure.as_str() {
            "retry" if attempt < STAGE_RETRY_ATTEMPTS => "retry",
            "skip" => "skip",
            _ => "abort",
        };
        let failed = StageFailed {
            run_id: ctx.run_id.clone(),
            snapshot_id: ctx.snapshot_id.clone(),
            stage_id: plan.id.clone(),
            iteration: i,
            message: f.to_string(),
            action: action.into(),
            attempt,
        };
        ctx.submit(vec![Event::StageFailed(failed)]).map_err(store_end)?;
        match action {
            "retry" => attempt += 1,
            "skip" => {
                complete(ctx, &plan.id, i, false, out, Map::new(), "", "skipped").await?;
                return Ok(Attempts::Skipped);
            }
            _ => return Err(Ending::failed(f.category(), format!("stage {}: {f}", plan.id))),
        }
    }
}

/// The stage's atom workers (`build-test`, `code-import`, `diff-review`), their events recorded
/// like an agent's.
async fn run_workers(ctx: &mut Ctx, plan: &Plan, i: u32, out: &mut IterationOutput) -> Result<(), Ending> {
    let has = |atom: &str| plan.atoms.iter().any(|a| a == atom);
    if has("build-test") {
        let plugin = crate::engine::gate::Capability {
            plugin_id: ctx.snap["pluginId"].as_str().unwrap_or("").into(),
            plugin_version: ctx.snap["pluginVersion"].as_str().unwrap_or("").into(),
            required: Default::default(),
            granted: ctx.snap["capabilitiesGranted"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c.as_str().map(String::from))
                .collect(),
        };
        let right = crate::engine::gate::ExecRight::of_run(&ctx.config);
        // The worker runs subprocesses: what the stage recorded goes out before it waits.
        ctx.rec.send().map_err(store_end)?;
        let evs = workers::build_test(&ctx.metadata, &plugin, right, &ctx.project_dir).await;
        record_agent_events(ctx, &plan.id, i, evs, "worker:build-test", out).await?;
    }
    if has("code-import") {
        let evs = code_index::code_import(&ctx.project_dir);
        record_agent_events(ctx, &plan.id, i, evs, "worker:code-import", out).await?;
    }
    if has("diff-review") {
        let evs = workers::diff_review(&ctx.engine, &ctx.run_id, &plan.id);
        record_agent_events(ctx, &plan.id, i, evs, "worker:diff-review", out).await?;
    }
    Ok(())
}

/// Judges iteration `i` by `until` over the run's signals, records a break and the devloop row;
/// true when the stage is over.
async fn conclude(ctx: &mut Ctx, plan: &Plan, i: u32, out: &IterationOutput) -> Result<bool, Ending> {
    let (signals, broken) = run_state(ctx, &plan.id)?;
    let mut with_iter = signals;
    with_iter.insert("iterations".into(), json!(i + 1));
    let lookup = |name: &str| match with_iter.get(name) {
        Some(Value::Bool(b)) => Some(Literal::Bool(*b)),
        Some(Value::Number(n)) => n.as_f64().map(Literal::Number),
        _ => None,
    };
    let matched = plan.until.as_ref().and_then(|u| u.matched(lookup));
    let converged = plan.until.is_none() || matched.is_some();
    let termination = if !plan.repeat {
        "no-loop"
    } else if converged {
        "until-satisfied"
    } else if broken.is_some() {
        "loop-broken"
    } else if i + 1 == plan.max {
        "iteration-cap"
    } else {
        ""
    };
    if let (Some(by), false) = (&broken, converged) {
        let e = LoopBroken {
            run_id: ctx.run_id.clone(),
            stage_id: plan.id.clone(),
            iteration: i,
            requested_by: by.clone(),
        };
        ctx.submit(vec![Event::LoopBroken(e)]).map_err(store_end)?;
    }
    let matched = matched.as_deref().unwrap_or("");
    complete(ctx, &plan.id, i, converged, out, with_iter, matched, termination).await?;
    Ok(!termination.is_empty())
}

/// Records the devloop row and `pipeline_stage_completed` of iteration `i`.
#[allow(clippy::too_many_arguments)]
async fn complete(
    ctx: &Ctx,
    stage_id: &str,
    i: u32,
    converged: bool,
    out: &IterationOutput,
    signals: Map<String, Value>,
    matched: &str,
    termination: &str,
) -> Result<(), Ending> {
    let now = ctx.now();
    let row = DevloopIteration {
        run_id: ctx.run_id.clone(),
        stage_id: stage_id.into(),
        iteration: i + 1,
        artifact_diff_summary: out.diffs.join("; "),
        critique_summary: out.critique.join("; "),
        tokens_used: out.tokens,
        ended_at: now,
        signals_json: Value::Object(signals).to_string(),
        matched: matched.into(),
        termination: termination.into(),
    };
    let done = StageCompleted {
        run_id: ctx.run_id.clone(),
        snapshot_id: ctx.snapshot_id.clone(),
        stage_id: stage_id.into(),
        iteration: i,
        completed_at: now,
        converged,
        diff_summary: out.diffs.join("; "),
    };
    ctx.submit(vec![Event::DevloopIteration(row), Event::StageCompleted(done)]).map_err(store_end)?;
    Ok(())
}

/// The run's latest signal values, and who asked to break the loop of `stage_id` since it started
/// (after its first `pipeline_stage_started` in the log; while that is still on its way to the log,
/// every request there came before it).
fn run_state(ctx: &Ctx, stage_id: &str) -> Result<(Map<String, Value>, Option<String>), Ending> {
    // What is in the log (signals from `od run signal` included), then this executor's own signals
    // still on their way to it — those are the newest.
    let mut signals = Map::new();
    let (mut started, mut broken) = (false, None);
    for s in ctx.history().map_err(|e| Ending::failed("store", e.to_string()))?.iter() {
        match &s.event {
            Event::SignalRecorded(e) => {
                signals.insert(e.name.clone(), serde_json::from_str(&e.value_json).unwrap_or(Value::Null));
            }
            Event::StageStarted(e) if e.stage_id == stage_id && e.iteration == 0 => {
                (started, broken) = (true, None);
            }
            Event::RunResponded(e) if e.action == od_events::vocab::ResponseAction::BreakLoop && started => {
                broken = Some("user".to_string());
            }
            _ => {}
        }
    }
    for (name, value) in ctx.rec.unflushed_signals() {
        signals.insert(name, value);
    }
    Ok((signals, broken))
}
