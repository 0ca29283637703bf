//! GenUI inside the executor: raising the surfaces a stage's entry triggers, and waiting — with
//! the run `awaiting-input` and its stage held — until every surface of the run is answered or
//! times out (`onTimeout`: abort ends the run, default/skip go on). Time comes from the injected
//! clock, so a timeout fires whether the daemon kept running or was restarted in between. Also an
//! agent's own question mid-invocation ([`answer_ask`]: an ACP permission request), raised the
//! same way and answered back to the agent that waits on it.

use od_events::vocab::FailureCategory;
use serde_json::Value;

use super::pipeline::{store_end, Ctx, Ending};
use crate::runner::agent::{Ask, CancelFlag};

/// Surfaces raised at a stage's first iteration: those whose `trigger.stageId` is this stage, those
/// whose `trigger.atom` (without a stage) is one of its atoms, and — at the first stage — those
/// with no trigger at all; but not a choice whose options the agent proposes (the direction
/// picker's), which only the agent's request raises.
fn entry_surfaces(snap: &Value, stage: &Value, first: bool) -> Vec<Value> {
    let atoms: Vec<&str> = stage["atoms"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    snap["genuiSurfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| !crate::engine::choice_options::awaits_agent_options(s))
        .filter(|s| {
            let t = &s["trigger"];
            match (t["stageId"].as_str(), t["atom"].as_str()) {
                (Some(st), _) => stage["id"] == st,
                (None, Some(a)) => atoms.contains(&a),
                (None, None) => first,
            }
        })
        .cloned()
        .collect()
}

/// Raises this stage's entry surfaces (a remembered answer of their tier is reused instead).
pub(super) async fn raise_entry_surfaces(ctx: &Ctx, stage: &Value, first: bool) -> Result<(), Ending> {
    let specs = entry_surfaces(ctx.snap_ref(), stage, first);
    if specs.is_empty() {
        return Ok(());
    }
    // The engine records the surfaces on the run's stream: what the stage recorded goes first.
    ctx.flush().await.map_err(store_end)?;
    let engine = ctx.engine.clone();
    let run_id = ctx.run_id.clone();
    let stage_id = stage["id"].as_str().unwrap_or("").to_string();
    let fence = ctx.rec.fence();
    let raised = tokio::task::spawn_blocking(move || {
        let run = engine.run_info(&run_id)?;
        for spec in &specs {
            engine.raise_surface_fenced(&run, spec, &stage_id, "pipeline", fence.clone())?;
        }
        Ok::<_, crate::engine::WorkError>(())
    })
    .await
    .map_err(|e| Ending::failed("genui", e.to_string()))?;
    noted(ctx, raised).map_err(|e| Ending::failed("genui", e.to_string()))
}

/// Notes a lost lease among an engine call's errors (the executor stops; see `Recorder::noted`).
fn noted<T>(ctx: &Ctx, r: Result<T, crate::engine::WorkError>) -> Result<T, crate::engine::WorkError> {
    match r {
        Err(crate::engine::WorkError::Store(e)) => Ok(ctx.rec.noted(Err(e))?),
        r => r,
    }
}

/// Holds the run until none of its surfaces waits. Timeouts are applied as they fall due.
pub(super) async fn wait_for_answers(ctx: &Ctx, cancel: &CancelFlag) -> Result<(), Ending> {
    let mut cancel = cancel.clone();
    loop {
        let changed = ctx.engine.genui_changed().notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let run_id = ctx.run_id.clone();
        let pending = ctx
            .engine
            .workspace()
            .read(|w| od_projections::genui::pending(w, &run_id, crate::limits::MAX_WORKING_SET_READ))
            .map_err(store_end)?;
        if pending.is_empty() {
            return Ok(());
        }
        let now = ctx.engine.clock().now_ms();
        if let Some(due) = pending.iter().find(|r| r.timeout_at != 0 && r.timeout_at <= now).cloned() {
            let engine = ctx.engine.clone();
            let row = due.clone();
            let fence = ctx.rec.fence();
            let resolution = tokio::task::spawn_blocking(move || engine.time_out_surface(&row, fence))
                .await
                .map_err(|e| Ending::failed("genui", e.to_string()))?;
            let resolution = noted(ctx, resolution).map_err(|e| Ending::failed("genui", e.to_string()))?;
            if resolution == "abort" {
                return Err(Ending::failed(
                    "genui-timeout",
                    format!("surface {} was not answered in time (onTimeout: abort)", due.surface_id),
                ));
            }
            continue;
        }
        // About to wait for an answer: what the run recorded so far becomes visible first.
        ctx.flush().await.map_err(store_end)?;
        let next = pending.iter().filter(|r| r.timeout_at != 0).map(|r| r.timeout_at).min();
        let sleep = ctx.engine.clock().sleep_until(next.unwrap_or(i64::MAX));
        tokio::select! {
            _ = changed => {}
            _ = sleep, if next.is_some() => {}
            r = cancel.changed() => {
                if r.is_err() || *cancel.borrow() {
                    return Err(if ctx.engine.is_shutting_down() { Ending::suspended() } else {
                        super::pipeline::stop_ending(&cancel, ctx).unwrap_or_else(|| Ending::failed(FailureCategory::Canceled, "canceled"))
                    });
                }
            }
        }
    }
}

/// Raises an agent's [`Ask`] as a surface of the run at `stage_id` (its tier's remembered answer
/// reused) and, from its own task, sends the answer back once the surface is answered (`None`
/// when skipped or timed out; timeouts applied as they fall due, by the injected clock). Raised
/// here, in the executor's order, so a second ask of a surface still waiting (parallel tool calls
/// of one kind) waits on the same request — one answer for both, no request left unanswered. The
/// task ends when the agent stops waiting; a surface that could not be raised drops the reply,
/// which the agent reads as nobody answering.
pub(super) async fn answer_ask(ctx: &Ctx, stage_id: &str, ask: Ask) {
    let engine = ctx.engine.clone();
    let run_id = ctx.run_id.clone();
    let fence = ctx.rec.fence();
    let surface_id = ask.spec["id"].as_str().unwrap_or("").to_string();
    let (e, r, s, f, spec, sid) =
        (engine.clone(), run_id.clone(), stage_id.to_string(), fence.clone(), ask.spec.clone(), surface_id.clone());
    let raised = tokio::task::spawn_blocking(move || {
        if e.pending_surfaces(&r)?.iter().any(|row| row.surface_id == sid) {
            return Ok(crate::engine::genui::Raised::Requested);
        }
        let run = e.run_info(&r)?;
        e.raise_surface_fenced(&run, &spec, &s, "agent", f)
    })
    .await;
    if !matches!(raised, Ok(Ok(_))) {
        return;
    }
    tokio::spawn(async move {
        loop {
            if ask.reply.is_closed() {
                return;
            }
            let changed = engine.genui_changed().notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let Ok(Some(row)) = engine.latest_run_surface(&run_id, &surface_id) else { return };
            match row.status.as_str() {
                "pending" => {}
                "resolved" => {
                    let value = row.value_json.as_deref().and_then(|v| serde_json::from_str::<Value>(v).ok());
                    return ask.reply.send(value.filter(|v| !v.is_null()));
                }
                _ => return ask.reply.send(None),
            }
            let now = engine.clock().now_ms();
            if row.timeout_at != 0 && row.timeout_at <= now {
                let (e, f) = (engine.clone(), fence.clone());
                let _ = tokio::task::spawn_blocking(move || e.time_out_surface(&row, f)).await;
                continue;
            }
            let next = if row.timeout_at != 0 { row.timeout_at } else { i64::MAX };
            tokio::select! {
                _ = changed => {}
                _ = engine.clock().sleep_until(next) => {}
                // The agent may stop waiting (canceled, gone) without any surface changing.
                _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            }
        }
    });
}
