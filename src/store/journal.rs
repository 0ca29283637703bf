//! The journal: the log's commit point.
//!
//! A preallocated, zero-filled file that is overwritten in place and recycled, so the fdatasync
//! that makes a batch durable flushes data blocks only (no file-size or extent metadata, as with
//! SQLite's recycled WAL). Each record is `[u32 frame_len][u64 batch_first_seq][frame]`; frames carry
//! their own blake3 hash and the chain's `prev_hash`, so a scan knows exactly where valid data ends.
//!
//! `journal.head` (replaced atomically by rename) names the first seq the journal holds and the hash
//! before it. Everything before `start_seq` is durable in sled; everything from it on is re-applied to
//! sled when the store opens.

use od_events::{FrameRef, Hash, GENESIS_HASH};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::StoreError;

const HEAD_MAGIC: &[u8; 4] = b"odjh";
const HEAD_LEN: usize = 4 + 8 + 32 + 32;
const FRAME_MAGIC: &[u8; 4] = b"odf1";
/// Bytes before each frame in a record.
pub const RECORD_HEADER: usize = 20;

/// Where the journal starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalHead {
    pub start_seq: u64,
    pub prev_hash: Hash,
}

/// What a scan of the journal found.
#[derive(Debug)]
pub struct Scan {
    /// Valid, chained frames of whole batches from `start_seq`, in order.
    pub frames: Vec<Vec<u8>>,
    /// Byte offset just past the last valid record.
    pub end: u64,
    /// A valid frame past the end that proves the end is not a torn tail (it came from a later,
    /// already-synced batch): its seq.
    pub later_batch_seq: Option<u64>,
}

/// The open journal.
pub struct Journal {
    dir: PathBuf,
    file: File,
    size: u64,
    pos: u64,
    head: JournalHead,
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| StoreError::io("syncing the data directory", e))
}

fn encode_head(h: &JournalHead) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEAD_LEN);
    b.extend_from_slice(HEAD_MAGIC);
    b.extend_from_slice(&h.start_seq.to_le_bytes());
    b.extend_from_slice(&h.prev_hash);
    let sum = blake3::hash(&b);
    b.extend_from_slice(sum.as_bytes());
    b
}

fn decode_head(b: &[u8]) -> Option<JournalHead> {
    if b.len() != HEAD_LEN || &b[..4] != HEAD_MAGIC || blake3::hash(&b[..44]).as_bytes() != &b[44..] {
        return None;
    }
    Some(JournalHead {
        start_seq: u64::from_le_bytes(b[4..12].try_into().ok()?),
        prev_hash: b[12..44].try_into().ok()?,
    })
}

