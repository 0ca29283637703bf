//! Packs: several consecutive frames of one stream stored as one sled value.
//!
//! sled pays per key (node copies, splits, allocation): one key per event capped the writer at
//! ~50–70k events/s in our benches, and a second copy of every frame (one ordered by stream) doubled
//! sled's write volume. So the `log` tree holds *packs*: up to
//! [`PACK_TARGET_BYTES`](crate::limits::PACK_TARGET_BYTES) of frames that are consecutive both in
//! the global order and in one stream, each as `[u32 len][frame]`, keyed by the first seq. Streams
//! are read through a small index (one entry per pack, not per event). The writer keeps the log's
//! last pack open in memory ([`OpenPack`]) and rewrites it while appends continue it.

use crate::limits::PACK_TARGET_BYTES;
use od_events::FrameRef;
use sled::IVec;

/// Appends one frame to pack bytes.
pub fn push(pack: &mut Vec<u8>, frame: &[u8]) {
    pack.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    pack.extend_from_slice(frame);
}

/// The `(offset, len)` of each frame in a pack; `None` if the pack is malformed.
pub fn offsets(pack: &[u8]) -> Option<Vec<(usize, usize)>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < pack.len() {
        let len = u32::from_le_bytes(pack.get(at..at + 4)?.try_into().ok()?) as usize;
        let start = at + 4;
        pack.get(start..start + len)?;
        out.push((start, len));
        at = start + len;
    }
    Some(out)
}

/// The frames of a stored pack, sharing its buffer.
pub fn frames(pack: &IVec) -> Option<Vec<IVec>> {
    Some(offsets(pack)?.into_iter().map(|(o, l)| pack.subslice(o, l)).collect())
}

/// A pack still being filled.
#[derive(Clone, Debug)]
pub struct OpenPack {
    pub key: Vec<u8>,
    pub bytes: Vec<u8>,
    /// Seq of the last frame in it.
    pub last: u64,
    /// Stream and version of the last frame in it.
    pub stream: String,
    pub version: u64,
}

impl OpenPack {
    /// Rebuilds the open pack from a stored key/value.
    pub fn from_stored(key: &[u8], value: &[u8]) -> Option<Self> {
        let (o, l) = *offsets(value)?.last()?;
        let f = FrameRef::parse(&value[o..o + l]).ok()?;
        Some(Self {
            key: key.to_vec(),
            bytes: value.to_vec(),
            last: f.seq(),
            stream: f.stream().ok()?.to_string(),
            version: f.version(),
        })
    }

    /// Whether `frame` continues this pack: next seq, same stream, next version, and room.
    pub fn takes(&self, f: &FrameRef<'_>) -> bool {
        self.last + 1 == f.seq()
            && self.version + 1 == f.version()
            && f.stream().is_ok_and(|s| s == self.stream)
            && self.bytes.len() + 4 + f.len() <= PACK_TARGET_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_roundtrip_and_reject_truncation() {
        let mut p = Vec::new();
        push(&mut p, b"abc");
        push(&mut p, b"");
        push(&mut p, b"de");
        assert_eq!(offsets(&p).unwrap(), vec![(4, 3), (11, 0), (15, 2)]);
        assert!(offsets(&p[..p.len() - 1]).is_none());
    }
}
