//! Importing frames that already exist — a copy of another log (`od log copy`) — verbatim: the
//! same bytes, so the same seqs, hashes, timestamps and op ids. Every frame is checked before
//! anything is written: it verifies (hash, stream, payload), it carries the log's next seq and
//! chains to the log's head hash, and its version is its stream's next. An import then maintains
//! what an append does: stream heads, op-id records (a retry with an op id after the copy gets the
//! original results, derived from the frames that carry it), durability before the return, and
//! live subscribers. The checks are shared by both backends; the embedded log commits an import
//! through its writer thread (`sled/import.rs`, one batch: fdatasynced, indexed and published
//! like appends), PostgreSQL in one transaction under the head-row lock (`pg/import.rs`).
//!
//! An atomic group's frames share its op id. A group split across two imports (a copy that had to
//! cut a group bigger than one import) is continued: the op's stored results are extended by the
//! second part, never replaced.

use bytes::Bytes;
use od_events::{FrameRef, Hash, StreamId};
use std::collections::HashMap;

use super::{AppendResult, RawFrame, StoreError, RECORD_BYTES};
use crate::limits::{MAX_EVENT_BYTES, MAX_IMPORT_BYTES, MAX_IMPORT_FRAMES, MAX_OP_ID_BYTES};

fn invalid(field: &'static str, reason: String) -> StoreError {
    StoreError::Invalid { field, reason }
}

/// The checks that need no log state: a bounded chunk of frames that each verify (hash, stream
/// id, op id, payload size and decoding) and chain to one another in seq order. Returns the bytes
/// the chunk takes as segment records.
pub(crate) fn precheck(frames: &[RawFrame]) -> Result<usize, StoreError> {
    if frames.is_empty() {
        return Err(invalid("frames", "an import needs at least one frame".into()));
    }
    if frames.len() > MAX_IMPORT_FRAMES {
        let (value, max) = (frames.len() as u64, MAX_IMPORT_FRAMES as u64);
        return Err(StoreError::LimitExceeded { limit: "frames per import", value, max });
    }
    let mut bytes = 0;
    let mut prev: Option<(u64, Hash)> = None;
    for raw in frames {
        let f = FrameRef::parse_verified(raw.bytes())
            .map_err(|e| invalid("frame", format!("the frame given as seq {}: {e}", raw.seq())))?;
        let seq = f.seq();
        let bad = |field: &'static str, why: String| invalid(field, format!("frame {seq}: {why}"));
        if let Some((p, h)) = prev {
            if seq != p + 1 {
                return Err(bad("seq", format!("follows frame {p} in the import; frames must be consecutive")));
            }
            if f.prev_hash() != &h {
                return Err(bad("prev_hash", format!("does not chain to frame {p} before it")));
            }
        }
        let stream = f.stream().map_err(|e| bad("stream", e.to_string()))?;
        StreamId::new(stream).map_err(|e| bad("stream", e.to_string()))?;
        match f.op_id() {
            Ok(Some(op)) if op.len() > MAX_OP_ID_BYTES => {
                return Err(bad("op_id", format!("{} bytes, more than {MAX_OP_ID_BYTES}", op.len())))
            }
            Ok(_) => {}
            Err(e) => return Err(bad("op_id", e.to_string())),
        }
        if f.payload().len() > MAX_EVENT_BYTES {
            return Err(bad("payload", format!("{} bytes, more than {MAX_EVENT_BYTES}", f.payload().len())));
        }
        od_migrations::decode_any(f.kind(), f.schema(), f.payload()).map_err(|e| bad("payload", e.to_string()))?;
        bytes += RECORD_BYTES + f.len();
        prev = Some((seq, *f.hash()));
    }
    if bytes > MAX_IMPORT_BYTES {
        let (value, max) = (bytes as u64, MAX_IMPORT_BYTES as u64);
        return Err(StoreError::LimitExceeded { limit: "import bytes", value, max });
    }
    Ok(bytes)
}

