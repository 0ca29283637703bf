//! What forking needs to know about a run's lineage, read cheaply: every event's position and kind,
//! but the decoded event only for the kinds that shape a run's state at a point (stages, prompts,
//! devloop rows, surfaces, the run's own bookkeeping). The bulk of a long run — agent output and
//! signals — is skipped by its kind code, so a fork's cost barely grows with its parent's length.
//! This module owns resolving a fork point (`<eventId>`, `<stage>[:<iteration>]`, `end`) and
//! refusing one inside an agent's invocation.

use od_events::vocab::RequestedBy;
use od_events::{Event, EventKind, FrameRef, Stored};

use super::{Engine, WorkError};

/// One event of a lineage, as forking reads it.
pub(super) struct Item {
    pub version: u64,
    pub kind: u16,
    /// Decoded for the kinds in [`STATE_KINDS`].
    pub stored: Option<Stored>,
    /// The frame, kept for a kind a check may need to look into ([`LAZY_KINDS`]).
    frame: Option<Vec<u8>>,
}

/// One run's part of a lineage.
pub(super) struct ItemSegment {
    pub run_id: String,
    pub items: Vec<Item>,
}

/// The kinds decoded up front: everything [`crate::engine::resume::resume_point`], the surfaces
/// still waiting and the stage targets look at.
const STATE_KINDS: [EventKind; 12] = [
    EventKind::RunForked,
    EventKind::RunCreated,
    EventKind::StageStarted,
    EventKind::PromptComposed,
    EventKind::StageFailed,
    EventKind::DevloopIteration,
    EventKind::StageCompleted,
    EventKind::RunEnded,
    EventKind::SurfaceRequested,
    EventKind::SurfaceResponded,
    EventKind::SurfaceTimedOut,
    EventKind::SurfaceRefused,
];

/// The kinds decoded only when the invocation check reaches them.
const LAZY_KINDS: [EventKind; 1] = [EventKind::SignalRecorded];

fn is(kind: u16, set: &[EventKind]) -> bool {
    set.iter().any(|k| k.code() == kind)
}

impl Item {
    fn event(&self) -> Option<Event> {
        if let Some(s) = &self.stored {
            return Some(s.event.clone());
        }
        let f = self.frame.as_ref()?;
        crate::store::decode_frame(FrameRef::parse(f).ok()?).ok().map(|s| s.event)
    }

    /// Whether an agent invocation (or the workers after it) produced this event.
    fn produced_by_invocation(&self) -> bool {
        let k = EventKind::from_code(self.kind);
        match k {
            Some(EventKind::AgentStarted | EventKind::AgentOutput | EventKind::ArtifactRecorded) => true,
            Some(EventKind::SurfaceRefused) => true,
            Some(EventKind::SignalRecorded) => {
                matches!(self.event(), Some(Event::SignalRecorded(s)) if s.source != "cli")
            }
            Some(EventKind::SurfaceRequested) => matches!(
                self.event(),
                Some(Event::SurfaceRequested(s)) if s.requested_by != RequestedBy::Pipeline && s.requested_by != RequestedBy::Fork
            ),
            _ => false,
        }
    }

    /// Whether this event closes an invocation's span.
    fn closes_invocation(&self) -> bool {
        is(
            self.kind,
            &[
                EventKind::PromptComposed,
                EventKind::StageStarted,
                EventKind::StageFailed,
                EventKind::DevloopIteration,
                EventKind::StageCompleted,
                EventKind::RunEnded,
            ],
        )
    }
}

impl Engine {
    /// Run `id`'s events through `upto` (None: all), as [`Item`]s.
    fn items(&self, id: &str, upto: Option<u64>) -> Result<Vec<Item>, WorkError> {
        let mut out = Vec::new();
        let mut failed = None;
        self.store.fold_stream(&format!("run:{id}"), &mut |bytes| {
            if failed.is_some() {
                return;
            }
            let view = match FrameRef::parse(bytes) {
                Ok(v) => v,
                Err(e) => return failed = Some(e.to_string()),
            };
            if upto.is_some_and(|u| view.version() > u) {
                return;
            }
            let kind = view.kind();
            let stored = match is(kind, &STATE_KINDS) {
                true => match crate::store::decode_frame(view) {
                    Ok(s) => Some(s),
                    Err(e) => return failed = Some(e.to_string()),
                },
                false => None,
            };
            let frame = is(kind, &LAZY_KINDS).then(|| bytes.to_vec());
            out.push(Item { version: view.version(), kind, stored, frame });
        })?;
        match failed {
            Some(e) => Err(WorkError::invalid("runId", format!("run {id}: {e}"))),
            None if out.is_empty() => Err(WorkError::RunNotFound(id.into())),
            None => Ok(out),
        }
    }

    /// Run `id`'s lineage as [`ItemSegment`]s, oldest ancestor first.
    pub(super) fn lineage_items(&self, id: &str) -> Result<Vec<ItemSegment>, WorkError> {
        self.ancestry(id)?
            .into_iter()
            .map(|(r, upto)| Ok(ItemSegment { items: self.items(&r, upto)?, run_id: r }))
            .collect()
    }

