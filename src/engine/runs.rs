//! Run reads and agent options: a run, a page of runs, its events, its devloop history, replay
//! verification, and the checks of the agent options a run is created with. Creating a run is
//! `run_create.rs` (resolving the snapshot: explicit id, fresh apply, the conversation's, the
//! project's pinned one, else the bundled `od-default` scenario); signals, responses and ends from
//! outside the executor are `run_ends.rs`. The executor itself is `crate::runner`.

use od_events::runs::RunCreated;
use od_events::{Event, Stored, StreamId};
use od_projections::workspace_read::{self as wr, RunFilter};
use od_projections::RunInfo;
use serde_json::{json, Map, Value};

use super::errors::WorkError;
use super::Engine;
use crate::engine::prompt;
use crate::limits::{MAX_AGENT_TIMEOUT_MS, MAX_RUN_LIST_EXAMINED, MAX_WORKING_SET_READ};
use crate::page::{page_keyed, Page, PageReq};
use crate::store::decode_frame;

pub use super::run_create::{NewRun, Started, DEFAULT_SCENARIO};

/// A run's stream.
pub(super) fn stream(id: &str) -> Result<StreamId, WorkError> {
    StreamId::typed("run", id).map_err(|e| WorkError::invalid("runId", e.to_string()))
}

/// An exec agent's options: its command (`agentCommand`, else `OD_AGENT_CMD`) and protocol.
fn exec_options(a: &mut Map<String, Value>, env: &super::agents::AgentEnv) -> Result<(), WorkError> {
    if !a.contains_key("command") {
        if let Some(cmd) = env.od_agent_cmd.clone() {
            a.insert("command".into(), json!(cmd));
        }
    }
    match a.get("command") {
        Some(Value::String(s)) if !s.trim().is_empty() => {}
        Some(Value::Array(v)) if !v.is_empty() && v.iter().all(Value::is_string) => {}
        _ => {
            return Err(WorkError::invalid(
                "agentCommand",
                "the exec agent needs a command (agentCommand, or OD_AGENT_CMD)",
            ))
        }
    }
    let p = a.get("protocol").and_then(Value::as_str).unwrap_or("auto");
    if crate::agents::options::Protocol::parse(p).is_none() {
        return Err(WorkError::invalid(
            "agentProtocol",
            format!("{p:?} is not {}", crate::agents::options::PROTOCOL_NAMES),
        ));
    }
    Ok(())
}

/// An ACP agent's options: its own command line and the ACP settings.
fn acp_options(a: &Map<String, Value>) -> Result<(), WorkError> {
    // An ACP agent names its own command line (the gate judges it like exec's): an argv
    // array, or a string run by `sh -c` (`od run start --agent-cmd "qwen --acp"`).
    match a.get("command") {
        Some(Value::Array(v)) if !v.is_empty() && v.iter().all(|x| x.as_str().is_some_and(|s| !s.is_empty())) => {}
        Some(Value::String(s)) if !s.trim().is_empty() => {}
        _ => {
            return Err(WorkError::invalid(
                "agentCommand",
                "the acp agent needs its command line (an array of strings, or a string run by sh -c)",
            ))
        }
    }
    crate::agents::options::AcpOptions::from_config(&Value::Object(a.clone()))?;
    Ok(())
}

