//! Read-ahead by stream: while one stream's packs are read in version order, the OS is asked for
//! the next ones' bytes ahead of time, coalesced and in offset order, so a cold read is many
//! requests in flight instead of one page fault (and its 128 KiB read-around) per pack.
//!
//! A stream's packs are scattered across the segments, among other streams' records (as many
//! runs write at once). Reading them through the mapping alone faults them in one at a time:
//! with the page cache cold, each fault waits on its own disk read. Here the reader keeps a window
//! of the packs it will read next ([`STREAM_READ_AHEAD_BYTES`] of reads, merged gaps counted, and
//! never more frames than the caller wants), and when it takes packs into the window it hints
//! their ranges with `MADV_WILLNEED` (asynchronous readahead into the page cache), merging ranges
//! closer than [`READ_AHEAD_GAP`] and cutting them into pieces of at most [`READ_AHEAD_PIECE`].
//! A window whose merged ranges are mostly other streams' records is left to the kernel's
//! read-around, and one whose sampled pages are already resident (a warm cache) is not hinted:
//! the hints would cost a syscall per range for nothing. Hints only move data into the page
//! cache; what is read, and every check on it, is unchanged.

use std::collections::VecDeque;

use super::pack::Loc;
use super::segments::{Pos, SegmentReader};
use crate::limits::{READ_AHEAD_GAP, READ_AHEAD_PIECE, STREAM_READ_AHEAD_BYTES};
use crate::store::StoreError;

/// One pack of a stream, as its index chunk lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// The stream version of its first frame.
    pub version: u64,
    /// The seq of its first frame.
    pub seq: u64,
    pub loc: Loc,
}

/// The window of packs hinted but not yet read.
pub struct ReadAhead<'a> {
    segments: &'a SegmentReader,
    /// The packs with what hinting each one reads (its span, plus the gap before it when that is
    /// read too, see [`coalesce`]).
    queue: VecDeque<(Run, u64)>,
    /// Bytes the hints of `queue` read.
    bytes: u64,
    /// Where the last queued pack ends.
    last_end: Option<Pos>,
    /// Frames the caller may still want, beyond those in `queue`.
    wanted: u64,
    exhausted: bool,
}

impl<'a> ReadAhead<'a> {
    /// A window over `segments` for a reader that wants at most `wanted` frames.
    pub fn new(segments: &'a SegmentReader, wanted: usize) -> Self {
        Self { segments, queue: VecDeque::new(), bytes: 0, last_end: None, wanted: wanted as u64, exhausted: false }
    }

    /// The next pack to read, taking (and hinting) more from `chunks` (each chunk's packs, in
    /// version order) once the window is half empty.
    pub fn next(
        &mut self,
        chunks: &mut dyn Iterator<Item = Result<Vec<Run>, StoreError>>,
    ) -> Result<Option<Run>, StoreError> {
        if self.queue.is_empty() || self.bytes < STREAM_READ_AHEAD_BYTES / 2 {
            self.fill(chunks)?;
        }
        let Some((run, cost)) = self.queue.pop_front() else { return Ok(None) };
        self.bytes -= cost;
        Ok(Some(run))
    }

    fn fill(&mut self, chunks: &mut dyn Iterator<Item = Result<Vec<Run>, StoreError>>) -> Result<(), StoreError> {
        let mut fresh = Vec::new();
        while !self.exhausted && self.wanted > 0 && self.bytes < STREAM_READ_AHEAD_BYTES {
            let Some(runs) = chunks.next() else {
                self.exhausted = true;
                break;
            };
            for run in runs? {
                let cost = self.cost(&run);
                self.bytes += cost;
                self.wanted = self.wanted.saturating_sub(run.loc.count as u64);
                fresh.push((run, cost));
            }
        }
        let runs: Vec<Run> = fresh.iter().map(|(r, _)| *r).collect();
        if !self.resident(&runs) {
            hint(self.segments, &runs);
        }
        self.queue.extend(fresh);
        Ok(())
    }

    /// The bytes hinting `run` reads: its span, plus the gap after the previous pack when the two
    /// are merged into one range.
    fn cost(&mut self, run: &Run) -> u64 {
        let l = run.loc;
        let end = Pos { seg: l.pos.seg, off: l.pos.off + l.span };
        let gap = match self.last_end.replace(end) {
            Some(e) if e.seg == l.pos.seg && e.off <= l.pos.off && l.pos.off - e.off <= READ_AHEAD_GAP => {
                l.pos.off - e.off
            }
            _ => 0,
        };
        (gap + l.span) as u64
    }

