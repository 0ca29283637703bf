//! Opening the log: recovery from the segments and verification from the last verified checkpoint.
//! The daemon's open and `od log verify` both run [`recover`], so they judge the same damage alike.
//!
//! The checkpoint (in sled's `meta`, made durable with the index) is the "verified through seq S,
//! head H" mark and says where the segments must be rescanned from: everything before it is
//! indexed durably and was verified when it was written. Opening costs the tail: the frame at S
//! must still hash to H, the index is checked for holes from S on (not from seq 1), and the frames
//! after S are scanned; what lies before S is the background pass's and `od log verify`'s.
//! The scan verifies each frame (hash and chain) and keeps whole batches only; their frames are
//! (re-)indexed idempotently. Recovery discards only what can never have been acknowledged: a
//! damaged or cut tail past the commit mark (`mark.rs`), the index and the checkpoint. Damage is an
//! error, never a silent repair: an index that lost checkpointed entries or has a hole, a
//! checkpoint that does not chain to the frame before it, a record broken before a later synced
//! batch, a frame the commit mark recorded as committed that is damaged or missing (or does not
//! hash as the mark says), a missing mark in a log that had one, or an index covering frames the
//! segments lack.

use bytes::Bytes;
use od_events::{FrameRef, Hash, GENESIS_HASH};

use super::mark::Mark;
use super::segments::{Pos, Segments};
use super::tables::{Checkpoint, Tables};
use crate::store::import::ops_of;
use crate::store::StoreError;

/// What recovery established.
pub(crate) struct Recovered {
    pub next_seq: u64,
    pub prev_hash: Hash,
    /// Where the next batch is written.
    pub end: Pos,
    /// The index's open pack (and, lazily, streams' last chunks).
    pub open: super::chunks::IndexState,
}

fn corrupt(seq: u64, reason: String) -> StoreError {
    StoreError::Corrupt { seq, reason }
}

/// Checks the index against the checkpoint, then rescans the segments from it and indexes what
/// the index lacks.
/// `mark` is the commit mark as read (`None` when the log has no mark file).
pub(crate) fn recover(tables: &Tables, segments: &Segments, mark: Option<Mark>) -> Result<Recovered, StoreError> {
    if mark.is_none() && tables.had_mark()? {
        let why = "the commit mark log/commit is missing, though this log had one: it cannot tell which frames \
                   were acknowledged";
        return Err(corrupt(0, why.into()));
    }
    let start = Checkpoint { pos: Pos { seg: 1, off: 0 }, next_seq: 1, prev_hash: GENESIS_HASH };
    let cp = tables.checkpoint()?.unwrap_or(start);
    let indexed = tables.last_seq()?;
    if indexed + 1 < cp.next_seq {
        let why = format!("frames {}..{} were checkpointed but the index lost them", indexed + 1, cp.next_seq - 1);
        return Err(corrupt(indexed + 1, why));
    }
    if let Some(hole) = tables.check_contiguous(cp.next_seq.saturating_sub(1), indexed)? {
        return Err(corrupt(hole, format!("frame {hole} is missing although the log goes on to {indexed}")));
    }
    check_link(tables, cp.next_seq, &cp.prev_hash)?;
    let scan = segments.scan(cp.pos, cp.next_seq, cp.prev_hash)?;
    let next_seq = cp.next_seq + scan.records.len() as u64;
    if let Some(later) = scan.later_batch_seq {
        return Err(corrupt(
            next_seq,
            format!("the record of seq {next_seq} is damaged, yet seq {later} was committed after it"),
        ));
    }
    if let Some(m) = mark {
        check_mark(tables, &m, &cp, &scan)?;
    }
    if tables.last_seq()? >= next_seq {
        return Err(corrupt(next_seq, format!("the record of seq {next_seq} is damaged, but the index covers it")));
    }
    let prev_hash = match scan.records.last() {
        Some(r) => *FrameRef::parse(&r.frame).expect("scanned").hash(),
        None => cp.prev_hash,
    };
    let located: Vec<(Bytes, Pos)> = scan.records.into_iter().map(|r| (Bytes::from(r.frame), r.pos)).collect();
    let mut open = super::chunks::IndexState::new(tables.last_log_run()?);
    for chunk in located.chunks(4096) {
        tables.apply(chunk, &ops_of(chunk.iter().map(|(f, _)| &f[..])), &mut open)?;
    }
    Ok(Recovered { next_seq, prev_hash, end: scan.end, open })
}

/// Every frame the commit mark recorded as committed must have been kept, and the last of them must
/// hash as the mark says.
fn check_mark(tables: &Tables, m: &Mark, cp: &Checkpoint, scan: &super::scan::Scan) -> Result<(), StoreError> {
    let kept = cp.next_seq + scan.records.len() as u64;
    if m.next_seq > kept {
        let seq = if scan.stopped_at < m.next_seq { scan.stopped_at } else { kept };
        let why = format!(
            "frame {seq} is damaged or missing, but the commit mark records frames up to {} as committed \
             (acknowledged)",
            m.next_seq - 1
        );
        return Err(corrupt(seq, why));
    }
    if m.next_seq <= 1 {
        return Ok(());
    }
    let seq = m.next_seq - 1;
    let hash = match seq.checked_sub(cp.next_seq) {
        Some(i) => *FrameRef::parse(&scan.records[i as usize].frame).expect("scanned").hash(),
        None => {
            let f = tables.read_log(seq, seq, 1)?.pop().ok_or_else(|| corrupt(seq, "frame is missing".into()))?;
            *FrameRef::parse_verified(f.bytes()).map_err(|e| corrupt(seq, e.to_string()))?.hash()
        }
    };
    match hash == m.last_hash {
        true => Ok(()),
        false => Err(corrupt(seq, "frame does not match the hash the commit mark recorded for it".into())),
    }
}

/// The frame just before the checkpoint must verify and hash to the checkpoint's `prev_hash`.
fn check_link(tables: &Tables, next_seq: u64, prev_hash: &Hash) -> Result<(), StoreError> {
    if next_seq == 1 {
        return match prev_hash == &GENESIS_HASH {
            true => Ok(()),
            false => Err(corrupt(1, "the checkpoint has a non-genesis hash at seq 1".into())),
        };
    }
    let seq = next_seq - 1;
    let f = tables.read_log(seq, seq, 1)?.pop().ok_or_else(|| corrupt(seq, "frame is missing".into()))?;
    let f = FrameRef::parse_verified(f.bytes()).map_err(|e| corrupt(seq, e.to_string()))?;
    if f.seq() != seq || f.hash() != prev_hash {
        return Err(corrupt(seq, "frame does not match the hash the checkpoint chains from".into()));
    }
    Ok(())
}