/// Reads the results an op id stored, if the log holds it.
pub(crate) type StoredOp<'a> = dyn FnMut(&str) -> Result<Option<Vec<AppendResult>>, StoreError> + 'a;

/// What a checked import changes besides adding its frames.
pub(crate) struct Staged {
    /// Each stream the import appends to, with its new head.
    pub moved: HashMap<String, u64>,
    /// Each op id the frames carry, with the results to store for it (a group an earlier import
    /// began: its stored results extended).
    pub ops: Vec<(String, Vec<AppendResult>)>,
    pub last_seq: u64,
    pub last_hash: Hash,
}

/// Checks prechecked `frames` against the log: the first carries `next_seq` and chains to `prev`,
/// each version is its stream's next (`head` reads a stream's committed head), and no op id is
/// one the log already holds (`stored_op` reads its results) unless the import continues that
/// op's group, whose last frame is the log's head.
pub(crate) fn stage(
    frames: &[Bytes],
    next_seq: u64,
    prev: &Hash,
    head: &mut dyn FnMut(&str) -> Result<Option<u64>, StoreError>,
    stored_op: &mut StoredOp<'_>,
) -> Result<Staged, StoreError> {
    let first = FrameRef::parse(&frames[0]).expect("prechecked");
    if first.seq() != next_seq {
        let why = format!("the import starts at seq {}, but the log's next seq is {next_seq}", first.seq());
        return Err(invalid("seq", why));
    }
    if first.prev_hash() != prev {
        let why = format!("frame {next_seq} does not chain to the log's head (its prev hash differs)");
        return Err(invalid("prev_hash", why));
    }
    let mut moved: HashMap<String, u64> = HashMap::new();
    let mut last_hash = *prev;
    for bytes in frames {
        let f = FrameRef::parse(bytes).expect("prechecked");
        let stream = f.stream().expect("prechecked");
        let at = match moved.get(stream) {
            Some(v) => Some(*v),
            None => head(stream)?,
        };
        let want = at.map_or(0, |v| v + 1);
        if f.version() != want {
            let why =
                format!("frame {} is version {} of {stream}, but the stream's next is {want}", f.seq(), f.version());
            return Err(invalid("version", why));
        }
        moved.insert(stream.to_string(), want);
        last_hash = *f.hash();
    }
    let mut ops: Vec<(String, Vec<AppendResult>)> = Vec::new();
    for (op, rs) in ops_of(frames.iter().map(|f| &f[..])) {
        if ops.iter().any(|(o, _)| *o == op) {
            let why = format!("op id {op:?} names two separate groups of the import (an op id names one group)");
            return Err(invalid("op_id", why));
        }
        let results = match stored_op(&op)? {
            None => rs,
            Some(stored) if continues(&stored, &rs) && rs[0].first_seq == next_seq => extend_group(stored, rs),
            Some(stored) => {
                let (a, b) = (stored[0].first_seq, stored.last().map_or(0, |r| r.last_seq));
                let why = format!("op id {op:?} already names frames {a}..={b} of this log (an op id names one group)");
                return Err(invalid("op_id", why));
            }
        };
        ops.push((op, results));
    }
    Ok(Staged { moved, ops, last_seq: next_seq + frames.len() as u64 - 1, last_hash })
}

/// Whether `more` (results of frames with one op id) directly follows `stored`'s last frame.
fn continues(stored: &[AppendResult], more: &[AppendResult]) -> bool {
    match (stored.last(), more.first()) {
        (Some(s), Some(m)) => s.last_seq + 1 == m.first_seq,
        _ => false,
    }
}

