//! Tails the streaming routes read: one stream (a run) from a version, and a project (its stream
//! plus its runs' streams) from a global seq. Both deliver the backlog then live frames with no gap
//! and no duplicate, and never hold the writer up.
//!
//! [`StreamTail`] joins the live broadcast *before* it reads the backlog from the stream's own index,
//! then keeps only frames of its stream at exactly the next version it expects. When it falls behind
//! the bounded live buffer (a stalled client stops polling it), the broadcast reports the lag and the
//! tail re-reads its stream from the index in bounded chunks — it never scans the global log, so a
//! thousand stalled run watchers cost a thousand small index reads, not a thousand log scans.

use std::collections::{HashSet, VecDeque};
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

use crate::limits::SUBSCRIBER_READ_CHUNK;
use crate::store::{decode_frame, Published, RawFrame, Store, StoreError, Subscription};
use od_events::{Event, FrameRef};

/// A tail of one stream from a version.
pub struct StreamTail {
    store: Store,
    stream: String,
    live: broadcast::Receiver<Published>,
    /// The next version this tail delivers.
    next: u64,
    /// Frames of the stream, contiguous from `next`.
    queue: VecDeque<RawFrame>,
    /// False while the index may hold frames the queue lacks (at the start, after a lag or a gap).
    caught_up: bool,
    /// Times this tail fell behind the live buffer and went back to the index.
    pub fallbacks: u64,
}

/// A run's tail (`run:<id>`).
pub type RunTail = StreamTail;

impl StreamTail {
    /// Delivers the frames of `stream` with version ≥ `from`.
    pub fn new(store: &Store, stream: String, from: u64) -> Self {
        let live = store.live();
        Self { store: store.clone(), stream, live, next: from, queue: VecDeque::new(), caught_up: false, fallbacks: 0 }
    }

    /// The next version to be delivered.
    pub fn position(&self) -> u64 {
        self.next
    }

    fn expected(&self) -> u64 {
        self.next + self.queue.len() as u64
    }

    /// Reads the next chunk of the stream from the index.
    fn refill(&mut self) -> Result<(), StoreError> {
        let frames = self.store.read_stream(&self.stream, self.expected(), SUBSCRIBER_READ_CHUNK)?;
        self.caught_up = frames.len() < SUBSCRIBER_READ_CHUNK;
        for f in frames {
            if f.view().version() == self.expected() {
                self.queue.push_back(f);
            }
        }
        Ok(())
    }

    /// Takes a published batch: keeps the frames of this stream that come next; a gap sends the
    /// tail back to the index.
    fn take(&mut self, batch: &Published) {
        if batch.is_empty() {
            // A batch too big to publish inline (limits::PUBLISH_INLINE_BYTES) arrives as an empty
            // wake-up: whatever it held of this stream is read from the index.
            self.caught_up = false;
            return;
        }
        for b in batch.iter() {
            let Ok(v) = FrameRef::parse(b) else { continue };
            if v.stream().ok() != Some(self.stream.as_str()) {
                continue;
            }
            let (version, expected) = (v.version(), self.expected());
            if version == expected && self.caught_up {
                self.queue.push_back(RawFrame(b.clone()));
            } else if version > expected {
                self.caught_up = false;
            }
        }
    }

    fn pop(&mut self) -> Option<RawFrame> {
        let f = self.queue.pop_front()?;
        self.next += 1;
        Some(f)
    }

    /// The next frame if one is available now.
    pub fn try_next(&mut self) -> Option<Result<RawFrame, StoreError>> {
        loop {
            if let Some(f) = self.pop() {
                return Some(Ok(f));
            }
            if !self.caught_up {
                if let Err(e) = self.refill() {
                    return Some(Err(e));
                }
                if !self.queue.is_empty() {
                    continue;
                }
            }
            match self.live.try_recv() {
                Ok(batch) => self.take(&batch),
                Err(TryRecvError::Lagged(_)) => self.lagged(),
                Err(TryRecvError::Empty | TryRecvError::Closed) => return None,
            }
        }
    }

    fn lagged(&mut self) {
        self.fallbacks += 1;
        self.caught_up = false;
    }

    /// The next frame, waiting for it. None when the log is closed.
    pub async fn next(&mut self) -> Option<Result<RawFrame, StoreError>> {
        loop {
            if let Some(r) = self.try_next() {
                return Some(r);
            }
            match self.live.recv().await {
                Ok(batch) => self.take(&batch),
                Err(RecvError::Lagged(_)) => self.lagged(),
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

/// A tail of a project: `project:<id>` and every run of the project, in global order, after a seq.
pub struct ProjectTail {
    backlog: VecDeque<RawFrame>,
    live: Subscription,
    project_stream: String,
    project_id: String,
    runs: HashSet<String>,
}

impl ProjectTail {
    /// Frames with seq > `after` of the project's stream and of `runs` (the project's runs now; runs
    /// created later are recognised by their first event).
    pub fn open(store: &Store, project_id: &str, runs: Vec<String>, after: u64) -> Result<Self, StoreError> {
        let at = store.last_seq();
        let live = store.subscribe(at);
        let project_stream = format!("project:{project_id}");
        let mut streams = vec![project_stream.clone()];
        streams.extend(runs.iter().map(|r| format!("run:{r}")));
        let mut backlog = Vec::new();
        for s in &streams {
            let mut from = 0;
            loop {
                let frames = store.read_stream(s, from, SUBSCRIBER_READ_CHUNK)?;
                let Some(last) = frames.last() else { break };
                from = last.view().version() + 1;
                let n = frames.len();
                backlog.extend(frames.into_iter().filter(|f| (after.saturating_add(1)..=at).contains(&f.seq())));
                if n < SUBSCRIBER_READ_CHUNK {
                    break;
                }
            }
        }
        backlog.sort_by_key(RawFrame::seq);
        Ok(Self {
            backlog: backlog.into(),
            live,
            project_stream,
            project_id: project_id.into(),
            runs: runs.into_iter().collect(),
        })
    }

    /// Whether a live frame belongs to the project (learning about new runs as they are created).
    fn member(&mut self, f: &RawFrame) -> bool {
        let v = f.view();
        let Ok(stream) = v.stream() else { return false };
        if stream == self.project_stream {
            return true;
        }
        let Some(run) = stream.strip_prefix("run:") else { return false };
        if self.runs.contains(run) {
            return true;
        }
        if v.version() == 0 {
            if let Ok(s) = decode_frame(v) {
                if matches!(&s.event, Event::RunCreated(e) if e.project_id == self.project_id) {
                    self.runs.insert(run.to_string());
                    return true;
                }
            }
        }
        false
    }

    /// The next frame if one is available now.
    pub fn try_next(&mut self) -> Option<Result<RawFrame, StoreError>> {
        if let Some(f) = self.backlog.pop_front() {
            return Some(Ok(f));
        }
        loop {
            match self.live.try_next()? {
                Ok(f) if self.member(&f) => return Some(Ok(f)),
                Ok(_) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// The next frame, waiting for it. None when the log is closed.
    pub async fn next(&mut self) -> Option<Result<RawFrame, StoreError>> {
        if let Some(f) = self.backlog.pop_front() {
            return Some(Ok(f));
        }
        loop {
            match self.live.next().await? {
                Ok(f) if self.member(&f) => return Some(Ok(f)),
                Ok(_) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}
