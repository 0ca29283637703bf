//! The embedded log's side of an import (`od log copy`, checks shared with PostgreSQL in
//! `store/import.rs`): the writer thread commits the frames as one batch of their own, after
//! whatever was queued before them — checked against the log's head, written and fdatasynced (the
//! commit point), indexed, then published, like appends.

use bytes::Bytes;
use std::sync::atomic::Ordering;

use super::segments::{push_record, RECORD_HEADER};
use super::writer::Writer;
use crate::limits::HEAD_CACHE_ENTRIES;
use crate::store::import::stage;
use crate::store::StoreError;

impl Writer {
    /// Commits an import (already prechecked, `store/import.rs`) as one batch of its own, after whatever was
    /// queued before it: checked against the log's head, written and fdatasynced (the commit
    /// point), indexed, then published. Returns the new last seq; a refused or failed import
    /// writes nothing.
    pub(crate) fn import(&mut self, frames: Vec<Bytes>) -> Result<u64, StoreError> {
        if let Some(why) = &self.poisoned {
            return Err(StoreError::Poisoned(why.clone()));
        }
        if self.heads.len() >= HEAD_CACHE_ENTRIES {
            self.heads.clear();
        }
        let (heads, tables) = (&mut self.heads, &self.tables);
        let staged = stage(
            &frames,
            self.next_seq,
            &self.prev_hash,
            &mut |s| match heads.get(s) {
                Some(h) => Ok(*h),
                None => {
                    let h = tables.stream_head(s)?;
                    heads.insert(s.to_string(), h);
                    Ok(h)
                }
            },
            &mut |op| tables.op_result(op),
        )?;
        let start = (self.next_seq, self.prev_hash);
        let mut records = Vec::with_capacity(frames.iter().map(|f| f.len() + RECORD_HEADER).sum());
        for f in &frames {
            push_record(&mut records, start.0, staged.last_seq, f);
        }
        (self.next_seq, self.prev_hash) = (staged.last_seq + 1, staged.last_hash);
        self.commit_frames(start, &records, &frames, &staged.ops)?;
        for (s, v) in staged.moved {
            // Copied frames may end runs: their streams' end is read again when next appended to.
            self.ended.remove(&s);
            self.heads.insert(s, Some(v));
        }
        debug_assert_eq!(self.tail.load(Ordering::Acquire), staged.last_seq);
        self.after_commit(frames);
        Ok(staged.last_seq)
    }
}
