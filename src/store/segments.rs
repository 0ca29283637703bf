//! Segment files: where the frames live. The log's commit point and its data in one.
//!
//! `log/<id>.seg` files of [`DEFAULT_SEGMENT_BYTES`](crate::limits::DEFAULT_SEGMENT_BYTES) each, preallocated with
//! zeros so that the fdatasync that makes a batch durable flushes data blocks only (no size or
//! extent metadata, like SQLite's recycled WAL). Records are appended in seq order, each
//! `[u32 frame_len][u64 batch_first_seq][u64 batch_last_seq][frame]`; a batch never spans two
//! segments. Frames carry their own blake3 hash and the chain's `prev_hash`, so a scan knows
//! exactly where valid data ends, and it keeps only whole batches: a batch cut short by a crash was
//! never acknowledged. sled only indexes these files (see `tables.rs`); readers map them.

use memmap2::Mmap;
use od_events::{FrameRef, Hash};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::StoreError;

/// Bytes before each frame in a record.
pub const RECORD_HEADER: usize = 20;
const FRAME_MAGIC: &[u8; 4] = b"odf1";

/// A position in the segment files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Pos {
    pub seg: u32,
    pub off: u32,
}

/// One record found by a scan.
#[derive(Debug, Clone)]
pub struct Found {
    pub pos: Pos,
    pub frame: Vec<u8>,
}

/// What a scan found.
#[derive(Debug)]
pub struct Scan {
    /// Valid, chained frames of whole batches, in order.
    pub records: Vec<Found>,
    /// Where the next batch goes.
    pub end: Pos,
    /// A valid frame past the end written by a later batch than the one that starts there: proof
    /// that the end is damage to synced data, not a torn unacknowledged tail.
    pub later_batch_seq: Option<u64>,
}

fn seg_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:08}.seg"))
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| StoreError::io("syncing the log directory", e))
}

/// Appends one record for `frame` (of the batch `first..=last`) to `buf`.
pub fn push_record(buf: &mut Vec<u8>, first: u64, last: u64, frame: &[u8]) {
    buf.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    buf.extend_from_slice(&first.to_le_bytes());
    buf.extend_from_slice(&last.to_le_bytes());
    buf.extend_from_slice(frame);
}

struct Record<'a> {
    batch_first: u64,
    batch_last: u64,
    frame: &'a [u8],
    next: usize,
}

fn record_at(bytes: &[u8], pos: usize) -> Option<Record<'_>> {
    let u64_at = |at: usize| bytes.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    let len = u32::from_le_bytes(bytes.get(pos..pos + 4)?.try_into().ok()?) as usize;
    if len == 0 {
        return None;
    }
    let start = pos + RECORD_HEADER;
    Some(Record {
        batch_first: u64_at(pos + 4)?,
        batch_last: u64_at(pos + 12)?,
        frame: bytes.get(start..start + len)?,
        next: start + len,
    })
}

/// The frames of the records in `bytes` (a pack's span), in order.
pub fn frames_in(bytes: &[u8]) -> Option<Vec<(usize, usize)>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let r = record_at(bytes, at)?;
        out.push((at + RECORD_HEADER, r.frame.len()));
        at = r.next;
    }
    Some(out)
}

/// The segment files of one data dir: the writer's append handle and readers' maps.
pub struct Segments {
    dir: PathBuf,
    size: u64,
    current: Option<(u32, File)>,
    maps: Arc<RwLock<HashMap<u32, Arc<Mmap>>>>,
    /// The next segment being zero-filled in the background, so rolling over never waits on it.
    spare: Option<(u32, std::thread::JoinHandle<Result<(), StoreError>>)>,
}

/// A cloneable read handle.
#[derive(Clone)]
pub struct SegmentReader {
    dir: PathBuf,
    maps: Arc<RwLock<HashMap<u32, Arc<Mmap>>>>,
}

impl SegmentReader {
    /// The bytes `[off, off+len)` of segment `seg`.
    pub fn read(&self, seg: u32, off: u32, len: u32) -> Result<sled::IVec, StoreError> {
        let map = self.map(seg)?;
        let (a, b) = (off as usize, off as usize + len as usize);
        map.get(a..b).map(sled::IVec::from).ok_or_else(|| StoreError::Corrupt {
            seq: 0,
            reason: format!("segment {seg} is shorter than the index says ({b} bytes)"),
        })
    }

    fn map(&self, seg: u32) -> Result<Arc<Mmap>, StoreError> {
        if let Some(m) = self.maps.read().expect("maps lock").get(&seg) {
            return Ok(m.clone());
        }
        let f = File::open(seg_path(&self.dir, seg))
            .map_err(|e| StoreError::Corrupt { seq: 0, reason: format!("segment {seg} cannot be opened: {e}") })?;
        // SAFETY: segment files are preallocated and only ever written in place, never truncated
        // or shrunk while the store is open, so the mapping stays valid; the bytes read are checked
        // (frame hashes) before they are trusted.
        let m = Arc::new(unsafe { Mmap::map(&f) }.map_err(|e| StoreError::io("mapping a segment", e))?);
        self.maps.write().expect("maps lock").insert(seg, m.clone());
        Ok(m)
    }
}

