//! What the executor records about its run, and when it reaches the log. The run's opening (its
//! first `pipeline_stage_started`) goes to the writer at once, so a watcher sees the run start
//! without waiting for the rest. After that, events are buffered while the executor computes and go
//! to the writer as one append when it is about to wait on anything outside itself (an agent's next
//! output, a worker's subprocess, an answer, a callback), before it lets anything else write to the
//! run, when the buffer reaches its cap ([`RUN_BUFFER_EVENTS`], [`RUN_BUFFER_BYTES`]), and at the
//! run's end — together with `end`, in the same append. A dry-run run that waits on nothing is thus
//! two appends. Sent appends are group-committed by the writer
//! without the executor waiting; [`Recorder::flush`] waits for their acks before the executor reads
//! what it recorded or lets an agent call back. Nobody sees an event before it is durable: the
//! store publishes only committed frames.
//!
//! The blobs the buffered events name are staged in the recorder's [`BlobBatch`] (not yet
//! durable): every append the recorder sends commits that batch first — its temp files fsynced
//! together, renamed, their folders fsynced together — so no event reaches the writer before the
//! blobs it names are durable, and a run's artifacts cost one round of fsyncs per append rather
//! than three fsyncs each. At the run's end the batch is committed with the run's project copies
//! (`pipeline::Ctx::sync_copies`): one round for both.
//!
//! Every append carries the executor's lease [`Fence`]: the log writes it only while that lease
//! holds. The first refusal (`lease-lost`) — or word from the heartbeat that the lease moved —
//! marks the run lost: its agent is stopped through the run's cancel switch, and nothing more is
//! sent (every later call fails with the same error).

use od_events::{Event, StreamId};
use serde_json::Value;
use std::sync::{Arc, Mutex};

use super::RunGuard;
use crate::blobs::BlobBatch;
use crate::durable::Syncs;
use crate::limits::{RUN_BUFFER_BYTES, RUN_BUFFER_EVENTS};
use crate::store::{AckReceiver, Append, Fence, Store, StoreError};

/// Room counted per buffered event besides its payload (a frame's header, stream and hash).
const FRAME_OVERHEAD: usize = 256;

#[derive(Default)]
struct Buffer {
    events: Vec<Event>,
    bytes: usize,
    /// Whether the run's opening was sent.
    opened: bool,
}

/// The run's recording state: the buffer, the acks of appends sent but not waited for, and the
/// signals recorded since the last flush (the log may not show them yet).
pub(super) struct Recorder {
    store: Store,
    stream: StreamId,
    fence: Option<Fence>,
    guard: Arc<RunGuard>,
    buf: Mutex<Buffer>,
    pending: Mutex<Vec<AckReceiver>>,
    unflushed_signals: Mutex<Vec<(String, Value)>>,
    /// Blobs named by events not yet sent (committed before any append is sent).
    blobs: Mutex<BlobBatch>,
}

impl Recorder {
    pub(super) fn new(store: Store, stream: StreamId, fence: Option<Fence>, guard: Arc<RunGuard>) -> Self {
        Self {
            store,
            stream,
            fence,
            guard,
            buf: Mutex::default(),
            pending: Mutex::default(),
            unflushed_signals: Mutex::default(),
            blobs: Mutex::default(),
        }
    }

    /// The fence this executor's appends carry.
    pub(super) fn fence(&self) -> Option<Fence> {
        self.fence.clone()
    }

    /// Whether the run's lease was lost (nothing more is recorded).
    pub(super) fn lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// Refuses once the lease is lost.
    fn check(&self) -> Result<(), StoreError> {
        match self.guard.is_lost() {
            true => Err(self.lost_error()),
            false => Ok(()),
        }
    }

    fn lost_error(&self) -> StoreError {
        let (run_id, epoch) = self.fence.as_ref().map_or((String::new(), 0), |f| (f.run_id.clone(), f.epoch));
        StoreError::LeaseLost { run_id, epoch }
    }

