//! Content-addressed blobs: the bytes of every artifact a run records, kept by their blake3 digest
//! under `<shared dir>/blobs/<first 2 hex>/<other 62 hex>`, so a run's files can be read back as they
//! were when it recorded them, whatever later runs did to the project folder (issue 16).
//!
//! A blob up to [`BLOB_IN_MEMORY_BYTES`] is read and hashed in memory first, so bytes already
//! stored cost no file; a new one, or a bigger one (streamed while it is hashed, bounded by
//! [`MAX_BLOB_BYTES`]), goes into a temporary file in the blob folder ([`Blobs::stage`], into a
//! [`BlobBatch`]); the batch is then made durable at
//! once ([`BlobBatch::commit`]): every temp file fsynced together, each renamed to its digest, and
//! every folder that gained a name fsynced together — several blobs per round of fsyncs (with
//! whatever else the caller owes, e.g. a run's project copies), which the file system's journal
//! commits as one. A blob exists whole or not at all, and nothing names it before its batch is
//! committed: the runner commits a run's batch before the append of the events naming its blobs
//! (`runner::recorder`). [`Blobs::put`] is a batch of one. Every step goes through
//! [`crate::durable`]'s seam. Equal bytes are stored once (a blob that already exists is not
//! written again; its folder is still synced with the batch, in case another batch's rename of it
//! is not durable yet).

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::durable::{disk, Syncs};
use crate::limits::{BLOB_IN_MEMORY_BYTES, MAX_BLOB_BYTES};

/// Why a blob could not be stored or read.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("blob I/O failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("MAX_BLOB_BYTES exceeded: more than {max} bytes")]
    TooBig { max: u64 },
    #[error("{0:?} is not a blake3 digest (64 lowercase hex digits)")]
    BadDigest(String),
    #[error("no blob {0}")]
    NotFound(String),
}

/// The blob store of one shared dir.
pub struct Blobs {
    dir: PathBuf,
    /// Names temporary files apart within this process.
    seq: AtomicU64,
    /// Digests stored since garbage collection last looked: an artifact naming one may be on its
    /// way to the log, so collection leaves them alone until its next pass.
    touched: std::sync::Mutex<std::collections::HashSet<String>>,
    /// One collection pass at a time (the periodic one and `od files gc` may meet).
    pub gc_lock: std::sync::Mutex<()>,
    /// Digests renamed into place by a batch whose folder fsyncs are not done yet: a batch that
    /// finds one of them stored owes its folder's fsync too.
    unsynced: Unsynced,
}

type Unsynced = std::sync::Arc<std::sync::Mutex<std::collections::HashSet<String>>>;

