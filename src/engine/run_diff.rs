//! Comparing runs (issue 16): where two runs — typically siblings of one fork point — diverge
//! (inputs, snapshot, agent, GenUI answers, prompt digests per stage iteration, signals and devloop
//! rows per iteration, and the files they recorded, with a unified diff for text), and a run's
//! family tree (its ancestors and every fork below it). Both read the runs' histories only.

use od_events::{Event, Stored};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

use super::{Engine, WorkError};
use crate::limits::{MAX_DIFF_TEXT_BYTES, MAX_FORK_DEPTH, MAX_TREE_RUNS};

/// What one run's history says, keyed for comparison.
#[derive(Default)]
struct Facts {
    answers: BTreeMap<String, Value>,
    /// (stage, iteration) → prompt digest (the last attempt's).
    prompts: BTreeMap<(String, u32), String>,
    /// The stage iterations in the order the run composed them.
    order: Vec<(String, u32)>,
    /// (stage, iteration, name) → value.
    signals: BTreeMap<(String, u32, String), Value>,
    /// (stage, 1-based iteration) → the devloop row's decision.
    devloop: BTreeMap<(String, u32), Value>,
    /// path → digest of its last recorded bytes.
    files: BTreeMap<String, String>,
}

fn facts(history: &[Stored]) -> Facts {
    let mut f = Facts::default();
    for s in history {
        match &s.event {
            Event::SurfaceResponded(e) => {
                f.answers.insert(e.surface_id.clone(), serde_json::from_str(&e.value_json).unwrap_or(Value::Null));
            }
            Event::PromptComposed(e) => {
                let key = (e.stage_id.clone(), e.iteration);
                if !f.order.contains(&key) {
                    f.order.push(key.clone());
                }
                f.prompts.insert(key, e.digest.clone());
            }
            Event::SignalRecorded(e) => {
                let v = serde_json::from_str(&e.value_json).unwrap_or(Value::Null);
                f.signals.insert((e.stage_id.clone(), e.iteration, e.name.clone()), v);
            }
            Event::DevloopIteration(e) => {
                let signals: Value = serde_json::from_str(&e.signals_json).unwrap_or(Value::Null);
                f.devloop.insert(
                    (e.stage_id.clone(), e.iteration),
                    json!({ "termination": e.termination, "matched": e.matched, "signals": signals }),
                );
            }
            Event::ArtifactRecorded(e) => {
                f.files.insert(e.path.clone(), e.digest.clone());
            }
            _ => {}
        }
    }
    f
}

/// Every key of two maps, in order, with both sides (None: absent on that side).
fn sides<'a, K: Ord + Clone, V>(
    a: &'a BTreeMap<K, V>,
    b: &'a BTreeMap<K, V>,
) -> Vec<(K, Option<&'a V>, Option<&'a V>)> {
    let mut keys: Vec<&K> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter().map(|k| (k.clone(), a.get(k), b.get(k))).collect()
}

fn opt<V: serde::Serialize>(v: Option<&V>) -> Value {
    v.map_or(Value::Null, |v| json!(v))
}

/// The inputs the two snapshots (`a`, `b`) differ in.
fn input_diffs(a: &Value, b: &Value) -> Vec<Value> {
    let empty = Map::new();
    let (ia, ib) =
        (a["inputs"].as_object().unwrap_or(&empty).clone(), b["inputs"].as_object().unwrap_or(&empty).clone());
    sides(&ia.into_iter().collect(), &ib.into_iter().collect())
        .into_iter()
        .filter(|(_, x, y)| x != y)
        .map(|(k, x, y)| json!({ "key": k, "a": opt(x), "b": opt(y) }))
        .collect()
}