    /// Notes a refusal: a lost lease stops the executor (its agent through the cancel switch).
    pub(super) fn noted<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(StoreError::LeaseLost { run_id, epoch }) = &r {
            if !self.guard.is_lost() {
                tracing::error!(
                    "run {run_id}: lease lost — the log refused this executor's append (epoch {epoch}): another daemon holds the run; stopping its agent, recording nothing more"
                );
            }
            self.guard.lose();
        }
        r
    }

    /// Adds `events` to the buffer (sending what was buffered first when they would pass its cap).
    pub(super) fn queue(&self, events: Vec<Event>) -> Result<(), StoreError> {
        self.check()?;
        for e in events {
            let bytes = e.encode_payload().len() + FRAME_OVERHEAD;
            let full = {
                let b = self.buf.lock().expect("buffer lock");
                !b.events.is_empty() && (b.events.len() >= RUN_BUFFER_EVENTS || b.bytes + bytes > RUN_BUFFER_BYTES)
            };
            if full {
                self.send()?;
            }
            let mut b = self.buf.lock().expect("buffer lock");
            b.events.push(e);
            b.bytes += bytes;
        }
        let opening = !std::mem::replace(&mut self.buf.lock().expect("buffer lock").opened, true);
        if opening {
            self.send()?;
        }
        Ok(())
    }

    /// Notes a signal the executor queued (see [`Recorder::unflushed_signals`]).
    pub(super) fn note_signal(&self, name: String, value: Value) {
        self.unflushed_signals.lock().expect("signals lock").push((name, value));
    }

    /// Signals queued since the last flush, oldest first.
    pub(super) fn unflushed_signals(&self) -> Vec<(String, Value)> {
        self.unflushed_signals.lock().expect("signals lock").clone()
    }

    /// The events waiting in the buffer, oldest first (once [`Recorder::wait_sent`] returned, the
    /// run's events are the log's and these).
    pub(super) fn buffered(&self) -> Vec<Event> {
        self.buf.lock().expect("buffer lock").events.clone()
    }

    /// Whether events wait in the buffer.
    pub(super) fn has_buffered(&self) -> bool {
        !self.buf.lock().expect("buffer lock").events.is_empty()
    }

    fn take(&self) -> Vec<Event> {
        let mut b = self.buf.lock().expect("buffer lock");
        b.bytes = 0;
        std::mem::take(&mut b.events)
    }

    /// The batch the blobs of events about to be queued are staged into.
    pub(super) fn blob_batch(&self) -> std::sync::MutexGuard<'_, BlobBatch> {
        self.blobs.lock().expect("blob batch lock")
    }

    /// Makes the staged blobs durable, with what `also` owes (one round of fsyncs for both).
    pub(super) fn commit_blobs(&self, also: Syncs) -> Result<(), StoreError> {
        let batch = std::mem::take(&mut *self.blob_batch());
        batch
            .commit(also)
            .map_err(|e| StoreError::Io { during: "making a run's blobs durable", message: e.to_string() })
    }

    /// Sends the buffer to the writer as one append, without waiting for its commit.
    pub(super) fn send(&self) -> Result<(), StoreError> {
        let events = self.take();
        // Lost: what was buffered is dropped, never sent.
        self.check()?;
        if events.is_empty() {
            return Ok(());
        }
        // The blobs these events name are durable before the writer sees them.
        self.commit_blobs(Syncs::new())?;
        let rx = self.noted(self.store.submit(self.append(events)))?;
        self.pending.lock().expect("pending lock").push(rx);
        Ok(())
    }

    /// Waits for the acks of what was sent (the buffer stays); reports the first failure.
    pub(super) async fn wait_sent(&self) -> Result<(), StoreError> {
        let queued = std::mem::take(&mut *self.pending.lock().expect("pending lock"));
        let mut first = Ok(());
        for rx in queued {
            let r = self.noted(rx.await.map_err(|_| StoreError::Closed).and_then(|r| r.map(|_| ())));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// Sends the buffer and waits until everything recorded so far is durable.
    pub(super) async fn flush(&self) -> Result<(), StoreError> {
        let sent = self.send();
        let waited = self.wait_sent().await;
        self.unflushed_signals.lock().expect("signals lock").clear();
        sent.and(waited)
    }

    /// Appends the buffer with `last` (the run's `end`) as one append and waits for it; on failure
    /// nothing of it was written.
    pub(super) async fn finish(&self, last: Event) -> Result<(), StoreError> {
        self.check()?;
        self.commit_blobs(Syncs::new())?;
        let mut events = self.take();
        events.push(last);
        self.noted(self.store.append_async(self.append(events)).await)?;
        Ok(())
    }

    /// Appends `events` alone (fenced), waiting for them: what the executor records when its
    /// buffer cannot carry them (the run's end after a refused append).
    pub(super) async fn record_alone(&self, events: Vec<Event>) -> Result<(), StoreError> {
        self.check()?;
        self.commit_blobs(Syncs::new())?;
        self.noted(self.store.append_async(self.append(events)).await)?;
        Ok(())
    }

    fn append(&self, events: Vec<Event>) -> Append {
        Append::new(self.stream.clone(), events).fenced(self.fence.clone())
    }
}
