//! Packs: index entries that each cover a run of records in one segment that are consecutive in
//! the global order *and* in one stream.
//!
//! sled pays per key and rewrites whole nodes when it consolidates them, so storing frames in sled
//! cost ~4× write amplification in our benches. Frames therefore live only in the segment files,
//! written once; sled holds small entries: `log` maps the first seq of a run of records (any
//! streams, [`LogRun`]) to its [`Loc`], and `stream_index` chunks list each stream's packs (a pack:
//! records consecutive in the global order *and* in one stream) with their `Loc`s. An append of
//! 1,000 events to one stream is ~10 entries, not 1,000. The writer keeps the last pack and run
//! open in memory ([`OpenPack`], [`LogRun`]) and extends them while appends continue them.

use od_events::FrameRef;

use super::segments::{Pos, RECORD_HEADER};
use crate::limits::PACK_MAX_BYTES;

/// Where a pack's records are: segment, offset, byte span, and how many frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    pub pos: Pos,
    pub span: u32,
    pub count: u32,
}

impl Loc {
    /// The 16-byte index value.
    pub fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.pos.seg.to_le_bytes());
        b[4..8].copy_from_slice(&self.pos.off.to_le_bytes());
        b[8..12].copy_from_slice(&self.span.to_le_bytes());
        b[12..16].copy_from_slice(&self.count.to_le_bytes());
        b
    }

    /// Decodes an index value.
    pub fn decode(b: &[u8]) -> Option<Self> {
        let u = |i: usize| b.get(i..i + 4).map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes")));
        Some(Self { pos: Pos { seg: u(0)?, off: u(4)? }, span: u(8)?, count: u(12)? })
    }
}

/// A run of records consecutive in the global order and in one segment, whatever their streams:
/// one entry of the `log` index (the global order needs no per-stream split, so a run covers up to
/// [`PACK_MAX_BYTES`] of records however interleaved the streams are).
#[derive(Clone, Debug)]
pub struct LogRun {
    pub first_seq: u64,
    pub loc: Loc,
}

impl LogRun {
    /// Seq of the last record in it.
    pub fn last(&self) -> u64 {
        self.first_seq + self.loc.count as u64 - 1
    }

    /// Whether the record of seq `seq`, `span` bytes at `pos`, continues this run.
    pub fn takes(&self, seq: u64, pos: Pos, span: u32) -> bool {
        self.last() + 1 == seq
            && pos.seg == self.loc.pos.seg
            && pos.off == self.loc.pos.off + self.loc.span
            && self.loc.span + span <= PACK_MAX_BYTES
    }
}

/// The pack still being extended.
#[derive(Clone, Debug)]
pub struct OpenPack {
    pub first_seq: u64,
    pub loc: Loc,
    /// Stream and version of the last frame in it.
    pub stream: String,
    pub version: u64,
}

impl OpenPack {
    /// Seq of the last frame in it.
    pub fn last(&self) -> u64 {
        self.first_seq + self.loc.count as u64 - 1
    }

    /// Whether the record of `f` written at `pos` continues this pack: next seq, same stream,
    /// next version, right after it in the same segment, and room.
    pub fn takes(&self, f: &FrameRef<'_>, pos: Pos) -> bool {
        self.last() + 1 == f.seq()
            && self.version + 1 == f.version()
            && pos.seg == self.loc.pos.seg
            && pos.off == self.loc.pos.off + self.loc.span
            && self.loc.span + (RECORD_HEADER + f.len()) as u32 <= PACK_MAX_BYTES
            && f.stream().is_ok_and(|s| s == self.stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loc_roundtrip() {
        let l = Loc { pos: Pos { seg: 3, off: 77 }, span: 900, count: 4 };
        assert_eq!(Loc::decode(&l.encode()), Some(l));
        assert_eq!(Loc::decode(&[1, 2, 3]), None);
    }
}
