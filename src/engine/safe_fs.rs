//! File access below a directory that never follows a symbolic link: every path component under
//! the root is opened with `openat(…, O_NOFOLLOW)` relative to its parent's descriptor, so a link
//! planted anywhere on the way (or swapped in between a check and a write) cannot lead outside.
//! Writes go to a fresh temp file created with `O_CREAT | O_EXCL | O_NOFOLLOW` under a random
//! name, fsynced, and renamed over the target (`renameat` replaces a directory entry; it follows
//! nothing); the folder — and the parent of every folder created on the way — is fsynced before
//! [`Root::write_atomic`] returns, so what it wrote survives a power cut (`crate::durable` owns
//! those steps and the seam they go through). The root itself is trusted (the project's
//! directory, as recorded).
//!
//! Paths handed in are already cleaned (`files::clean_relative`): `/`-separated, no `..`.

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::durable::Syncs;
use std::path::Path;

/// Why an access below the root failed.
#[derive(Debug, thiserror::Error)]
pub enum SafeFsError {
    /// A component on the way (or the target) is a symbolic link.
    #[error("a symbolic link is on the way")]
    Link,
    /// The target or a directory on the way does not exist.
    #[error("not found")]
    NotFound,
    /// A component on the way is not a directory.
    #[error("{0} is not a directory")]
    NotADirectory(String),
    /// The target is a directory.
    #[error("is a directory")]
    IsDirectory,
    /// The target is not a regular file (a FIFO, a socket, a device).
    #[error("is not a regular file")]
    NotAFile,
    /// Anything else the OS said.
    #[error(transparent)]
    Io(std::io::Error),
}

impl From<std::io::Error> for SafeFsError {
    fn from(e: std::io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ELOOP) => SafeFsError::Link,
            Some(libc::ENOENT) => SafeFsError::NotFound,
            Some(libc::EISDIR) => SafeFsError::IsDirectory,
            _ => SafeFsError::Io(e),
        }
    }
}

type Result<T> = std::result::Result<T, SafeFsError>;

fn cstr(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| SafeFsError::Io(std::io::Error::from(std::io::ErrorKind::InvalidInput)))
}

