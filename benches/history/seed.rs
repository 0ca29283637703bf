//! Seeding a data dir with `n` realistic runs for `benches/history`, through the store, not HTTP.
//!
//! [`capture`] runs one real dry-run `od-new-generation` run on the release daemon (fresh data dir),
//! stops it, and reads back every event the run wrote (streams `project:…`, `snapshot:…`,
//! `run:…`; the daemon's own `system` events are left out) with the ids it used (run, project,
//! conversation, snapshot, artifacts) and the time window it ran in.
//!
//! [`seed`] replays that template `n` times with fresh ids, each run's timestamps moved back so the
//! runs are spaced [`RUN_SPACING_MS`] apart and all lie in the past. One run in [`SHARED_EVERY`]
//! goes into one shared project (its `project_created` is dropped, its new conversation is appended
//! to the shared project's stream), so "one project's runs" is a real filter over the history.
//! Each run is one `submit_all` (its project, snapshot and run parts: one atomic append, as one
//! command writes), pipelined [`PIPELINE`] deep so group commit writes big batches.

use od::store::{decode_frame, Append, EventLog, SledLog, StoreConfig};
use od_events::{Event, StreamId};
use serde_json::Value;
use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::daemon::{client, one_run, Daemon};

/// One in this many seeded runs lands in the shared project.
pub const SHARED_EVERY: usize = 10;
/// Seeded runs' creation times are this far apart.
pub const RUN_SPACING_MS: i64 = 1_000;
/// Appends in flight while seeding.
const PIPELINE: usize = 1024;

/// One captured run: its events in log order, as JSON text with the ids to replace.
pub struct Template {
    /// `[[stream, event], …]` in seq order.
    json: String,
    pub events: usize,
    pub payload_bytes: usize,
    project_id: String,
    /// Every other id the run used (run, conversation, snapshot, artifacts).
    ids: Vec<String>,
    /// The capture's data dir (inside `cwd`/`dir` paths).
    data_dir: String,
    /// The capture's time window (ms): timestamps in it are shifted.
    window: (i64, i64),
    pub kinds: std::collections::BTreeMap<String, usize>,
}

/// Runs one real run on a fresh data dir and returns its events as a template.
pub fn capture(dir: &Path) -> Template {
    let d = Daemon::spawn(dir, Duration::from_secs(30));
    let agent = client();
    let before = d.last_seq;
    let t0 = now_ms() - 1;
    let (_, status) = one_run(&agent, &d.url);
    assert_eq!(status, "succeeded", "the captured run");
    let t1 = now_ms() + 1;
    d.stop();
    let store = SledLog::open(StoreConfig::new(dir)).expect("open the capture's log");
    let frames = store.read_from(before + 1, 100_000).expect("read the capture");
    drop(store);
    let all: Vec<(String, Event)> = frames
        .iter()
        .map(|f| decode_frame(f.view()).expect("decode a captured frame"))
        .filter(|s| s.envelope.stream != "system")
        .map(|s| (s.envelope.stream, s.event))
        .collect();
    // The run's stream, its project's and its snapshot's.
    let run_stream = all.iter().find(|(s, _)| s.starts_with("run:")).expect("a run stream").0.clone();
    let created = all
        .iter()
        .find_map(|(s, e)| match e {
            Event::RunCreated(c) if *s == run_stream => Some(c.clone()),
            _ => None,
        })
        .expect("run_created");
    let keep =
        [run_stream.clone(), format!("project:{}", created.project_id), format!("snapshot:{}", created.snapshot_id)];
    let events: Vec<(String, Event)> = all.into_iter().filter(|(s, _)| keep.contains(s)).collect();
    let mut ids = vec![created.run_id.clone(), created.conversation_id.clone(), created.snapshot_id.clone()];
    for (_, e) in &events {
        if let Event::ArtifactRecorded(a) = e {
            ids.push(a.artifact_id.clone());
        }
    }
    let mut kinds = std::collections::BTreeMap::new();
    let mut payload_bytes = 0;
    for (_, e) in &events {
        *kinds.entry(e.kind().name().to_string()).or_insert(0) += 1;
        payload_bytes += e.encode_payload().len();
    }
    Template {
        json: serde_json::to_string(&events).expect("template json"),
        events: events.len(),
        payload_bytes,
        project_id: created.project_id,
        ids,
        data_dir: dir.display().to_string(),
        window: (t0, t1),
        kinds,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis() as i64
}

/// A fresh uuid-shaped id from a counter and a per-seed salt.
fn fresh_id(salt: u64, n: u64) -> String {
    let mut x = salt ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let (a, b) = (next(), next());
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        b >> 52,
        b & 0xffff_ffff_ffff
    )
}

