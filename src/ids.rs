//! Injected randomness for identifiers: runs, projects, conversations, snapshots and artifacts get
//! ids from an [`IdGen`], so tests can make them deterministic.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A source of fresh unique ids.
pub trait IdGen: Send + Sync + 'static {
    /// A new id (ASCII, no `:` or `/`).
    fn new_id(&self) -> String;
}

/// Random UUIDv4 ids.
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomIds;

impl IdGen for RandomIds {
    fn new_id(&self) -> String {
        uuid::Uuid::new_v4().to_string()
    }
}

/// Sequential ids `<prefix>-000001`, … for tests.
#[derive(Debug, Default)]
pub struct SeqIds {
    prefix: String,
    next: AtomicU64,
}

impl SeqIds {
    pub fn new(prefix: &str) -> Self {
        Self { prefix: prefix.to_string(), next: AtomicU64::new(1) }
    }
}

impl IdGen for SeqIds {
    fn new_id(&self) -> String {
        format!("{}-{:06}", self.prefix, self.next.fetch_add(1, Ordering::Relaxed))
    }
}

/// Shared handle to an id source.
pub type SharedIds = Arc<dyn IdGen>;
