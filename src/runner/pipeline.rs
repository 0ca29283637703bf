//! The pipeline executor: drives one run's stages in order. Per stage iteration it records
//! `pipeline_stage_started`, composes the prompt (recording its digest), hands it to the agent,
//! records everything that comes back, runs the atom workers, evaluates the stage's `until` over
//! the run's signals, records the devloop row and `pipeline_stage_completed`, and loops until the
//! condition holds, the ceiling is hit or the user breaks the loop. Failures follow the stage's
//! `onFailure` (abort, skip, retry); the run always ends with `end`. What it records goes through
//! the run's [`Recorder`], which turns it into as few appends as waiting allows.
//!
//! This file loads the run and drives it to its end; one file per concern below it: `stage` (a
//! stage's iterations, attempts, workers and devloop row), `invoke` (one agent invocation),
//! `agent_events` (what an agent produced, recorded), `awaiting`'s surfaces, `staging` (the
//! substrate), `conversation` (the reply) and `ending` (how the run ends).

use od_events::{Event, StreamId};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::agent::CancelFlag;

mod agent_events;
mod conversation;
mod ending;
mod history;
mod invoke;
mod stage;
mod staging;
use super::recorder::Recorder;
use crate::engine::Engine;
use crate::store::StoreError;
use ending::run_ended;
pub(super) use ending::{stop_ending, store_end, Ending};

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
    resume: Option<crate::engine::resume::Resume>,
    /// What the run records, buffered into appends.
    pub(super) rec: Recorder,
    /// The project copies of the artifacts recorded since they were last made durable (each
    /// artifact's blob is durable before its event; the copies are fsynced, one fsync per file and
    /// per folder, before the run ends or waits — what acknowledges them — see [`Ctx::sync_copies`]).
    pub(super) copies: std::collections::BTreeSet<String>,
    /// The run's history, read incrementally ([`history::History`]).
    history: history::History,
    /// Fsyncs owed since `load` (the run folder's parent, when `load` created the folder), paid
    /// with the copies before anything acknowledges them.
    owed: crate::durable::Syncs,
}

impl Ctx {
    /// The run's snapshot.
    pub(super) fn snap_ref(&self) -> &Value {
        &self.snap
    }

    /// The run's history now: [`Engine::run_history`]'s answer, read incrementally.
    pub(super) fn history(&self) -> Result<Arc<Vec<od_events::Stored>>, crate::engine::WorkError> {
        self.history.read(&self.engine, &self.run_id)
    }

    fn now(&self) -> i64 {
        self.engine.clock().now_ms()
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

    /// Makes the project copies of the artifacts recorded so far durable — each file fsynced, then
    /// each folder on the way once (`crate::durable::Syncs`) — in one round with the blobs the
    /// recorder's buffer names (`Recorder::commit_blobs`), and with the run folder's creation
    /// (its parent's fsync, owed since `load`). A copy gone since, or replaced by a link or
    /// something not a file (a later write, a person, the agent), is not this run's to keep.
    pub(super) fn sync_copies(&mut self) -> Result<(), Ending> {
        let failed = |e: String| Ending::failed("store", format!("making the project's files durable: {e}"));
        let mut syncs = std::mem::take(&mut self.owed);
        if self.copies.is_empty() {
            return self.rec.commit_blobs(syncs).map_err(|e| failed(e.to_string()));
        }
        let root = crate::engine::safe_fs::Root::open(&self.project_dir).map_err(|e| failed(e.to_string()))?;
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
        self.rec.commit_blobs(syncs).map_err(|e| failed(e.to_string()))
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
            let stream = StreamId::typed("run", run_id).map(|s| Recorder::new(engine.store().clone(), s, fence, guard));
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
    // The folder may be new (or made without its fsyncs by the run's start): its creation and its
    // parent's entry are owed, and paid with the run's files (`Ctx::sync_copies`).
    let mut owed = crate::durable::Syncs::new();
    let dir_error = |e: String| format!("project directory {}: {e}", project_dir.display());
    crate::engine::safe_fs::Root::create_in(&project_dir, &mut owed).map_err(|e| dir_error(e.to_string()))?;
    if let Some(parent) = project_dir.parent() {
        let fd = crate::durable::open_dir(parent, &mut owed).map_err(|e| dir_error(e.to_string()))?;
        owed.add(std::os::fd::AsFd::as_fd(&fd)).map_err(|e| dir_error(e.to_string()))?;
    }
    let history = history::History::default();
    let events = history.read(&engine, run_id).map_err(|e| e.to_string())?;
    let (artifacts, artifact_count) = crate::engine::resume::artifacts_so_far(&events);
    let resume = crate::engine::resume::resume_point(&events);
    let stream = StreamId::typed("run", run_id).map_err(|e| e.to_string())?;
    Ok(Some(Ctx {
        rec: Recorder::new(engine.store().clone(), stream, fence, guard),
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
        history,
        owed,
    }))
}

fn stages(snap: &Value) -> Vec<Value> {
    match snap["pipeline"]["stages"].as_array() {
        Some(s) if !s.is_empty() => s.clone(),
        _ => vec![json!({ "id": "run", "atoms": [] })],
    }
}

async fn drive(ctx: &mut Ctx, cancel: CancelFlag) -> Ending {
    let ceiling = ctx.engine.config().max_devloop_iterations;
    // A follow-up runs only its planned stages (`engine/conversations.rs`).
    let history = ctx.history().unwrap_or_default();
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
        match stage::run_stage(ctx, stage, first, ceiling, cancel.clone()).await {
            Ok(()) => {}
            Err(end) => return end,
        }
    }
    Ending::succeeded()
}
