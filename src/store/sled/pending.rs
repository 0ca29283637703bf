//! The index's recent part: the `log` and `stream_index` entries of frames written since the last
//! checkpoint, kept in memory and written to sled once, at the checkpoint, in one batch per tree.
//!
//! sled writes every update of a key to its own log and rewrites a whole leaf every few updates,
//! so indexing each group commit in place (a pack's entry and its stream's chunk rewritten as the
//! pack grows) cost far more bytes on disk than the frames themselves. Deferring the index to the
//! checkpoint writes each entry about once. Nothing is lost by it: until a checkpoint, recovery
//! rescans the segments from the previous one and rebuilds these entries (the segments are the
//! commit point; sled's index never was). Readers see sled and this overlay merged by key, the
//! overlay winning (its entry for a key is the newer one: a pack extended after a checkpoint).
//! Bounded by the checkpoint: [`CHECKPOINT_BYTES`](crate::limits::CHECKPOINT_BYTES) of records or
//! [`CHECKPOINT_INTERVAL_MS`](crate::limits::CHECKPOINT_INTERVAL_MS), whichever comes first.

use sled::IVec;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, RwLock};

use super::tables::{sled_error, Tables};
use crate::store::StoreError;

/// Entries not yet in sled, by tree, keyed exactly as in sled.
#[derive(Default)]
pub struct Pending {
    pub log: BTreeMap<Vec<u8>, Vec<u8>>,
    pub streams: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// The overlay shared by the writer (the only one that changes it) and readers.
pub type SharedPending = Arc<RwLock<Pending>>;

/// Up to `n` entries of `map` with keys in `range`, in key order.
pub fn snapshot(
    map: &BTreeMap<Vec<u8>, Vec<u8>>,
    from: Bound<Vec<u8>>,
    to: Bound<Vec<u8>>,
    n: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    map.range((from, to)).take(n).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Merges a sled iterator with a snapshot of the overlay (both in key order); on equal keys the
/// overlay's entry wins.
pub fn merge<I>(sled: I, overlay: Vec<(Vec<u8>, Vec<u8>)>) -> Merged<I>
where
    I: Iterator<Item = sled::Result<(IVec, IVec)>>,
{
    Merged { sled: sled.peekable(), overlay: overlay.into_iter().peekable() }
}

/// See [`merge`].
pub struct Merged<I: Iterator<Item = sled::Result<(IVec, IVec)>>> {
    sled: std::iter::Peekable<I>,
    overlay: std::iter::Peekable<std::vec::IntoIter<(Vec<u8>, Vec<u8>)>>,
}

impl<I: Iterator<Item = sled::Result<(IVec, IVec)>>> Iterator for Merged<I> {
    type Item = sled::Result<(IVec, IVec)>;

    fn next(&mut self) -> Option<Self::Item> {
        let order = match (self.sled.peek(), self.overlay.peek()) {
            (None, None) => return None,
            (Some(Err(_)), _) | (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some(Ok((a, _))), Some((b, _))) => a.as_ref().cmp(b.as_slice()),
        };
        match order {
            std::cmp::Ordering::Less => self.sled.next(),
            std::cmp::Ordering::Equal => {
                self.sled.next();
                self.overlay.next().map(|(k, v)| Ok((IVec::from(k), IVec::from(v))))
            }
            std::cmp::Ordering::Greater => self.overlay.next().map(|(k, v)| Ok((IVec::from(k), IVec::from(v)))),
        }
    }
}

fn pick_last(s: Option<(IVec, IVec)>, o: Option<(Vec<u8>, Vec<u8>)>) -> Option<(IVec, IVec)> {
    match (s, o) {
        (Some(s), Some(o)) if s.0.as_ref() > o.0.as_slice() => Some(s),
        (_, Some((k, v))) => Some((IVec::from(k), IVec::from(v))),
        (s, None) => s,
    }
}

/// Reads of the index as sled and the overlay together.
impl Tables {
    fn pending_read(&self) -> std::sync::RwLockReadGuard<'_, Pending> {
        self.pending.read().expect("index overlay lock")
    }

    /// The log index from the entry keyed `from` on, in key order.
    pub fn log_iter(&self, from: u64) -> Merged<sled::Iter> {
        let k = from.to_be_bytes().to_vec();
        let over = snapshot(&self.pending_read().log, Bound::Included(k.clone()), Bound::Unbounded, usize::MAX);
        merge(self.log.range(k..), over)
    }

    /// The log index entry with the highest key ≤ `seq` (the pack that would hold it).
    pub fn log_floor(&self, seq: u64) -> Result<Option<(IVec, IVec)>, StoreError> {
        let k = seq.to_be_bytes().to_vec();
        let over = self.pending_read().log.range(..=k.clone()).next_back().map(|(a, b)| (a.clone(), b.clone()));
        let s = self.log.range(..=k).next_back().transpose().map_err(sled_error("reading the log index", seq))?;
        Ok(pick_last(s, over))
    }

    /// The log index entry keyed `seq`.
    pub fn log_get(&self, seq: u64) -> Result<Option<IVec>, StoreError> {
        let k = seq.to_be_bytes();
        if let Some(v) = self.pending_read().log.get(k.as_slice()) {
            return Ok(Some(IVec::from(v.as_slice())));
        }
        self.log.get(k).map_err(sled_error("reading the log index", seq))
    }

    /// Stream index chunks with keys in `(from, to)`, in key order.
    pub fn streams_iter(&self, from: Bound<Vec<u8>>, to: Bound<Vec<u8>>) -> Merged<sled::Iter> {
        let over = snapshot(&self.pending_read().streams, from.clone(), to.clone(), usize::MAX);
        merge(self.stream_index.range((from, to)), over)
    }

    /// The stream index chunk with the highest key in `lo..=hi`.
    pub fn streams_floor(&self, lo: &[u8], hi: &[u8]) -> Result<Option<(IVec, IVec)>, StoreError> {
        let over = self
            .pending_read()
            .streams
            .range(lo.to_vec()..=hi.to_vec())
            .next_back()
            .map(|(a, b)| (a.clone(), b.clone()));
        let s = self
            .stream_index
            .range(lo..=hi)
            .next_back()
            .transpose()
            .map_err(sled_error("reading a stream index", 0))?;
        Ok(pick_last(s, over))
    }

    /// Writes the overlay to sled (stream chunks, then the log entries: the log index is
    /// recovery's watermark) and empties it. Called by the writer (the overlay's only writer) at a
    /// checkpoint, before the checkpoint record and the flush that make both durable.
    pub fn flush_pending(&self) -> Result<(), StoreError> {
        let (log, streams) = {
            let p = self.pending_read();
            (p.log.clone(), p.streams.clone())
        };
        let mut b = sled::Batch::default();
        for (k, v) in streams {
            b.insert(k, v);
        }
        self.stream_index.apply_batch(b).map_err(sled_error("writing the stream index", 0))?;
        let mut b = sled::Batch::default();
        for (k, v) in log {
            b.insert(k, v);
        }
        self.log.apply_batch(b).map_err(sled_error("writing the log index", 0))?;
        let mut p = self.pending.write().expect("index overlay lock");
        p.log.clear();
        p.streams.clear();
        Ok(())
    }

    /// Whether the overlay holds entries not yet in sled.
    pub fn has_pending(&self) -> bool {
        let p = self.pending_read();
        !p.log.is_empty() || !p.streams.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_orders_by_key_and_the_overlay_wins_ties() {
        let s: Vec<sled::Result<(IVec, IVec)>> = vec![
            Ok((IVec::from(&b"a"[..]), IVec::from(&b"1"[..]))),
            Ok((IVec::from(&b"c"[..]), IVec::from(&b"old"[..]))),
        ];
        let o = vec![(b"b".to_vec(), b"2".to_vec()), (b"c".to_vec(), b"new".to_vec()), (b"d".to_vec(), b"4".to_vec())];
        let got: Vec<(Vec<u8>, Vec<u8>)> =
            merge(s.into_iter(), o).map(|r| r.unwrap()).map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        let want: Vec<(&[u8], &[u8])> = vec![(b"a", b"1"), (b"b", b"2"), (b"c", b"new"), (b"d", b"4")];
        assert_eq!(got, want.into_iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect::<Vec<_>>());
    }
}
