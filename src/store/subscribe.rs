//! Subscriptions: backlog then live, with no gap and no duplicate, never blocking the writer.
//!
//! A subscription joins the live broadcast *first*, then reads the backlog from the log, and drops
//! any live frame at or below the last seq it delivered. The broadcast is bounded
//! ([`crate::limits::SUBSCRIBER_BUFFER`] batches): a subscriber that falls further behind is told it
//! lagged and simply goes back to reading the log from where it was, in bounded chunks. The writer
//! only ever does a non-blocking send.

use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

use super::{EventLog, Published, RawFrame, StoreError};
use crate::limits::SUBSCRIBER_READ_CHUNK;

/// A tail of the log from a chosen seq.
pub struct Subscription {
    log: Arc<dyn EventLog>,
    live: broadcast::Receiver<Published>,
    /// The next seq this subscription will deliver.
    next: u64,
    queue: VecDeque<RawFrame>,
    /// Times this subscriber lagged behind the live buffer and fell back to the log.
    pub fallbacks: u64,
}

impl Subscription {
    /// Delivers frames with seq > `after` (`after = u64::MAX`: none, ever — it never wraps to 0).
    pub fn new(log: Arc<dyn EventLog>, after: u64) -> Self {
        let live = log.live();
        Self { log, live, next: after.saturating_add(1), queue: VecDeque::new(), fallbacks: 0 }
    }

    /// The seq of the last frame delivered (or the starting point).
    pub fn position(&self) -> u64 {
        self.next - 1
    }

    /// Fills the queue from the log when the log is ahead of us. True only when the queue now
    /// starts at `next` (so the caller's loop makes progress; it never spins on frames it drops).
    fn catch_up(&mut self) -> Result<bool, StoreError> {
        if self.log.last_seq() < self.next {
            return Ok(false);
        }
        let frames = self.log.read_from(self.next, SUBSCRIBER_READ_CHUNK)?;
        let any = frames.first().is_some_and(|f| f.seq() == self.next);
        self.queue.extend(frames);
        Ok(any)
    }

    fn pop(&mut self) -> Option<RawFrame> {
        while let Some(f) = self.queue.pop_front() {
            let seq = f.seq();
            if seq == self.next {
                self.next += 1;
                return Some(f);
            }
        }
        None
    }

    /// Takes a published batch: keeps what is new; a gap means we must read the log instead.
    fn take_live(&mut self, batch: &Published) -> Result<(), StoreError> {
        for b in batch.iter() {
            let f = RawFrame(b.clone());
            let seq = f.seq();
            if seq < self.next {
                continue;
            }
            if seq > self.next + self.queue.len() as u64 {
                self.queue.clear();
                self.catch_up()?;
                return Ok(());
            }
            if seq == self.next + self.queue.len() as u64 {
                self.queue.push_back(f);
            }
        }
        Ok(())
    }

    /// The next frame, waiting for one if needed. `None` when the log is closed.
    pub async fn next(&mut self) -> Option<Result<RawFrame, StoreError>> {
        loop {
            if let Some(r) = self.try_next() {
                return Some(r);
            }
            match self.live.recv().await {
                Ok(batch) => {
                    if let Err(e) = self.take_live(&batch) {
                        return Some(Err(e));
                    }
                }
                Err(RecvError::Lagged(_)) => self.fallbacks += 1,
                Err(RecvError::Closed) => return None,
            }
        }
    }

    /// The next frame if one is available now, without waiting.
    pub fn try_next(&mut self) -> Option<Result<RawFrame, StoreError>> {
        loop {
            if let Some(f) = self.pop() {
                return Some(Ok(f));
            }
            match self.live.try_recv() {
                Ok(batch) => {
                    if let Err(e) = self.take_live(&batch) {
                        return Some(Err(e));
                    }
                }
                Err(TryRecvError::Lagged(_)) => self.fallbacks += 1,
                Err(TryRecvError::Empty | TryRecvError::Closed) => match self.catch_up() {
                    Ok(true) => continue,
                    Ok(false) => return None,
                    Err(e) => return Some(Err(e)),
                },
            }
        }
    }
}