    /// Run `id`'s own events as [`Item`]s (for checking a point in an ancestor's part).
    pub(super) fn own_items(&self, id: &str) -> Result<Vec<Item>, WorkError> {
        self.items(id, None)
    }
}

/// A fork point: the run whose stream holds it and its last inherited event.
#[derive(Debug, Clone, PartialEq)]
pub struct ForkPoint {
    pub run_id: String,
    pub event_id: u64,
}

/// Parses `<stage>[:<iteration>]` (1-based iteration; default 1) into the stage and its 0-based
/// iteration.
pub(super) fn stage_target(at: &str) -> Result<(String, u32), WorkError> {
    let (stage, iter) = match at.rsplit_once(':') {
        Some((s, i)) => {
            let n =
                i.parse::<u32>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                    WorkError::invalid("at", format!("{i:?} is not an iteration (1, 2, …) in {at:?}"))
                })?;
            (s.to_string(), n)
        }
        None => (at.to_string(), 1),
    };
    if stage.is_empty() {
        return Err(WorkError::invalid("at", "empty: give an event id, a stage[:iteration] or `end`"));
    }
    Ok((stage, iter - 1))
}

/// Where `at` points in a lineage (`run_id`'s, oldest first): the index of the segment holding the
/// point, and the point. A stage target is the event before that iteration's start.
pub(super) fn resolve_in(segments: &[ItemSegment], run_id: &str, at: &str) -> Result<(usize, ForkPoint), WorkError> {
    let at = at.trim();
    let last = segments.len() - 1;
    let head = segments[last].items.last().map_or(0, |s| s.version);
    let own = |event_id| Ok((last, ForkPoint { run_id: run_id.into(), event_id }));
    if at == "end" {
        return own(head);
    }
    if let Ok(n) = at.parse::<u64>() {
        if n > head {
            return Err(WorkError::invalid("at", format!("run {run_id} has events 0..={head}, not {n}")));
        }
        return own(n);
    }
    let (stage, iteration) = stage_target(at)?;
    for (k, seg) in segments.iter().enumerate().rev() {
        let found = seg.items.iter().rev().find(|s| {
            matches!(s.stored.as_ref().map(|s| &s.event), Some(Event::StageStarted(e)) if e.stage_id == stage && e.iteration == iteration)
        });
        if let Some(s) = found {
            let point = ForkPoint { run_id: seg.run_id.clone(), event_id: s.version.saturating_sub(1) };
            return Ok((k, point));
        }
    }
    Err(WorkError::invalid(
        "at",
        format!(
            "run {run_id} never started stage {stage:?} iteration {} (give a stage the run reached)",
            iteration + 1
        ),
    ))
}

/// Refuses a fork point in the middle of something the fork could not continue: an agent's
/// invocation still producing output after it, or a devloop row without its stage completion.
/// `items` are the whole stream of the run holding the point.
pub(super) fn check_clean(run_id: &str, items: &[Item], at: u64) -> Result<(), WorkError> {
    let Some(i) = items.iter().position(|s| s.version == at) else { return Ok(()) };
    let kind = |k: EventKind| k.code();
    if items[i].kind == kind(EventKind::DevloopIteration)
        && items.get(i + 1).is_some_and(|n| n.kind == kind(EventKind::StageCompleted))
    {
        return Err(WorkError::invalid(
            "at",
            format!("event {at} of run {run_id} is a devloop row whose stage completion follows; fork at {}", at + 1),
        ));
    }
    // The invocation open at `at`, if any: the last prompt at or before it with no boundary since.
    let mut start = None;
    for (n, s) in items[..=i].iter().enumerate().rev() {
        if s.kind == kind(EventKind::PromptComposed) {
            start = Some(n);
            break;
        }
        if s.closes_invocation() {
            break;
        }
    }
    let Some(start) = start else { return Ok(()) };
    // The span ends at the invocation's last product before the next boundary.
    let mut end = items[start].version;
    for s in &items[start + 1..] {
        if s.closes_invocation() {
            break;
        }
        if s.produced_by_invocation() {
            end = s.version;
        }
    }
    if at < end {
        let first = items[start].version;
        return Err(WorkError::invalid(
            "at",
            format!(
                "event {at} of run {run_id} is inside an agent invocation (events {first}..={end}); fork at {} (before \
                 it) or {end} (after it)",
                first.saturating_sub(1)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::stage_target;

    #[test]
    fn stage_targets_parse_with_one_based_iterations() {
        assert_eq!(stage_target("design").unwrap(), ("design".into(), 0));
        assert_eq!(stage_target("design:3").unwrap(), ("design".into(), 2));
        assert_eq!(stage_target("a:b:2").unwrap(), ("a:b".into(), 1));
        assert!(stage_target("design:0").is_err());
        assert!(stage_target("design:x").is_err());
        assert!(stage_target(":2").is_err());
    }
}
