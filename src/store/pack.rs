//! Packs: several consecutive frames stored as one sled value.
//!
//! sled pays per key (node copies, splits, allocation): one key per event capped the writer at
//! ~50–70k events/s in our benches. So both sled trees hold *packs*: up to
//! [`PACK_TARGET_BYTES`](crate::limits::PACK_TARGET_BYTES) of consecutive frames, each as
//! `[u32 len][frame]`. The `log` tree packs consecutive seqs (key: first seq), the `streams` tree
//! packs consecutive versions of one stream (key: `stream \0 first version`). The writer keeps the
//! last, still-open pack of the log and of recently written streams in memory ([`Packer`]) and
//! rewrites it as frames are added; a full pack is never written again.

use od_events::FrameRef;
use sled::IVec;
use std::collections::HashMap;

use crate::limits::{HEAD_CACHE_ENTRIES, PACK_TARGET_BYTES};

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
    /// Seq (log) or version (stream) of the last frame in it.
    pub last: u64,
}

impl OpenPack {
    /// Rebuilds the open pack from a stored key/value; `pos` reads a frame's position.
    pub fn from_stored(key: &[u8], value: &[u8], pos: fn(&FrameRef<'_>) -> u64) -> Option<Self> {
        let (o, l) = *offsets(value)?.last()?;
        let f = FrameRef::parse(&value[o..o + l]).ok()?;
        Some(Self { key: key.to_vec(), bytes: value.to_vec(), last: pos(&f) })
    }

    /// Whether `frame` at position `at` continues this pack.
    pub fn takes(&self, at: u64, frame_len: usize) -> bool {
        self.last + 1 == at && self.bytes.len() + 4 + frame_len <= PACK_TARGET_BYTES
    }
}

/// The writer's open packs: the log's last pack and a bounded cache of streams' last packs
/// (`None` = the stream has no events).
#[derive(Default)]
pub struct Packer {
    pub log: Option<OpenPack>,
    pub streams: HashMap<String, Option<OpenPack>>,
}

impl Packer {
    /// Remembers a stream's last pack, clearing the cache when it is full (everything in it is
    /// already stored, so it can be reloaded from sled).
    pub fn remember(&mut self, stream: &str, pack: Option<OpenPack>) {
        if self.streams.len() >= HEAD_CACHE_ENTRIES && !self.streams.contains_key(stream) {
            self.streams.clear();
        }
        self.streams.insert(stream.to_string(), pack);
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
