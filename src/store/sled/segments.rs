//! Segment files: where the frames live. The log's commit point and its data in one.
//!
//! `log/<id>.seg` files of [`DEFAULT_SEGMENT_BYTES`](crate::limits::DEFAULT_SEGMENT_BYTES) each, preallocated with
//! zeros so that the fdatasync that makes a batch durable flushes data blocks only (no size or
//! extent metadata, like SQLite's recycled WAL). Records are appended in seq order, each
//! `[u32 frame_len][u64 batch_first_seq][u64 batch_last_seq][frame]`; a batch never spans two
//! segments. Frames carry their own blake3 hash and the chain's `prev_hash`, so a scan knows
//! exactly where valid data ends, and it keeps only whole batches: a batch cut short by a crash was
//! never acknowledged. sled only indexes these files (see `tables.rs`); readers map them.

use bytes::Bytes;
use memmap2::Mmap;
use std::collections::HashMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::files::{LayerFile, RealFiles, SharedFiles};
use crate::store::error::is_full;
use crate::store::StoreError;

/// Bytes before each frame in a record.
pub const RECORD_HEADER: usize = 20;
pub(crate) const FRAME_MAGIC: &[u8; 4] = b"odf1";

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

pub(crate) fn seg_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:08}.seg"))
}

fn tmp_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:08}.seg.tmp"))
}

/// Appends one record for `frame` (of the batch `first..=last`) to `buf`.
pub fn push_record(buf: &mut Vec<u8>, first: u64, last: u64, frame: &[u8]) {
    buf.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    buf.extend_from_slice(&first.to_le_bytes());
    buf.extend_from_slice(&last.to_le_bytes());
    buf.extend_from_slice(frame);
}

pub(crate) struct Record<'a> {
    pub batch_first: u64,
    pub batch_last: u64,
    pub frame: &'a [u8],
    pub next: usize,
}

pub(crate) fn record_at(bytes: &[u8], pos: usize) -> Option<Record<'_>> {
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
    files: SharedFiles,
    current: Option<(u32, Box<dyn LayerFile>)>,
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
    pub fn read(&self, seg: u32, off: u32, len: u32) -> Result<Bytes, StoreError> {
        let map = self.map(seg)?;
        let (a, b) = (off as usize, off as usize + len as usize);
        map.get(a..b).map(Bytes::copy_from_slice).ok_or_else(|| StoreError::Corrupt {
            seq: 0,
            reason: format!("segment {seg} is shorter than the index says ({b} bytes)"),
        })
    }

    /// Asks the OS to start reading `[off, off+len)` of segment `seg` into the page cache
    /// (`MADV_WILLNEED`: asynchronous, a hint). Best effort: a segment that cannot be mapped or a
    /// refused hint is left to the read itself, which reports it.
    pub fn will_need(&self, seg: u32, off: u32, len: u32) {
        let Ok(map) = self.map(seg) else { return };
        let (a, n) = (off as usize, len as usize);
        if a + n <= map.len() {
            let _ = map.advise_range(memmap2::Advice::WillNeed, a, n);
        }
    }

    /// Whether the first page of `[off, off+len)` of segment `seg` is in the page cache (`mincore`).
    /// `true` when it cannot tell: the caller then skips a hint, which costs speed only.
    pub fn resident(&self, seg: u32, off: u32, len: u32) -> bool {
        let Ok(map) = self.map(seg) else { return true };
        if len == 0 || off as usize + len as usize > map.len() {
            return true;
        }
        // SAFETY: sysconf has no memory effects.
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            p if p > 0 => p as usize,
            _ => return true,
        };
        let at = off as usize / page * page;
        let mut vec = [0u8; 1];
        // SAFETY: `[at, at + 1)` lies in the live mapping `map` (checked above), `at` is
        // page-aligned from the mapping's page-aligned start, and `vec` has room for the one page's
        // entry.
        let rc = unsafe { libc::mincore(map.as_ptr().add(at) as *mut libc::c_void, 1, vec.as_mut_ptr()) };
        rc != 0 || vec[0] & 1 == 1
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
    /// Opens the segment directory `dir` (created if missing) for the writer.
    pub fn open(dir: &Path, size: u64, files: SharedFiles) -> Result<Self, StoreError> {
        fs::create_dir_all(dir).map_err(|e| StoreError::io("creating the log directory", e))?;
        Ok(Self::for_reading(dir, size, files))
    }

    /// Removes the temporary files of segments (or a commit mark) whose creation a crash
    /// interrupted. Only once the data dir's lock is held: another process may be making one.
    pub fn remove_stale(&self) -> Result<(), StoreError> {
        for e in fs::read_dir(&self.dir).map_err(|e| StoreError::io("listing segments", e))?.flatten() {
            let name = e.file_name();
            if name.to_str().is_some_and(|n| n.ends_with(".seg.tmp") || n == "commit.tmp") {
                self.files.remove(&e.path()).map_err(|e| StoreError::from_io("removing a half-made segment", e))?;
            }
        }
        Ok(())
    }

    /// The segments of `dir` for reading only (`od log verify`): nothing is created or removed.
    pub fn for_reading(dir: &Path, size: u64, files: SharedFiles) -> Self {
        Self { dir: dir.to_path_buf(), size, files, current: None, maps: Default::default(), spare: None }
    }

    /// The segments of `dir` for reading, with the real file layer.
    pub fn read_only(dir: &Path) -> Self {
        Self::for_reading(dir, crate::limits::DEFAULT_SEGMENT_BYTES, Arc::new(RealFiles))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
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

    /// Opening: makes `pos.seg` the segment appended to if it exists; otherwise reserves its space
    /// now (so a disk without room for it refuses the open at once) and zero-fills it in the
    /// background, so opening a fresh data dir does not wait for 64 MiB of zeros to reach the disk
    /// — the first commit does.
    pub fn open_at(&mut self, pos: Pos) -> Result<(), StoreError> {
        if seg_path(&self.dir, pos.seg).exists() {
            return self.start_at(pos);
        }
        let f = reserve(&self.files, &self.dir, pos.seg, self.size)?;
        self.spawn_fill(pos.seg, Some(f))
    }

    /// Prepares segment `id` in the background (reserving it there too when `f` is `None`).
    fn spawn_fill(&mut self, id: u32, f: Option<Box<dyn LayerFile>>) -> Result<(), StoreError> {
        let (files, dir, size) = (self.files.clone(), self.dir.clone(), self.size);
        let h = std::thread::Builder::new()
            .name("od-segment-prep".into())
            .spawn(move || {
                let f = match f {
                    Some(f) => f,
                    None => reserve(&files, &dir, id, size)?,
                };
                fill_and_install(&files, f, &dir, id, size)
            })
            .map_err(|e| StoreError::io("starting the segment preparer", e))?;
        self.spare = Some((id, h));
        Ok(())
    }

    /// Makes `pos.seg` the segment appended to (creating it if needed). A segment found shorter
    /// than its size — cut after its last commit, the only cut recovery lets through — gets its
    /// space back before anything is written to it.
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
            let f = reserve(&self.files, &self.dir, pos.seg, self.size)?;
            fill_and_install(&self.files, f, &self.dir, pos.seg, self.size)?;
        }
        let f = self.files.open(&path).map_err(|e| StoreError::from_io("opening a segment", e))?;
        let len = fs::metadata(&path).map_err(|e| StoreError::io("opening a segment", e))?.len();
        if len < self.size {
            f.allocate(self.size).map_err(|e| StoreError::from_io("restoring a segment's size", e))?;
            f.sync_data().map_err(|e| StoreError::from_io("restoring a segment's size", e))?;
            self.maps.write().expect("maps lock").remove(&pos.seg);
        }
        self.current = Some((pos.seg, f));
        Ok(())
    }

    /// Once the current segment is half full, starts zero-filling the next one in the background
    /// (off the commit path; a small log never pays for a second segment). Best effort: if it
    /// cannot start, the roll-over makes the segment itself.
    fn prepare_next(&mut self, pos: Pos) {
        let next = pos.seg + 1;
        if self.spare.is_some() || (pos.off as u64) < self.size / 2 || seg_path(&self.dir, next).exists() {
            return;
        }
        let _ = self.spawn_fill(next, None);
    }

    /// Whether `n` bytes fit at `pos`.
    pub fn fits(&self, pos: Pos, n: usize) -> bool {
        pos.off as u64 + n as u64 <= self.size
    }

    /// Writes `records` at `pos` and makes them durable (fdatasync): the commit point.
    pub fn commit(&mut self, pos: Pos, records: &[u8]) -> Result<(), StoreError> {
        if self.current.as_ref().map(|(id, _)| *id) != Some(pos.seg) {
            self.start_at(pos)?;
        }
        let (_, f) = self.current.as_ref().expect("current segment");
        f.write_at(records, pos.off as u64).map_err(|e| StoreError::from_io("writing a segment", e))?;
        f.sync_data().map_err(|e| StoreError::from_io("fdatasync of a segment", e))?;
        self.prepare_next(pos);
        Ok(())
    }
}

