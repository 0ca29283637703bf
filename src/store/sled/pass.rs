//! A verification pass over the whole log that can run in steps: the global order first (every
//! frame's hash, chain, seq and payload), then the stream index (every chunk's packs hold, at the
//! seqs it names, that stream's frames in version order, and the chunks cover every frame).
//! `verify_tables`
//! runs it in one go; the daemon's background pass runs it a bounded number of bytes at a time,
//! pausing in between, while appends go on.
//!
//! A live pass (`live = true`) checks up to the tail at its start and tolerates what concurrent
//! appends do meanwhile: packs and frames beyond that tail are skipped.

use bytes::Bytes;
use od_events::{FrameRef, GENESIS_HASH};
use serde::{Deserialize, Serialize};
use std::ops::Bound;

use super::chunks::{key_version, Chunk};
use super::pack::Loc;
use super::tables::Tables;
use crate::limits::MAX_VERIFY_DOUBLE_ENDS;
use crate::store::verify::{check_frame, hex};
use crate::store::{BadFrame, VerifyReport};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum Phase {
    Log,
    /// The stream index, resuming after `after`; `current` is the stream being walked and its next
    /// expected version; `count` the frames (≤ the pass's tail) it covered so far.
    Streams {
        after: Option<Vec<u8>>,
        current: Option<(Vec<u8>, u64)>,
        count: u64,
        /// The `run_ended` frames of the current stream so far.
        #[serde(default)]
        ends: u32,
    },
}

/// A resumable verification of the log up to a fixed seq. It serializes (the daemon saves it after
/// every step, see `resume.rs`), so a pass can go on in a later process where it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyPass {
    upto: u64,
    live: bool,
    prev: [u8; 32],
    expected: u64,
    phase: Phase,
    /// Run streams holding more than one `run_ended` (written before the writer refused appends
    /// after an end), up to [`MAX_VERIFY_DOUBLE_ENDS`].
    #[serde(default)]
    ended_twice: Vec<String>,
}

impl VerifyPass {
    /// A pass over seqs `1..=upto` (`u64::MAX`: whatever the index holds).
    pub fn new(upto: u64, live: bool) -> Self {
        Self { upto, live, prev: GENESIS_HASH, expected: 1, phase: Phase::Log, ended_twice: Vec::new() }
    }

    /// The last seq this pass checks.
    pub fn upto(&self) -> u64 {
        self.upto
    }

    /// The next seq of the global order this pass checks (`upto + 1` once it walks the stream
    /// index).
    pub fn next_seq(&self) -> u64 {
        self.expected
    }

    /// Checks about `budget` bytes of frames; the report once the pass is over (at the end, or at
    /// the first bad frame), `None` while there is more to do.
    pub fn step(&mut self, tables: &Tables, budget: u64) -> Option<VerifyReport> {
        let mut spent = 0u64;
        if matches!(self.phase, Phase::Log) {
            match self.log(tables, budget, &mut spent) {
                Step::Bad(b) => return Some(self.report(Some(b))),
                Step::More => return None,
                Step::Done => {}
            }
            if self.upto != u64::MAX && self.expected <= self.upto {
                let reason = format!("frame is missing (the log should go on to {})", self.upto);
                return Some(self.report(Some(BadFrame { seq: self.expected, reason })));
            }
            self.phase = Phase::Streams { after: None, current: None, count: 0, ends: 0 };
        }
        match self.streams(tables, budget, &mut spent) {
            Step::Bad(b) => Some(self.report(Some(b))),
            Step::More => None,
            Step::Done => Some(self.report(None)),
        }
    }

    fn report(&self, first_bad: Option<BadFrame>) -> VerifyReport {
        let verified = match &first_bad {
            Some(b) if b.seq > 0 => b.seq.min(self.expected) - 1,
            _ => self.expected - 1,
        };
        VerifyReport { verified, head_hash: hex(&self.prev), first_bad, runs_ended_twice: self.ended_twice.clone() }
    }

    /// The global order: every frame's hash, chain, seq, and payload.
    fn log(&mut self, tables: &Tables, budget: u64, spent: &mut u64) -> Step {
        let bad = |seq, reason: String| Step::Bad(BadFrame { seq, reason });
        for item in tables.log_iter(self.expected) {
            if *spent >= budget {
                return Step::More;
            }
            let (k, v) = match item {
                Ok(kv) => kv,
                Err(e) => return bad(self.expected, format!("the log index is unreadable: {e}")),
            };
            let first = u64::from_be_bytes(k.as_ref().try_into().unwrap_or([0; 8]));
            if first > self.upto {
                return Step::Done;
            }
            if first != self.expected {
                return bad(self.expected, format!("frame is missing (next present is {first})"));
            }
            let Some(loc) = Loc::decode(&v) else { return bad(first, "index entry is malformed".into()) };
            let frames = match tables.pack_frames(first, &loc) {
                Ok(f) => f,
                Err(e) => return bad(first, e.to_string()),
            };
            *spent += loc.span as u64;
            for bytes in frames {
                if self.expected > self.upto {
                    return Step::Done;
                }
                if let Err(reason) = check_frame(&bytes, self.expected, &self.prev) {
                    return bad(self.expected, reason);
                }
                self.prev = *FrameRef::parse(&bytes).expect("checked").hash();
                self.expected += 1;
            }
        }
        Step::Done
    }

