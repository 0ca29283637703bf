//! The pipeline executor: drives one run's stages in order. Per stage iteration it records
//! `pipeline_stage_started`, composes the prompt (recording its digest), hands it to the agent,
//! records everything that comes back, runs the atom workers, evaluates the stage's `until` over
//! the run's signals, records the devloop row and `pipeline_stage_completed`, and loops until the
//! condition holds, the ceiling is hit or the user breaks the loop. Failures follow the stage's
//! `onFailure` (abort, skip, retry); the run always ends with `end`. What it records goes through
//! the run's [`Recorder`], which turns it into as few appends as waiting allows.

use od_events::runs::{AgentStarted, DevloopIteration, LoopBroken, StageCompleted, StageFailed, StageStarted};
use od_events::vocab::FailureCategory;
use od_events::{Event, StreamId};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc;

use super::agent::{AgentFailure, CancelFlag, Invocation};
use agent_events::record_agent_events;

mod agent_events;
mod conversation;
mod ending;
mod staging;
use super::recorder::Recorder;
use super::{code_index, dry_run, exec, prompt, workers};
use crate::engine::Engine;
use crate::limits::{
    AGENT_EVENTS_PER_APPEND, DEFAULT_MAX_DEVLOOP_ITERATIONS, MAX_DEVLOOP_ITERATIONS_CAP, STAGE_RETRY_ATTEMPTS,
};
use crate::plugins::until::{parse_until, Literal};
use crate::store::StoreError;
use ending::run_ended;
pub(super) use ending::{stop_ending, store_end, Ending};

/// `OD_MAX_DEVLOOP_ITERATIONS` (default 10, at least 1, at most the hard cap).
pub fn max_iterations() -> u32 {
    std::env::var("OD_MAX_DEVLOOP_ITERATIONS")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(DEFAULT_MAX_DEVLOOP_ITERATIONS)
        .clamp(1, MAX_DEVLOOP_ITERATIONS_CAP)
}

/// Everything the executor needs about its run, loaded once.
pub(super) struct Ctx {
    pub(super) engine: Arc<Engine>,
    pub(super) run_id: String,
    snapshot_id: String,
    snap: Value,
    project_id: String,
    project_dir: PathBuf,
    metadata: Value,
    message: String,
    config: Value,
    daemon_url: String,
    artifact_count: u32,
    /// Latest artifact id and digest per path (parent links and diff summaries).
    artifacts: HashMap<String, (String, String)>,
    /// Where a resumed run picks up.
    resume: Option<super::resume::Resume>,
    /// What the run records, buffered into appends.
    pub(super) rec: Recorder,
    /// The project copies of the artifacts recorded since they were last made durable (each
    /// artifact's blob is durable before its event; the copies are fsynced, one fsync per file and
    /// per folder, before the run ends or waits — what acknowledges them — see [`Ctx::sync_copies`]).
    pub(super) copies: std::collections::BTreeSet<String>,
}

impl Ctx {
    /// The run's snapshot.
    pub(super) fn snap_ref(&self) -> &Value {
        &self.snap
    }

    fn now(&self) -> i64 {
        self.engine.clock.now_ms()
    }

    /// Records `events` behind the run's earlier ones and waits until all of it is durable.
    async fn record(&self, events: Vec<Event>) -> Result<(), StoreError> {
        self.rec.queue(events)?;
        self.rec.flush().await
    }

    /// Records `events` behind the run's earlier ones (buffered; see [`Recorder`]).
    fn submit(&self, events: Vec<Event>) -> Result<(), StoreError> {
        self.rec.queue(events)
    }

    /// Waits until everything recorded so far is durable (and reports the first failure).
    pub(super) async fn flush(&self) -> Result<(), StoreError> {
        self.rec.flush().await
    }

