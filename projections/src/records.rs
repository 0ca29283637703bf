//! The record store the growing folds write through: named tables of small JSON records, with
//! point reads, writes, deletes and bounded ordered prefix scans. [`Records`] is the contract (the
//! daemon implements it over one SQLite table per projection, writing each folded batch with its
//! checkpoint seq in one transaction); [`MemRecords`] is the in-memory implementation a rebuild or a test
//! folds into. A [`RecordFold`] is a pure fold over it — the state lives in the records, never in
//! the fold.
//!
//! Keys: a table's name, a 0 byte, then the key's parts — a string as its length (u32 BE) and
//! bytes, a number as 8 bytes BE — so a key's leading parts are a prefix of every key that shares
//! them, and numbers sort numerically.

use od_events::{Envelope, Event};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;

/// Read access to records (keys are full keys, table included).
pub trait RecordsRead {
    /// The value at `key`.
    fn get_raw(&self, key: &[u8]) -> Option<Vec<u8>>;
    /// Up to `limit` entries whose key starts with `prefix`, in key order (reversed with
    /// `descending`), strictly past `after` (a full key) in that order when given.
    fn scan_raw(&self, prefix: &[u8], after: Option<&[u8]>, descending: bool, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)>;
}

/// Read and write access to records.
pub trait Records: RecordsRead {
    /// Sets `key` to `value`.
    fn put_raw(&mut self, key: Vec<u8>, value: Vec<u8>);
    /// Removes `key` (nothing when absent).
    fn delete_raw(&mut self, key: &[u8]);
}

/// A key under construction: `Key::new("run").s(id)`, `Key::new("runs_by_seq").n(seq)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key(pub Vec<u8>);

impl Key {
    /// The key prefix of table `table`.
    pub fn new(table: &str) -> Self {
        let mut k = Vec::with_capacity(table.len() + 24);
        k.extend_from_slice(table.as_bytes());
        k.push(0);
        Self(k)
    }

    /// Appends a string part.
    pub fn s(mut self, part: &str) -> Self {
        self.0.extend_from_slice(&(part.len() as u32).to_be_bytes());
        self.0.extend_from_slice(part.as_bytes());
        self
    }

    /// Appends a string part as its bare bytes (no length): only as a key's last part, so a scan
    /// of `Key::new(t).raw(p)` finds every key whose last part starts with `p` (id prefixes).
    pub fn raw(mut self, part: &str) -> Self {
        self.0.extend_from_slice(part.as_bytes());
        self
    }

    /// Appends a number part.
    pub fn n(mut self, part: u64) -> Self {
        self.0.extend_from_slice(&part.to_be_bytes());
        self
    }

    /// Appends a signed number part (order preserving).
    pub fn i(self, part: i64) -> Self {
        self.n((part as u64) ^ (1 << 63))
    }

    /// The bytes after `prefix` (a cursor's key within one index).
    pub fn suffix<'a>(full: &'a [u8], prefix: &Key) -> &'a [u8] {
        full.get(prefix.0.len()..).unwrap_or_default()
    }
}

/// Typed helpers over any record store.
pub trait RecordsExt: RecordsRead {
    /// The record at `key`, decoded (None when absent or not of this type).
    fn get<T: DeserializeOwned>(&self, key: &Key) -> Option<T> {
        self.get_raw(&key.0).and_then(|v| serde_json::from_slice(&v).ok())
    }
    /// Whether `key` is present.
    fn has(&self, key: &Key) -> bool {
        self.get_raw(&key.0).is_some()
    }
    /// Index entries whose values are strings (ids): `(full key, id)`.
    fn ids(&self, prefix: &Key, after: Option<&[u8]>, descending: bool, limit: usize) -> Vec<(Vec<u8>, String)> {
        self.scan_raw(&prefix.0, after, descending, limit)
            .into_iter()
            .filter_map(|(k, v)| Some((k, serde_json::from_slice(&v).ok()?)))
            .collect()
    }
}