fn valid(digest: &str) -> bool {
    digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Blobs {
    /// The store under `dir` (created on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            seq: AtomicU64::new(0),
            touched: Default::default(),
            gc_lock: Default::default(),
            unsynced: Default::default(),
        }
    }

    /// Where blob `digest` lives.
    pub fn path(&self, digest: &str) -> Result<PathBuf, BlobError> {
        if !valid(digest) {
            return Err(BlobError::BadDigest(digest.to_string()));
        }
        Ok(self.dir.join(&digest[..2]).join(&digest[2..]))
    }

    /// Whether blob `digest` is stored.
    pub fn contains(&self, digest: &str) -> bool {
        self.path(digest).is_ok_and(|p| p.is_file())
    }

    /// Stores what `r` yields (at most [`MAX_BLOB_BYTES`]); its digest and length. Durable when it
    /// returns (a batch of one).
    pub fn put(&self, r: impl Read) -> Result<(String, u64), BlobError> {
        let mut batch = BlobBatch::default();
        let stored = self.stage_bounded(r, MAX_BLOB_BYTES, &mut batch)?;
        batch.commit(Syncs::new())?;
        Ok(stored)
    }

    /// Writes what `r` yields (at most [`MAX_BLOB_BYTES`]) into `batch`, not yet durable: nothing
    /// may name the digest returned before [`BlobBatch::commit`] returns.
    pub fn stage(&self, r: impl Read, batch: &mut BlobBatch) -> Result<(String, u64), BlobError> {
        self.stage_bounded(r, MAX_BLOB_BYTES, batch)
    }

    fn stage_bounded(&self, r: impl Read, max: u64, batch: &mut BlobBatch) -> Result<(String, u64), BlobError> {
        let dir = batch.open(&self.dir)?;
        batch.unsynced = Some(self.unsynced.clone());
        let staged = self.stage_in(&dir, r, max, batch)?;
        batch.dir = Some((self.dir.clone(), dir));
        Ok(staged)
    }

    /// [`Blobs::stage_bounded`] in the open blob folder `dir`.
    fn stage_in(
        &self,
        dir: &OwnedFd,
        mut r: impl Read,
        max: u64,
        batch: &mut BlobBatch,
    ) -> Result<(String, u64), BlobError> {
        // Small blobs are hashed before a file is made: one already stored costs none.
        let (head, whole) = read_head(&mut r, BLOB_IN_MEMORY_BYTES, max)?;
        if whole {
            let digest = blake3::hash(&head).to_hex().to_string();
            self.touch(&digest);
            if !self.note_if_stored(&digest, batch)? {
                let (tmp, mut f) = self.temp_file(dir)?;
                let written = disk().write(&mut f, &head).map_err(BlobError::from);
                if let Err(e) = written.and_then(|()| Ok(batch.syncs.add_file(f)?)) {
                    unlink(dir, &tmp);
                    return Err(e);
                }
                batch.pending.push(Pending { tmp, digest: digest.clone() });
            }
            return Ok((digest, head.len() as u64));
        }
        let (tmp, mut f) = self.temp_file(dir)?;
        let (digest, len) = match stream(&head, r, &mut f, max) {
            Ok(d) => d,
            Err(e) => {
                unlink(dir, &tmp);
                return Err(e);
            }
        };
        self.touch(&digest);
        if self.note_if_stored(&digest, batch)? {
            unlink(dir, &tmp);
        } else {
            batch.syncs.add_file(f)?;
            batch.pending.push(Pending { tmp, digest: digest.clone() });
        }
        Ok((digest, len))
    }

    /// A new temp file in the blob folder `dir`: (its name, the file).
    fn temp_file(&self, dir: &OwnedFd) -> Result<(String, File), BlobError> {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let tmp = format!(".tmp-{}-{n}", std::process::id());
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let f = File::from(crate::durable::open_at(Some(dir.as_fd()), &tmp, flags, 0o644)?);
        Ok((tmp, f))
    }

    /// Notes `digest` as stored since collection last looked: an artifact naming it may be on its
    /// way to the log, so a collection pass running now leaves it alone.
    fn touch(&self, digest: &str) {
        self.touched.lock().unwrap_or_else(|e| e.into_inner()).insert(digest.to_string());
    }

    /// Whether `digest` is stored already or staged in `batch`: then nothing is written for it, and
    /// the batch owes its folder's fsync if another batch's rename of it is not durable yet.
    fn note_if_stored(&self, digest: &str, batch: &mut BlobBatch) -> Result<bool, BlobError> {
        if !(self.path(digest)?.is_file() || batch.pending.iter().any(|p| p.digest == digest)) {
            return Ok(false);
        }
        if self.unsynced.lock().unwrap_or_else(|e| e.into_inner()).contains(digest) {
            batch.existing.push(digest.to_string());
        }
        Ok(true)
    }

    /// The digests stored since the last call (garbage collection's "recent" set).
    pub fn take_touched(&self) -> std::collections::HashSet<String> {
        std::mem::take(&mut *self.touched.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether `digest` was stored since [`Blobs::take_touched`] last ran.
    pub fn touched(&self, digest: &str) -> bool {
        self.touched.lock().unwrap_or_else(|e| e.into_inner()).contains(digest)
    }

    /// Every stored blob's digest and size (temporary files skipped).
    pub fn list(&self) -> Result<Vec<(String, u64)>, BlobError> {
        let mut out = Vec::new();
        let Ok(top) = std::fs::read_dir(&self.dir) else { return Ok(out) };
        for d in top.flatten() {
            let head = d.file_name().to_string_lossy().to_string();
            if head.len() != 2 || !d.path().is_dir() {
                continue;
            }
            for f in std::fs::read_dir(d.path())?.flatten() {
                let digest = format!("{head}{}", f.file_name().to_string_lossy());
                if valid(&digest) {
                    out.push((digest, f.metadata()?.len()));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// Removes blob `digest` (garbage collection, after recording why).
    pub fn remove(&self, digest: &str) -> Result<(), BlobError> {
        let p = self.path(digest)?;
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(BlobError::Io(e)),
            _ => Ok(()),
        }
    }

    /// Blob `digest`, opened for reading.
    pub fn open(&self, digest: &str) -> Result<std::fs::File, BlobError> {
        let p = self.path(digest)?;
        std::fs::File::open(&p).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => BlobError::NotFound(digest.to_string()),
            _ => BlobError::Io(e),
        })
    }

    /// Blob `digest`'s bytes, checked against the digest (a damaged blob is an error, not data).
    pub fn read(&self, digest: &str) -> Result<Vec<u8>, BlobError> {
        let mut bytes = Vec::new();
        self.open(digest)?.read_to_end(&mut bytes)?;
        if blake3::hash(&bytes).to_hex().as_str() != digest {
            return Err(BlobError::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("blob {digest} does not hash to its name"),
            )));
        }
        Ok(bytes)
    }

    /// The folder the blobs live in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Reads `r` until it ends or more than `cap` bytes came (at most `max`): (the bytes, whether that
/// was all of it).
fn read_head(r: &mut impl Read, cap: usize, max: u64) -> Result<(Vec<u8>, bool), BlobError> {
    let mut head = Vec::new();
    let n = r.take(cap as u64 + 1).read_to_end(&mut head)?;
    if n as u64 > max {
        return Err(BlobError::TooBig { max });
    }
    Ok((head, n <= cap))
}

/// Writes `head` and then the rest of `r` into `f` through the seam, hashing it all; (digest,
/// length).
fn stream(head: &[u8], mut r: impl Read, f: &mut File, max: u64) -> Result<(String, u64), BlobError> {
    let d = disk();
    let mut h = blake3::Hasher::new();
    h.update(head);
    d.write(f, head)?;
    let mut buf = vec![0u8; BLOB_IN_MEMORY_BYTES];
    let mut len = head.len() as u64;
    loop {
        let k = r.read(&mut buf)?;
        if k == 0 {
            break;
        }
        len += k as u64;
        if len > max {
            return Err(BlobError::TooBig { max });
        }
        h.update(&buf[..k]);
        d.write(f, &buf[..k])?;
    }
    Ok((h.finalize().to_hex().to_string(), len))
}

fn unlink(dir: &OwnedFd, name: &str) {
    if let Ok(c) = std::ffi::CString::new(name) {
        // SAFETY: `c` is NUL-terminated; `dir` is an open folder.
        unsafe { libc::unlinkat(std::os::fd::AsRawFd::as_raw_fd(dir), c.as_ptr(), 0) };
    }
}

/// A blob written to its temp file, waiting for its batch's commit.
struct Pending {
    tmp: String,
    digest: String,
}

/// Blobs staged and not yet durable (see the module's first lines). Dropped uncommitted, it
/// removes its temp files: nothing named them.
#[derive(Default)]
pub struct BlobBatch {
    /// The blob folder (path, open) once something was staged.
    dir: Option<(PathBuf, OwnedFd)>,
    /// The temp files' fsyncs, and those of folders created on the way to the blob folder.
    syncs: Syncs,
    pending: Vec<Pending>,
    /// Digests staged that another batch stored and has not synced the folder of yet.
    existing: Vec<String>,
    /// The store's [`Blobs::unsynced`].
    unsynced: Option<Unsynced>,
}

impl BlobBatch {
    /// Whether nothing was staged since the last commit.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.existing.is_empty() && self.syncs.is_empty()
    }

    /// The blob folder `dir`, open (created, its parent owing an fsync, the first time).
    fn open(&mut self, dir: &Path) -> Result<OwnedFd, BlobError> {
        match &self.dir {
            Some((p, fd)) if p == dir => Ok(fd.try_clone()?),
            _ => Ok(crate::durable::open_dir(dir, &mut self.syncs)?),
        }
    }

    /// Makes every staged blob durable together with what `also` owes (its files fsynced with the
    /// temp files, its folders with the blobs' folders): the temp files' fsyncs, then each rename
    /// to its digest, then the folders' fsyncs. When it returns, the batch's digests may be named.
    pub fn commit(mut self, mut also: Syncs) -> Result<(), BlobError> {
        also.absorb(std::mem::take(&mut self.syncs));
        let pending = std::mem::take(&mut self.pending);
        let existing = std::mem::take(&mut self.existing);
        let Some((path, dir)) = self.dir.take() else {
            return Ok(also.commit()?);
        };
        let unsynced = self.unsynced.take().unwrap_or_default();
        let note = |add: bool| {
            let mut u = unsynced.lock().unwrap_or_else(|e| e.into_inner());
            for p in &pending {
                match add {
                    true => u.insert(p.digest.clone()),
                    false => u.remove(&p.digest),
                };
            }
        };
        let committed = also.commit_around(|s| {
            note(true);
            for p in &pending {
                let sub = crate::durable::open_dir(&path.join(&p.digest[..2]), s)?;
                disk().rename_between(dir.as_fd(), &p.tmp, sub.as_fd(), &p.digest[2..])?;
                s.add(sub.as_fd())?;
            }
            for d in &existing {
                if let Ok(sub) = crate::durable::open_dir(&path.join(&d[..2]), s) {
                    s.add(sub.as_fd())?;
                }
            }
            Ok(())
        });
        match committed {
            // Left noted on failure: a later batch finding one of them syncs its folder.
            Err(e) => {
                pending.iter().for_each(|p| unlink(&dir, &p.tmp));
                Err(e.into())
            }
            Ok(()) => {
                note(false);
                Ok(())
            }
        }
    }
}

