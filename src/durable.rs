//! Acknowledged means durable, for every file od writes outside the log (issue 38). This module owns
//! the one write primitive and the seam it goes through:
//!
//! - the steps: a fresh temp file in the target's folder (`O_CREAT | O_EXCL | O_NOFOLLOW`), write,
//!   fsync the file, rename it over the target, fsync the folder — and fsync the parent of every
//!   folder created on the way ([`write_file`]; `engine::safe_fs::Root::write_atomic` takes the same
//!   steps below a confined root);
//! - [`Syncs`]: the folder fsyncs still owed, one per folder however many files were renamed into
//!   it, so a plugin install's tree or a run's artifacts cost one folder fsync per folder;
//! - [`Disk`]: the seam every step goes through (write, fsync, mkdir, rename, folder fsync). The
//!   process has one ([`disk`]), [`RealDisk`] by default; a test installs a double ([`set_disk`])
//!   that records what was synced and, when it "cuts power", drops everything that was not.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

mod sync_pool;

/// The file-system steps a durable write takes; names are single path components relative to an
/// open folder (`dir`), so nothing here resolves a path twice.
pub trait Disk: Send + Sync + 'static {
    /// Writes all of `bytes` to `f` (a temp file just created by the caller).
    fn write(&self, f: &mut File, bytes: &[u8]) -> io::Result<()> {
        f.write_all(bytes)
    }
    /// `fsync(f)`: its data and metadata are durable when it returns.
    fn sync_file(&self, f: &File) -> io::Result<()> {
        f.sync_all()
    }
    /// `mkdirat(dir, name)`; `Ok(false)` when it already exists.
    fn mkdir_at(&self, dir: BorrowedFd<'_>, name: &str) -> io::Result<bool> {
        let c = cstr(name)?;
        // SAFETY: `c` is NUL-terminated and `dir` is an open descriptor.
        if unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o777) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EEXIST) {
            Ok(false)
        } else {
            Err(e)
        }
    }
    /// `renameat(dir, from, dir, to)`: replaces `to` atomically.
    fn rename_at(&self, dir: BorrowedFd<'_>, from: &str, to: &str) -> io::Result<()> {
        let (f, t) = (cstr(from)?, cstr(to)?);
        let d = dir.as_raw_fd();
        // SAFETY: both names are NUL-terminated; `d` is an open folder.
        if unsafe { libc::renameat(d, f.as_ptr(), d, t.as_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
    /// `renameat(from_dir, from, to_dir, to)`: moves `from` into another folder, replacing `to`
    /// atomically (a blob's temp file into its digest's folder); `to_dir` owes an fsync.
    fn rename_between(&self, from_dir: BorrowedFd<'_>, from: &str, to_dir: BorrowedFd<'_>, to: &str) -> io::Result<()> {
        let (f, t) = (cstr(from)?, cstr(to)?);
        // SAFETY: both names are NUL-terminated; both folders are open.
        if unsafe { libc::renameat(from_dir.as_raw_fd(), f.as_ptr(), to_dir.as_raw_fd(), t.as_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
    /// `fsync` of a folder: the entries created, renamed or removed in it are durable.
    fn sync_dir(&self, dir: BorrowedFd<'_>) -> io::Result<()> {
        // SAFETY: a plain syscall on an open descriptor.
        if unsafe { libc::fsync(dir.as_raw_fd()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// The real file system (every step is the syscall it names).
#[derive(Debug, Default, Clone, Copy)]
pub struct RealDisk;

impl Disk for RealDisk {}

/// A shared disk.
pub type SharedDisk = Arc<dyn Disk>;

static DISK: RwLock<Option<SharedDisk>> = RwLock::new(None);

/// The process's disk ([`RealDisk`] unless a test installed another).
pub fn disk() -> SharedDisk {
    DISK.read().unwrap_or_else(|e| e.into_inner()).clone().unwrap_or_else(|| Arc::new(RealDisk))
}

/// Installs `d` as the process's disk (tests: a fault-injecting double); returns the previous one.
pub fn set_disk(d: SharedDisk) -> SharedDisk {
    let prev = DISK.write().unwrap_or_else(|e| e.into_inner()).replace(d);
    prev.unwrap_or_else(|| Arc::new(RealDisk))
}

fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))
}

/// `openat(dir, name, flags | O_CLOEXEC, mode)`, retried on EINTR (`dir` None: the working folder).
pub fn open_at(dir: Option<BorrowedFd<'_>>, name: &str, flags: libc::c_int, mode: libc::c_uint) -> io::Result<OwnedFd> {
    let c = cstr(name)?;
    let at = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    loop {
        // SAFETY: `c` is a valid NUL-terminated string; the returned fd is owned by us alone.
        let fd = unsafe { libc::openat(at, c.as_ptr(), flags | libc::O_CLOEXEC, mode) };
        if fd >= 0 {
            // SAFETY: `fd` was just returned by openat and is not owned elsewhere.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The fsyncs a batch of writes still owes: one per folder, and one per file someone else wrote.
/// Nothing written through the batch may be acknowledged before [`Syncs::commit`] returns.
#[derive(Default)]
pub struct Syncs {
    dirs: Vec<((u64, u64), OwnedFd)>,
    files: Vec<((u64, u64), File)>,
}

impl Syncs {
    pub fn new() -> Self {
        Self::default()
    }

    /// Owes an fsync of folder `dir` (once, however often it is added).
    pub fn add(&mut self, dir: BorrowedFd<'_>) -> io::Result<()> {
        let meta = File::from(dir.try_clone_to_owned()?).metadata()?;
        let key = (meta.dev(), meta.ino());
        if !self.dirs.iter().any(|(k, _)| *k == key) {
            self.dirs.push((key, dir.try_clone_to_owned()?));
        }
        Ok(())
    }

    /// Owes an fsync of file `f` (once per file).
    pub fn add_file(&mut self, f: File) -> io::Result<()> {
        let meta = f.metadata()?;
        let key = (meta.dev(), meta.ino());
        if !self.files.iter().any(|(k, _)| *k == key) {
            self.files.push((key, f));
        }
        Ok(())
    }

    /// How many fsyncs are owed.
    pub fn len(&self) -> usize {
        self.dirs.len() + self.files.len()
    }

    /// Whether none is owed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes on what `other` owes (each fsync still once).
    pub fn absorb(&mut self, other: Syncs) {
        for (k, fd) in other.dirs {
            if !self.dirs.iter().any(|(d, _)| *d == k) {
                self.dirs.push((k, fd));
            }
        }
        for (k, f) in other.files {
            if !self.files.iter().any(|(d, _)| *d == k) {
                self.files.push((k, f));
            }
        }
    }

    /// Pays them around `between`: every file first (in parallel, as in [`Syncs::commit`]), then
    /// `between` runs — it renames the files just synced into place and owes their folders to the
    /// batch — then every folder. One batch of fsyncs for temp files that must be whole before
    /// their names appear (blobs), and folders that must hold those names before anything names
    /// them.
    pub fn commit_around(mut self, between: impl FnOnce(&mut Syncs) -> io::Result<()>) -> io::Result<()> {
        sync_pool::run(self.files.drain(..).map(|(_, f)| f).collect(), sync_file)?;
        between(&mut self)?;
        self.commit()
    }

    /// Pays them: the files, then the folders. Many are issued from up to [`MAX_SYNC_THREADS`]
    /// threads at once (`sync_pool`), so the file system commits them together (one journal
    /// commit for the lot, not one per fsync).
    ///
    /// [`MAX_SYNC_THREADS`]: crate::limits::MAX_SYNC_THREADS
    pub fn commit(self) -> io::Result<()> {
        sync_pool::run(self.files.into_iter().map(|(_, f)| f).collect(), sync_file)?;
        sync_pool::run(self.dirs.into_iter().rev().map(|(_, fd)| fd).collect(), sync_dir)
    }
}

fn sync_file(f: &File) -> io::Result<()> {
    disk().sync_file(f)
}

fn sync_dir(fd: &OwnedFd) -> io::Result<()> {
    disk().sync_dir(fd.as_fd())
}

/// Opens folder `path`, creating it and any missing parent (each new folder's parent owes an
/// fsync to `syncs`). The path is trusted (od's data dir, a project's recorded folder).
pub fn open_dir(path: &Path, syncs: &mut Syncs) -> io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY;
    let s = path.to_str().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a path is not UTF-8"))?;
    match open_at(None, if s.is_empty() { "." } else { s }, flags, 0) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        other => return other,
    }
    let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Err(io::Error::from(io::ErrorKind::NotFound));
    };
    let parent_fd = open_dir(parent, syncs)?;
    if disk().mkdir_at(parent_fd.as_fd(), name)? {
        syncs.add(parent_fd.as_fd())?;
    }
    open_at(Some(parent_fd.as_fd()), name, flags, 0)
}

/// A fresh temp-file name beside a target.
fn temp_name() -> String {
    use crate::ids::IdGen;
    format!(".od-{}.tmp", crate::ids::RandomIds.new_id())
}

/// Writes `bytes` as `name` in the open folder `dir`: temp file, write, fsync, rename; the folder
/// owes its fsync to `syncs`. A link at the temp name is never followed (`O_EXCL | O_NOFOLLOW`).
pub fn write_in(dir: BorrowedFd<'_>, name: &str, bytes: &[u8], mode: u32, syncs: &mut Syncs) -> io::Result<()> {
    write_named(dir, name, bytes, mode, &temp_name(), syncs)
}

/// [`write_in`] with the temp file's name given (`tmp`, unique per call).
pub fn write_named(
    dir: BorrowedFd<'_>,
    name: &str,
    bytes: &[u8],
    mode: u32,
    tmp: &str,
    syncs: &mut Syncs,
) -> io::Result<()> {
    write_temp(dir, name, bytes, mode, tmp, true)?;
    syncs.add(dir)
}

/// Temp file, write, fsync when `sync`, rename; the temp file is removed when a step fails.
pub fn write_temp(dir: BorrowedFd<'_>, name: &str, bytes: &[u8], mode: u32, tmp: &str, sync: bool) -> io::Result<()> {
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
    let fd = open_at(Some(dir), tmp, flags, mode)?;
    let d = disk();
    let mut f = File::from(fd);
    let written = d
        .write(&mut f, bytes)
        .and_then(|()| if sync { d.sync_file(&f) } else { Ok(()) })
        .and_then(|()| d.rename_at(dir, tmp, name));
    if written.is_err() {
        if let Ok(c) = cstr(tmp) {
            // SAFETY: `c` is NUL-terminated; `dir` is open.
            unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) };
        }
    }
    written
}

/// Splits `path` into its folder and file name.
fn split(path: &Path) -> io::Result<(PathBuf, &str)> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{} names no file", path.display())))?;
    let parent = path.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok((parent, name))
}

/// Writes `bytes` to `path` as part of a batch (its folder's fsync owed to `syncs`).
pub fn write_file_in(path: &Path, bytes: &[u8], syncs: &mut Syncs) -> io::Result<()> {
    let (parent, name) = split(path)?;
    let dir = open_dir(&parent, syncs)?;
    write_in(dir.as_fd(), name, bytes, 0o666, syncs)
}

/// Replaces (or creates) `path` with `bytes`, durably: when it returns, the bytes survive a power
/// cut (missing folders are created, and they survive too).
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_file_mode(path, bytes, 0o666)
}

/// [`write_file`] with the new file's permission bits (e.g. `0o600` for a secret).
pub fn write_file_mode(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let mut syncs = Syncs::new();
    let (parent, name) = split(path)?;
    let dir = open_dir(&parent, &mut syncs)?;
    write_in(dir.as_fd(), name, bytes, mode, &mut syncs)?;
    syncs.commit()
}

/// Makes a file someone else wrote (an agent's artifact) durable: owes its fsync and its
/// folder's to `syncs`.
pub fn sync_existing(dir: BorrowedFd<'_>, f: File, syncs: &mut Syncs) -> io::Result<()> {
    syncs.add_file(f)?;
    syncs.add(dir)
}

/// Renames `from` to `to` (both in folder `dir`, a file or a folder) and owes `dir`'s fsync.
pub fn rename_in(dir: &Path, from: &str, to: &str, syncs: &mut Syncs) -> io::Result<()> {
    let fd = open_dir(dir, syncs)?;
    disk().rename_at(fd.as_fd(), from, to)?;
    syncs.add(fd.as_fd())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_durable_write_creates_its_folders_and_leaves_no_temp_file() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("a/b/c.txt");
        write_file(&p, b"one").unwrap();
        write_file(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> =
            std::fs::read_dir(tmp.path().join("a/b")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let mut s = Syncs::new();
        write_file_in(&tmp.path().join("a/x"), b"x", &mut s).unwrap();
        write_file_in(&tmp.path().join("a/y"), b"y", &mut s).unwrap();
        assert_eq!(s.len(), 1, "one folder fsync owed for two files in one folder");
        s.commit().unwrap();
    }
}