    /// Whether the first, middle and last of `runs` are in the page cache (a sample: a cache is
    /// warm or cold as a whole far more often than in part, and a wrong guess costs speed only).
    fn resident(&self, runs: &[Run]) -> bool {
        let Some(last) = runs.len().checked_sub(1) else { return true };
        [0, last / 2, last].iter().all(|&i| {
            let l = runs[i].loc;
            self.segments.resident(l.pos.seg, l.pos.off, l.span)
        })
    }
}

/// Hints the byte ranges of `runs`, merged when closer than [`READ_AHEAD_GAP`] and sorted by
/// position, in pieces of at most [`READ_AHEAD_PIECE`] — unless the packs are dense (other
/// streams' records are most of the merged ranges, as when every event is its own append): the
/// kernel's own read-around on the mapping's faults then reads those ranges sequentially, and
/// hints measured slower there (`benches/replay`, interleave 1, 2026-12-07).
fn hint(segments: &SegmentReader, runs: &[Run]) {
    let ranges = coalesce(runs);
    let hinted: u64 = ranges.iter().map(|r| r.2 as u64).sum();
    let records: u64 = runs.iter().map(|r| r.loc.span as u64).sum();
    if records * 2 < hinted {
        return;
    }
    for (seg, off, len) in ranges {
        let mut at = 0;
        while at < len {
            let n = (len - at).min(READ_AHEAD_PIECE);
            segments.will_need(seg, off + at, n);
            at += n;
        }
    }
}

/// The ranges `(segment, offset, length)` covering `runs`, sorted, merging neighbours in one
/// segment whose gap is at most [`READ_AHEAD_GAP`].
pub fn coalesce(runs: &[Run]) -> Vec<(u32, u32, u32)> {
    let mut locs: Vec<Loc> = runs.iter().map(|r| r.loc).collect();
    locs.sort_unstable_by_key(|l| l.pos);
    let mut out: Vec<(u32, u32, u32)> = Vec::new();
    for l in locs {
        match out.last_mut() {
            Some((seg, off, len)) if *seg == l.pos.seg && l.pos.off.saturating_sub(*off + *len) <= READ_AHEAD_GAP => {
                *len = (*len).max(l.pos.off + l.span - *off);
            }
            _ => out.push((l.pos.seg, l.pos.off, l.span)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seg: u32, off: u32, span: u32) -> Run {
        Run { version: 0, seq: 0, loc: Loc { pos: Pos { seg, off }, span, count: 1 } }
    }

    /// Reads every run through a window, counting the chunks taken from the index by then.
    fn read_all(wanted: usize, chunks: Vec<Vec<Run>>, after_first: usize) -> Vec<Run> {
        let dir = tempfile::tempdir().unwrap();
        let segs = super::super::segments::Segments::read_only(dir.path());
        let reader = segs.reader();
        let pulled = std::cell::Cell::new(0);
        let mut it = chunks.into_iter().inspect(|_| pulled.set(pulled.get() + 1)).map(Ok);
        let mut ahead = ReadAhead::new(&reader, wanted);
        let mut out = vec![];
        while let Some(r) = ahead.next(&mut it).unwrap() {
            if out.is_empty() {
                assert_eq!(pulled.get(), after_first, "chunks taken before the first pack is read");
            }
            out.push(r);
        }
        out
    }

    #[test]
    fn the_window_takes_no_more_than_wanted_and_keeps_order() {
        let mk = |i: u32, span: u32| Run {
            version: i as u64 * 3,
            seq: i as u64,
            loc: Loc { pos: Pos { seg: 0, off: i * span }, span, count: 3 },
        };
        // 5 frames wanted, 3 per chunk: two chunks, and never a third.
        let chunks: Vec<Vec<Run>> = (0..10).map(|i| vec![mk(i, 100)]).collect();
        assert_eq!(read_all(5, chunks.clone(), 2), chunks[..2].concat());
        // All wanted: the window stops at its byte bound (4 quarters), then refills as it drains.
        let quarter = (STREAM_READ_AHEAD_BYTES / 4) as u32;
        let chunks: Vec<Vec<Run>> = (0..10).map(|i| vec![mk(i, quarter)]).collect();
        assert_eq!(read_all(usize::MAX, chunks.clone(), 4), chunks.concat());
    }

    #[test]
    fn coalesce_merges_close_ranges_in_one_segment_only() {
        let g = READ_AHEAD_GAP;
        let runs = [run(1, 0, 100), run(0, 500, 10), run(1, 100 + g, 50), run(1, 100 + g + 50 + g + 1, 7)];
        assert_eq!(coalesce(&runs), vec![(0, 500, 10), (1, 0, 100 + g + 50), (1, 100 + g + 50 + g + 1, 7)]);
        // Overlapping or contained ranges never shrink the merged one.
        assert_eq!(coalesce(&[run(2, 0, 1000), run(2, 10, 20)]), vec![(2, 0, 1000)]);
        assert!(coalesce(&[]).is_empty());
    }
}
