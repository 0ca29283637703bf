//! Content-addressed blobs: the bytes of every artifact a run records, kept by their blake3 digest
//! under `<shared dir>/blobs/<first 2 hex>/<other 62 hex>`, so a run's files can be read back as they
//! were when it recorded them, whatever later runs did to the project folder (issue 16).
//!
//! A blob is streamed into a temporary file beside its final place while it is hashed, bounded by
//! [`MAX_BLOB_BYTES`], fsynced, renamed to its digest and the folder fsynced: it exists whole or not
//! at all, and it is durable before the event naming it is submitted. Equal bytes are stored once
//! (a blob that already exists is not written again).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::limits::MAX_BLOB_BYTES;

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
}

fn valid(digest: &str) -> bool {
    digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Blobs {
    /// The store under `dir` (created on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into(), seq: AtomicU64::new(0), touched: Default::default(), gc_lock: Default::default() }
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
    /// returns.
    pub fn put(&self, r: impl Read) -> Result<(String, u64), BlobError> {
        self.put_bounded(r, MAX_BLOB_BYTES)
    }

    fn put_bounded(&self, mut r: impl Read, max: u64) -> Result<(String, u64), BlobError> {
        // A folder created on the way is durable too (its parent fsynced).
        let mut syncs = crate::durable::Syncs::new();
        crate::durable::open_dir(&self.dir, &mut syncs)?;
        syncs.commit()?;
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let tmp = self.dir.join(format!(".tmp-{}-{n}", std::process::id()));
        let written = (|| {
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            let mut h = blake3::Hasher::new();
            let mut buf = vec![0u8; 64 * 1024];
            let mut len = 0u64;
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
                f.write_all(&buf[..k])?;
            }
            f.sync_all()?;
            Ok((h.finalize().to_hex().to_string(), len))
        })();
        let (digest, len) = match written {
            Ok(d) => d,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        let dst = self.path(&digest)?;
        // Noted before it is in place: a collection pass running now leaves it alone.
        self.touched.lock().unwrap_or_else(|e| e.into_inner()).insert(digest.clone());
        if dst.is_file() {
            std::fs::remove_file(&tmp)?;
            return Ok((digest, len));
        }
        let parent = dst.parent().expect("a blob has a folder");
        crate::durable::open_dir(parent, &mut crate::durable::Syncs::new())?;
        std::fs::rename(&tmp, &dst)?;
        std::fs::File::open(parent)?.sync_all()?;
        std::fs::File::open(&self.dir)?.sync_all()?;
        Ok((digest, len))
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
        assert!(matches!(b.put_bounded(&[7u8; 100][..], 99), Err(BlobError::TooBig { max: 99 })));
        assert!(walk(b.dir()).is_empty(), "nothing left of a refused blob");
        assert!(matches!(b.path("../etc/passwd"), Err(BlobError::BadDigest(_))));
        assert!(matches!(b.open(&"a".repeat(64)), Err(BlobError::NotFound(_))));
        let (d, _) = b.put(&b"abc"[..]).unwrap();
        std::fs::write(b.path(&d).unwrap(), b"abd").unwrap();
        assert!(b.read(&d).is_err(), "a damaged blob is not returned as data");
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