    /// The stream index: every chunk's runs point at records holding, in order, the frames of that
    /// seq on (each verifying), all of that stream; per stream, versions run from 0 with no gap;
    /// the index covers every frame.
    fn streams(&mut self, tables: &Tables, budget: u64, spent: &mut u64) -> Step {
        let (total, live) = (self.expected - 1, self.live);
        let Phase::Streams { after, current, count, ends } = &mut self.phase else { return Step::Done };
        let mut walk = StreamWalk { tables, total, live, count, ends, twice: &mut self.ended_twice, spent };
        let from = match after.take() {
            Some(k) => Bound::Excluded(k),
            None => Bound::Unbounded,
        };
        for item in tables.streams_iter(from, Bound::Unbounded) {
            let (k, v) = match item {
                Ok(kv) => kv,
                Err(e) => return bad(0, format!("the stream index is unreadable: {e}")),
            };
            let at = describe_key(&k);
            let (stream, _) = k.split_at(k.len().saturating_sub(9));
            let Some(chunk) = (k.len() >= 9).then(|| Chunk::decode(key_version(&k), &v)).flatten() else {
                return bad(0, format!("the index chunk for {at} is malformed"));
            };
            if live && chunk.runs.first().is_some_and(|(seq, _)| *seq > total) {
                continue; // a chunk begun after the pass began
            }
            let next = match current {
                Some((s, n)) if s.as_slice() == stream => *n,
                _ => {
                    *walk.ends = 0;
                    0
                }
            };
            match walk.chunk(stream, &chunk, next, &at) {
                Ok(next) => *current = Some((stream.to_vec(), next)),
                Err(step) => return step,
            }
            if *walk.spent >= budget {
                *after = Some(k.to_vec());
                return Step::More;
            }
        }
        match *walk.count == total {
            true => Step::Done,
            false => bad(0, format!("the stream index covers {count} frames but the log holds {total}")),
        }
    }
}

/// A stepped pass's walk of the stream index: what it has covered so far.
struct StreamWalk<'a> {
    tables: &'a Tables,
    /// The last seq the pass checks.
    total: u64,
    live: bool,
    /// Frames (≤ `total`) the index covered so far.
    count: &'a mut u64,
    /// The `run_ended` frames of the current stream so far.
    ends: &'a mut u32,
    /// Run streams ended more than once.
    twice: &'a mut Vec<String>,
    /// Bytes of packs read in this step.
    spent: &'a mut u64,
}

impl StreamWalk<'_> {
    /// Checks one chunk of `stream` (described as `at`) whose first version should be `next`;
    /// the stream's next version after it.
    fn chunk(&mut self, stream: &[u8], chunk: &Chunk, mut next: u64, at: &str) -> Result<u64, Step> {
        if chunk.first_version != next {
            return Err(bad(0, format!("{at}: the stream's versions have a gap before it")));
        }
        for (seq, loc) in &chunk.runs {
            if self.live && *seq > self.total {
                break; // appended after the pass began
            }
            let pack = (*seq > 0 && *seq <= self.total).then(|| self.tables.pack_frames(*seq, loc).ok()).flatten();
            let Some(pack) = pack else {
                return Err(bad(*seq, format!("the index chunk for {at} points at no pack")));
            };
            *self.spent += loc.span as u64;
            next = self.pack(stream, *seq, &pack, next, at)?;
        }
        Ok(next)
    }

    /// Checks the frames of one pack (its first at `seq`): each verifies and is the next version
    /// of `stream`; a run stream's `run_ended` frames are counted. The stream's next version after
    /// them.
    fn pack(&mut self, stream: &[u8], seq: u64, pack: &[Bytes], mut next: u64, at: &str) -> Result<u64, Step> {
        let run_stream = stream.starts_with(b"run:");
        let run_ended = od_events::EventKind::RunEnded.code();
        for (i, frame) in pack.iter().enumerate() {
            if self.live && seq + i as u64 > self.total {
                break;
            }
            let ok = FrameRef::parse_verified(frame).is_ok_and(|f| {
                f.seq() == seq + i as u64 && f.version() == next && f.stream().is_ok_and(|s| s.as_bytes() == stream)
            });
            if !ok {
                return Err(bad(seq, format!("the pack indexed for {at} holds another frame")));
            }
            if run_stream && FrameRef::parse(frame).is_ok_and(|f| f.kind() == run_ended) {
                *self.ends += 1;
                if *self.ends == 2 && self.twice.len() < MAX_VERIFY_DOUBLE_ENDS {
                    self.twice.push(String::from_utf8_lossy(stream).into_owned());
                }
            }
            next += 1;
            *self.count += 1;
        }
        Ok(next)
    }
}

fn bad(seq: u64, reason: String) -> Step {
    Step::Bad(BadFrame { seq, reason })
}

enum Step {
    Done,
    More,
    Bad(BadFrame),
}

/// `stream@version` for a streams-tree key.
fn describe_key(k: &[u8]) -> String {
    match k.len().checked_sub(9) {
        Some(n) => {
            let v = u64::from_be_bytes(k[n + 1..].try_into().unwrap_or([0; 8]));
            format!("stream {} from version {v}", String::from_utf8_lossy(&k[..n]))
        }
        None => "an unreadable stream key".to_string(),
    }
}