impl Segments {
    /// Opens the segment directory `dir` (created if missing).
    pub fn open(dir: &Path, size: u64) -> Result<Self, StoreError> {
        fs::create_dir_all(dir).map_err(|e| StoreError::io("creating the log directory", e))?;
        Ok(Self { dir: dir.to_path_buf(), size, current: None, maps: Default::default(), spare: None })
    }

    /// A read handle.
    pub fn reader(&self) -> SegmentReader {
        SegmentReader { dir: self.dir.clone(), maps: self.maps.clone() }
    }

    /// Ids of the segment files present, ascending.
    pub fn ids(&self) -> Result<Vec<u32>, StoreError> {
        let mut ids = Vec::new();
        for e in fs::read_dir(&self.dir).map_err(|e| StoreError::io("listing segments", e))? {
            let name = e.map_err(|e| StoreError::io("listing segments", e))?.file_name();
            if let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".seg")).and_then(|n| n.parse().ok()) {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// Opening: makes `pos.seg` the segment appended to if it exists; otherwise starts zero-filling
    /// it in the background, so opening a fresh data dir does not wait for 64 MiB of zeros to
    /// reach the disk — the first commit does (and a read-only session never does).
    pub fn open_at(&mut self, pos: Pos) -> Result<(), StoreError> {
        if seg_path(&self.dir, pos.seg).exists() {
            return self.start_at(pos);
        }
        let (dir, size, id) = (self.dir.clone(), self.size, pos.seg);
        let h = std::thread::Builder::new()
            .name("od-segment-prep".into())
            .spawn(move || create(&dir, id, size))
            .map_err(|e| StoreError::io("starting the segment preparer", e))?;
        self.spare = Some((id, h));
        Ok(())
    }

    /// Makes `pos.seg` the segment appended to (creating it if needed).
    pub fn start_at(&mut self, pos: Pos) -> Result<(), StoreError> {
        let path = seg_path(&self.dir, pos.seg);
        match self.spare.take() {
            Some((id, h)) if id == pos.seg => {
                h.join().map_err(|_| StoreError::io("preparing a segment", "panicked"))??
            }
            Some((_, h)) => {
                let _ = h.join();
            }
            None => {}
        }
        if !path.exists() {
            create(&self.dir, pos.seg, self.size)?;
        }
        let f = OpenOptions::new().write(true).open(&path).map_err(|e| StoreError::io("opening a segment", e))?;
        self.current = Some((pos.seg, f));
        Ok(())
    }

    /// Once the current segment is half full, starts zero-filling the next one in the background
    /// (off the commit path; a small log never pays for a second segment).
    fn prepare_next(&mut self, pos: Pos) -> Result<(), StoreError> {
        let (dir, size, next) = (self.dir.clone(), self.size, pos.seg + 1);
        if self.spare.is_some() || (pos.off as u64) < self.size / 2 || seg_path(&dir, next).exists() {
            return Ok(());
        }
        let h = std::thread::Builder::new()
            .name("od-segment-prep".into())
            .spawn(move || create(&dir, next, size))
            .map_err(|e| StoreError::io("starting the segment preparer", e))?;
        self.spare = Some((next, h));
        Ok(())
    }

    /// Whether `n` bytes fit at `pos`.
    pub fn fits(&self, pos: Pos, n: usize) -> bool {
        pos.off as u64 + n as u64 <= self.size
    }

    /// Writes `records` at `pos` and makes them durable (fdatasync). Returns where they start.
    pub fn commit(&mut self, pos: Pos, records: &[u8]) -> Result<(), StoreError> {
        if self.current.as_ref().map(|(id, _)| *id) != Some(pos.seg) {
            self.start_at(pos)?;
        }
        let (_, f) = self.current.as_ref().expect("current segment");
        f.write_all_at(records, pos.off as u64).map_err(|e| StoreError::io("writing a segment", e))?;
        f.sync_data().map_err(|e| StoreError::io("fdatasync of a segment", e))?;
        self.prepare_next(pos)
    }

    /// Scans from `from` (whose first frame must be `next_seq`, chained after `prev`) through every
    /// later segment, keeping whole batches.
    pub fn scan(&self, from: Pos, next_seq: u64, prev: Hash) -> Result<Scan, StoreError> {
        let ids: Vec<u32> = self.ids()?.into_iter().filter(|id| *id >= from.seg).collect();
        let (mut expected, mut prev) = (next_seq, prev);
        let mut records = Vec::new();
        let mut end = from;
        for (i, &id) in ids.iter().enumerate() {
            let bytes = map_for_scan(&seg_path(&self.dir, id))?;
            let start = if id == from.seg { from.off as usize } else { 0 };
            let mut batch: Vec<Found> = Vec::new();
            let (mut at, mut kept) = (start, start);
            while let Some(r) = record_at(&bytes, at) {
                let ok = matches!(FrameRef::parse_verified(r.frame),
                    Ok(f) if f.seq() == expected && f.prev_hash() == &prev
                        && r.batch_first <= expected && expected <= r.batch_last);
                if !ok {
                    break;
                }
                prev = *FrameRef::parse(r.frame).expect("verified").hash();
                batch.push(Found { pos: Pos { seg: id, off: at as u32 }, frame: r.frame.to_vec() });
                at = r.next;
                if expected == r.batch_last {
                    records.append(&mut batch);
                    kept = at;
                    end = Pos { seg: id, off: at as u32 };
                }
                expected += 1;
            }
            let first_unkept = next_seq + records.len() as u64;
            if let Some(later) = later_batch_evidence(&bytes, kept, first_unkept) {
                return Ok(Scan { records, end, later_batch_seq: Some(later) });
            }
            let next_starts = match ids.get(i + 1) {
                Some(&n) if batch.is_empty() => {
                    let b = map_for_scan(&seg_path(&self.dir, n))?;
                    starts_with(&b, next_seq + records.len() as u64)
                }
                _ => false,
            };
            if !next_starts {
                // Anything in later segments from a later batch proves damage here.
                for &later_id in &ids[i + 1..] {
                    let b = map_for_scan(&seg_path(&self.dir, later_id))?;
                    if let Some(s) = later_batch_evidence(&b, 0, first_unkept) {
                        return Ok(Scan { records, end, later_batch_seq: Some(s) });
                    }
                }
                return Ok(Scan { records, end, later_batch_seq: None });
            }
            // The segment ended cleanly (zeros after its last batch); the next one carries on.
            end = Pos { seg: id + 1, off: 0 };
        }
        Ok(Scan { records, end, later_batch_seq: None })
    }
}

/// A segment's bytes for a scan, mapped rather than read (a segment is 64 MiB, mostly zeros at
/// the tail; only the pages the scan touches are read).
fn map_for_scan(path: &Path) -> Result<ScanBytes, StoreError> {
    let f = File::open(path).map_err(|e| StoreError::io("reading a segment", e))?;
    let len = f.metadata().map_err(|e| StoreError::io("reading a segment", e))?.len();
    if len == 0 {
        return Ok(ScanBytes::Empty);
    }
    // SAFETY: segments are only written in place by this process's writer, which is not running
    // while the store opens; verify reads a scratch copy.
    let m = unsafe { Mmap::map(&f) }.map_err(|e| StoreError::io("mapping a segment", e))?;
    Ok(ScanBytes::Mapped(m))
}

enum ScanBytes {
    Empty,
    Mapped(Mmap),
}

impl std::ops::Deref for ScanBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            ScanBytes::Empty => &[],
            ScanBytes::Mapped(m) => m,
        }
    }
}

