//! The PostgreSQL backend's publisher: the one task that hands committed frames to live
//! subscribers, exactly once and in seq order, whichever daemon wrote them. It wakes on this
//! daemon's commits, on `od_log` notifications (another daemon's commits; LISTEN/NOTIFY is only
//! a wake-up, skipped when it names a seq already published) and on a poll timer (the safety net when a notification is lost), then reads every
//! frame after the last one it published, by seq. Commit order equals seq order (appends lock the
//! head row), so what it reads is a gap-free prefix.

use futures_util::StreamExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, Notify};
use tokio_postgres::types::Type;

use crate::store::Published;

/// Frames read (and published) per query.
const PAGE: i64 = 1024;

pub(super) struct Tailer {
    pub target: super::conn::Target,
    pub reader: Arc<super::conn::Shared>,
    /// The LISTEN connection and its notifications (None while it is gone: the poll remains, and
    /// each poll tries to listen again).
    pub listener: Option<super::conn::Listener>,
    /// The last seq published (this task's cursor).
    pub published: u64,
    pub committed: Arc<Notify>,
    pub publish: broadcast::Sender<Published>,
    /// The highest durable seq this daemon knows (its own commits raise it too).
    pub tail: Arc<AtomicU64>,
    pub poll: Duration,
}

async fn recv_or_pending(listener: &mut Option<super::conn::Listener>) -> Option<u64> {
    match listener {
        Some((_, w)) => w.recv().await,
        None => std::future::pending().await,
    }
}

impl Tailer {
    pub async fn run(mut self) {
        let mut read = true;
        loop {
            if read {
                self.catch_up().await;
            }
            read = tokio::select! {
                _ = self.committed.notified() => true,
                w = recv_or_pending(&mut self.listener) => match w {
                    // A commit already published (this daemon's own, mostly): nothing to read.
                    Some(seq) => seq > self.published,
                    None => {
                        self.listener = None;
                        true
                    }
                },
                _ = tokio::time::sleep(self.poll) => {
                    if self.listener.is_none() {
                        self.listener = super::conn::listen(&self.target).await.ok();
                    }
                    true
                }
            };
        }
    }

    /// Publishes every committed frame after the tail, in pages.
    async fn catch_up(&mut self) {
        loop {
            let from = self.published;
            let reader = match self.reader.get().await {
                Ok(r) => r,
                Err(_) => return, // the database is away: the poll comes back
            };
            let rows = match reader
                // One round trip (parse, bind and execute sent together), not a prepare and a query.
                .query_typed(
                    "SELECT seq, frame FROM od_frames WHERE seq > $1 ORDER BY seq LIMIT $2",
                    &[(&(from as i64), Type::INT8), (&PAGE, Type::INT8)],
                )
                .await
            {
                Ok(rows) => rows,
                Err(_) => return, // the poll retries; readers see the error on their own queries
            };
            let mut frames = Vec::with_capacity(rows.len());
            let mut last = from;
            for r in &rows {
                let seq = r.get::<_, i64>(0) as u64;
                if seq != last + 1 {
                    break; // cannot happen while commits hold the head lock; never skip a seq
                }
                last = seq;
                frames.push(bytes::Bytes::from(r.get::<_, Vec<u8>>(1)));
            }
            if frames.is_empty() {
                return;
            }
            let n = frames.len() as i64;
            self.published = last;
            self.tail.fetch_max(last, Ordering::AcqRel);
            let _ = self.publish.send(Arc::new(frames));
            if n < PAGE {
                return;
            }
        }
    }
}

/// Drives a LISTEN connection: every notification on it becomes a wake-up carrying its commit's
/// last seq (the payload `sql::write` sends).
pub(super) async fn listen(mut connection: super::conn::Connection, wake: mpsc::UnboundedSender<u64>) {
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    while let Some(m) = messages.next().await {
        match m {
            Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                let _ = wake.send(n.payload().parse().unwrap_or(u64::MAX));
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
}
