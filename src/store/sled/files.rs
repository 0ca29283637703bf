//! The store's file layer: every write the log makes to its own files (segments and the commit
//! mark) goes through [`FileLayer`], so tests can inject faults (ENOSPC, EIO) at each step of a
//! commit and know exactly what was made durable. Reads (maps of the segments) and sled's own
//! files do not go through it. [`RealFiles`] is the default: plain `std::fs` plus
//! `posix_fallocate` to reserve a segment's space up front.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::Arc;

/// A file opened for writing through a [`FileLayer`].
pub trait LayerFile: Send + Sync {
    /// Writes all of `buf` at `off` (a `pwrite` loop).
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()>;
    /// `fdatasync`: makes the data written so far durable.
    fn sync_data(&self) -> io::Result<()>;
    /// Reserves `len` bytes of disk for the file (`posix_fallocate`), so running out of space shows
    /// here and not at a later write.
    fn allocate(&self, len: u64) -> io::Result<()>;
}

/// The file operations the log's writer uses.
pub trait FileLayer: Send + Sync + 'static {
    /// Opens an existing file for writing.
    fn open(&self, path: &Path) -> io::Result<Box<dyn LayerFile>>;
    /// Creates a file for writing, truncating one that exists.
    fn create(&self, path: &Path) -> io::Result<Box<dyn LayerFile>>;
    /// Renames `from` to `to` (atomically replacing `to`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes a directory's entries durable (after a create or rename in it).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
}

/// A shared file layer.
pub type SharedFiles = Arc<dyn FileLayer>;

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFiles;

struct RealFile(File);

impl LayerFile for RealFile {
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.0.write_all_at(buf, off)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        let len = libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a plain syscall on a file descriptor this struct owns.
        match unsafe { libc::posix_fallocate(self.0.as_raw_fd(), 0, len) } {
            0 => Ok(()),
            // Filesystems without fallocate: the zero-fill that follows reserves the space instead.
            libc::EOPNOTSUPP | libc::EINVAL => Ok(()),
            e => Err(io::Error::from_raw_os_error(e)),
        }
    }
}

impl FileLayer for RealFiles {
    fn open(&self, path: &Path) -> io::Result<Box<dyn LayerFile>> {
        Ok(Box::new(RealFile(OpenOptions::new().write(true).open(path)?)))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn LayerFile>> {
        Ok(Box::new(RealFile(File::create(path)?)))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
}
