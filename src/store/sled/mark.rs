//! The commit mark: `log/commit`, how far the log was committed, so that recovery can tell damage
//! to acknowledged frames from a torn, never-acknowledged tail.
//!
//! After each group commit's fdatasync and before its acks, the writer records `(end position,
//! next seq, hash of the last frame)` here. The write is a plain `pwrite` into the page cache: it
//! survives a `kill -9` of the process (the kernel still holds it) and is fdatasynced at every
//! checkpoint and on open. After a power loss it may be older than the segments, never newer (it is
//! written after the segments' fdatasync), so it is a lower bound of what was acknowledged: frames
//! it covers that fail to verify or are missing are corruption; a damaged tail past it is a batch
//! that was never acknowledged, and recovery may drop it.
//!
//! Two checksummed slots, written alternately (the one with the higher counter wins), so a write
//! torn by a crash leaves the other one intact. Both slots unreadable is damage.

use od_events::Hash;
use std::path::{Path, PathBuf};

use super::files::{LayerFile, SharedFiles};
use super::segments::Pos;
use crate::store::StoreError;

const MAGIC: &[u8; 4] = b"odc1";
/// Bytes of one slot: magic 4, seg 4, off 4, zero 4, counter 8, next seq 8, hash 32, checksum 8.
const SLOT: usize = 72;
/// Where the second slot starts (its own disk sector).
const SLOT_B: u64 = 512;
/// Size of the file.
const FILE_BYTES: u64 = 1024;

/// What the mark records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// Where the next batch goes.
    pub end: Pos,
    /// The first seq not committed (1 for an empty log).
    pub next_seq: u64,
    /// The hash of frame `next_seq - 1` (the genesis hash for an empty log).
    pub last_hash: Hash,
}

/// The mark's path in a log directory.
pub fn path(log_dir: &Path) -> PathBuf {
    log_dir.join("commit")
}

fn encode(m: &Mark, counter: u64) -> [u8; SLOT] {
    let mut b = [0u8; SLOT];
    b[0..4].copy_from_slice(MAGIC);
    b[4..8].copy_from_slice(&m.end.seg.to_le_bytes());
    b[8..12].copy_from_slice(&m.end.off.to_le_bytes());
    b[16..24].copy_from_slice(&counter.to_le_bytes());
    b[24..32].copy_from_slice(&m.next_seq.to_le_bytes());
    b[32..64].copy_from_slice(&m.last_hash);
    let sum = blake3::hash(&b[..64]);
    b[64..72].copy_from_slice(&sum.as_bytes()[..8]);
    b
}

fn decode(b: &[u8]) -> Option<(Mark, u64)> {
    let b = b.get(..SLOT)?;
    if &b[0..4] != MAGIC || b[64..72] != blake3::hash(&b[..64]).as_bytes()[..8] {
        return None;
    }
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    let m = Mark {
        end: Pos { seg: u32_at(4), off: u32_at(8) },
        next_seq: u64_at(24),
        last_hash: b[32..64].try_into().expect("32 bytes"),
    };
    Some((m, u64_at(16)))
}

/// Reads the mark of `log_dir` (read-only): `None` when there is no mark file (a new data dir, or
/// one written before marks existed), the newer valid slot otherwise, and `Corrupt` when the file
/// exists but neither slot verifies.
pub fn read(log_dir: &Path) -> Result<Option<(Mark, u64)>, StoreError> {
    let bytes = match std::fs::read(path(log_dir)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("reading the commit mark", e)),
    };
    let a = decode(&bytes);
    let b = bytes.get(SLOT_B as usize..).and_then(decode);
    match (a, b) {
        (Some(a), Some(b)) => Ok(Some(if b.1 > a.1 { b } else { a })),
        (Some(x), None) | (None, Some(x)) => Ok(Some(x)),
        (None, None) => Err(StoreError::Corrupt {
            seq: 0,
            reason: format!(
                "the commit mark {} is unreadable (both slots fail their checksum)",
                path(log_dir).display()
            ),
        }),
    }
}

/// The writer's handle on the mark.
pub struct MarkFile {
    file: Box<dyn LayerFile>,
    counter: u64,
}

impl MarkFile {
    /// Opens the mark of `log_dir` for writing and records `m` durably (creating the file, via a
    /// temporary one, if there is none). `found` is what [`read`] returned.
    pub fn open(files: &SharedFiles, log_dir: &Path, found: Option<(Mark, u64)>, m: Mark) -> Result<Self, StoreError> {
        let io = |during| move |e| StoreError::from_io(during, e);
        let Some((last, counter)) = found else {
            let tmp = log_dir.join("commit.tmp");
            let f = files.create(&tmp).map_err(io("creating the commit mark"))?;
            let made = f
                .write_at(&[0u8; FILE_BYTES as usize], 0)
                .and_then(|_| f.write_at(&encode(&m, 1), 0))
                .and_then(|_| f.sync_data())
                .and_then(|_| files.rename(&tmp, &path(log_dir)))
                .and_then(|_| files.sync_dir(log_dir));
            if let Err(e) = made {
                let _ = files.remove(&tmp);
                return Err(io("creating the commit mark")(e));
            }
            let file = files.open(&path(log_dir)).map_err(io("opening the commit mark"))?;
            return Ok(Self { file, counter: 1 });
        };
        let file = files.open(&path(log_dir)).map_err(io("opening the commit mark"))?;
        let mut mf = Self { file, counter };
        if last != m {
            mf.record(&m)?;
            mf.sync()?;
        }
        Ok(mf)
    }

    /// Records `m` (page cache only; see [`Self::sync`]). A failed write leaves the other slot, and
    /// the counter, as they were.
    pub fn record(&mut self, m: &Mark) -> Result<(), StoreError> {
        let counter = self.counter + 1;
        let at = if counter.is_multiple_of(2) { SLOT_B } else { 0 };
        self.file.write_at(&encode(m, counter), at).map_err(|e| StoreError::from_io("writing the commit mark", e))?;
        self.counter = counter;
        Ok(())
    }

    /// Makes the last recorded mark durable.
    pub fn sync(&self) -> Result<(), StoreError> {
        self.file.sync_data().map_err(|e| StoreError::from_io("fdatasync of the commit mark", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_roundtrip_and_reject_damage() {
        let m = Mark { end: Pos { seg: 2, off: 77 }, next_seq: 9, last_hash: [7; 32] };
        let mut b = encode(&m, 5);
        assert_eq!(decode(&b), Some((m, 5)));
        b[30] ^= 1;
        assert_eq!(decode(&b), None);
    }
}
