//! Injected randomness for identifiers: runs, projects, conversations, snapshots and artifacts get
//! ids from an [`IdGen`], so tests can make them deterministic. Secrets ([`mint_token`]: API and
//! tool-token keys, session secrets) come from the OS, never from the injected ids.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A source of fresh unique ids.
pub trait IdGen: Send + Sync + 'static {
    /// A new id (ASCII, no `:` or `/`).
    fn new_id(&self) -> String;
}

/// A fresh random token (256 bits, hex). Secrets come from the OS, never from the injected ids.
pub fn mint_token() -> String {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).expect("the OS random source is available");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Random UUIDv4 ids.
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomIds;

impl IdGen for RandomIds {
    /// A random (version 4, RFC 9562) UUID in its hyphenated lowercase form.
    fn new_id(&self) -> String {
        let mut b = [0u8; 16];
        getrandom::fill(&mut b).expect("the OS random source is available");
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_are_v4_uuids_and_differ() {
        let a = RandomIds.new_id();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"));
        assert_ne!(a, RandomIds.new_id());
    }
}
