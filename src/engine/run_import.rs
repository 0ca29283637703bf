//! Importing a run bundle (`od run import`, `POST /api/runs/import`): data from elsewhere is
//! verified, never trusted. The bundle arrives as a file (the HTTP body is spooled to one) and is
//! read in one pass that keeps only `manifest.json` and `frames.bin` in memory — every blob is
//! hashed as it streams by — then, when every check passes, the blobs are stored (a second pass)
//! and the events appended in one atomic append. A refusal writes nothing.
//!
//! Checked: the tar is byte for byte as `od run export` writes it (headers, order, padding, end);
//! each frame's own hash, and the chain wherever two frames follow each other in the log; only the
//! streams of the bundle's runs — `run:<id>`, the `snapshot:<id>` each ran with, and their
//! `snapshot-body:<digest>` — each complete from version 0 and holding only the event kinds such a
//! stream holds ([`RUN_KINDS`] …), every event naming its own stream's run or snapshot; every
//! reference as a live run's would be (ids, snapshot, parent run, the fork's folder `forks/<id>`);
//! every artifact path clean (relative, no `..`) and its blob present and what its digest says; a
//! body stream holding the body its digest names. The runs must be new here.
//!
//! A run that had not ended when it was exported does not go on here: its agent options are the
//! bundle author's. It is ended at import — `canceled`, category `imported`, with the way to go on
//! (a fork, whose agent and rights are the forker's) — so it never says `running` or
//! `awaiting-input` for a run nothing executes. An imported exec run is marked
//! (`imported:<runId>`), and a fork of it must name its own agent instead of running the bundle
//! author's command again.

use od_events::frame::FrameRef;
use od_events::runs::RunEnded;
use od_events::{Event, EventKind, Stored, StreamId};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::run_bundle::{unpack, FORMAT};
use super::snapshots::BODY_STREAM_PREFIX;
use super::{Engine, WorkError};
use crate::limits::{MAX_BUNDLE_FRAMES_BYTES, MAX_RUN_BUNDLE_BYTES};
use crate::store::{decode_frame, Append, Expected};

/// The failure category (and the end reason's subject) of a run ended at import.
pub const IMPORTED_CATEGORY: &str = "imported";

/// The stream type of the mark an import leaves per exec run (`imported:<runId>`): written by the
/// engine only (a bundle may carry no such stream), so a fork knows its parent's agent command is a
/// bundle author's.
pub const IMPORT_MARK: &str = "imported";

/// What a `run:<id>` stream may hold.
pub const RUN_KINDS: &[EventKind] = &[
    EventKind::RunForked,
    EventKind::RunCreated,
    EventKind::AgentStarted,
    EventKind::AgentOutput,
    EventKind::PromptComposed,
    EventKind::SignalRecorded,
    EventKind::StageStarted,
    EventKind::StageCompleted,
    EventKind::StageFailed,
    EventKind::DevloopIteration,
    EventKind::LoopBroken,
    EventKind::RunResponded,
    EventKind::ArtifactRecorded,
    EventKind::SubstrateStaged,
    EventKind::ConversationMessage,
    EventKind::FollowUpPlanned,
    EventKind::RunEnded,
    EventKind::SurfaceRequested,
    EventKind::SurfaceResponded,
    EventKind::SurfaceTimedOut,
    EventKind::SurfaceRefused,
    EventKind::SurfaceInvalidated,
    EventKind::BrowserActionRequested,
    EventKind::BrowserActionResulted,
];

/// What a `snapshot:<id>` stream may hold.
pub const SNAPSHOT_KINDS: &[EventKind] =
    &[EventKind::SnapshotRecorded, EventKind::SnapshotMarkedStale, EventKind::SnapshotExpired];

/// What a `snapshot-body:<digest>` stream may hold.
pub const BODY_KINDS: &[EventKind] = &[EventKind::SnapshotBodyRecorded];

fn bad(message: impl Into<String>) -> WorkError {
    WorkError::invalid("bundle", message)
}

fn io(e: std::io::Error) -> WorkError {
    WorkError::io("reading a bundle", e)
}

/// A tar block.
const BLOCK: u64 = 512;

