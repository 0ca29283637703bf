//! Run ends, signals and responses from outside the executor: a run's `signal` and `respond`,
//! ending it by request, asking the daemon executing it elsewhere to cancel it, and ending the
//! runs a previous process (or a lost daemon) left in flight.

use od_events::runs::{RunEnded, RunResponded, SignalRecorded};
use od_events::vocab::{FailureCategory, ResponseAction, RunStatus};
use od_events::Event;
use od_projections::RunInfo;
use serde_json::Value;

use super::errors::WorkError;
use super::runs::stream;
use super::Engine;
use crate::store::Append;

impl Engine {
    fn append_to_run(&self, id: &str, events: Vec<Event>) -> Result<(), WorkError> {
        self.store.append(Append::new(stream(id)?, events))?;
        Ok(())
    }

    /// Ends a run this daemon holds the lease of at `epoch` (a take-over, a recovery): fenced, so
    /// a daemon that took the run since cannot be contradicted. No-op for a run that already ended.
    fn end_run_as(
        &self,
        r: &RunInfo,
        epoch: u64,
        (status, code): (RunStatus, i32),
        category: FailureCategory,
        reason: &str,
    ) -> Result<(), WorkError> {
        if self.run_info(&r.run_id)?.is_terminal() {
            return Ok(());
        }
        let e = RunEnded {
            run_id: r.run_id.clone(),
            status,
            code,
            reason: reason.into(),
            failure_category: category,
            artifact_count: r.artifact_count,
            ended_at: self.clock.now_ms(),
        };
        let fence = self.leases.fence(&r.run_id, epoch);
        match self.store.append(Append::new(stream(&r.run_id)?, vec![Event::RunEnded(e)]).fenced(fence)) {
            Ok(_) | Err(crate::store::StoreError::RunEnded { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Records a signal reported from outside the executor (`od run signal`).
    pub fn record_signal(&self, id: &str, name: &str, value: Value) -> Result<RunInfo, WorkError> {
        let run = self.active_run(id, "signals are only taken while it runs")?;
        if name.is_empty()
            || name.len() > 64
            || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
        {
            return Err(WorkError::invalid("name", format!("{name:?} is not a signal name")));
        }
        if !(value.is_number() || value.is_boolean()) {
            return Err(WorkError::invalid("value", "a signal is a number or true/false"));
        }
        let e = SignalRecorded {
            run_id: id.into(),
            stage_id: run.stage_id.clone(),
            iteration: run.iteration,
            name: name.into(),
            value_json: value.to_string(),
            source: "cli".into(),
        };
        self.append_to_run(id, vec![Event::SignalRecorded(e)])?;
        self.run_info(id)
    }

    fn active_run(&self, id: &str, why: &str) -> Result<RunInfo, WorkError> {
        let run = self.run_info(id)?;
        if run.is_terminal() {
            return Err(WorkError::RunState { run_id: id.into(), status: run.status, message: why.into() });
        }
        Ok(run)
    }

    /// Records a user response (`od run respond`): `{"action":"break-loop"}` leaves the current
    /// devloop after the iteration in progress.
    pub fn respond(&self, id: &str, body: &Value) -> Result<RunInfo, WorkError> {
        let action =
            body["action"].as_str().ok_or_else(|| WorkError::invalid("action", "missing (e.g. \"break-loop\")"))?;
        let action = ResponseAction::parse(action);
        if action != ResponseAction::BreakLoop {
            return Err(WorkError::invalid(
                "action",
                format!("{:?} is not a known action (break-loop)", action.as_str()),
            ));
        }
        self.active_run(id, "it no longer takes responses")?;
        let e = RunResponded {
            run_id: id.into(),
            action,
            payload_json: body.to_string(),
            received_at: self.clock.now_ms(),
        };
        self.append_to_run(id, vec![Event::RunResponded(e)])?;
        self.run_info(id)
    }

    /// Ends a run that is not executing anywhere (queued in a dead process, or canceled before it
    /// started). No-op for a run that already ended.
    pub fn end_run(
        &self,
        id: &str,
        status: RunStatus,
        category: FailureCategory,
        reason: &str,
    ) -> Result<RunInfo, WorkError> {
        let run = self.run_info(id)?;
        if run.is_terminal() {
            return Ok(run);
        }
        let e = RunEnded {
            run_id: id.into(),
            code: if status == RunStatus::Canceled { 130 } else { 1 },
            status,
            reason: reason.into(),
            failure_category: category,
            artifact_count: run.artifact_count,
            ended_at: self.clock.now_ms(),
        };
        self.append_to_run(id, vec![Event::RunEnded(e)])?;
        self.run_info(id)
    }

    /// Sorts the runs a previous process left unfinished: those that were executing an agent are
    /// ended as failed (the agent's process and state are gone); those still `queued` or
    /// `awaiting-input` (stopped at a clean point, nothing lost) are returned to be resumed.
    /// `orphans` are the agent process groups a killed process left running, ended by the caller
    /// first (the runner's `orphans::end_recorded`), by run id; the run's end reason names the
    /// group (`agentProcessGroupEnded: <pgid>`).
    pub fn recover_interrupted_runs(
        &self,
        orphans: &std::collections::HashMap<String, u32>,
    ) -> Result<Vec<String>, WorkError> {
        // Another daemon's commits become visible first (a no-op for the embedded log).
        self.store.sync_head()?;
        let mut resume = Vec::new();
        let mut projects = std::collections::BTreeSet::new();
        for r in self.active_runs()? {
            // A run another live daemon executes is that daemon's (shared log only).
            let Some(epoch) = self.leases.take(&r.run_id)? else {
                continue;
            };
            // Its project copies were not yet made durable (a run does that before it ends).
            projects.insert(r.project_id.clone());
            let mut reason = "od stopped while this run's agent was working; such runs are not resumed because the agent's process and state were lost".to_string();
            if let Some(pgid) = orphans.get(&r.run_id) {
                reason.push_str(&format!(
                    "; agentProcessGroupEnded: {pgid} (the agent was still running unsupervised: SIGTERM, then SIGKILL after {} ms)",
                    crate::limits::ORPHAN_AGENT_GRACE_MS
                ));
            }
            if self.recover_run(&r, epoch, FailureCategory::DaemonRestart, &reason)? {
                resume.push(r.run_id);
            } else {
                self.leases.release(&r.run_id);
            }
        }
        self.heal_copies_of(projects);
        Ok(resume)
    }

    /// Applies the restart semantics to `r`, whose executor is gone: a run that was queued, waiting
    /// for an answer, or answered while parked resumes (true); one whose agent was working ends
    /// `failed` with `category` and `reason` (false).
    fn recover_run(&self, r: &RunInfo, epoch: u64, category: FailureCategory, reason: &str) -> Result<bool, WorkError> {
        // A cancel asked for while its executor could not hear it (stalled, or gone) is final.
        let cancel_asked = self
            .run_events(&r.run_id, 0)?
            .iter()
            .any(|s| matches!(&s.event, Event::RunResponded(e) if e.action == ResponseAction::Cancel));
        if cancel_asked {
            self.end_run_as(r, epoch, (RunStatus::Canceled, 130), FailureCategory::Canceled, "canceled by the user")?;
            return Ok(false);
        }
        // A run parked for an answer that got it while no executor held it is still at a clean
        // point: its last event is that answer.
        let answered_while_parked = r.status == RunStatus::Running
            && self.store.read_stream(stream(&r.run_id)?.as_str(), r.last_version, 1)?.first().is_some_and(|f| {
                matches!(f.view().kind(), k if k == od_events::EventKind::SurfaceResponded.code() || k == od_events::EventKind::SurfaceTimedOut.code())
            });
        if matches!(r.status, RunStatus::Queued | RunStatus::AwaitingInput) || answered_while_parked {
            return Ok(true);
        }
        self.end_run_as(r, epoch, (RunStatus::Failed, 1), category, reason)?;
        Ok(false)
    }

    /// Takes over `run_id` from a daemon that stopped heart-beating (shared log): with its lease
    /// taken and the log read up to the database's head, the restart semantics apply. `Some(true)`:
    /// resume it here; `Some(false)`: it ended (or had already ended); `None`: a live daemon holds it.
    pub fn take_over(&self, run_id: &str) -> Result<Option<bool>, WorkError> {
        let Some(epoch) = self.leases.take(run_id)? else {
            return Ok(None);
        };
        self.store.sync_head()?;
        let r = self.run_info(run_id)?;
        let reason = format!(
            "the daemon executing this run stopped heart-beating for {} ms while its agent was working; the agent's process and state were lost with it, so the run is not resumed",
            self.config.lease_ttl_ms
        );
        let resume = !r.is_terminal() && self.recover_run(&r, epoch, FailureCategory::DaemonLost, &reason)?;
        if !resume {
            self.leases.release(run_id);
        }
        Ok(Some(resume))
    }

    /// Asks the daemon executing `id` elsewhere to cancel it: a `run_responded` with action
    /// `cancel`, which that daemon follows in the log.
    pub fn request_cancel(&self, id: &str) -> Result<(), WorkError> {
        self.active_run(id, "it has ended")?;
        let e = RunResponded {
            run_id: id.into(),
            action: ResponseAction::Cancel,
            payload_json: "{\"action\":\"cancel\"}".into(),
            received_at: self.clock.now_ms(),
        };
        self.append_to_run(id, vec![Event::RunResponded(e)])?;
        Ok(())
    }
}