/// `stored` extended by `more`, the next frames of the same group: a part on the same stream as
/// the last stored one continues it, the others are further parts.
pub(crate) fn extend_group(mut stored: Vec<AppendResult>, more: Vec<AppendResult>) -> Vec<AppendResult> {
    for m in more {
        match stored.last_mut() {
            Some(s) if s.stream == m.stream && s.last_seq + 1 == m.first_seq => {
                s.last_seq = m.last_seq;
                s.last_version = m.last_version;
            }
            _ => stored.push(m),
        }
    }
    for r in &mut stored {
        r.deduplicated = false;
    }
    stored
}

/// What the op index keeps for `op` when frames carrying it are indexed (`new`, from those frames)
/// and it already holds `stored`: frames continuing the stored group extend it; frames the stored
/// results already cover (recovery re-indexing a batch) leave it; otherwise `new`.
pub(crate) fn merge_op(stored: Option<Vec<AppendResult>>, new: Vec<AppendResult>) -> Vec<AppendResult> {
    let Some(stored) = stored else { return new };
    let (Some(s0), Some(sl), Some(n0), Some(nl)) = (stored.first(), stored.last(), new.first(), new.last()) else {
        return new;
    };
    if continues(&stored, &new) {
        return extend_group(stored, new);
    }
    if n0.first_seq >= s0.first_seq && nl.last_seq <= sl.last_seq {
        return stored.into_iter().map(|r| AppendResult { deduplicated: false, ..r }).collect();
    }
    new
}

/// Groups frames into the op results of the appends that wrote them. An append's frames are
/// contiguous and share stream and op id; an atomic multi-stream append's frames are contiguous and
/// share the op id, one part per stream (a part never shares its stream with another), so a change
/// of stream inside a run of one op id starts the next part.
pub(crate) fn ops_of<'a>(frames: impl IntoIterator<Item = &'a [u8]>) -> Vec<(String, Vec<AppendResult>)> {
    let mut out: Vec<(String, Vec<AppendResult>)> = Vec::new();
    let mut last_seq = 0;
    for bytes in frames {
        let f = FrameRef::parse(bytes).expect("verified frame");
        let (Ok(Some(op)), Ok(stream)) = (f.op_id(), f.stream()) else {
            continue;
        };
        let fresh = || AppendResult {
            stream: stream.to_string(),
            first_seq: f.seq(),
            last_seq: f.seq(),
            first_version: f.version(),
            last_version: f.version(),
            deduplicated: false,
        };
        match out.last_mut() {
            Some((o, parts)) if o == op && last_seq + 1 == f.seq() => {
                let part = parts.last_mut().expect("a group has a part");
                if part.stream == stream {
                    part.last_seq = f.seq();
                    part.last_version = f.version();
                } else {
                    parts.push(fresh());
                }
            }
            _ => out.push((op.to_string(), vec![fresh()])),
        }
        last_seq = f.seq();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(stream: &str, first_seq: u64, last_seq: u64, first_version: u64) -> AppendResult {
        let last_version = first_version + last_seq - first_seq;
        AppendResult { stream: stream.into(), first_seq, last_seq, first_version, last_version, deduplicated: true }
    }

    #[test]
    fn a_split_group_is_extended_and_a_reindexed_one_kept() {
        let whole = vec![r("a", 5, 7, 0), r("b", 8, 9, 3)];
        let first = vec![r("a", 5, 6, 0)];
        let rest = vec![r("a", 7, 7, 2), r("b", 8, 9, 3)];
        let undup = |v: Vec<AppendResult>| -> Vec<AppendResult> {
            v.into_iter().map(|x| AppendResult { deduplicated: false, ..x }).collect()
        };
        assert_eq!(merge_op(Some(first.clone()), rest.clone()), undup(whole.clone()));
        // Recovery re-indexing the second part after the whole group was recorded.
        assert_eq!(merge_op(Some(whole.clone()), rest), undup(whole.clone()));
        assert_eq!(merge_op(None, first.clone()), first);
        // Not a continuation, not covered: the frames' own results.
        let elsewhere = vec![r("c", 20, 20, 0)];
        assert_eq!(merge_op(Some(first), elsewhere.clone()), elsewhere);
    }
}