/// Checks and completes the agent options: the agent chosen by the one rule (`agents.rs`), with
/// its `agentSource`; a catalog agent's options checked against the catalog (`data_dir`'s files
/// included) and its detection (`crate::agents::configure`).
pub(crate) fn agent_config(
    mut a: Map<String, Value>,
    data_dir: &std::path::Path,
    probe: &crate::agents::detect::ProbeEnv,
    clock: &dyn crate::clock::Clock,
    env: &super::agents::AgentEnv,
) -> Result<Value, WorkError> {
    // Only the engine records a right (`with_exec_right`).
    a.remove(super::gate::MAY_EXEC_KEY);
    let catalog = crate::agents::catalog::Catalog::load(data_dir);
    let ids: Vec<String> = match &catalog {
        Ok(c) => c.agents.iter().map(|d| d.id.clone()).collect(),
        Err(_) => crate::agents::catalog::Catalog::built_in().agents.iter().map(|d| d.id.clone()).collect(),
    };
    super::agents::choose(&mut a, env, &ids)?;
    let kind = a.get("agent").and_then(Value::as_str).unwrap_or("dry-run").to_string();
    if ["dry-run", "exec"].contains(&kind.as_str()) {
        // od's own agents have no permission mode or reasoning effort to map: asking is a mistake.
        for field in [crate::agents::PERMISSION_KEY, "reasoning"] {
            if a.get(field).is_some_and(|v| !v.is_null()) {
                return Err(WorkError::invalid(
                    field,
                    format!("only a catalog agent takes it (this run's agent is {kind})"),
                ));
            }
        }
    }
    match kind.as_str() {
        "dry-run" => {}
        "exec" => exec_options(&mut a, env)?,
        "acp" => acp_options(&a)?,
        other if ids.iter().any(|id| id == other) => {
            let catalog = catalog.map_err(crate::agents::catalog_error)?;
            let def = catalog.get(other).expect("listed above");
            let d = crate::agents::detect_one(def, probe, clock);
            crate::agents::configure(def, &mut a, &d)?;
        }
        other => {
            return Err(WorkError::invalid(
                "agent",
                format!("{other:?} is not one of {}", super::agents::runnable(&ids).join(", ")),
            ))
        }
    }
    if let Some(script) = a.get("dryRun") {
        crate::agents::options::check_script(script)?;
    }
    // Bounded so that `Instant + timeout` cannot overflow (it panics); named as the request names them.
    for (k, field) in [("timeoutMs", "agentTimeoutMs"), ("idleTimeoutMs", "agentIdleTimeoutMs")] {
        if a.get(k).is_some_and(|v| v.as_u64().is_none_or(|n| n == 0 || n > MAX_AGENT_TIMEOUT_MS)) {
            return Err(WorkError::invalid(
                field,
                format!("must be a positive integer of milliseconds, at most {MAX_AGENT_TIMEOUT_MS}"),
            ));
        }
    }
    if let Some(v) = a.get("promptBudgetTokens") {
        crate::engine::prompt::stack::check_budget(v).map_err(|e| WorkError::invalid("promptBudgetTokens", e))?;
    }
    if let Err(e) = crate::agents::options::OutputLimits::default().with_config(&Value::Object(a.clone())) {
        let field = if e.field() == "outputMaxBytes" { "agentOutputMaxBytes" } else { "agentOutputMaxEvents" };
        return Err(WorkError::invalid(field, e.message()));
    }
    a.insert("agent".into(), json!(kind));
    Ok(Value::Object(a))
}

/// The agent options with the creator's exec right recorded (`gate.rs`; absent: denied), replacing
/// whatever an inherited or imported record said.
pub(crate) fn with_exec_right(mut config: Value, right: super::gate::ExecRight) -> Value {
    if let Some(o) = config.as_object_mut() {
        o.remove(super::gate::MAY_EXEC_KEY);
        if right.granted() {
            o.insert(super::gate::MAY_EXEC_KEY.into(), json!(true));
        }
    }
    config
}

impl Engine {
    /// One run's summary.
    pub fn run_info(&self, id: &str) -> Result<RunInfo, WorkError> {
        let run = self.workspace.read(|w| wr::run(w, id))?.ok_or_else(|| WorkError::RunNotFound(id.into()))?;
        self.with_head(run)
    }

    /// The run with `last_version` read from its stream head (its record keeps only its
    /// `RunCreated`'s, so the events that change nothing else write nothing).
    fn with_head(&self, mut run: RunInfo) -> Result<RunInfo, WorkError> {
        if let Some(v) = self.store.stream_version(stream(&run.run_id)?.as_str())? {
            run.last_version = v;
        }
        Ok(run)
    }