/// A writer keeping only the first block it is given (to see the header `tar` writes).
struct FirstBlock(Vec<u8>);

impl Write for FirstBlock {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let room = (BLOCK as usize).saturating_sub(self.0.len()).min(b.len());
        self.0.extend_from_slice(&b[..room]);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The header `od run export` writes for an entry (see `run_bundle::build_tar`).
fn export_header(name: &str, size: u64) -> Result<Vec<u8>, WorkError> {
    let mut tar = tar::Builder::new(FirstBlock(Vec::with_capacity(BLOCK as usize)));
    let mut h = tar::Header::new_gnu();
    h.set_size(size);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_cksum();
    tar.append_data(&mut h, name, std::io::repeat(0).take(size)).map_err(io)?;
    Ok(tar.into_inner().map_err(io)?.0)
}

fn padding(size: u64) -> u64 {
    (BLOCK - size % BLOCK) % BLOCK
}

/// A bundle's parts as read: the manifest and frames in memory, each blob's place in the file.
struct Parts {
    manifest: Vec<u8>,
    frames: Vec<u8>,
    /// digest → (offset of its bytes, length)
    blobs: BTreeMap<String, (u64, u64)>,
}

fn read_exact_vec(f: &mut impl Read, n: u64, what: &str) -> Result<Vec<u8>, WorkError> {
    if n > MAX_BUNDLE_FRAMES_BYTES {
        return Err(bad(format!("{what} is over MAX_BUNDLE_FRAMES_BYTES ({MAX_BUNDLE_FRAMES_BYTES})")));
    }
    let mut v = vec![0u8; n as usize];
    f.read_exact(&mut v).map_err(|e| bad(format!("{what}: {e}")))?;
    Ok(v)
}

/// Hashes `n` bytes of `f` as they stream by.
fn hash_stream(f: &mut impl Read, n: u64) -> Result<String, WorkError> {
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut left = n;
    while left > 0 {
        let k = (left as usize).min(buf.len());
        f.read_exact(&mut buf[..k]).map_err(|e| bad(format!("a blob ends early: {e}")))?;
        h.update(&buf[..k]);
        left -= k as u64;
    }
    Ok(h.finalize().to_hex().to_string())
}

fn zeros(f: &mut impl Read, n: u64, what: &str) -> Result<(), WorkError> {
    let mut buf = vec![0u8; n as usize];
    f.read_exact(&mut buf).map_err(|e| bad(format!("{what}: {e}")))?;
    if buf.iter().any(|b| *b != 0) {
        return Err(bad(format!("the bundle is not as `od run export` writes it ({what} is not zero)")));
    }
    Ok(())
}

/// Reads the tar at `path` in one pass, refusing anything `od run export` would not have written.
fn read_parts(path: &Path) -> Result<(Parts, std::fs::File), WorkError> {
    let file = std::fs::File::open(path).map_err(io)?;
    let total = file.metadata().map_err(io)?.len();
    if total > MAX_RUN_BUNDLE_BYTES {
        return Err(bad(format!("larger than MAX_RUN_BUNDLE_BYTES ({MAX_RUN_BUNDLE_BYTES})")));
    }
    let mut r = std::io::BufReader::with_capacity(64 * 1024, file);
    let (mut pos, mut n) = (0u64, 0usize);
    let (mut manifest, mut frames, mut blobs) = (None, None, BTreeMap::new());
    let mut last_name = String::new();
    loop {
        let mut head = [0u8; BLOCK as usize];
        r.read_exact(&mut head).map_err(|e| bad(format!("the tar ends early: {e}")))?;
        if head.iter().all(|b| *b == 0) {
            // The end: this block and one more of zeros, then nothing.
            zeros(&mut r, BLOCK, "the end of the tar")?;
            if pos + 2 * BLOCK != total {
                return Err(bad("the bundle is not as `od run export` writes it (bytes after the end)"));
            }
            break;
        }
        let h = tar::Header::from_byte_slice(&head);
        let name = String::from_utf8(h.path_bytes().to_vec()).map_err(|_| bad("an entry name is not UTF-8"))?;
        let size = h.entry_size().map_err(|e| bad(format!("{name}: {e}")))?;
        if size > total.saturating_sub(pos + BLOCK) {
            return Err(bad(format!("{name}: larger than the bundle")));
        }
        let expected = match (n, name.as_str()) {
            (0, "manifest.json") | (1, "frames.bin") => true,
            (k, other) if k >= 2 => other.strip_prefix("blobs/").is_some_and(|d| {
                d.len() == 64
                    && d.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                    && (!last_name.starts_with("blobs/") || *other > *last_name)
            }),
            _ => false,
        };
        if !expected {
            return Err(bad(format!("unexpected entry {name:?} (entry {n})")));
        }
        if export_header(&name, size)? != head {
            return Err(bad(format!("the bundle is not as `od run export` writes it ({name}'s header was altered)")));
        }
        let data_at = pos + BLOCK;
        match n {
            0 => manifest = Some(read_exact_vec(&mut r, size, "manifest.json")?),
            1 => frames = Some(read_exact_vec(&mut r, size, "frames.bin")?),
            _ => {
                let digest = name["blobs/".len()..].to_string();
                if hash_stream(&mut r, size)? != digest {
                    return Err(bad(format!("blob {digest} does not match its digest (altered)")));
                }
                blobs.insert(digest, (data_at, size));
            }
        }
        zeros(&mut r, padding(size), &format!("{name}'s padding"))?;
        pos = data_at + size + padding(size);
        last_name = name;
        n += 1;
    }
    let manifest = manifest.ok_or_else(|| bad("no manifest.json"))?;
    let frames = frames.ok_or_else(|| bad("no frames.bin"))?;
    Ok((Parts { manifest, frames, blobs }, r.into_inner()))
}

/// Each frame's hash, seqs rising, and the chain wherever two frames follow each other in the log.
fn verified_frames(packed: &[u8]) -> Result<Vec<Stored>, WorkError> {
    let raw = unpack(packed)?;
    let mut stored: Vec<Stored> = Vec::with_capacity(raw.len());
    let mut prev: Option<(u64, [u8; 32])> = None;
    for (n, f) in raw.iter().enumerate() {
        let view = FrameRef::parse_verified(f).map_err(|e| bad(format!("frame {n}: {e}")))?;
        if let Some((seq, hash)) = prev {
            if view.seq() <= seq {
                return Err(bad(format!("frame {n}: seq {} is not after {seq}", view.seq())));
            }
            if view.seq() == seq + 1 && *view.prev_hash() != hash {
                return Err(bad(format!("frame {n}: seq {} does not chain to the frame before it", view.seq())));
            }
        }
        prev = Some((view.seq(), *view.hash()));
        stored.push(decode_frame(view).map_err(|e| bad(format!("frame {n}: {e}")))?);
    }
    Ok(stored)
}

/// The kind of a bundle stream and the id it names.
enum StreamOf<'a> {
    Run(&'a str),
    Snapshot(&'a str),
    Body(&'a str),
}

fn stream_of(name: &str) -> Option<StreamOf<'_>> {
    let (kind, id) = name.split_once(':')?;
    match kind {
        "run" => Some(StreamOf::Run(id)),
        "snapshot" => Some(StreamOf::Snapshot(id)),
        k if k == BODY_STREAM_PREFIX => Some(StreamOf::Body(id)),
        _ => None,
    }
}

/// What the checks of one stream need to know about the whole bundle.
struct Scope<'a> {
    runs: &'a BTreeSet<String>,
    streams: &'a BTreeSet<String>,
    blobs: &'a BTreeMap<String, (u64, u64)>,
}

impl Engine {
    /// Whether run `id` came from a bundle (its agent options are the bundle author's).
    pub fn was_imported(&self, id: &str) -> Result<bool, WorkError> {
        let mark = StreamId::typed(IMPORT_MARK, id).map_err(|e| bad(e.to_string()))?;
        Ok(!self.store.read_stream(mark.as_str(), 0, 1)?.is_empty())
    }

