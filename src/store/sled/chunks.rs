//! Stream-index chunks: one sled value lists up to [`STREAM_CHUNK_RUNS`] packs of a stream.
//!
//! A fully interleaved log (every event its own append) has one pack per event, so one index entry
//! per pack would make replaying a stream one sled lookup per event. A chunk holds the
//! `(first seq, Loc)` runs of consecutive packs of one stream, keyed `stream \0 first version`; the
//! writer keeps each stream's last chunk in a bounded cache and rewrites it as packs are added or
//! extended.

use std::collections::{BTreeMap, HashMap};

use super::pack::{Loc, LogRun, OpenPack};
use super::tables::{stream_key, stream_prefix, Tables};
use crate::limits::{HEAD_CACHE_ENTRIES, STREAM_CHUNK_RUNS};
use crate::store::StoreError;

/// One chunk: the first version it covers and its runs in version order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub first_version: u64,
    pub runs: Vec<(u64, Loc)>,
}

impl Chunk {
    /// Encodes the runs (24 bytes each: first seq BE, then the Loc).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.runs.len() * 24);
        for (seq, loc) in &self.runs {
            b.extend_from_slice(&seq.to_be_bytes());
            b.extend_from_slice(&loc.encode());
        }
        b
    }

    /// Decodes a chunk stored under a key whose version is `first_version`.
    pub fn decode(first_version: u64, v: &[u8]) -> Option<Self> {
        if v.is_empty() || !v.len().is_multiple_of(24) {
            return None;
        }
        let runs = v
            .chunks(24)
            .map(|c| Some((u64::from_be_bytes(c[..8].try_into().ok()?), Loc::decode(&c[8..])?)))
            .collect::<Option<Vec<_>>>()?;
        Some(Self { first_version, runs })
    }

    /// The version after the chunk's last frame.
    pub fn end_version(&self) -> u64 {
        self.first_version + self.runs.iter().map(|(_, l)| l.count as u64).sum::<u64>()
    }
}

/// The version in a stream-index key.
pub fn key_version(k: &[u8]) -> u64 {
    u64::from_be_bytes(k[k.len() - 8..].try_into().expect("8-byte version"))
}

/// The writer's indexing state: the log index's open run, the open pack (of one stream), and
/// streams' last chunks.
#[derive(Default)]
pub struct IndexState {
    pub log_run: Option<LogRun>,
    pub open: Option<OpenPack>,
    chunks: HashMap<String, Chunk>,
}

impl IndexState {
    /// State after the log index's last run (the next frame starts a new pack; chunks load
    /// lazily).
    pub fn new(log_run: Option<LogRun>) -> Self {
        Self { log_run, open: None, chunks: HashMap::new() }
    }

    /// The chunk that holds (or would end with) `version` of `stream`.
    fn chunk_for(&mut self, t: &Tables, stream: &str, version: u64) -> Result<Chunk, StoreError> {
        if let Some(c) = self.chunks.get(stream).filter(|c| c.first_version <= version) {
            return Ok(c.clone());
        }
        let found = t.streams_floor(&stream_prefix(stream), &stream_key(stream, version))?;
        let chunk = match found {
            Some((k, v)) => Chunk::decode(key_version(&k), &v).ok_or_else(|| StoreError::Corrupt {
                seq: 0,
                reason: format!("the stream index chunk of {stream} is malformed"),
            })?,
            None => Chunk { first_version: version, runs: vec![] },
        };
        Ok(chunk)
    }

    /// Records pack `p` (new or extended) in its stream's chunks; returns the chunks to write,
    /// keyed by their sled key (so they are written in key order).
    pub fn note_packs(&mut self, t: &Tables, packs: &[&OpenPack]) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, StoreError> {
        let mut dirty = BTreeMap::new();
        for p in packs {
            let first_version = p.version + 1 - p.loc.count as u64;
            let mut c = self.chunk_for(t, &p.stream, first_version)?;
            if let Some(run) = c.runs.iter_mut().find(|(s, _)| *s == p.first_seq) {
                run.1 = p.loc;
            } else if c.runs.is_empty() || (c.runs.len() < STREAM_CHUNK_RUNS && c.end_version() == first_version) {
                if c.runs.is_empty() {
                    c.first_version = first_version;
                }
                c.runs.push((p.first_seq, p.loc));
            } else {
                c = Chunk { first_version, runs: vec![(p.first_seq, p.loc)] };
            }
            dirty.insert(stream_key(&p.stream, c.first_version), c.encode());
            let is_last = self.chunks.get(&p.stream).is_none_or(|l| l.first_version <= c.first_version);
            if is_last {
                if self.chunks.len() >= HEAD_CACHE_ENTRIES && !self.chunks.contains_key(&p.stream) {
                    self.chunks.clear();
                }
                self.chunks.insert(p.stream.clone(), c);
            }
        }
        Ok(dirty)
    }
}