/// Moves every `…At` timestamp inside the capture window by `shift` ms.
fn shift_times(v: &mut Value, window: (i64, i64), shift: i64) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match x.as_i64() {
                    Some(t) if k.ends_with("At") && t >= window.0 && t <= window.1 => *x = Value::from(t + shift),
                    _ => shift_times(x, window, shift),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| shift_times(x, window, shift)),
        _ => {}
    }
}

/// Run `i` of `n` written into `data_dir`: the template with fresh ids and shifted times.
fn replica(t: &Template, i: usize, n: usize, salt: u64, data_dir: &str, shared: &str) -> Vec<(String, Vec<Event>)> {
    let mut text = t.json.replace(&t.data_dir, data_dir);
    let in_shared = i.is_multiple_of(SHARED_EVERY);
    let project = if in_shared { shared.to_string() } else { fresh_id(salt, (i as u64) << 8) };
    text = text.replace(&t.project_id, &project);
    for (k, id) in t.ids.iter().enumerate() {
        text = text.replace(id.as_str(), &fresh_id(salt, ((i as u64) << 8) | (k as u64 + 1)));
    }
    let mut v: Value = serde_json::from_str(&text).expect("replica json");
    shift_times(&mut v, t.window, -((n - i) as i64) * RUN_SPACING_MS);
    let events: Vec<(String, Event)> = serde_json::from_value(v).expect("replica events");
    // Group by stream, in order of first appearance (one part per stream).
    let mut parts: Vec<(String, Vec<Event>)> = Vec::new();
    for (s, e) in events {
        if in_shared && i > 0 && matches!(e, Event::ProjectCreated(_)) {
            continue;
        }
        match parts.iter_mut().find(|(p, _)| *p == s) {
            Some((_, es)) => es.push(e),
            None => parts.push((s, vec![e])),
        }
    }
    parts
}

/// What seeding wrote.
pub struct Seeded {
    pub runs: usize,
    pub events: u64,
    pub secs: f64,
    pub shared_project: String,
}

/// Writes `n` replicas of `t` into the log at `dir` (created fresh).
pub fn seed(t: &Template, dir: &Path, n: usize) -> Seeded {
    let salt = now_ms() as u64 ^ 0x5EED;
    let shared = fresh_id(salt, u64::MAX);
    let t0 = Instant::now();
    let store = SledLog::open(StoreConfig::new(dir)).expect("open the seeded log");
    let data_dir = dir.display().to_string();
    let mut acks = VecDeque::new();
    for i in 0..n {
        let parts = replica(t, i, n, salt, &data_dir, &shared)
            .into_iter()
            .map(|(s, es)| Append::new(StreamId::new(s).expect("stream id"), es))
            .collect();
        acks.push_back(store.submit_all(parts).expect("submit_all"));
        if acks.len() >= PIPELINE {
            acks.pop_front().expect("ack").blocking_recv().expect("ack").expect("append");
        }
        if n >= 10_000 && (i + 1) % (n / 10) == 0 {
            eprintln!("  seeded {} / {n} runs ({:.0} s)", i + 1, t0.elapsed().as_secs_f64());
        }
    }
    for a in acks {
        a.blocking_recv().expect("ack").expect("append");
    }
    let events = store.last_seq();
    store.close();
    drop(store);
    Seeded { runs: n, events, secs: t0.elapsed().as_secs_f64(), shared_project: shared }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fresh_ids_are_uuid_shaped_and_distinct() {
        let a = super::fresh_id(1, 1);
        assert_eq!(a.len(), 36);
        assert_ne!(a, super::fresh_id(1, 2));
    }
}