    /// Whether `name` is a stream of the bundle or already here.
    fn present(&self, scope: &Scope, name: &str) -> Result<bool, WorkError> {
        Ok(scope.streams.contains(name) || !self.store.read_stream(name, 0, 1)?.is_empty())
    }

    /// One event of `stream` as a live one would be: of a kind the stream holds, naming its stream's
    /// run or snapshot, its references present and its paths clean.
    fn check_event(&self, scope: &Scope, stream: &str, s: &Stored) -> Result<(), WorkError> {
        let at = |m: String| bad(format!("{stream} version {}: {m}", s.envelope.version));
        let kind = s.event.kind();
        let Some(of) = stream_of(stream) else { return Err(at("not a stream a run bundle carries".into())) };
        let (allowed, key, id) = match of {
            StreamOf::Run(id) => (RUN_KINDS, "runId", id),
            StreamOf::Snapshot(id) => (SNAPSHOT_KINDS, "snapshotId", id),
            StreamOf::Body(id) => (BODY_KINDS, "digest", id),
        };
        if !allowed.contains(&kind) {
            return Err(at(format!("a {} event does not belong on this stream", kind.name())));
        }
        let data = serde_json::to_value(&s.event).map_err(|e| at(e.to_string()))?;
        if data["data"][key].as_str().is_some_and(|v| v != id) {
            return Err(at(format!("the event names {key} {} of another stream", data["data"][key])));
        }
        match &s.event {
            Event::RunCreated(e) => {
                super::projects::check_id("projectId", &e.project_id).map_err(|x| at(x.to_string()))?;
                super::projects::check_id("conversationId", &e.conversation_id).map_err(|x| at(x.to_string()))?;
                if !self.present(scope, &format!("snapshot:{}", e.snapshot_id))? {
                    return Err(at(format!("snapshot {} is neither in the bundle nor here", e.snapshot_id)));
                }
            }
            Event::RunForked(e) => {
                if !scope.runs.contains(&e.parent_run_id) {
                    return Err(at(format!("parent run {} is not in the bundle", e.parent_run_id)));
                }
                if e.work_dir != format!("forks/{id}") {
                    return Err(at(format!("the fork's folder {:?} is not forks/{id}", e.work_dir)));
                }
            }
            Event::ArtifactRecorded(e) => {
                if super::files::clean_relative(&e.path).ok().as_deref() != Some(e.path.as_str()) {
                    return Err(at(format!("artifact path {:?} leaves the run's folder", e.path)));
                }
                if !scope.blobs.contains_key(&e.digest) {
                    return Err(at(format!("blob {} of {} is missing", e.digest, e.path)));
                }
            }
            Event::SubstrateStaged(e) => {
                for f in &e.files {
                    if super::files::clean_relative(&f.path).ok().as_deref() != Some(f.path.as_str()) {
                        return Err(at(format!("staged path {:?} leaves the run's folder", f.path)));
                    }
                    if !scope.blobs.contains_key(&f.digest) {
                        return Err(at(format!("blob {} of staged {} is missing", f.digest, f.path)));
                    }
                }
            }
            Event::SnapshotRecorded(e) => {
                if let od_events::snapshots::SnapshotBody::Stored { digest } = &e.body {
                    if !self.present(scope, &format!("{BODY_STREAM_PREFIX}:{digest}"))? {
                        return Err(at(format!("snapshot body {digest} is neither in the bundle nor here")));
                    }
                }
            }
            Event::SnapshotBodyRecorded(e) if blake3::hash(e.body_json.as_bytes()).to_hex().as_str() != id => {
                return Err(at("the body does not hash to its stream's digest".into()));
            }
            _ => {}
        }
        Ok(())
    }

