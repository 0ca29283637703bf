//! Targets of the log: frame decoding (`FrameRef::parse`, the hash, `decode_frame` with its rkyv
//! validation and upcasting) and segment recovery (bytes written as a segment, then the store
//! opened on them, with and without an index from a checkpoint; then read, verified, appended to,
//! and verified offline).

use super::harness::{Bounds, Rng, Target};
use super::mutate::havoc;
use od::store::{decode_frame, Append, SledLog, StoreConfig};
use od_events::{Frame, FrameRef, StreamId};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const NOW: i64 = 1_800_000_000_000;

// ---- frames -----------------------------------------------------------------------------------------

/// Decoding a frame: re-encoding its header and payload gives back exactly its bytes when (and only
/// when) its hash verifies; an event that decodes re-encodes to the same event.
pub fn check_frame(input: &[u8]) {
    let Ok(f) = FrameRef::parse(input) else { return };
    let verified = f.verify().is_ok();
    if let Ok(h) = f.header() {
        let again = Frame::encode(&h, f.payload(), f.prev_hash());
        assert_eq!(again == input, verified, "re-encoding reproduces the frame exactly when its hash verifies");
    }
    if let Ok(stored) = decode_frame(f) {
        let kind = stored.event.kind();
        let payload = stored.event.encode_payload();
        let back = od_migrations::decode_any(kind.code(), kind.current_schema(), &payload).expect("re-encoded event");
        assert_eq!(back, stored.event, "decode ∘ encode is the identity on decoded events");
    }
}

/// Re-encodes a frame after changing one thing (payload bytes, kind, schema, seq), with a hash that
/// verifies, so the mutation reaches the payload decoder instead of stopping at the hash.
fn reseal(rng: &mut Rng, frame: &[u8]) -> Option<Vec<u8>> {
    let f = FrameRef::parse(frame).ok()?;
    let mut h = f.header().ok()?;
    let mut payload = f.payload().to_vec();
    match rng.below(5) {
        0 => h.kind = rng.below(80) as u16,
        1 => h.schema = rng.below(4) as u16,
        2 => h.seq = rng.next() >> rng.below(64),
        _ => payload = havoc(rng, &payload, &[]),
    }
    Some(Frame::encode(&h, &payload, f.prev_hash()))
}

pub fn mutate_frame(rng: &mut Rng, input: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    if !rng.one_in(3) {
        if let Some(out) = reseal(rng, input) {
            return out;
        }
    }
    havoc(rng, input, pool)
}

pub fn frame_target() -> Target {
    Target {
        name: "frame",
        iterations: 3000,
        bounds: Bounds { deadline: Duration::from_secs(10), memory: |n| (1 << 20) + 16 * n },
        seeds: Vec::new(),
        mutate: mutate_frame,
    }
}

// ---- segments ---------------------------------------------------------------------------------------

const SEGMENT: &str = "log/00000001.seg";

/// `(offset, total length)` of each record `[u32 len][u64 first][u64 last][frame]` from the start.
fn records(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(len) = b.get(at..at + 4).map(|s| u32::from_le_bytes(s.try_into().unwrap()) as usize) {
        if len == 0 || at + 20 + len > b.len() {
            break;
        }
        out.push((at, 20 + len));
        at += 20 + len;
    }
    out
}

/// Edits one record's frame (resealed), then, half the time, re-chains every later frame to it, so
/// the damage is a valid-looking log that differs from what the index knows.
fn mutate_segment(rng: &mut Rng, input: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    let recs = records(input);
    if recs.is_empty() || rng.one_in(3) {
        return havoc(rng, input, pool);
    }
    let mut out = input[..recs[0].0].to_vec();
    let pick = rng.below(recs.len());
    let rechain = rng.one_in(2);
    let mut prev: Option<od_events::Hash> = None;
    for (i, &(at, len)) in recs.iter().enumerate() {
        let rec = &input[at..at + len];
        let mut frame = rec[20..].to_vec();
        if i == pick {
            frame = reseal(rng, &frame).unwrap_or(frame);
        }
        if let (Some(p), true, Ok(f)) = (prev, rechain && i > pick, FrameRef::parse(&frame)) {
            if let Ok(h) = f.header() {
                frame = Frame::encode(&h, f.payload(), &p);
            }
        }
        prev = FrameRef::parse(&frame).ok().map(|f| *f.hash());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&rec[4..20]);
        out.extend_from_slice(&frame);
    }
    let tail = recs.last().map_or(0, |(a, l)| a + l);
    out.extend_from_slice(&input[tail..]);
    out
}