impl<R: RecordsRead + ?Sized> RecordsExt for R {}

/// Typed writes over any record store.
pub trait RecordsWrite: Records {
    /// Writes `value` at `key`.
    fn put<T: Serialize>(&mut self, key: &Key, value: &T) {
        self.put_raw(key.0.clone(), serde_json::to_vec(value).expect("records serialise"));
    }
    /// Removes `key`.
    fn delete(&mut self, key: &Key) {
        self.delete_raw(&key.0);
    }
}

impl<R: Records + ?Sized> RecordsWrite for R {}

/// A pure fold from the log into records.
pub trait RecordFold: Send + Sync + 'static {
    /// Stable name: the projection's table (`rec_<NAME>`) and checkpoint; `[a-z0-9_]+`.
    const NAME: &'static str;
    /// Version of the fold; a change clears the records and rebuilds them from the log.
    const VERSION: u32;
    /// Folds one event in.
    fn apply(rec: &mut dyn Records, env: &Envelope, event: &Event);
}

/// Records in memory (a rebuild, a test).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemRecords {
    pub map: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// The first key past every key that starts with `prefix` (None when there is none).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The `(prefix, after, descending)` window of a scan, as range bounds.
pub fn scan_bounds(
    prefix: &[u8],
    after: Option<&[u8]>,
    descending: bool,
) -> (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>) {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    let after = after.filter(|a| a.starts_with(prefix));
    let start = match (after, descending) {
        (Some(a), false) => Excluded(a.to_vec()),
        _ => Included(prefix.to_vec()),
    };
    let end = match (after, descending) {
        (Some(a), true) => Excluded(a.to_vec()),
        _ => prefix_end(prefix).map_or(Unbounded, Excluded),
    };
    (start, end)
}

impl RecordsRead for MemRecords {
    fn get_raw(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.map.get(key).cloned()
    }
    fn scan_raw(&self, prefix: &[u8], after: Option<&[u8]>, descending: bool, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let range = self.map.range(scan_bounds(prefix, after, descending));
        let pair = |(k, v): (&Vec<u8>, &Vec<u8>)| (k.clone(), v.clone());
        match descending {
            true => range.rev().take(limit).map(pair).collect(),
            false => range.take(limit).map(pair).collect(),
        }
    }
}

impl Records for MemRecords {
    fn put_raw(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.map.insert(key, value);
    }
    fn delete_raw(&mut self, key: &[u8]) {
        self.map.remove(key);
    }
}

impl MemRecords {
    /// Folds `events` in with `F`.
    pub fn fold<F: RecordFold>(&mut self, env: &Envelope, event: &Event) {
        F::apply(self, env, event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_respect_prefix_cursor_and_direction() {
        let mut m = MemRecords::default();
        for n in 0..5u64 {
            m.put(&Key::new("a").s("x").n(n), &n);
            m.put(&Key::new("a").s("y").n(n), &(n + 10));
        }
        m.put(&Key::new("b").n(1), &99u64);
        let p = Key::new("a").s("x");
        let asc: Vec<u64> =
            m.scan_raw(&p.0, None, false, 10).iter().map(|(_, v)| serde_json::from_slice(v).unwrap()).collect();
        assert_eq!(asc, vec![0, 1, 2, 3, 4]);
        let after = Key::new("a").s("x").n(2).0;
        let desc: Vec<u64> =
            m.scan_raw(&p.0, Some(&after), true, 10).iter().map(|(_, v)| serde_json::from_slice(v).unwrap()).collect();
        assert_eq!(desc, vec![1, 0]);
        let asc: Vec<u64> =
            m.scan_raw(&p.0, Some(&after), false, 1).iter().map(|(_, v)| serde_json::from_slice(v).unwrap()).collect();
        assert_eq!(asc, vec![3]);
        assert!(Key::new("t").i(-1).0 < Key::new("t").i(0).0);
    }
}