    /// Checks the bundle in the file at `path` and, when every check passes, records it here:
    /// `{runId, runs, events, blobs, skippedStreams, endedAtImport}`. A refusal writes nothing.
    pub fn import_run_file(&self, path: &Path) -> Result<Value, WorkError> {
        let (mut parts, mut file) = read_parts(path)?;
        let (manifest, stored) = checked_manifest(&mut parts)?;
        let runs: Vec<String> =
            serde_json::from_value(manifest["runs"].clone()).map_err(|e| bad(format!("runs: {e}")))?;
        let run_id = manifest["runId"].as_str().unwrap_or("").to_string();
        let by_stream = self.checked_streams(&manifest, &runs, &run_id, stored, &parts.blobs)?;
        let planned = self.planned_import(by_stream)?;
        for (digest, (at, len)) in &parts.blobs {
            file.seek(SeekFrom::Start(*at)).map_err(io)?;
            let (got, _) =
                self.blobs.put((&mut file).take(*len)).map_err(|e| WorkError::io("storing a bundle's blob", e))?;
            if got != *digest {
                return Err(bad(format!("blob {digest} changed while it was imported")));
            }
        }
        let Planned { mut appends, skipped, ended, supplied } = planned;
        let n: usize = appends.iter().map(|a: &Append| a.events.len()).sum();
        // Marked: the runs whose agent runs a supplied command (only a fork of one asks).
        for r in supplied.iter() {
            let mark = StreamId::typed(IMPORT_MARK, r).map_err(|e| bad(e.to_string()))?;
            let note =
                od_events::system::NoteRecorded { text: format!("run {r} imported from a bundle"), tags: vec![] };
            appends.push(Append::new(mark, vec![Event::NoteRecorded(note)]).expect(Expected::NoStream));
        }
        self.store.append_all(appends)?;
        Ok(json!({ "runId": run_id, "runs": runs, "events": n, "blobs": parts.blobs.len(),
            "skippedStreams": skipped, "endedAtImport": ended }))
    }

