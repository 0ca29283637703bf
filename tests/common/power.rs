//! A power-cut double of od's file-system seam (`od::durable::Disk`): it passes every step to the
//! real file system and remembers, for files and folders below its root, what was not made
//! durable — file data written and not fsynced since, folder entries made (a `mkdir`, a `rename`)
//! and not followed by an fsync of that folder. [`PowerCut::cut`] then does what losing power
//! does to those (as LazyFS does from outside): file data not synced is lost (the file is left
//! empty, what ext4 showed in issue 38), entries not synced are undone (a renamed-in file goes back
//! to what was there before, or vanishes; a new folder vanishes) — and from then on every step
//! below the root fails with EIO, as a machine without power writes nothing.
//!
//! Paths come from the descriptors (`/proc/self/fd`), so the double sees exactly what the
//! primitive does. Writes that bypass the seam are not seen (`tests/store/durability.rs` keeps plain
//! writes out of `src/`).

use od::durable::{Disk, RealDisk};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

enum EntryOp {
    Made(String),
    Renamed { to: String, before: Option<Vec<u8>> },
}

#[derive(Default)]
struct State {
    /// Files (dev, ino) with data written and not fsynced, and their last known path.
    dirty: Vec<((u64, u64), PathBuf)>,
    /// Folder entries made and not synced, oldest first.
    entries: Vec<(PathBuf, EntryOp)>,
    off: bool,
    /// What the cut dropped (for the test's message).
    dropped: Vec<String>,
}

pub struct PowerCut {
    root: PathBuf,
    state: Mutex<State>,
}

fn fd_path(fd: BorrowedFd<'_>) -> PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default()
}

fn key(f: &File) -> io::Result<(u64, u64)> {
    let m = f.metadata()?;
    Ok((m.dev(), m.ino()))
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

impl PowerCut {
    /// A double for everything below `root` (other paths pass through untouched).
    pub fn new(root: &Path) -> Arc<Self> {
        let root = std::fs::canonicalize(root).unwrap();
        Arc::new(Self { root, state: Mutex::new(State::default()) })
    }

    fn mine(&self, p: &Path) -> bool {
        p.starts_with(&self.root)
    }

    /// Whether the power is out (and `p` is below the root): then the step fails.
    fn dead(&self, p: &Path) -> bool {
        self.mine(p) && self.state.lock().unwrap().off
    }

    /// Cuts the power: drops what was not synced; returns what it dropped.
    pub fn cut(&self) -> Vec<String> {
        let mut st = self.state.lock().unwrap();
        st.off = true;
        let mut dropped = Vec::new();
        for (_, path) in std::mem::take(&mut st.dirty) {
            if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&path) {
                f.set_len(0).unwrap();
                dropped.push(format!("data of {}", path.display()));
            }
        }
        for (dir, op) in std::mem::take(&mut st.entries).into_iter().rev() {
            match op {
                EntryOp::Made(name) => {
                    let _ = std::fs::remove_dir_all(dir.join(&name));
                    dropped.push(format!("folder {}", dir.join(name).display()));
                }
                EntryOp::Renamed { to, before } => {
                    let p = dir.join(&to);
                    if p.is_dir() {
                        let _ = std::fs::remove_dir_all(&p);
                    } else {
                        let _ = std::fs::remove_file(&p);
                    }
                    if let Some(b) = before {
                        std::fs::write(&p, b).unwrap();
                    }
                    dropped.push(format!("entry {}", p.display()));
                }
            }
        }
        st.dropped.extend(dropped.clone());
        dropped
    }
}

impl Disk for PowerCut {
    fn write(&self, f: &mut File, bytes: &[u8]) -> io::Result<()> {
        let p = fd_path(f.as_fd());
        if self.dead(&p) {
            return Err(eio());
        }
        RealDisk.write(f, bytes)?;
        if self.mine(&p) {
            let k = key(f)?;
            let mut st = self.state.lock().unwrap();
            st.dirty.retain(|(d, _)| *d != k);
            st.dirty.push((k, p));
        }
        Ok(())
    }

    fn sync_file(&self, f: &File) -> io::Result<()> {
        let p = fd_path(f.as_fd());
        if self.dead(&p) {
            return Err(eio());
        }
        RealDisk.sync_file(f)?;
        let k = key(f)?;
        self.state.lock().unwrap().dirty.retain(|(d, _)| *d != k);
        Ok(())
    }

    fn mkdir_at(&self, dir: BorrowedFd<'_>, name: &str) -> io::Result<bool> {
        let p = fd_path(dir);
        if self.dead(&p) {
            return Err(eio());
        }
        let made = RealDisk.mkdir_at(dir, name)?;
        if made && self.mine(&p) {
            self.state.lock().unwrap().entries.push((p, EntryOp::Made(name.to_string())));
        }
        Ok(made)
    }

    fn rename_at(&self, dir: BorrowedFd<'_>, from: &str, to: &str) -> io::Result<()> {
        let p = fd_path(dir);
        if self.dead(&p) {
            return Err(eio());
        }
        let before = if self.mine(&p) && p.join(to).is_file() { std::fs::read(p.join(to)).ok() } else { None };
        RealDisk.rename_at(dir, from, to)?;
        if self.mine(&p) {
            let mut st = self.state.lock().unwrap();
            let (old, new) = (p.join(from), p.join(to));
            for (_, path) in st.dirty.iter_mut() {
                if let Ok(rest) = path.strip_prefix(&old) {
                    *path = if rest.as_os_str().is_empty() { new.clone() } else { new.join(rest) };
                }
            }
            for (d, _) in st.entries.iter_mut() {
                if let Ok(rest) = d.strip_prefix(&old) {
                    *d = new.join(rest);
                }
            }
            st.entries.push((p, EntryOp::Renamed { to: to.to_string(), before }));
        }
        Ok(())
    }

    fn rename_between(&self, from_dir: BorrowedFd<'_>, from: &str, to_dir: BorrowedFd<'_>, to: &str) -> io::Result<()> {
        let (p, q) = (fd_path(from_dir), fd_path(to_dir));
        if self.dead(&p) || self.dead(&q) {
            return Err(eio());
        }
        let before = if self.mine(&q) && q.join(to).is_file() { std::fs::read(q.join(to)).ok() } else { None };
        RealDisk.rename_between(from_dir, from, to_dir, to)?;
        if self.mine(&q) {
            let mut st = self.state.lock().unwrap();
            let (old, new) = (p.join(from), q.join(to));
            for (_, path) in st.dirty.iter_mut() {
                if *path == old {
                    *path = new.clone();
                }
            }
            st.entries.push((q, EntryOp::Renamed { to: to.to_string(), before }));
        }
        Ok(())
    }

    fn sync_dir(&self, dir: BorrowedFd<'_>) -> io::Result<()> {
        let p = fd_path(dir);
        if self.dead(&p) {
            return Err(eio());
        }
        RealDisk.sync_dir(dir)?;
        self.state.lock().unwrap().entries.retain(|(d, _)| *d != p);
        Ok(())
    }
}
