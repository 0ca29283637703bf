//! What a run's own events say about where it is: the GenUI answers given so far (fed to the next
//! prompt, and to replay), the artifacts written (parent links, counts), and — for a run that was
//! waiting for an answer when the daemon stopped, or a fork starting from its parent's state — the
//! point to resume at.

use od_events::{Event, Stored};
use serde_json::Value;
use std::collections::HashMap;

/// Where a suspended run (or a fork) picks up: inside `stage_id`'s `iteration`, whose
/// `pipeline_stage_started` is recorded; `invoked` when its agent already ran (the run then waited
/// for an answer it asked); `completed` once the iteration's devloop row is recorded (`Some(true)`:
/// the stage is over, go on with the next; `Some(false)`: go on with the next iteration).
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    pub stage_id: String,
    pub iteration: u32,
    pub invoked: bool,
    pub completed: Option<bool>,
}

/// The run's GenUI answers in order (a later answer to the same surface replaces the earlier).
pub fn answers_so_far(events: &[Stored]) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::new();
    for s in events {
        if let Event::SurfaceResponded(e) = &s.event {
            let v: Value = serde_json::from_str(&e.value_json).unwrap_or(Value::Null);
            out.retain(|(id, _)| *id != e.surface_id);
            if !v.is_null() {
                out.push((e.surface_id.clone(), v));
            }
        }
    }
    out
}

/// Latest artifact id and digest per path, and how many artifacts the run recorded.
pub fn artifacts_so_far(events: &[Stored]) -> (HashMap<String, (String, String)>, u32) {
    let mut map = HashMap::new();
    let mut n = 0;
    for s in events {
        if let Event::ArtifactRecorded(e) = &s.event {
            // Only a clean relative path names a file of the run's folder (imports refuse others).
            if crate::engine::files::clean_relative(&e.path).ok().as_deref() != Some(e.path.as_str()) {
                continue;
            }
            map.insert(e.path.clone(), (e.artifact_id.clone(), e.digest.clone()));
            n += 1;
        }
    }
    (map, n)
}

/// What the run staged into its folder (`substrate_staged`): the staged context folder, and the
/// digest of every staged file by path (None: the run staged nothing).
pub fn staged_so_far(events: &[Stored]) -> Option<(String, HashMap<String, String>)> {
    events.iter().rev().find_map(|s| match &s.event {
        Event::SubstrateStaged(e) => {
            let files = e
                .files
                .iter()
                // Only a clean relative path names a file of the run's folder.
                .filter(|f| crate::engine::files::clean_relative(&f.path).ok().as_deref() == Some(f.path.as_str()))
                .map(|f| (f.path.clone(), f.digest.clone()))
                .collect();
            Some((e.context_dir.clone(), files))
        }
        _ => None,
    })
}

/// The resume point of a run that already started a stage (None: start from the beginning).
pub fn resume_point(events: &[Stored]) -> Option<Resume> {
    let mut at: Option<Resume> = None;
    for s in events {
        match &s.event {
            Event::StageStarted(e) => {
                at = Some(Resume {
                    stage_id: e.stage_id.clone(),
                    iteration: e.iteration,
                    invoked: false,
                    completed: None,
                });
            }
            Event::PromptComposed(_) => {
                if let Some(r) = at.as_mut() {
                    r.invoked = true;
                }
            }
            // A failed invocation is invoked again (what `onFailure: retry` does, and what a fork
            // after a failure asks for).
            Event::StageFailed(_) => {
                if let Some(r) = at.as_mut() {
                    r.invoked = false;
                }
            }
            Event::DevloopIteration(e) => {
                if let Some(r) = at.as_mut() {
                    r.completed = Some(e.termination != od_events::vocab::Termination::Continuing);
                }
            }
            _ => {}
        }
    }
    at
}