    /// The bundle's events by stream, once each stream is the manifest's, complete from version
    /// 0, and every event passes [`Engine::check_event`] within the bundle's scope (its runs, its
    /// streams, its blobs).
    fn checked_streams(
        &self,
        manifest: &Value,
        runs: &[String],
        run_id: &str,
        stored: Vec<Stored>,
        blobs: &BTreeMap<String, (u64, u64)>,
    ) -> Result<BTreeMap<String, Vec<Stored>>, WorkError> {
        let listed: BTreeSet<String> =
            serde_json::from_value(manifest["streams"].clone()).map_err(|e| bad(format!("streams: {e}")))?;
        let run_set: BTreeSet<String> = runs.iter().cloned().collect();
        // Events by stream, moved (not copied) out of the decoded frames.
        let mut by_stream: BTreeMap<String, Vec<Stored>> = BTreeMap::new();
        for s in stored {
            by_stream.entry(s.envelope.stream.clone()).or_default().push(s);
        }
        let present: BTreeSet<String> = by_stream.keys().cloned().collect();
        if present != listed {
            return Err(bad("the frames' streams are not the manifest's list"));
        }
        let run_streams: BTreeSet<String> = run_set.iter().map(|r| format!("run:{r}")).collect();
        let own_runs: BTreeSet<String> = present.iter().filter(|s| s.starts_with("run:")).cloned().collect();
        if own_runs != run_streams || !run_set.contains(run_id) {
            return Err(bad(format!("the bundle's run streams are not its runs (run {run_id:?})")));
        }
        let scope = Scope { runs: &run_set, streams: &present, blobs };
        for (name, events) in &by_stream {
            if events.iter().enumerate().any(|(i, s)| s.envelope.version != i as u64) {
                return Err(bad(format!("stream {name} is not complete from version 0")));
            }
            for s in events {
                self.check_event(&scope, name, s)?;
            }
        }
        Ok(by_stream)
    }