impl Engine {
    /// Where runs `a` and `b` diverge. Only differences are listed, except prompts, which list
    /// every stage iteration either run composed (with `same`).
    pub fn diff_runs(&self, a: &str, b: &str) -> Result<Value, WorkError> {
        let (ra, rb) = (self.run_info(a)?, self.run_info(b)?);
        let (ha, hb) = (self.run_history(a)?, self.run_history(b)?);
        // The shared prefix: the very same recorded events (a common ancestor's).
        let shared = ha
            .iter()
            .zip(hb.iter())
            .take_while(|(x, y)| x.envelope.seq == y.envelope.seq && x.envelope.seq != 0)
            .last()
            .map(|(x, _)| {
                json!({ "runId": x.envelope.stream.trim_start_matches("run:"), "eventId": x.envelope.version })
            });
        let (fa, fb) = (facts(&ha), facts(&hb));
        let (sa, sb) = (self.snapshot(&ra.snapshot_id)?, self.snapshot(&rb.snapshot_id)?);
        let inputs = input_diffs(&sa, &sb);
        let answers: Vec<Value> = sides(&fa.answers, &fb.answers)
            .into_iter()
            .filter(|(_, x, y)| x != y)
            .map(|(k, x, y)| json!({ "surfaceId": k, "a": opt(x), "b": opt(y) }))
            .collect();
        // In the order the runs composed them: A's, then what only B composed.
        let mut order = fa.order.clone();
        order.extend(fb.order.iter().filter(|k| !fa.order.contains(k)).cloned());
        let prompts: Vec<Value> = order
            .into_iter()
            .map(|k| {
                let (x, y) = (fa.prompts.get(&k), fb.prompts.get(&k));
                json!({ "stageId": k.0, "iteration": k.1 + 1, "a": opt(x), "b": opt(y), "same": x == y })
            })
            .collect();
        let signals: Vec<Value> = sides(&fa.signals, &fb.signals)
            .into_iter()
            .filter(|(_, x, y)| x != y)
            .map(|((st, i, n), x, y)| json!({ "stageId": st, "iteration": i + 1, "name": n, "a": opt(x), "b": opt(y) }))
            .collect();
        let devloop: Vec<Value> = sides(&fa.devloop, &fb.devloop)
            .into_iter()
            .filter(|(_, x, y)| x != y)
            .map(|((st, i), x, y)| json!({ "stageId": st, "iteration": i, "a": opt(x), "b": opt(y) }))
            .collect();
        let files = self.file_diffs(&fa.files, &fb.files);
        let first = prompts
            .iter()
            .find(|p| p["same"] == false)
            .map(|p| json!({ "stageId": p["stageId"], "iteration": p["iteration"] }));
        Ok(json!({
            "a": { "runId": a, "status": ra.status, "snapshotId": ra.snapshot_id, "agent": ra.agent,
                   "parentRunId": if ra.parent_run_id.is_empty() { Value::Null } else { json!(ra.parent_run_id) } },
            "b": { "runId": b, "status": rb.status, "snapshotId": rb.snapshot_id, "agent": rb.agent,
                   "parentRunId": if rb.parent_run_id.is_empty() { Value::Null } else { json!(rb.parent_run_id) } },
            "sharedUntil": shared,
            "firstDivergentPrompt": first,
            "same": inputs.is_empty() && answers.is_empty() && signals.is_empty() && devloop.is_empty()
                && files.is_empty() && first.is_none() && ra.snapshot_id == rb.snapshot_id,
            "inputs": inputs, "answers": answers, "prompts": prompts, "signals": signals,
            "devloop": devloop, "files": files,
        }))
    }

    /// The files either run wrote differently: changed, or written by one side only, each with
    /// its text diff when both sides are text.
    fn file_diffs(&self, fa: &BTreeMap<String, String>, fb: &BTreeMap<String, String>) -> Vec<Value> {
        let mut files = Vec::new();
        for (path, x, y) in sides(fa, fb) {
            if x == y {
                continue;
            }
            let status = match (x, y) {
                (Some(_), Some(_)) => "changed",
                (Some(_), None) => "only-a",
                _ => "only-b",
            };
            files.push(json!({ "path": path, "status": status, "a": opt(x), "b": opt(y),
                "diff": self.text_diff(&path, x.map(String::as_str), y.map(String::as_str)) }));
        }
        files
    }

    /// A unified diff of two blobs when both sides are UTF-8 text within the bound (None else).
    fn text_diff(&self, path: &str, a: Option<&str>, b: Option<&str>) -> Value {
        let read = |d: Option<&str>| -> Option<String> {
            match d {
                None => Some(String::new()),
                Some(d) => {
                    let bytes = self.blobs.read(d).ok()?;
                    (bytes.len() as u64 <= MAX_DIFF_TEXT_BYTES).then_some(())?;
                    String::from_utf8(bytes).ok()
                }
            }
        };
        match (read(a), read(b)) {
            // Past the diff deadline: compared by digest only, like a binary file.
            (Some(x), Some(y)) => {
                json!(super::run_files::unified_diff(&x, &y, &format!("a/{path}"), &format!("b/{path}")))
            }
            _ => Value::Null,
        }
    }

    /// Run `id`'s family: its ancestors (oldest first, each with the fork point its child took)
    /// and the forks below it, nested.
    pub fn run_tree(&self, id: &str) -> Result<Value, WorkError> {
        let run = self.run_info(id)?;
        let mut ancestors = Vec::new();
        let mut at = run.clone();
        while !at.parent_run_id.is_empty() && ancestors.len() < MAX_FORK_DEPTH {
            let parent = self.run_info(&at.parent_run_id)?;
            ancestors.push(json!({ "runId": parent.run_id, "status": parent.status,
                "childForkedAt": at.fork_event_id, "child": at.run_id }));
            at = parent;
        }
        ancestors.reverse();
        let mut budget = MAX_TREE_RUNS;
        let forks = self.fork_subtree(id, 0, &mut budget)?;
        Ok(json!({ "runId": id, "status": run.status,
            "parentRunId": if run.parent_run_id.is_empty() { Value::Null } else { json!(run.parent_run_id) },
            "forkEventId": if run.parent_run_id.is_empty() { Value::Null } else { json!(run.fork_event_id) },
            "ancestors": ancestors, "forks": forks, "truncated": budget == 0 }))
    }

    fn fork_subtree(&self, id: &str, depth: usize, budget: &mut usize) -> Result<Vec<Value>, WorkError> {
        let mut out = Vec::new();
        if depth >= MAX_FORK_DEPTH {
            return Ok(out);
        }
        for child in self.forks_of(id)? {
            if *budget == 0 {
                break;
            }
            *budget -= 1;
            let r = self.run_info(&child)?;
            let at = self.fork_link(&child)?.map(|l| l.at).unwrap_or_default();
            let below = self.fork_subtree(&child, depth + 1, budget)?;
            out.push(json!({ "runId": child, "status": r.status, "forkEventId": r.fork_event_id, "at": at,
                "forks": below }));
        }
        Ok(out)
    }
}
