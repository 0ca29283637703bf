//! sled's side of the log: the index over the segment files, op ids, checkpoints.
//!
//! - `log`: `first seq(BE)` → [`Loc`] of a run of records consecutive in the global order and in
//!   one segment, whatever their streams (up to `PACK_MAX_BYTES`, see `pack.rs`): a few entries per
//!   megabyte of log. Iterating it in key order is the global order.
//! - `stream_index`: `stream \0 first version(BE)` → a chunk listing up to 32 of the stream's packs
//!   (`chunks.rs`), so reading one stream is a short range scan plus one mapped read per pack.
//! - `ops`: op id → the [`AppendResult`] of the append that carried it.
//! - `meta`: `checkpoint` → where recovery starts rescanning the segments; `mark` → present once a
//!   checkpoint was made with a commit mark beside the segments (see `mark.rs`).
//! - `projections`: where an older od checkpointed projections; emptied by
//!   [`EventLog::drop_sled_read_models`](crate::store::EventLog::drop_sled_read_models), which the
//!   read models call when they open (they and their checkpoints live in `read-models.sqlite`).
//!
//! The `log` and `stream_index` entries of frames since the last checkpoint are held in memory
//! (`pending.rs`) and written at the checkpoint; atomicity comes from the segments (recovery
//! re-indexes whole batches from the checkpoint on).

use bytes::Bytes;
use od_events::FrameRef;
use sled::Tree;
use std::ops::Bound;
use std::path::Path;

use super::ahead::{ReadAhead, Run};
use super::chunks::{key_version, Chunk, IndexState};
use super::pack::{Loc, LogRun, OpenPack};
use super::segments::{frames_in, Pos, SegmentReader};
use crate::limits::SLED_OPEN_RETRIES;
use crate::store::{AppendResult, RawFrame, StoreError};

/// The open sled trees.
#[derive(Clone)]
pub struct Tables {
    pub db: sled::Db,
    pub log: Tree,
    pub stream_index: Tree,
    pub ops: Tree,
    pub meta: Tree,
    pub projections: Tree,
    pub segments: SegmentReader,
    /// Index entries written since the last checkpoint, not yet in sled (see `pending.rs`).
    pub pending: super::pending::SharedPending,
    /// sled was written outside the log (read models, saved progress) since the last checkpoint
    /// began; set by [`crate::store::SledLog::note_sled_written`] even when its message to the
    /// writer cannot be queued, so the final checkpoint never misses it.
    pub sled_dirty: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Where recovery resumes: everything indexed before `pos`/`next_seq` is durable in sled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    pub pos: Pos,
    pub next_seq: u64,
    pub prev_hash: [u8; 32],
}

/// `stream \0 version(BE)`.
pub fn stream_key(stream: &str, version: u64) -> Vec<u8> {
    let mut k = stream_prefix(stream);
    k.extend_from_slice(&version.to_be_bytes());
    k
}

/// `stream \0`, the prefix of all the stream's keys.
pub fn stream_prefix(stream: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(stream.len() + 9);
    k.extend_from_slice(stream.as_bytes());
    k.push(0);
    k
}

/// Maps a sled error: sled's checksum failures are corruption (at `seq`, 0 when unknown), the rest
/// are I/O.
pub fn sled_error(during: &'static str, seq: u64) -> impl Fn(sled::Error) -> StoreError {
    move |e| match e {
        sled::Error::Corruption { .. } => StoreError::Corrupt { seq, reason: format!("{during}: {e}") },
        other => StoreError::io(during, other),
    }
}

fn bad_pack(seq: u64) -> StoreError {
    StoreError::Corrupt { seq, reason: "a stored pack of frames is malformed".into() }
}