/// A small log, and its index as of a checkpoint halfway through.
pub struct SegmentBase {
    _tmp: tempfile::TempDir,
    /// A data dir whose sled index is as of the checkpoint (its segment is replaced per input).
    checkpointed: PathBuf,
    /// The final segment's bytes, up to its last record and a few zeros.
    pub segment: Vec<u8>,
}

fn open(dir: &Path) -> Result<od::store::Store, od::store::StoreError> {
    let mut cfg = StoreConfig::new(dir);
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    cfg.clock = Arc::new(od::clock::ManualClock::at(NOW));
    SledLog::open(cfg).map(|s| s as od::store::Store)
}

fn note(i: usize) -> od_events::Event {
    od_events::Event::NoteRecorded(od_events::system::NoteRecorded {
        text: format!("note {i} {}", "n".repeat(i % 7 * 13)),
        tags: vec![format!("t{}", i % 3)],
    })
}

fn append_notes(s: &od::store::Store, range: std::ops::Range<usize>) {
    for i in range {
        let stream = StreamId::new(format!("note:s{}", i % 3)).unwrap();
        let events = (0..1 + i % 3).map(|k| note(i * 10 + k)).collect();
        let mut a = Append::new(stream, events);
        if i % 2 == 0 {
            a = a.op_id(format!("op-{i}"));
        }
        s.append(a).unwrap();
    }
}

impl SegmentBase {
    pub fn build() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let (live, checkpointed) = (tmp.path().join("live"), tmp.path().join("checkpointed"));
        let s = open(&live).unwrap();
        append_notes(&s, 0..8);
        s.checkpoint().unwrap();
        copy_dir(&live.join("sled"), &checkpointed.join("sled"));
        append_notes(&s, 8..16);
        drop(s);
        let bytes = std::fs::read(live.join(SEGMENT)).unwrap();
        let end = records(&bytes).last().map_or(0, |(a, l)| a + l);
        let segment = bytes[..(end + 64).min(bytes.len())].to_vec();
        SegmentBase { _tmp: tmp, checkpointed, segment }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Opens a store on `dir`: it opens or refuses with an error; when it opens, everything it holds
/// reads (or fails to decode with an error), it verifies, and it takes a new append.
fn exercise(dir: &Path) {
    if let Ok(s) = open(dir) {
        let last = s.last_seq();
        if let Ok(frames) = s.read_from(1, od::limits::MAX_READ_PAGE) {
            assert!(frames.len() as u64 <= last, "read {} frames from a log of {last}", frames.len());
            for f in &frames {
                let _ = f.decode();
            }
        }
        let _ = s.verify();
        let stream = StreamId::new("note:after").unwrap();
        if let Ok(r) = s.append(Append::new(stream, vec![note(1)])) {
            assert_eq!(r.first_seq, last + 1, "a new append continues the log");
        }
    }
    let _ = od::store::verify_dir(dir);
}

/// Writes `input` as the only segment, opens with no index (full rescan) and with the index of a
/// checkpoint (rescan from it).
pub fn check_segment(base: &SegmentBase, input: &[u8]) {
    let tmp = tempfile::tempdir().unwrap();
    let fresh = tmp.path().join("fresh");
    std::fs::create_dir_all(fresh.join("log")).unwrap();
    std::fs::write(fresh.join(SEGMENT), input).unwrap();
    exercise(&fresh);
    let indexed = tmp.path().join("indexed");
    copy_dir(&base.checkpointed, &indexed);
    std::fs::create_dir_all(indexed.join("log")).unwrap();
    std::fs::write(indexed.join(SEGMENT), input).unwrap();
    exercise(&indexed);
}

pub fn segment_target(base: &SegmentBase) -> Target {
    Target {
        name: "segment",
        iterations: 100,
        bounds: Bounds { deadline: Duration::from_secs(30), memory: |n| (64 << 20) + 16 * n },
        seeds: vec![("built".into(), base.segment.clone())],
        mutate: mutate_segment,
    }
}