    /// What importing the streams appends: runs must be new here (a snapshot or body already here
    /// is the same one and is kept, skipped); a run that had not ended ends at import; the runs
    /// whose agent runs a supplied command are noted.
    fn planned_import(&self, by_stream: BTreeMap<String, Vec<Stored>>) -> Result<Planned, WorkError> {
        let now = self.clock.now_ms();
        let mut planned = Planned::default();
        for (name, events) in by_stream {
            let exists = !self.store.read_stream(&name, 0, 1)?.is_empty();
            if exists && name.starts_with("run:") {
                return Err(WorkError::Exists { what: "run", id: name[4..].to_string() });
            }
            if exists {
                planned.skipped.push(name);
                continue;
            }
            let stream = StreamId::new(name.clone()).map_err(|e| bad(e.to_string()))?;
            let mut evs: Vec<Event> = events.into_iter().map(|s| s.event).collect();
            for e in &evs {
                if let Event::RunCreated(c) = e {
                    let config: Value = serde_json::from_str(&c.agent_config_json).unwrap_or(Value::Null);
                    if c.agent == od_events::vocab::AgentKind::Exec || super::gate::supplied_command(&config) {
                        planned.supplied.push(c.run_id.clone());
                    }
                }
            }
            if let Some(id) = name.strip_prefix("run:") {
                if let Some(end) = end_at_import(id, &evs, now) {
                    planned.ended.push(id.to_string());
                    evs.push(end);
                }
            }
            planned.appends.push(Append::new(stream, evs).expect(Expected::NoStream));
        }
        Ok(planned)
    }
}

/// What an import appends, and what it reports.
#[derive(Default)]
struct Planned {
    appends: Vec<Append>,
    /// Streams already here (the same snapshot or body), kept.
    skipped: Vec<String>,
    /// Runs that had not ended, ended at import.
    ended: Vec<String>,
    /// Runs whose agent runs a supplied command.
    supplied: Vec<String>,
}

/// The manifest and the verified frames of a bundle's parts, once the manifest's format, frames
/// digest, blob list and frame count match what the bundle holds (the frames' bytes are dropped).
fn checked_manifest(parts: &mut Parts) -> Result<(Value, Vec<Stored>), WorkError> {
    let manifest: Value = serde_json::from_slice(&parts.manifest).map_err(|e| bad(format!("manifest.json: {e}")))?;
    if manifest["format"] != FORMAT {
        return Err(bad(format!("format {} is not {FORMAT}", manifest["format"])));
    }
    if blake3::hash(&parts.frames).to_hex().as_str() != manifest["framesDigest"].as_str().unwrap_or("") {
        return Err(bad("frames.bin does not match the manifest's framesDigest (altered or truncated)"));
    }
    let listed_blobs: BTreeSet<String> = manifest["blobs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["digest"].as_str().map(String::from))
        .collect();
    if listed_blobs != parts.blobs.keys().cloned().collect::<BTreeSet<_>>() {
        return Err(bad("the blobs do not match the manifest's list"));
    }
    let stored = verified_frames(&std::mem::take(&mut parts.frames))?;
    if stored.len() as u64 != manifest["frames"].as_u64().unwrap_or(u64::MAX) {
        return Err(bad("the manifest's frame count does not match frames.bin"));
    }
    Ok((manifest, stored))
}

/// The end an imported run that had not ended gets (None: it had ended).
fn end_at_import(run_id: &str, events: &[Event], now: i64) -> Option<Event> {
    if events.iter().any(|e| matches!(e, Event::RunEnded(_))) {
        return None;
    }
    let artifacts = events.iter().filter(|e| matches!(e, Event::ArtifactRecorded(_))).count() as u32;
    Some(Event::RunEnded(RunEnded {
        run_id: run_id.into(),
        status: "canceled".into(),
        code: 130,
        reason: format!(
            "imported before it ended: a bundle's runs do not execute here (their agent options are the bundle \
             author's); to go on, fork it (od run fork {run_id} --at end, with answers for what it asked)"
        ),
        failure_category: IMPORTED_CATEGORY.into(),
        artifact_count: artifacts,
        ended_at: now,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expected_header_is_the_one_export_writes() {
        let mut blobs = BTreeMap::new();
        let digest = blake3::hash(&[7u8; 1000]).to_hex().to_string();
        blobs.insert(digest.clone(), vec![7u8; 1000]);
        let tar = super::super::run_bundle::build_tar(b"{}", &[1, 2, 3], &blobs).unwrap();
        assert_eq!(export_header("manifest.json", 2).unwrap(), tar[..512]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.tar");
        std::fs::write(&path, &tar).unwrap();
        let (parts, _) = read_parts(&path).unwrap();
        assert_eq!((parts.manifest.as_slice(), parts.frames.as_slice()), (&b"{}"[..], &[1u8, 2, 3][..]));
        assert_eq!(parts.blobs[&digest].1, 1000);
        let mut longer = tar.clone();
        longer.extend_from_slice(&[0u8; 512]);
        std::fs::write(&path, &longer).unwrap();
        assert!(read_parts(&path).is_err(), "bytes after the end");
    }
}