fn last_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// `openat(dir, name, flags | O_CLOEXEC, mode)`, retried on EINTR.
fn open_at(dir: RawFd, name: &str, flags: libc::c_int, mode: libc::c_uint) -> Result<OwnedFd> {
    let c = cstr(name)?;
    loop {
        // SAFETY: `c` is a valid NUL-terminated string; the returned fd is owned by us alone.
        let fd = unsafe { libc::openat(dir, c.as_ptr(), flags | libc::O_CLOEXEC, mode) };
        if fd >= 0 {
            // SAFETY: `fd` was just returned by openat and is not owned elsewhere.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = last_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e.into());
        }
    }
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`'s file type bits, `None` when it does not exist.
fn kind_at(dir: RawFd, name: &str) -> Result<Option<libc::mode_t>> {
    let c = cstr(name)?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `c` is NUL-terminated and `st` is a valid out pointer for one `stat`.
    let rc = unsafe { libc::fstatat(dir, c.as_ptr(), st.as_mut_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
    if rc != 0 {
        let e = last_error();
        return if e.raw_os_error() == Some(libc::ENOENT) { Ok(None) } else { Err(e.into()) };
    }
    // SAFETY: fstatat succeeded, so it filled `st`.
    Ok(Some(unsafe { st.assume_init() }.st_mode & libc::S_IFMT))
}

fn unlink_at(dir: RawFd, name: &str) -> Result<()> {
    let c = cstr(name)?;
    // SAFETY: `c` is NUL-terminated.
    if unsafe { libc::unlinkat(dir, c.as_ptr(), 0) } != 0 {
        return Err(last_error().into());
    }
    Ok(())
}

/// A fresh temp-file tag for writers without an id source (the agent's prompt file, the dry-run
/// agent's drafts): the name is never observable state, only unique, so the OS random source is
/// used directly.
pub fn temp_tag() -> String {
    use crate::ids::IdGen;
    crate::ids::RandomIds.new_id()
}

/// Splits a cleaned relative path into its directories and its last name.
fn split(rel: &str) -> (Vec<&str>, &str) {
    let mut parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    let name = parts.pop().unwrap_or("");
    (parts, name)
}

/// A directory that accesses below it are confined to.
pub struct Root {
    fd: OwnedFd,
}

impl Root {
    /// Opens `path` (which must be a directory; the root itself may be reached through links).
    pub fn open(path: &Path) -> Result<Root> {
        let s = path.to_str().ok_or(SafeFsError::NotFound)?;
        Ok(Root { fd: open_at(libc::AT_FDCWD, s, libc::O_RDONLY | libc::O_DIRECTORY, 0)? })
    }

    /// Opens `root`, creating it (and its parents, which are trusted like the root) when missing;
    /// the folders it created are durable when it returns.
    pub fn create(path: &Path) -> Result<Root> {
        let mut syncs = Syncs::new();
        let root = Self::create_in(path, &mut syncs)?;
        syncs.commit()?;
        Ok(root)
    }

    /// [`Root::create`] as part of a batch: the parents of folders it made owe their fsyncs to
    /// `syncs` (nothing below it is acknowledged before [`Syncs::commit`]).
    pub fn create_in(path: &Path, syncs: &mut Syncs) -> Result<Root> {
        Ok(Root { fd: crate::durable::open_dir(path, syncs)? })
    }

    /// The directory `parts` below the root, each component opened without following links;
    /// missing ones are created when `syncs` is given (their parents then owe it an fsync).
    fn dir(&self, parts: &[&str], mut create: Option<&mut Syncs>) -> Result<OwnedFd> {
        let mut cur: Option<OwnedFd> = None;
        for part in parts {
            let at = cur.as_ref().unwrap_or(&self.fd).as_raw_fd();
            let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
            let next = match open_at(at, part, flags, 0) {
                Err(SafeFsError::NotFound) if create.is_some() => {
                    // SAFETY: `at` is an open directory that outlives this borrow.
                    let parent = unsafe { BorrowedFd::borrow_raw(at) };
                    if crate::durable::disk().mkdir_at(parent, part)? {
                        create.as_deref_mut().expect("checked above").add(parent)?;
                    }
                    open_at(at, part, flags, 0)
                }
                other => other,
            };
            let next = next.map_err(|e| match e {
                // Linux says ENOTDIR for a link opened with O_DIRECTORY | O_NOFOLLOW.
                SafeFsError::Io(io) if io.raw_os_error() == Some(libc::ENOTDIR) => match kind_at(at, part) {
                    Ok(Some(libc::S_IFLNK)) => SafeFsError::Link,
                    _ => SafeFsError::NotADirectory((*part).to_string()),
                },
                other => other,
            })?;
            cur = Some(next);
        }
        match cur {
            Some(fd) => Ok(fd),
            None => Ok(self.fd.try_clone().map_err(SafeFsError::Io)?),
        }
    }

    /// Replaces (or creates) the file `rel` with `bytes`, atomically and durably: a fresh temp
    /// file named with `tag` (unique per call: take it from the id source), fsynced, then renamed
    /// over the target, and its folder (and the parents of folders created) fsynced. Missing
    /// directories are created. A link at the target is refused, never followed.
    pub fn write_atomic(&self, rel: &str, bytes: &[u8], tag: &str) -> Result<()> {
        let mut syncs = Syncs::new();
        self.write_atomic_in(rel, bytes, tag, &mut syncs)?;
        Ok(syncs.commit()?)
    }

    /// [`Root::write_atomic`] as part of a batch: the folder fsyncs are owed to `syncs` (nothing
    /// written is acknowledged before [`Syncs::commit`]).
    pub fn write_atomic_in(&self, rel: &str, bytes: &[u8], tag: &str, syncs: &mut Syncs) -> Result<()> {
        self.write_temp(rel, bytes, tag, Some(syncs))
    }

    /// [`Root::write_atomic`] without the fsyncs: atomic, not durable — for an agent's own files
    /// (the dry-run agent's drafts, a prompt file), which od makes durable when it records them
    /// (`runner::pipeline::Ctx::sync_copies`) or never acknowledges.
    pub fn write_atomic_unsynced(&self, rel: &str, bytes: &[u8], tag: &str) -> Result<()> {
        self.write_temp(rel, bytes, tag, None)
    }

    fn write_temp(&self, rel: &str, bytes: &[u8], tag: &str, mut syncs: Option<&mut Syncs>) -> Result<()> {
        let (parts, name) = split(rel);
        // Folders made on the way owe their parent's fsync (to a throwaway batch when unsynced).
        let mut none = Syncs::new();
        let dir = self.dir(&parts, Some(syncs.as_deref_mut().unwrap_or(&mut none)))?;
        match kind_at(dir.as_raw_fd(), name)? {
            Some(libc::S_IFLNK) => return Err(SafeFsError::Link),
            Some(libc::S_IFDIR) => return Err(SafeFsError::IsDirectory),
            _ => {}
        }
        let tmp = format!(".od-{tag}.tmp");
        let sync = syncs.is_some();
        crate::durable::write_temp(dir.as_fd(), name, bytes, 0o666, &tmp, sync).map_err(|e| {
            match e.raw_os_error() {
                // O_EXCL: something (a link, a file) already sits at the temp name.
                Some(libc::EEXIST) => SafeFsError::Link,
                _ => SafeFsError::from(e),
            }
        })?;
        match syncs {
            Some(s) => Ok(s.add(dir.as_fd())?),
            None => Ok(()),
        }
    }

    /// Makes the regular file `rel` (written by someone else, e.g. an agent) durable: owes to
    /// `syncs` its fsync, its folder's and that of every folder on the way up to the root (any of
    /// them may be new: the writer did not say).
    pub fn sync_in(&self, rel: &str, syncs: &mut Syncs) -> Result<()> {
        let (parts, _) = split(rel);
        for depth in 0..parts.len() {
            syncs.add(self.dir(&parts[..depth], None)?.as_fd())?;
        }
        let dir = self.dir(&parts, None)?;
        let f = self.open_file(rel)?;
        Ok(crate::durable::sync_existing(dir.as_fd(), f, syncs)?)
    }

    /// Opens the regular file `rel` for reading (never a link, a FIFO or a device).
    pub fn open_file(&self, rel: &str) -> Result<File> {
        let (parts, name) = split(rel);
        let dir = self.dir(&parts, None)?;
        // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
        let fd = open_at(dir.as_raw_fd(), name, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK, 0)?;
        let f = File::from(fd);
        let meta = f.metadata().map_err(SafeFsError::Io)?;
        if meta.is_dir() {
            return Err(SafeFsError::IsDirectory);
        }
        if !meta.is_file() {
            return Err(SafeFsError::NotAFile);
        }
        Ok(f)
    }

    /// The bytes of the regular file `rel`.
    pub fn read(&self, rel: &str) -> Result<Vec<u8>> {
        let mut f = self.open_file(rel)?;
        let mut out = Vec::new();
        f.read_to_end(&mut out).map_err(SafeFsError::Io)?;
        Ok(out)
    }

    /// The blake3 digest (hex) and length of the regular file `rel`, read in bounded chunks.
    pub fn digest(&self, rel: &str) -> Result<(String, u64)> {
        let mut f = self.open_file(rel)?;
        let mut h = blake3::Hasher::new();
        let n = std::io::copy(&mut f, &mut h).map_err(SafeFsError::Io)?;
        Ok((h.finalize().to_hex().to_string(), n))
    }

    /// Removes the file `rel` (a link at it is refused; a directory too), durably: its folder is
    /// fsynced before this returns, so an acknowledged delete does not come back after a power cut.
    pub fn remove(&self, rel: &str) -> Result<()> {
        let (parts, name) = split(rel);
        let dir = self.dir(&parts, None)?;
        match kind_at(dir.as_raw_fd(), name)? {
            None => Err(SafeFsError::NotFound),
            Some(libc::S_IFLNK) => Err(SafeFsError::Link),
            Some(libc::S_IFDIR) => Err(SafeFsError::IsDirectory),
            Some(_) => {
                unlink_at(dir.as_raw_fd(), name)?;
                Ok(crate::durable::disk().sync_dir(dir.as_fd())?)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_anywhere_on_the_way_are_refused_and_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let (root_dir, outside) = (tmp.path().join("root"), tmp.path().join("outside"));
        std::fs::create_dir_all(&root_dir).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("victim"), "precious").unwrap();
        symlink(&outside, root_dir.join("out")).unwrap();
        symlink(outside.join("victim"), root_dir.join("v")).unwrap();
        let root = Root::open(&root_dir).unwrap();
        assert!(matches!(root.write_atomic("out/victim", b"x", "t1"), Err(SafeFsError::Link)));
        assert!(matches!(root.write_atomic("out/new", b"x", "t2"), Err(SafeFsError::Link)));
        assert!(matches!(root.write_atomic("v", b"x", "t3"), Err(SafeFsError::Link)));
        assert!(matches!(root.read("v"), Err(SafeFsError::Link)));
        assert!(matches!(root.read("out/victim"), Err(SafeFsError::Link)));
        assert!(matches!(root.remove("v"), Err(SafeFsError::Link)));
        // A link at the temp name is never written through.
        symlink(outside.join("victim"), root_dir.join(".od-t4.tmp")).unwrap();
        assert!(matches!(root.write_atomic("a.txt", b"x", "t4"), Err(SafeFsError::Link)));
        assert_eq!(std::fs::read_to_string(outside.join("victim")).unwrap(), "precious");
        assert!(!outside.join("new").exists());
        root.write_atomic("d/e/f.txt", b"hello", "t5").unwrap();
        assert_eq!(root.read("d/e/f.txt").unwrap(), b"hello");
        assert_eq!(root.digest("d/e/f.txt").unwrap().1, 5);
        assert!(matches!(root.write_atomic("d/e/f.txt/g", b"x", "t6"), Err(SafeFsError::NotADirectory(_))));
        assert!(matches!(root.write_atomic("d", b"x", "t7"), Err(SafeFsError::IsDirectory)));
        root.remove("d/e/f.txt").unwrap();
        assert!(matches!(root.read("d/e/f.txt"), Err(SafeFsError::NotFound)));
        let names: Vec<_> = std::fs::read_dir(&root_dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 4, "no temp file is left behind: {names:?}");
    }
}
