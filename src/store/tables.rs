//! sled's side of the log: the trees, their key encodings, and idempotent application of frames.
//!
//! - `frames`: `stream \0 version(BE)` → frame bytes. Keyed by stream so that reading one stream
//!   is one contiguous range scan.
//! - `global`: `seq(BE)` → frames key, the global order.
//! - `ops`: op id → the [`AppendResult`] of the append that carried it.
//! - `projections`: projection name → checkpoint (see `crate::projector`).

use od_events::FrameRef;
use sled::{Batch, IVec, Tree};
use std::path::Path;

use super::{AppendResult, StoreError};
use crate::limits::SLED_OPEN_RETRIES;

/// The open sled trees.
#[derive(Clone)]
pub struct Tables {
    pub db: sled::Db,
    pub frames: Tree,
    pub global: Tree,
    pub ops: Tree,
    pub projections: Tree,
}

/// `stream \0 version(BE)`.
pub fn frame_key(stream: &str, version: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(stream.len() + 9);
    k.extend_from_slice(stream.as_bytes());
    k.push(0);
    k.extend_from_slice(&version.to_be_bytes());
    k
}

/// `stream \0`, the prefix of all the stream's frame keys.
pub fn stream_prefix(stream: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(stream.len() + 1);
    k.extend_from_slice(stream.as_bytes());
    k.push(0);
    k
}

/// Maps a sled error: sled's checksum failures are corruption (at `seq`, 0 when unknown), the rest
/// are I/O.
pub fn sled_error(during: &'static str, seq: u64) -> impl Fn(sled::Error) -> StoreError {
    move |e| match e {
        sled::Error::Corruption { .. } => StoreError::Corrupt {
            seq,
            reason: format!("{during}: {e}"),
        },
        other => StoreError::io(during, other),
    }
}

fn sled_err(during: &'static str) -> impl Fn(sled::Error) -> StoreError {
    sled_error(during, 0)
}

impl Tables {
    /// Opens sled in `dir`, retrying while a just-dropped handle still holds the lock.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let cfg = sled::Config::new()
            .path(dir)
            .mode(sled::Mode::HighThroughput)
            .cache_capacity(256 * 1024 * 1024)
            .flush_every_ms(Some(1000));
        let mut tries = 0;
        let db = loop {
            // sled 0.34.7 panics (instead of erroring) on some damaged files; that is corruption.
            let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cfg.open()))
                .map_err(|p| {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    StoreError::Corrupt {
                        seq: 0,
                        reason: format!("sled could not read its files: {msg}"),
                    }
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
                Err(e) => return Err(sled_err("opening sled")(e)),
            }
        };
        let tree = |n: &str| db.open_tree(n).map_err(sled_err("opening a sled tree"));
        Ok(Self {
            frames: tree("frames")?,
            global: tree("global")?,
            ops: tree("ops")?,
            projections: tree("projections")?,
            db,
        })
    }

    /// The last version of `stream`, if it has events.
    pub fn stream_head(&self, stream: &str) -> Result<Option<u64>, StoreError> {
        let last = self.frames.scan_prefix(stream_prefix(stream)).next_back();
        match last {
            None => Ok(None),
            Some(r) => {
                let (k, _) = r.map_err(sled_err("reading a stream head"))?;
                let v = k[k.len() - 8..].try_into().expect("8 bytes");
                Ok(Some(u64::from_be_bytes(v)))
            }
        }
    }

    /// The highest seq in sled.
    pub fn last_seq(&self) -> Result<u64, StoreError> {
        match self
            .global
            .last()
            .map_err(sled_err("reading the last seq"))?
        {
            None => Ok(0),
            Some((k, _)) => Ok(u64::from_be_bytes(
                k.as_ref().try_into().expect("8-byte seq key"),
            )),
        }
    }

    /// The frame at `seq`.
    pub fn frame_at(&self, seq: u64) -> Result<Option<IVec>, StoreError> {
        let key = self.global.get(seq.to_be_bytes());
        let Some(key) = key.map_err(sled_error("reading the global index", seq))? else {
            return Ok(None);
        };
        self.frames
            .get(key)
            .map_err(sled_error("reading a frame", seq))
    }

    /// Checks that the global index holds exactly the seqs `1..=last`, with no hole. Reads keys and
    /// the small index values only, not frames. Returns the first missing seq.
    pub fn check_contiguous(&self, last: u64) -> Result<Option<u64>, StoreError> {
        let mut expected = 1u64;
        for item in self.global.iter() {
            let (k, _) = item.map_err(sled_error("reading the global index", expected))?;
            let seq = u64::from_be_bytes(k.as_ref().try_into().unwrap_or([0; 8]));
            if seq != expected {
                return Ok(Some(expected));
            }
            expected += 1;
        }
        Ok((expected <= last).then_some(expected))
    }

    /// The stored result of an earlier append with `op_id`.
    pub fn op_result(&self, op_id: &str) -> Result<Option<AppendResult>, StoreError> {
        let v = self
            .ops
            .get(op_id.as_bytes())
            .map_err(sled_err("reading the op index"))?;
        Ok(v.and_then(|b| AppendResult::decode(&b)))
    }

    /// Writes frames (already durable in the journal) and their op results. Idempotent.
    pub fn apply(&self, frames: &[IVec], ops: &[(String, AppendResult)]) -> Result<(), StoreError> {
        let (mut fb, mut gb) = (Batch::default(), Batch::default());
        for bytes in frames {
            let f = FrameRef::parse(bytes).expect("frames are built or verified before apply");
            let key = frame_key(f.stream().expect("utf-8 stream"), f.version());
            gb.insert(&f.seq().to_be_bytes(), key.as_slice());
            fb.insert(key, bytes.clone());
        }
        self.frames
            .apply_batch(fb)
            .map_err(sled_err("writing frames"))?;
        self.global
            .apply_batch(gb)
            .map_err(sled_err("writing the global index"))?;
        if !ops.is_empty() {
            let mut ob = Batch::default();
            for (op, r) in ops {
                ob.insert(op.as_bytes(), r.encode());
            }
            self.ops
                .apply_batch(ob)
                .map_err(sled_err("writing the op index"))?;
        }
        Ok(())
    }

    /// Makes everything written so far durable: sled flush, then a real fdatasync of sled's files
    /// (sled's own flush does not fsync; see sled-facts.md).
    pub fn make_durable(&self, dir: &Path) -> Result<(), StoreError> {
        self.db.flush().map_err(sled_err("flushing sled"))?;
        sync_tree_files(dir)
    }
}

/// fdatasyncs every regular file under sled's directory (the `db` file, snapshots, any blobs).
fn sync_tree_files(dir: &Path) -> Result<(), StoreError> {
    let walk = std::fs::read_dir(dir).map_err(|e| StoreError::io("listing sled files", e))?;
    for entry in walk {
        let entry = entry.map_err(|e| StoreError::io("listing sled files", e))?;
        let path = entry.path();
        let ft = entry
            .file_type()
            .map_err(|e| StoreError::io("listing sled files", e))?;
        if ft.is_dir() {
            sync_tree_files(&path)?;
        } else if ft.is_file() {
            let f = std::fs::File::open(&path)
                .map_err(|e| StoreError::io("opening a sled file to sync", e))?;
            f.sync_data()
                .map_err(|e| StoreError::io("fdatasync of sled", e))?;
        }
    }
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("syncing sled's directory", e))
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