    /// Makes the project copies of the artifacts recorded so far durable: each file fsynced, then
    /// each folder on the way once (`crate::durable::Syncs`). A copy gone since, or replaced by a
    /// link or something not a file (a later write, a person, the agent), is not this run's to keep.
    pub(super) fn sync_copies(&mut self) -> Result<(), Ending> {
        if self.copies.is_empty() {
            return Ok(());
        }
        let failed = |e: String| Ending::failed("store", format!("making the project's files durable: {e}"));
        let root = crate::engine::safe_fs::Root::open(&self.project_dir).map_err(|e| failed(e.to_string()))?;
        let mut syncs = crate::durable::Syncs::new();
        for rel in std::mem::take(&mut self.copies) {
            match root.sync_in(&rel, &mut syncs) {
                Ok(())
                | Err(
                    crate::engine::safe_fs::SafeFsError::NotFound
                    | crate::engine::safe_fs::SafeFsError::Link
                    | crate::engine::safe_fs::SafeFsError::NotAFile
                    | crate::engine::safe_fs::SafeFsError::IsDirectory,
                ) => {}
                Err(e) => return Err(failed(format!("{rel}: {e}"))),
            }
        }
        syncs.commit().map_err(|e| failed(e.to_string()))
    }
}

/// What one stage iteration's agent produced, summarised for the devloop row.
#[derive(Default)]
struct IterationOutput {
    tokens: u64,
    diffs: Vec<String>,
    critique: Vec<String>,
}

/// What the runner hands the executor: the run's guard (cancel switch, lost lease), the fence its
/// appends carry, and the cancel flag its agent watches.
pub struct Executing {
    pub guard: Arc<super::RunGuard>,
    pub fence: Option<crate::store::Fence>,
    pub cancel: CancelFlag,
}

/// Drives `run_id` to its end. Never panics on bad data: every failure becomes an `end` event —
/// unless the run's lease is lost, when the executor stops and records nothing more.
pub async fn execute(engine: Arc<Engine>, run_id: &str, run: Executing, daemon_url: String) {
    let Executing { guard, fence, cancel } = run;
    let mut ctx = match load(engine.clone(), run_id, daemon_url, fence.clone(), guard.clone()) {
        Ok(Some(c)) => c,
        Ok(None) => return,
        Err(e) => {
            let stream = StreamId::typed("run", run_id).map(|s| Recorder::new(engine.store.clone(), s, fence, guard));
            if let Ok(rec) = stream {
                let end = run_ended(&engine, run_id, Ending::failed("run-setup", e), 0);
                if let Err(e) = rec.record_alone(vec![end]).await {
                    tracing::error!("could not record the end of run {run_id}: {e}");
                }
            }
            return;
        }
    };
    let mut ending = drive(&mut ctx, cancel).await;
    if let Err(e) = ctx.rec.wait_sent().await {
        ending = store_end(e);
    }
    if ctx.rec.lost() {
        tracing::error!("run {run_id}: its lease was lost; this executor stopped and recorded nothing more");
        return;
    }
    // The run's project copies are durable before its end (or its wait) is recorded.
    if let Err(e) = ctx.sync_copies() {
        ending = e;
    }
    if ending.suspend {
        if let Err(e) = ctx.flush().await {
            tracing::error!("could not record run {run_id} before suspending it: {e}");
        }
        return;
    }
    conversation::record_reply(&ctx);
    // What is still buffered lands with `end`, in one append; if that is refused, `end` alone
    // records why (unless the refusal says the run is no longer this executor's to end).
    let end = run_ended(&engine, run_id, ending, ctx.artifact_count);
    match ctx.rec.finish(end).await {
        Ok(()) => {}
        Err(e @ (StoreError::LeaseLost { .. } | StoreError::RunEnded { .. })) => {
            tracing::error!("run {run_id}: its end was not recorded: {e}");
        }
        Err(e) => {
            let end = run_ended(&engine, run_id, store_end(e), ctx.artifact_count);
            if let Err(e) = ctx.rec.record_alone(vec![end]).await {
                tracing::error!("could not record the end of run {run_id}: {e}");
            }
        }
    }
}