impl Journal {
    /// Opens (or creates, preallocated to `size` bytes) the journal in `dir`.
    pub fn open(dir: &Path, size: u64) -> Result<Self, StoreError> {
        let data = dir.join("journal.dat");
        let head_path = dir.join("journal.head");
        if !data.exists() {
            Self::preallocate(dir, &data, size)?;
        }
        let head = match fs::read(&head_path) {
            Ok(b) => decode_head(&b)
                .ok_or_else(|| StoreError::Corrupt { seq: 0, reason: format!("{} is damaged", head_path.display()) })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let h = JournalHead { start_seq: 1, prev_hash: GENESIS_HASH };
                write_head(dir, &h)?;
                h
            }
            Err(e) => return Err(StoreError::io("reading journal.head", e)),
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&data)
            .map_err(|e| StoreError::io("opening the journal", e))?;
        let size = file.metadata().map_err(|e| StoreError::io("reading journal size", e))?.len();
        Ok(Self { dir: dir.to_path_buf(), file, size, pos: 0, head })
    }

    fn preallocate(dir: &Path, data: &Path, size: u64) -> Result<(), StoreError> {
        let tmp = dir.join("journal.dat.tmp");
        let mut f = File::create(&tmp).map_err(|e| StoreError::io("creating the journal", e))?;
        let zeros = vec![0u8; 1 << 20];
        let mut left = size;
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            f.write_all(&zeros[..n]).map_err(|e| StoreError::io("preallocating the journal", e))?;
            left -= n as u64;
        }
        f.sync_all().map_err(|e| StoreError::io("syncing the new journal", e))?;
        fs::rename(&tmp, data).map_err(|e| StoreError::io("installing the journal", e))?;
        sync_dir(dir)
    }

    /// The current head.
    pub fn head(&self) -> JournalHead {
        self.head
    }

    /// Reads the whole journal and returns the valid chained frames of whole batches from the head on.
    pub fn scan(&self) -> Result<Scan, StoreError> {
        let mut bytes = Vec::with_capacity(self.size as usize);
        (&self.file).read_to_end(&mut bytes).map_err(|e| StoreError::io("reading the journal", e))?;
        let mut frames = Vec::new();
        let mut batch: Vec<Vec<u8>> = Vec::new();
        let (mut pos, mut end) = (0usize, 0usize);
        let (mut expected, mut prev) = (self.head.start_seq, self.head.prev_hash);
        while let Some(rec) = record_at(&bytes, pos) {
            let ok = matches!(FrameRef::parse_verified(rec.frame),
                Ok(f) if f.seq() == expected && f.prev_hash() == &prev
                    && rec.batch_first <= expected && expected <= rec.batch_last);
            if !ok {
                break;
            }
            prev = *FrameRef::parse(rec.frame).expect("verified").hash();
            batch.push(rec.frame.to_vec());
            pos = rec.next;
            if expected == rec.batch_last {
                frames.append(&mut batch);
                end = pos;
            }
            expected += 1;
        }
        let first_unkept = self.head.start_seq + frames.len() as u64;
        let later_batch_seq = later_batch_evidence(&bytes, end, first_unkept);
        Ok(Scan { frames, end: end as u64, later_batch_seq })
    }

    /// Positions the write cursor (after a scan).
    pub fn set_pos(&mut self, pos: u64) {
        self.pos = pos;
    }

    /// Whether `n` more bytes fit before the journal must be recycled.
    pub fn fits(&self, n: usize) -> bool {
        self.pos + n as u64 <= self.size
    }

    /// Writes a batch of records at the cursor and makes them durable (fdatasync).
    pub fn commit(&mut self, records: &[u8]) -> Result<(), StoreError> {
        self.file.write_all_at(records, self.pos).map_err(|e| StoreError::io("writing the journal", e))?;
        self.file.sync_data().map_err(|e| StoreError::io("fdatasync of the journal", e))?;
        self.pos += records.len() as u64;
        Ok(())
    }

    /// Starts the journal over at `head` (call only once everything before it is durable in sled).
    pub fn recycle(&mut self, head: JournalHead) -> Result<(), StoreError> {
        write_head(&self.dir, &head)?;
        self.head = head;
        self.pos = 0;
        Ok(())
    }
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

/// Looks past the last whole batch for a valid frame at or beyond `first_unkept` written by a
/// *later* batch than the one that starts there. Batches are written only after the previous one was
/// synced, so such a frame proves the break is damage to synced data, not a torn unacknowledged tail.
fn later_batch_evidence(bytes: &[u8], from: usize, first_unkept: u64) -> Option<u64> {
    for off in memchr::memmem::find_iter(&bytes[from..], FRAME_MAGIC) {
        let Some(rec) = (from + off).checked_sub(RECORD_HEADER).and_then(|at| record_at(bytes, at)) else {
            continue;
        };
        let Ok(f) = FrameRef::parse_verified(rec.frame) else {
            continue;
        };
        if f.seq() >= first_unkept && rec.batch_first > first_unkept {
            return Some(f.seq());
        }
    }
    None
}

fn write_head(dir: &Path, h: &JournalHead) -> Result<(), StoreError> {
    let tmp = dir.join("journal.head.tmp");
    let mut f = File::create(&tmp).map_err(|e| StoreError::io("writing journal.head", e))?;
    f.write_all(&encode_head(h)).map_err(|e| StoreError::io("writing journal.head", e))?;
    f.sync_all().map_err(|e| StoreError::io("syncing journal.head", e))?;
    fs::rename(&tmp, dir.join("journal.head")).map_err(|e| StoreError::io("installing journal.head", e))?;
    sync_dir(dir)
}
