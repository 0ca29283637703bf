//! sled's side of the log: the trees, their keys, reading frames out of packs, and idempotent
//! application of frames that are already durable in the journal.
//!
//! - `log`: `first seq(BE)` → pack of frames consecutive in the global order and in one stream.
//! - `stream_index`: `stream \0 first version(BE)` → first seq of the pack holding that version, one
//!   entry per pack, so reading one stream is a range scan of its index plus one get per pack.
//! - `ops`: op id → the [`AppendResult`] of the append that carried it.
//! - `projections`: projection name → checkpoint (see `crate::projector`).
//!
//! Writes are plain inserts, not sled batches: atomicity comes from the journal (recovery re-applies
//! whole batches), and a sled batch makes sled seal and write its I/O buffer on every call.

use od_events::FrameRef;
use sled::{IVec, Tree};
use std::path::Path;

use super::pack::{self, OpenPack};
use super::{AppendResult, RawFrame, StoreError};
use crate::limits::SLED_OPEN_RETRIES;

/// The open sled trees.
#[derive(Clone)]
pub struct Tables {
    pub db: sled::Db,
    pub log: Tree,
    pub stream_index: Tree,
    pub ops: Tree,
    pub projections: Tree,
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
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let cfg = sled::Config::new()
            .path(dir)
            .mode(sled::Mode::HighThroughput)
            .cache_capacity(256 * 1024 * 1024)
            .flush_every_ms(None);
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
                Err(sled::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {
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
            projections: tree("projections")?,
            db,
        })
    }

    /// The log's last pack, as an open pack.
    pub fn last_log_pack(&self) -> Result<Option<OpenPack>, StoreError> {
        let Some((k, v)) = self.log.last().map_err(sled_error("reading the log", 0))? else { return Ok(None) };
        OpenPack::from_stored(&k, &v).map(Some).ok_or_else(|| bad_pack(0))
    }

    /// The pack starting at `seq`.
    fn pack_at(&self, seq: u64) -> Result<IVec, StoreError> {
        let v = self.log.get(seq.to_be_bytes()).map_err(sled_error("reading the log", seq))?;
        v.ok_or_else(|| StoreError::Corrupt { seq, reason: "the stream index points at a missing pack".into() })
    }

    /// The last version of `stream`, if it has events.
    pub fn stream_head(&self, stream: &str) -> Result<Option<u64>, StoreError> {
        let Some(item) = self.stream_index.scan_prefix(stream_prefix(stream)).next_back() else { return Ok(None) };
        let (_, seq) = item.map_err(sled_error("reading a stream head", 0))?;
        let seq = u64::from_be_bytes(seq.as_ref().try_into().map_err(|_| bad_pack(0))?);
        let pack = self.pack_at(seq)?;
        let p = OpenPack::from_stored(&seq.to_be_bytes(), &pack).ok_or_else(|| bad_pack(seq))?;
        Ok(Some(p.version))
    }

    /// The highest seq in sled.
    pub fn last_seq(&self) -> Result<u64, StoreError> {
        Ok(self.last_log_pack()?.map_or(0, |p| p.last))
    }

    /// Up to `limit` frames with `from ≤ seq ≤ upto`, in order.
    pub fn read_log(&self, from: u64, upto: u64, limit: usize) -> Result<Vec<RawFrame>, StoreError> {
        let start = match self.log.range(..=from.to_be_bytes()).next_back() {
            Some(item) => item.map_err(sled_error("reading the log", from))?.0.to_vec(),
            None => from.to_be_bytes().to_vec(),
        };
        let mut out = Vec::new();
        for item in self.log.range(start..) {
            let (_, v) = item.map_err(sled_error("reading the log", from))?;
            for f in pack::frames(&v).ok_or_else(|| bad_pack(from))? {
                let seq = FrameRef::parse(&f).map_err(|_| bad_pack(from))?.seq();
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
    pub fn scan_stream(&self, stream: &str, from: u64, f: &mut dyn FnMut(IVec) -> bool) -> Result<(), StoreError> {
        let prefix = stream_prefix(stream);
        let first = stream_key(stream, from);
        let start = match self.stream_index.range(prefix.clone()..=first.clone()).next_back() {
            Some(item) => item.map_err(sled_error("reading a stream index", 0))?.0.to_vec(),
            None => first,
        };
        let mut end = prefix;
        *end.last_mut().expect("prefix ends in NUL") = 1;
        for item in self.stream_index.range(start..end) {
            let (_, seq) = item.map_err(sled_error("reading a stream index", 0))?;
            let seq = u64::from_be_bytes(seq.as_ref().try_into().map_err(|_| bad_pack(0))?);
            for frame in pack::frames(&self.pack_at(seq)?).ok_or_else(|| bad_pack(seq))? {
                let version = FrameRef::parse(&frame).map_err(|_| bad_pack(seq))?.version();
                if version >= from && !f(frame) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Checks that the log's packs hold exactly the seqs `1..=last`, with no hole (reads pack
    /// headers, not hashes). Returns the first missing seq.
    pub fn check_contiguous(&self, last: u64) -> Result<Option<u64>, StoreError> {
        let mut expected = 1u64;
        for item in self.log.iter() {
            let (k, v) = item.map_err(sled_error("reading the log", expected))?;
            if u64::from_be_bytes(k.as_ref().try_into().unwrap_or([0; 8])) != expected {
                return Ok(Some(expected));
            }
            expected += pack::offsets(&v).ok_or_else(|| bad_pack(expected))?.len() as u64;
        }
        Ok((expected <= last).then_some(expected))
    }

    /// The stored result of an earlier append with `op_id`.
    pub fn op_result(&self, op_id: &str) -> Result<Option<AppendResult>, StoreError> {
        let v = self.ops.get(op_id.as_bytes()).map_err(sled_error("reading the op index", 0))?;
        Ok(v.and_then(|b| AppendResult::decode(&b)))
    }

    /// Writes frames (already durable in the journal, in seq order) into the log's packs and the
    /// stream index, and their op results. Idempotent: frames the log already holds are skipped.
    pub fn apply(
        &self,
        frames: &[IVec],
        ops: &[(String, AppendResult)],
        open: &mut Option<OpenPack>,
    ) -> Result<(), StoreError> {
        let log_last = open.as_ref().map_or(0, |p| p.last);
        let mut full: Vec<OpenPack> = Vec::new();
        for bytes in frames {
            let f = FrameRef::parse(bytes).expect("frames are built or verified before apply");
            if f.seq() <= log_last {
                continue;
            }
            match open {
                Some(p) if p.takes(&f) => {
                    pack::push(&mut p.bytes, bytes);
                    p.last = f.seq();
                    p.version = f.version();
                }
                _ => {
                    let stream = f.stream().expect("utf-8 stream");
                    let key = f.seq().to_be_bytes();
                    self.stream_index
                        .insert(stream_key(stream, f.version()), &key)
                        .map_err(sled_error("writing the stream index", f.seq()))?;
                    let mut fresh = Vec::with_capacity(crate::limits::PACK_TARGET_BYTES);
                    pack::push(&mut fresh, bytes);
                    let next = OpenPack {
                        key: key.to_vec(),
                        bytes: fresh,
                        last: f.seq(),
                        stream: stream.to_string(),
                        version: f.version(),
                    };
                    full.extend(open.replace(next));
                }
            }
        }
        for p in full.iter().chain(open.iter()) {
            self.log.insert(p.key.as_slice(), p.bytes.as_slice()).map_err(sled_error("writing the log", p.last))?;
        }
        for (op, r) in ops {
            self.ops.insert(op.as_bytes(), r.encode()).map_err(sled_error("writing the op index", r.first_seq))?;
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

/// Groups frames into the op results of the appends that wrote them (an append's frames are
/// contiguous and share stream and op id).
pub fn ops_of(frames: &[IVec]) -> Vec<(String, AppendResult)> {
    let mut out: Vec<(String, AppendResult)> = Vec::new();
    for bytes in frames {
        let f = FrameRef::parse(bytes).expect("verified frame");
        let (Ok(Some(op)), Ok(stream)) = (f.op_id(), f.stream()) else {
            continue;
        };
        match out.last_mut() {
            Some((o, r)) if o == op && r.stream == stream && r.last_seq + 1 == f.seq() => {
                r.last_seq = f.seq();
                r.last_version = f.version();
            }
            _ => out.push((
                op.to_string(),
                AppendResult {
                    stream: stream.to_string(),
                    first_seq: f.seq(),
                    last_seq: f.seq(),
                    first_version: f.version(),
                    last_version: f.version(),
                    deduplicated: false,
                },
            )),
        }
    }
    out
}