impl Tables {
    /// Opens sled in `dir`, retrying while a just-dropped handle still holds the lock.
    pub fn open(dir: &Path, segments: SegmentReader) -> Result<Self, StoreError> {
        let cfg = sled::Config::new()
            .path(dir)
            .mode(sled::Mode::HighThroughput)
            .cache_capacity(crate::limits::SLED_CACHE_BYTES)
            .flush_every_ms(None); // checkpoints make sled durable when it matters
        let mut tries = 0;
        let db = loop {
            // sled 0.34.7 panics (instead of erroring) on some damaged files; that is corruption.
            let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cfg.open())).map_err(|p| {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                StoreError::Corrupt { seq: 0, reason: format!("sled could not read its files: {msg}") }
            })?;
            match opened {
                Ok(db) => break db,
                // sled reports a held lock as an `Other` I/O error wrapping the `WouldBlock`.
                Err(sled::Error::Io(e))
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.to_string().contains("could not acquire lock") =>
                {
                    tries += 1;
                    if tries > SLED_OPEN_RETRIES {
                        return Err(StoreError::Locked(dir.display().to_string()));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10 * tries as u64));
                }
                Err(e) => return Err(sled_error("opening sled", 0)(e)),
            }
        };
        let tree = |n: &str| db.open_tree(n).map_err(sled_error("opening a sled tree", 0));
        Ok(Self {
            log: tree("log")?,
            stream_index: tree("stream_index")?,
            ops: tree("ops")?,
            meta: tree("meta")?,
            projections: tree("projections")?,
            db,
            segments,
            pending: Default::default(),
            sled_dirty: Default::default(),
        })
    }

    /// The frames of the pack at `loc` (their bytes, each checked for length, not hash).
    pub fn pack_frames(&self, first_seq: u64, loc: &Loc) -> Result<Vec<Bytes>, StoreError> {
        let bytes = self.segments.read(loc.pos.seg, loc.pos.off, loc.span)?;
        let offs = frames_in(&bytes).filter(|o| o.len() == loc.count as usize).ok_or_else(|| bad_pack(first_seq))?;
        Ok(offs.into_iter().map(|(o, l)| bytes.slice(o..o + l)).collect())
    }

    fn loc_of(seq: u64, v: &[u8]) -> Result<Loc, StoreError> {
        Loc::decode(v).ok_or_else(|| bad_pack(seq))
    }

    /// The log index's last run of records.
    pub fn last_log_run(&self) -> Result<Option<LogRun>, StoreError> {
        let Some((k, v)) = self.log_floor(u64::MAX)? else { return Ok(None) };
        let first_seq = u64::from_be_bytes(k.as_ref().try_into().map_err(|_| bad_pack(0))?);
        Ok(Some(LogRun { first_seq, loc: Self::loc_of(first_seq, &v)? }))
    }

    /// The last version of `stream`, if it has events.
    pub fn stream_head(&self, stream: &str) -> Result<Option<u64>, StoreError> {
        let Some((k, v)) = self.streams_floor(&stream_prefix(stream), &stream_key(stream, u64::MAX))? else {
            return Ok(None);
        };
        let chunk = Chunk::decode(key_version(&k), &v).ok_or_else(|| bad_pack(0))?;
        Ok(Some(chunk.end_version() - 1))
    }

    /// The highest seq indexed.
    pub fn last_seq(&self) -> Result<u64, StoreError> {
        let Some((k, v)) = self.log_floor(u64::MAX)? else { return Ok(0) };
        let first = u64::from_be_bytes(k.as_ref().try_into().map_err(|_| bad_pack(0))?);
        Ok(first + Self::loc_of(first, &v)?.count as u64 - 1)
    }

    /// Up to `limit` frames with `from ≤ seq ≤ upto`, in order.
    pub fn read_log(&self, from: u64, upto: u64, limit: usize) -> Result<Vec<RawFrame>, StoreError> {
        let start = match self.log_floor(from)? {
            Some((k, _)) => u64::from_be_bytes(k.as_ref().try_into().map_err(|_| bad_pack(from))?),
            None => from,
        };
        let mut out = Vec::new();
        for item in self.log_iter(start) {
            let (k, v) = item.map_err(sled_error("reading the log index", from))?;
            let first = u64::from_be_bytes(k.as_ref().try_into().map_err(|_| bad_pack(from))?);
            for (i, f) in self.pack_frames(first, &Self::loc_of(first, &v)?)?.into_iter().enumerate() {
                let seq = first + i as u64;
                if seq > upto || out.len() >= limit {
                    return Ok(out);
                }
                if seq >= from {
                    out.push(RawFrame(f));
                }
            }
        }
        Ok(out)
    }

    /// Calls `f` on frames of `stream` with version ≥ `from`, in order, until it returns false.
    /// `wanted` is how many frames the caller may take at most: the packs are read ahead
    /// (`ahead.rs`) for that many, no more.
    pub fn scan_stream(
        &self,
        stream: &str,
        from: u64,
        wanted: usize,
        f: &mut dyn FnMut(Bytes) -> bool,
    ) -> Result<(), StoreError> {
        let mut chunks = self.stream_runs(stream, from)?;
        let mut ahead = ReadAhead::new(&self.segments, wanted);
        while let Some(run) = ahead.next(&mut chunks)? {
            for (i, frame) in self.pack_frames(run.seq, &run.loc)?.into_iter().enumerate() {
                if run.version + i as u64 >= from && !f(frame) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The packs of `stream` holding versions ≥ `from`, chunk by chunk, in version order.
    fn stream_runs(
        &self,
        stream: &str,
        from: u64,
    ) -> Result<impl Iterator<Item = Result<Vec<Run>, StoreError>>, StoreError> {
        let prefix = stream_prefix(stream);
        let first = stream_key(stream, from);
        let start = match self.streams_floor(&prefix, &first)? {
            Some((k, _)) => k.to_vec(),
            None => first,
        };
        let mut end = prefix;
        *end.last_mut().expect("prefix ends in NUL") = 1;
        Ok(self.streams_iter(Bound::Included(start), Bound::Excluded(end)).map(move |item| {
            let (k, v) = item.map_err(sled_error("reading a stream index", 0))?;
            let chunk = Chunk::decode(key_version(&k), &v).ok_or_else(|| bad_pack(0))?;
            let mut version = chunk.first_version;
            let mut runs = Vec::with_capacity(chunk.runs.len());
            for (seq, loc) in chunk.runs {
                if version + loc.count as u64 > from {
                    runs.push(Run { version, seq, loc });
                }
                version += loc.count as u64;
            }
            Ok(runs)
        }))
    }

    /// Record bytes the log index covers (for measurements).
    pub fn used_segment_bytes(&self) -> u64 {
        self.log_iter(0).flatten().filter_map(|(_, v)| Loc::decode(&v)).map(|l| l.span as u64).sum()
    }

    /// Live key + value bytes of every tree in sled (for measurements).
    pub fn live_bytes(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for name in self.db.tree_names() {
            let Ok(t) = self.db.open_tree(&name) else { continue };
            let n = t.iter().flatten().map(|(k, v)| (k.len() + v.len()) as u64).sum();
            out.push((String::from_utf8_lossy(&name).into_owned(), n));
        }
        out
    }

    /// Checks that the log index covers the seqs `from..=last` with no hole, starting at the entry
    /// that holds `from` (reads the index only, from there on: opening checks the tail, not the
    /// history; `from` = 1 checks it all). Returns the first missing seq.
    pub fn check_contiguous(&self, from: u64, last: u64) -> Result<Option<u64>, StoreError> {
        let mut expected = match self.log_floor(from.max(1))? {
            Some((k, _)) => u64::from_be_bytes(k.as_ref().try_into().unwrap_or([0; 8])),
            None => 1,
        };
        for item in self.log_iter(expected) {
            let (k, v) = item.map_err(sled_error("reading the log index", expected))?;
            if u64::from_be_bytes(k.as_ref().try_into().unwrap_or([0; 8])) != expected {
                return Ok(Some(expected));
            }
            expected += Self::loc_of(expected, &v)?.count as u64;
        }
        Ok((expected <= last).then_some(expected))
    }

    /// Where recovery resumes.
    pub fn checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        let v = self.meta.get("checkpoint").map_err(sled_error("reading the checkpoint", 0))?;
        Ok(v.and_then(|b| {
            let loc = Loc::decode(&b)?;
            Some(Checkpoint {
                pos: loc.pos,
                next_seq: u64::from_le_bytes(b.get(16..24)?.try_into().ok()?),
                prev_hash: b.get(24..56)?.try_into().ok()?,
            })
        }))
    }

    /// Records a checkpoint (durable with the next [`Tables::make_durable`]).
    pub fn set_checkpoint(&self, cp: &Checkpoint) -> Result<(), StoreError> {
        let mut b = Loc { pos: cp.pos, span: 0, count: 0 }.encode().to_vec();
        b.extend_from_slice(&cp.next_seq.to_le_bytes());
        b.extend_from_slice(&cp.prev_hash);
        self.meta.insert("checkpoint", b).map_err(sled_error("writing the checkpoint", 0)).map(|_| ())
    }

    /// Whether a checkpoint recorded that this log keeps a commit mark.
    pub fn had_mark(&self) -> Result<bool, StoreError> {
        Ok(self.meta.get("mark").map_err(sled_error("reading the checkpoint", 0))?.is_some())
    }

    /// Records that this log keeps a commit mark (durable with the next [`Tables::make_durable`]),
    /// so that a mark deleted later is noticed.
    pub fn note_mark(&self) -> Result<(), StoreError> {
        self.meta.insert("mark", &[1u8]).map_err(sled_error("writing the checkpoint", 0)).map(|_| ())
    }

    /// The stored results of an earlier append with `op_id` (one per part of a multi-stream append).
    pub fn op_result(&self, op_id: &str) -> Result<Option<Vec<AppendResult>>, StoreError> {
        let v = self.ops.get(op_id.as_bytes()).map_err(sled_error("reading the op index", 0))?;
        Ok(v.and_then(|b| AppendResult::decode_all(&b)))
    }

    /// Indexes frames that are durable in the segments (in seq order, each with its record's
    /// position), and their op results. Idempotent: frames the index already covers are skipped.
    pub fn apply(
        &self,
        frames: &[(Bytes, Pos)],
        ops: &[(String, Vec<AppendResult>)],
        state: &mut IndexState,
    ) -> Result<(), StoreError> {
        let indexed = state.log_run.as_ref().map_or(0, LogRun::last);
        let mut done: Vec<OpenPack> = Vec::new();
        let mut runs: Vec<LogRun> = Vec::new();
        for (bytes, pos) in frames {
            let f = FrameRef::parse(bytes).expect("frames are built or verified before they are indexed");
            if f.seq() <= indexed {
                continue;
            }
            let span = (super::segments::RECORD_HEADER + bytes.len()) as u32;
            match &mut state.log_run {
                Some(r) if r.takes(f.seq(), *pos, span) => {
                    r.loc.span += span;
                    r.loc.count += 1;
                }
                run => runs.extend(run.replace(LogRun { first_seq: f.seq(), loc: Loc { pos: *pos, span, count: 1 } })),
            }
            let open = &mut state.open;
            match open {
                Some(p) if p.takes(&f, *pos) => {
                    p.loc.span += span;
                    p.loc.count += 1;
                    p.version = f.version();
                }
                _ => {
                    let stream = f.stream().expect("utf-8 stream");
                    let next = OpenPack {
                        first_seq: f.seq(),
                        loc: Loc { pos: *pos, span, count: 1 },
                        stream: stream.to_string(),
                        version: f.version(),
                    };
                    done.extend(open.replace(next));
                }
            }
        }
        // The log index is recovery's watermark (frames it covers are not re-applied), so
        // everything derived from a frame is written before the log entry that covers it: sled
        // recovers a prefix of its operations, and a crash in between then only costs a re-apply.
        let touched: Vec<OpenPack> = done.into_iter().chain(state.open.iter().cloned()).collect();
        let refs: Vec<&OpenPack> = touched.iter().collect();
        let chunks = state.note_packs(self, &refs)?;
        for (op, rs) in ops {
            let seq = rs.first().map_or(0, |r| r.first_seq);
            // A group split across two batches (an import that had to cut it, or recovery's
            // re-indexing in chunks) extends what the first part recorded, never replaces it.
            let rs = crate::store::import::merge_op(self.op_result(op)?, rs.clone());
            self.ops
                .insert(op.as_bytes(), AppendResult::encode_all(&rs))
                .map_err(sled_error("writing the op index", seq))?;
        }
        // The index itself goes to the overlay, for sled at the next checkpoint (`pending.rs`);
        // readers see it at once.
        let mut pending = self.pending.write().expect("index overlay lock");
        pending.streams.extend(chunks);
        for r in runs.iter().chain(state.log_run.iter()) {
            pending.log.insert(r.first_seq.to_be_bytes().to_vec(), r.loc.encode().to_vec());
        }
        Ok(())
    }

    /// Makes everything written so far durable: sled flush, then a real fdatasync of sled's files
    /// (sled's own flush does not fsync; see sled-facts.md).
    pub fn make_durable(&self, dir: &Path) -> Result<(), StoreError> {
        self.db.flush().map_err(sled_error("flushing sled", 0))?;
        sync_tree_files(dir)
    }
}

/// fdatasyncs every regular file under sled's directory (the `db` file, snapshots, any blobs).
fn sync_tree_files(dir: &Path) -> Result<(), StoreError> {
    let walk = std::fs::read_dir(dir).map_err(|e| StoreError::io("listing sled files", e))?;
    for entry in walk {
        let entry = entry.map_err(|e| StoreError::io("listing sled files", e))?;
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| StoreError::io("listing sled files", e))?;
        if ft.is_dir() {
            sync_tree_files(&path)?;
        } else if ft.is_file() {
            let f = std::fs::File::open(&path).map_err(|e| StoreError::io("opening a sled file to sync", e))?;
            f.sync_data().map_err(|e| StoreError::io("fdatasync of sled", e))?;
        }
    }
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| StoreError::io("syncing sled's directory", e))
}