fn load(
    engine: Arc<Engine>,
    run_id: &str,
    daemon_url: String,
    fence: Option<crate::store::Fence>,
    guard: Arc<super::RunGuard>,
) -> Result<Option<Ctx>, String> {
    let run = engine.run_info(run_id).map_err(|e| e.to_string())?;
    if run.is_terminal() {
        return Ok(None);
    }
    let created = engine.run_created(run_id).map_err(|e| e.to_string())?;
    let snap = engine.snapshot(&run.snapshot_id).map_err(|e| e.to_string())?;
    let project = engine.project(&run.project_id).map_err(|e| e.to_string())?;
    // A fork works in its own folder, holding the files its inherited part recorded.
    let project_dir = match engine.fork_work_dir(run_id).map_err(|e| e.to_string())? {
        Some(dir) => dir,
        None => engine.project_dir(&project),
    };
    crate::engine::safe_fs::Root::create(&project_dir)
        .map_err(|e| format!("project directory {}: {e}", project_dir.display()))?;
    let events = engine.run_history(run_id).map_err(|e| e.to_string())?;
    let (artifacts, artifact_count) = super::resume::artifacts_so_far(&events);
    let resume = super::resume::resume_point(&events);
    let stream = StreamId::typed("run", run_id).map_err(|e| e.to_string())?;
    Ok(Some(Ctx {
        rec: Recorder::new(engine.store.clone(), stream, fence, guard),
        run_id: run_id.into(),
        snapshot_id: run.snapshot_id.clone(),
        snap,
        project_id: project.id.clone(),
        project_dir,
        metadata: serde_json::from_str(&project.metadata_json).unwrap_or(Value::Null),
        message: created.message,
        config: serde_json::from_str(&created.agent_config_json).unwrap_or(json!({})),
        daemon_url,
        artifact_count,
        artifacts,
        resume,
        engine,
        copies: Default::default(),
    }))
}

fn stages(snap: &Value) -> Vec<Value> {
    match snap["pipeline"]["stages"].as_array() {
        Some(s) if !s.is_empty() => s.clone(),
        _ => vec![json!({ "id": "run", "atoms": [] })],
    }
}

async fn drive(ctx: &mut Ctx, cancel: CancelFlag) -> Ending {
    let ceiling = max_iterations();
    // A follow-up runs only its planned stages (`engine/conversations.rs`).
    let history = ctx.engine.run_history(&ctx.run_id).unwrap_or_default();
    let pipeline = stages(&ctx.snap);
    let first_id = pipeline[0]["id"].clone();
    let all = crate::engine::conversations::stages_to_run(&history, pipeline);
    let skip = match &ctx.resume {
        Some(r) => {
            let at = all.iter().position(|s| s["id"] == r.stage_id.as_str()).unwrap_or(0);
            // A stage whose last devloop row ended it is over: go on with the next one.
            if r.completed == Some(true) {
                ctx.resume = None;
                at + 1
            } else {
                at
            }
        }
        None => 0,
    };
    // The substrate is in the folder before the first agent invocation (once per run: a resumed
    // run or a fork finds it recorded and restored).
    if let Err(end) = staging::stage(ctx).await {
        return end;
    }
    for (n, stage) in all.iter().enumerate().skip(skip) {
        // The run-start surfaces come with the pipeline's first stage (not a follow-up's first).
        let first = n == 0 && stage["id"] == first_id;
        match run_stage(ctx, stage, first, ceiling, cancel.clone()).await {
            Ok(()) => {}
            Err(end) => return end,
        }
    }
    Ending::succeeded()
}