impl Drop for BlobBatch {
    fn drop(&mut self) {
        if let Some((_, dir)) = &self.dir {
            self.pending.iter().for_each(|p| unlink(dir, &p.tmp));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_is_stored_once_by_its_digest_and_reads_back() {
        let tmp = tempfile::tempdir().unwrap();
        let b = Blobs::new(tmp.path().join("blobs"));
        let (d, n) = b.put(&b"<h1>tea</h1>"[..]).unwrap();
        assert_eq!((d.as_str(), n), (blake3::hash(b"<h1>tea</h1>").to_hex().as_str(), 12));
        assert!(b.contains(&d));
        assert_eq!(b.read(&d).unwrap(), b"<h1>tea</h1>");
        let again = b.put(&b"<h1>tea</h1>"[..]).unwrap();
        assert_eq!(again.0, d);
        let files: Vec<_> = walk(b.dir());
        assert_eq!(files.len(), 1, "stored once, no temporary file left: {files:?}");
    }

    #[test]
    fn too_big_bad_names_and_damage_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let b = Blobs::new(tmp.path().join("blobs"));
        assert!(matches!(
            b.stage_bounded(&[7u8; 100][..], 99, &mut BlobBatch::default()),
            Err(BlobError::TooBig { max: 99 })
        ));
        assert!(walk(b.dir()).is_empty(), "nothing left of a refused blob");
        assert!(matches!(b.path("../etc/passwd"), Err(BlobError::BadDigest(_))));
        assert!(matches!(b.open(&"a".repeat(64)), Err(BlobError::NotFound(_))));
        let (d, _) = b.put(&b"abc"[..]).unwrap();
        std::fs::write(b.path(&d).unwrap(), b"abd").unwrap();
        assert!(b.read(&d).is_err(), "a damaged blob is not returned as data");
    }

    #[test]
    fn a_batch_names_nothing_before_its_commit_and_a_dropped_one_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let b = Blobs::new(tmp.path().join("blobs"));
        let mut batch = BlobBatch::default();
        let (one, _) = b.stage(&b"one"[..], &mut batch).unwrap();
        let (two, _) = b.stage(&b"two"[..], &mut batch).unwrap();
        let (again, _) = b.stage(&b"one"[..], &mut batch).unwrap();
        assert_eq!(again, one);
        assert!(!b.contains(&one) && !b.contains(&two), "staged is not stored yet");
        batch.commit(Syncs::new()).unwrap();
        assert_eq!((b.read(&one).unwrap(), b.read(&two).unwrap()), (b"one".to_vec(), b"two".to_vec()));
        assert_eq!(walk(b.dir()).len(), 2, "each stored once, no temp file left");
        let mut dropped = BlobBatch::default();
        let (three, _) = b.stage(&b"three"[..], &mut dropped).unwrap();
        drop(dropped);
        assert!(!b.contains(&three));
        assert_eq!(walk(b.dir()).len(), 2, "a dropped batch leaves no temp file");
    }

