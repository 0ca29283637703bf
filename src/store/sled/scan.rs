//! Scanning the segment files: where valid, chained data ends, keeping whole batches only.
//!
//! Recovery scans from the last checkpoint. Each frame must verify (hash), carry the next seq,
//! chain to the previous frame, and sit inside its record's batch extent; a batch is kept only once
//! its last frame has been read, since a batch cut short by a crash was never acknowledged. A scan
//! also notes where it stopped (the first frame that failed or is missing) and any valid frame
//! of a *later* batch beyond that point (proof that the damage is to synced data). What that means
//! — a torn tail or corruption — is decided in `open.rs` with the commit mark and the index.

use memmap2::Mmap;
use od_events::{FrameRef, Hash};
use std::fs::File;
use std::path::Path;

use super::segments::{record_at, seg_path, Found, Pos, Segments, FRAME_MAGIC, RECORD_HEADER};
use crate::store::StoreError;

/// What a scan found.
#[derive(Debug)]
pub struct Scan {
    /// Valid, chained frames of whole batches, in order.
    pub records: Vec<Found>,
    /// Where the next batch goes.
    pub end: Pos,
    /// The first seq not read as valid: the seq after the last kept frame when the log simply ends
    /// there, else the frame that failed or is missing (it may be inside a batch cut short).
    pub stopped_at: u64,
    /// A valid frame past the end written by a later batch than the one that starts there: proof
    /// that the end is damage to synced data, not a torn unacknowledged tail.
    pub later_batch_seq: Option<u64>,
}

impl Segments {
    /// Scans from `from` (whose first frame must be `next_seq`, chained after `prev`) through every
    /// later segment, keeping whole batches.
    pub fn scan(&self, from: Pos, next_seq: u64, prev: Hash) -> Result<Scan, StoreError> {
        let ids: Vec<u32> = self.ids()?.into_iter().filter(|id| *id >= from.seg).collect();
        let (mut expected, mut prev) = (next_seq, prev);
        let mut records = Vec::new();
        let mut end = from;
        let done = |records, end, stopped_at, later_batch_seq| Ok(Scan { records, end, stopped_at, later_batch_seq });
        for (i, &id) in ids.iter().enumerate() {
            let bytes = map_for_scan(&seg_path(self.dir(), id))?;
            let start = if id == from.seg { from.off as usize } else { 0 };
            let mut batch: Vec<Found> = Vec::new();
            let (mut at, mut kept) = (start, start);
            while let Some(r) = record_at(&bytes, at) {
                let ok = matches!(FrameRef::parse_verified(r.frame),
                    Ok(f) if f.seq() == expected && f.prev_hash() == &prev
                        && r.batch_first <= expected && expected <= r.batch_last);
                if !ok {
                    break;
                }
                prev = *FrameRef::parse(r.frame).expect("verified").hash();
                batch.push(Found { pos: Pos { seg: id, off: at as u32 }, frame: r.frame.to_vec() });
                at = r.next;
                if expected == r.batch_last {
                    records.append(&mut batch);
                    kept = at;
                    end = Pos { seg: id, off: at as u32 };
                }
                expected += 1;
            }
            let first_unkept = next_seq + records.len() as u64;
            if let Some(later) = later_batch_evidence(&bytes, kept, first_unkept) {
                return done(records, end, expected, Some(later));
            }
            let next_starts = match ids.get(i + 1) {
                Some(&n) if batch.is_empty() => {
                    let b = map_for_scan(&seg_path(self.dir(), n))?;
                    starts_with(&b, first_unkept)
                }
                _ => false,
            };
            if !next_starts {
                // Anything in later segments from a later batch proves damage here.
                for &later_id in &ids[i + 1..] {
                    let b = map_for_scan(&seg_path(self.dir(), later_id))?;
                    if let Some(s) = later_batch_evidence(&b, 0, first_unkept) {
                        return done(records, end, expected, Some(s));
                    }
                }
                return done(records, end, expected, None);
            }
            // The segment ended cleanly (zeros after its last batch); the next one carries on.
            end = Pos { seg: id + 1, off: 0 };
        }
        done(records, end, expected, None)
    }
}

/// A segment's bytes for a scan, mapped rather than read (a segment is 64 MiB, mostly zeros at
/// the tail; only the pages the scan touches are read).
fn map_for_scan(path: &Path) -> Result<ScanBytes, StoreError> {
    let f = File::open(path).map_err(|e| StoreError::io("reading a segment", e))?;
    let len = f.metadata().map_err(|e| StoreError::io("reading a segment", e))?.len();
    if len == 0 {
        return Ok(ScanBytes::Empty);
    }
    // SAFETY: segments are only written in place by this process's writer, which is not running
    // while the store opens; `od log verify` maps them read-only with no writer running.
    let m = unsafe { Mmap::map(&f) }.map_err(|e| StoreError::io("mapping a segment", e))?;
    Ok(ScanBytes::Mapped(m))
}

enum ScanBytes {
    Empty,
    Mapped(Mmap),
}

impl std::ops::Deref for ScanBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            ScanBytes::Empty => &[],
            ScanBytes::Mapped(m) => m,
        }
    }
}

/// Whether segment bytes start with a valid record of frame `seq`.
fn starts_with(bytes: &[u8], seq: u64) -> bool {
    record_at(bytes, 0).is_some_and(|r| FrameRef::parse_verified(r.frame).is_ok_and(|f| f.seq() == seq))
}

/// Looks from `from` for a valid frame at or beyond `first_unkept` written by a *later* batch than
/// the one that starts there. Batches are written only after the previous one was synced.
fn later_batch_evidence(bytes: &[u8], from: usize, first_unkept: u64) -> Option<u64> {
    for off in memchr::memmem::find_iter(&bytes[from.min(bytes.len())..], FRAME_MAGIC) {
        let Some(rec) = (from + off).checked_sub(RECORD_HEADER).and_then(|at| record_at(bytes, at)) else {
            continue;
        };
        let Ok(f) = FrameRef::parse_verified(rec.frame) else { continue };
        if f.seq() >= first_unkept && rec.batch_first > first_unkept {
            return Some(f.seq());
        }
    }
    None
}