    /// One page of runs, newest first (by the seq of their `RunCreated`, so runs created while a
    /// caller pages land before its cursor and never shift a later page), read from the index of
    /// the filter (`status` may be `active`: not ended). A page narrowed by a second filter may
    /// come back short, with a `nextCursor`, after [`MAX_RUN_LIST_EXAMINED`] index entries.
    pub fn runs_page(&self, filter: &RunFilter, req: &PageReq) -> Result<Page<RunInfo>, WorkError> {
        let (items, stopped) =
            self.workspace.read(|w| wr::runs(w, filter, req.after.as_deref(), req.limit + 1, MAX_RUN_LIST_EXAMINED))?;
        let items = items.into_iter().map(|(k, r)| Ok((k, self.with_head(r)?))).collect::<Result<_, WorkError>>()?;
        let mut page = page_keyed("runs", req, items, true);
        if let (None, Some(at)) = (&page.next_cursor, stopped) {
            // The examined bound stopped the read: the next page resumes where it stopped.
            page.next_cursor = Some(crate::page::encode_cursor("runs", &at));
        }
        Ok(page)
    }

    /// The runs not ended (runs in flight: the working set).
    pub fn active_runs(&self) -> Result<Vec<RunInfo>, WorkError> {
        let runs = self.workspace.read(|w| wr::active_runs(w, MAX_WORKING_SET_READ))?;
        runs.into_iter().map(|r| self.with_head(r)).collect()
    }

    /// The run's events from stream version `from`, decoded.
    pub fn run_events(&self, id: &str, from: u64) -> Result<Vec<Stored>, WorkError> {
        let s = stream(id)?;
        let mut out = Vec::new();
        let mut at = from;
        loop {
            let frames = self.store.read_stream(s.as_str(), at, 4096)?;
            if frames.is_empty() {
                break;
            }
            for f in &frames {
                let st = decode_frame(f.view())?;
                at = st.envelope.version + 1;
                out.push(st);
            }
        }
        Ok(out)
    }

    /// The run's `RunCreated` (message and agent options).
    pub fn run_created(&self, id: &str) -> Result<RunCreated, WorkError> {
        self.run_created_event(id)
    }

    /// Recomposes every stage prompt of the run from its recorded snapshot and compares each with
    /// the digest recorded when it was sent. A fork's inherited prompts are recomposed from the
    /// snapshot and message of the ancestor that recorded them (its `inherited` part), its own from
    /// its own — each with the answers its history held then.
    pub fn verify_replay(&self, id: &str) -> Result<Value, WorkError> {
        let run = self.run_info(id)?;
        let snap = self.snapshot(&run.snapshot_id)?;
        let segments = self.lineage(id)?;
        let last = segments.len() - 1;
        let mut history: Vec<Stored> = Vec::new();
        let (mut own, mut inherited) = (Vec::new(), Vec::new());
        for (k, seg) in segments.into_iter().enumerate() {
            let created = self.run_created(&seg.run_id)?;
            let seg_snap = match k == last {
                true => snap.clone(),
                false => self.snapshot(&created.snapshot_id)?,
            };
            for s in seg.events {
                if let Event::PromptComposed(e) = &s.event {
                    let answers = crate::engine::resume::answers_so_far(&history);
                    let staged = crate::engine::resume::staged_so_far(&history).map(|(dir, _)| dir);
                    let follow_up = self.follow_up_context(&history);
                    let inputs = prompt::PromptInputs {
                        snap: &seg_snap,
                        stage_id: &e.stage_id,
                        iteration: e.iteration,
                        message: &created.message,
                        answers: &answers,
                        staged: staged.as_deref(),
                        follow_up: follow_up.as_ref(),
                    };
                    let check = self.replay_check(&seg.run_id, s.envelope.version, e, &created, &inputs, &history);
                    match k == last {
                        true => own.push(check),
                        false => inherited.push(check),
                    }
                }
                if k == last || !matches!(s.event, Event::RunEnded(_)) {
                    history.push(s);
                }
            }
        }
        let all_ok = |c: &[Value]| c.iter().all(|c| c["identical"] == true);
        let ok = all_ok(&own) && all_ok(&inherited);
        let mut out = json!({ "ok": ok, "runId": id, "snapshotId": run.snapshot_id, "pluginId": run.plugin_id,
            "snapshotStatus": snap["status"], "prompts": own });
        if !run.parent_run_id.is_empty() {
            out["inherited"] = json!({ "parentRunId": run.parent_run_id, "forkEventId": run.fork_event_id,
                "ok": all_ok(&inherited), "prompts": inherited });
        }
        Ok(out)
    }
}