/// Creates segment `id` of `size` zero bytes (via a temporary file, so a half-made one never
/// appears under its real name).
fn create(dir: &Path, id: u32, size: u64) -> Result<(), StoreError> {
    let tmp = dir.join(format!("{id:08}.seg.tmp"));
    let mut f = File::create(&tmp).map_err(|e| StoreError::io("creating a segment", e))?;
    let zeros = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        f.write_all(&zeros[..n]).map_err(|e| StoreError::io("preallocating a segment", e))?;
        left -= n as u64;
    }
    f.sync_all().map_err(|e| StoreError::io("syncing a new segment", e))?;
    fs::rename(&tmp, seg_path(dir, id)).map_err(|e| StoreError::io("installing a segment", e))?;
    sync_dir(dir)
}

impl Drop for Segments {
    fn drop(&mut self) {
        if let Some((_, h)) = self.spare.take() {
            let _ = h.join();
        }
    }
}

/// Whether segment bytes start with a valid record of frame `seq`.
fn starts_with(bytes: &[u8], seq: u64) -> bool {
    record_at(bytes, 0).is_some_and(|r| FrameRef::parse_verified(r.frame).is_ok_and(|f| f.seq() == seq))
}

/// Looks from `from` for a valid frame at or beyond `first_unkept` written by a *later* batch than
/// the one that starts there. Batches are written only after the previous one was synced.
fn later_batch_evidence(bytes: &[u8], from: usize, first_unkept: u64) -> Option<u64> {
    for off in memchr::memmem::find_iter(&bytes[from.min(bytes.len())..], FRAME_MAGIC) {
        let Some(rec) = (from + off).checked_sub(RECORD_HEADER).and_then(|at| record_at(bytes, at)) else {
            continue;
        };
        let Ok(f) = FrameRef::parse_verified(rec.frame) else { continue };
        if f.seq() >= first_unkept && rec.batch_first > first_unkept {
            return Some(f.seq());
        }
    }
    None
}