/// Creates `<id>.seg.tmp` and reserves `size` bytes for it, so a full disk refuses here, naming the
/// directory and the space needed. Nothing is left behind on failure.
fn reserve(files: &SharedFiles, dir: &Path, id: u32, size: u64) -> Result<Box<dyn LayerFile>, StoreError> {
    let tmp = tmp_path(dir, id);
    let f = files.create(&tmp).map_err(|e| no_room(dir, id, size, "creating a segment", e))?;
    if let Err(e) = f.allocate(size) {
        let _ = files.remove(&tmp);
        return Err(no_room(dir, id, size, "reserving a segment", e));
    }
    Ok(f)
}

/// Zero-fills a reserved segment (so that each commit's fdatasync flushes data blocks only), syncs
/// it and installs it under its real name; a half-made one never appears under that name, and its
/// temporary file is removed if anything fails.
fn fill_and_install(
    files: &SharedFiles,
    f: Box<dyn LayerFile>,
    dir: &Path,
    id: u32,
    size: u64,
) -> Result<(), StoreError> {
    let tmp = tmp_path(dir, id);
    let made = (|| {
        let zeros = vec![0u8; 1 << 20];
        let mut at = 0;
        while at < size {
            let n = (size - at).min(zeros.len() as u64) as usize;
            f.write_at(&zeros[..n], at)?;
            at += n as u64;
        }
        f.sync_data()?;
        files.rename(&tmp, &seg_path(dir, id))?;
        files.sync_dir(dir)
    })();
    made.map_err(|e| {
        let _ = files.remove(&tmp);
        no_room(dir, id, size, "preparing a segment", e)
    })
}

/// A failed segment creation: `Full` naming the directory and the space a segment needs, or `Io`.
fn no_room(dir: &Path, id: u32, size: u64, during: &'static str, e: std::io::Error) -> StoreError {
    match is_full(&e) {
        true => StoreError::Full {
            during,
            message: format!(
                "{} needs {size} bytes ({} MiB) free for its segment {id:08}.seg: {e}",
                dir.display(),
                size >> 20
            ),
        },
        false => StoreError::from_io(during, e),
    }
}

impl Drop for Segments {
    fn drop(&mut self) {
        if let Some((_, h)) = self.spare.take() {
            let _ = h.join();
        }
    }
}