/// Runs one stage to convergence, the ceiling, a break, a skip — or returns how the run ends.
async fn run_stage(ctx: &mut Ctx, stage: &Value, first: bool, ceiling: u32, cancel: CancelFlag) -> Result<(), Ending> {
    let stage_id = stage["id"].as_str().unwrap_or("stage").to_string();
    let repeat = stage["repeat"].as_bool().unwrap_or(false);
    let on_failure = stage["onFailure"].as_str().unwrap_or("abort").to_string();
    let until = match (repeat, stage["until"].as_str()) {
        (false, _) => None,
        (true, None) => {
            return Err(Ending::failed("pipeline-config", format!("stage {stage_id} repeats without `until`")))
        }
        (true, Some(src)) => Some(parse_until(src).map_err(|e| {
            Ending::failed("pipeline-config", format!("stage {stage_id}: `until` {src:?} does not parse at {e}"))
        })?),
    };
    let max = if repeat { ceiling } else { 1 };
    let atoms: Vec<String> =
        stage["atoms"].as_array().into_iter().flatten().filter_map(|a| a.as_str().map(String::from)).collect();
    let resume = ctx.resume.take().filter(|r| r.stage_id == stage_id);
    let (from, mut resumed, mut invoked) = match &resume {
        // The iteration's devloop row is recorded: the next iteration starts afresh.
        Some(r) if r.completed.is_some() => (r.iteration + 1, false, false),
        Some(r) => (r.iteration, true, r.invoked),
        None => (0, false, false),
    };
    for i in from..max {
        if let Some(end) = stop_ending(&cancel, ctx) {
            return Err(end);
        }
        if !std::mem::take(&mut resumed) {
            let started = StageStarted {
                run_id: ctx.run_id.clone(),
                snapshot_id: ctx.snapshot_id.clone(),
                stage_id: stage_id.clone(),
                iteration: i,
                started_at: ctx.now(),
            };
            ctx.submit(vec![Event::StageStarted(started)]).map_err(store_end)?;
            // An agent that never waits (the dry-run one) would hold this runtime thread for the
            // whole run: other tasks — this run's watchers among them — get a turn at each stage.
            tokio::task::yield_now().await;
            if i == 0 {
                super::awaiting::raise_entry_surfaces(ctx, stage, first).await?;
            }
        }
        super::awaiting::wait_for_answers(ctx, &cancel).await?;
        let mut out = IterationOutput::default();
        let mut attempt = 1;
        loop {
            if std::mem::take(&mut invoked) {
                break;
            }
            match invoke(ctx, &stage_id, &atoms, i, attempt, &cancel, &mut out).await {
                Ok(()) => break,
                Err(AgentFailure::Canceled) => {
                    return Err(stop_ending(&cancel, ctx)
                        .unwrap_or_else(|| Ending::failed(FailureCategory::Canceled, "canceled")))
                }
                Err(f) => {
                    let action = match on_failure.as_str() {
                        "retry" if attempt < STAGE_RETRY_ATTEMPTS => "retry",
                        "skip" => "skip",
                        _ => "abort",
                    };
                    let failed = StageFailed {
                        run_id: ctx.run_id.clone(),
                        snapshot_id: ctx.snapshot_id.clone(),
                        stage_id: stage_id.clone(),
                        iteration: i,
                        message: f.to_string(),
                        action: action.into(),
                        attempt,
                    };
                    ctx.submit(vec![Event::StageFailed(failed)]).map_err(store_end)?;
                    match action {
                        "retry" => attempt += 1,
                        "skip" => {
                            complete(ctx, &stage_id, i, false, &out, Map::new(), "", "skipped").await?;
                            return Ok(());
                        }
                        _ => return Err(Ending::failed(f.category(), format!("stage {stage_id}: {f}"))),
                    }
                }
            }
        }
        super::awaiting::wait_for_answers(ctx, &cancel).await?;
        if atoms.iter().any(|a| a == "build-test") {
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
            record_agent_events(ctx, &stage_id, i, evs, "worker:build-test", &mut out).await?;
        }
        if atoms.iter().any(|a| a == "code-import") {
            let evs = code_index::code_import(&ctx.project_dir);
            record_agent_events(ctx, &stage_id, i, evs, "worker:code-import", &mut out).await?;
        }
        if atoms.iter().any(|a| a == "diff-review") {
            let evs = workers::diff_review(&ctx.engine, &ctx.run_id, &stage_id);
            record_agent_events(ctx, &stage_id, i, evs, "worker:diff-review", &mut out).await?;
        }
        let (signals, broken) = run_state(ctx, &stage_id)?;
        let mut with_iter = signals.clone();
        with_iter.insert("iterations".into(), json!(i + 1));
        let lookup = |name: &str| match with_iter.get(name) {
            Some(Value::Bool(b)) => Some(Literal::Bool(*b)),
            Some(Value::Number(n)) => n.as_f64().map(Literal::Number),
            _ => None,
        };
        let matched = until.as_ref().and_then(|u| u.matched(lookup));
        let converged = until.is_none() || matched.is_some();
        let termination = if !repeat {
            "no-loop"
        } else if converged {
            "until-satisfied"
        } else if broken.is_some() {
            "loop-broken"
        } else if i + 1 == max {
            "iteration-cap"
        } else {
            ""
        };
        if let (Some(by), false) = (&broken, converged) {
            let e = LoopBroken {
                run_id: ctx.run_id.clone(),
                stage_id: stage_id.clone(),
                iteration: i,
                requested_by: by.clone(),
            };
            ctx.submit(vec![Event::LoopBroken(e)]).map_err(store_end)?;
        }
        complete(ctx, &stage_id, i, converged, &out, with_iter, matched.as_deref().unwrap_or(""), termination).await?;
        if !termination.is_empty() {
            return Ok(());
        }
    }
    Ok(())
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
    for s in ctx.engine.run_history(&ctx.run_id).map_err(|e| Ending::failed("store", e.to_string()))? {
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

/// One agent invocation: prompt digest, `start`, then the agent's events as they come.
async fn invoke(
    ctx: &mut Ctx,
    stage_id: &str,
    atoms: &[String],
    i: u32,
    attempt: u32,
    cancel: &CancelFlag,
    out: &mut IterationOutput,
) -> Result<(), AgentFailure> {
    let history = ctx.engine.run_history(&ctx.run_id).unwrap_or_default();
    let answers = super::resume::answers_so_far(&history);
    let staged = super::resume::staged_so_far(&history).map(|(dir, _)| dir);
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
    let text = composed.text.clone();
    let agent = ctx.config["agent"].as_str().unwrap_or("dry-run").to_string();
    // A catalog agent resumes the session its previous iteration of this stage named.
    let mut config = ctx.config.clone();
    if let (Some(prev), false) = (i.checked_sub(1), matches!(agent.as_str(), "exec" | "dry-run" | "acp")) {
        if let Some(id) = crate::agents::launch::previous_session(history.iter().map(|s| &s.event), stage_id, prev) {
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
        prompt: text.clone(),
        config,
        daemon_url: ctx.daemon_url.clone(),
        data_dir: ctx.engine.store.dir().to_path_buf(),
        tool_token: ctx.engine.tool_token(&ctx.run_id, &ctx.snapshot_id),
    };
    // A catalog agent's command line is built now, from the catalog as it is (`agents/launch.rs`).
    let catalog = match agent.as_str() {
        "exec" | "dry-run" | "acp" => None,
        _ => Some(crate::agents::launch::prepare(
            &inv,
            &ctx.engine.data_dir,
            &ctx.engine.probe_env(),
            &*ctx.engine.clock,
        )),
    };
    let bin = match (agent.as_str(), &catalog) {
        ("exec" | "acp", _) => match &ctx.config["command"] {
            Value::Array(a) => a.first().and_then(Value::as_str).unwrap_or("").to_string(),
            Value::String(s) => s.clone(),
            _ => String::new(),
        },
        (_, Some(Ok(p))) => p.bin.to_string_lossy().into(),
        (_, Some(Err(_))) => ctx.config["agentBin"].as_str().unwrap_or("").to_string(),
        _ => "od:dry-run".into(),
    };
    let composed = composed.event(&ctx.run_id, stage_id, i);
    let started = AgentStarted {
        run_id: ctx.run_id.clone(),
        stage_id: stage_id.into(),
        iteration: i,
        agent_id: agent.clone(),
        bin,
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
    let result = {
        let fut = async {
            match (agent.as_str(), catalog) {
                ("exec", _) => exec::invoke(&inv, &tx, cancel.clone()).await,
                ("acp", _) => super::acp::invoke(&inv, &tx, cancel.clone()).await,
                (_, Some(prepared)) => exec::invoke_with(&inv, prepared?.exec, &tx, cancel.clone()).await,
                _ => dry_run::invoke(&inv, &tx, cancel.clone()).await,
            }
        };
        tokio::pin!(fut);
        loop {
            // In order: the agent's end, its output, and — only when both would wait — sending
            // what is buffered, so watchers see the output while the agent works on.
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
    };
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