    #[test]
    fn bytes_already_stored_make_no_file_and_big_ones_stream() {
        let tmp = tempfile::tempdir().unwrap();
        let b = Blobs::new(tmp.path().join("blobs"));
        let small = b"<h1>tea</h1>".repeat(100);
        let (d, _) = b.put(&small[..]).unwrap();
        let temps = b.seq.load(Ordering::Relaxed);
        let mut batch = BlobBatch::default();
        assert_eq!(b.stage(&small[..], &mut batch).unwrap(), (d.clone(), small.len() as u64));
        assert_eq!(b.seq.load(Ordering::Relaxed), temps, "no temp file made for stored bytes");
        batch.commit(Syncs::new()).unwrap();
        // One byte over the in-memory size, and exactly it: both stored whole, by their digest.
        for len in [BLOB_IN_MEMORY_BYTES + 1, BLOB_IN_MEMORY_BYTES, 3 * BLOB_IN_MEMORY_BYTES + 7] {
            let big: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let (d, n) = b.put(&big[..]).unwrap();
            assert_eq!((d.as_str(), n), (blake3::hash(&big).to_hex().as_str(), len as u64));
            assert_eq!(b.read(&d).unwrap(), big);
        }
        assert!(matches!(
            b.stage_bounded(
                &vec![1u8; BLOB_IN_MEMORY_BYTES + 10][..],
                BLOB_IN_MEMORY_BYTES as u64 + 5,
                &mut BlobBatch::default()
            ),
            Err(BlobError::TooBig { .. })
        ));
        assert!(walk(b.dir()).iter().all(|p| !p.to_string_lossy().contains(".tmp-")), "no temp file left");
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                out.extend(walk(&e.path()));
            } else {
                out.push(e.path());
            }
        }
        out
    }
}
