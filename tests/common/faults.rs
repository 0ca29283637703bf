//! A fault-injecting file layer for the store (`StoreConfig::files`): wraps the real file system,
//! fails chosen operations with a chosen errno (ENOSPC, EIO, …), optionally after writing part of
//! the buffer, enforces a space budget on reservations, and records which byte ranges of which files
//! were made durable by a successful `sync_data` — so a test can check that nothing was
//! acknowledged that was not durable.

use od::store::{FileLayer, LayerFile, RealFiles};
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The file operations the layer can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Write,
    Sync,
    Allocate,
    Create,
    Open,
    Rename,
    SyncDir,
}

pub const ALL_OPS: [Op; 7] = [Op::Write, Op::Sync, Op::Allocate, Op::Create, Op::Open, Op::Rename, Op::SyncDir];

/// One injected fault.
#[derive(Debug, Clone)]
pub struct Rule {
    pub op: Op,
    /// Only paths whose file name ends with this.
    pub name: String,
    pub errno: i32,
    /// Skip this many matching calls first.
    pub skip: u64,
    /// Fail this many matching calls (then the rule is spent); `u64::MAX` = until cleared.
    pub times: u64,
    /// A failing write writes the first half of its buffer first (a torn write).
    pub partial: bool,
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    /// Bytes reservations may still take; `None` = unlimited.
    budget: Option<u64>,
    /// Per file: ranges written since its last sync, and ranges made durable.
    pending: HashMap<PathBuf, Vec<(u64, u64)>>,
    synced: HashMap<PathBuf, Vec<(u64, u64)>>,
    /// Calls per op (including failed ones).
    calls: HashMap<Op, u64>,
    failures: u64,
}

/// The layer; clone the `Arc` into `StoreConfig::files`.
#[derive(Default)]
pub struct FaultFiles {
    state: Mutex<State>,
}

impl FaultFiles {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn add(&self, rule: Rule) {
        self.state.lock().unwrap().rules.push(rule);
    }

    /// Fails every `op` on files whose name ends with `name` with `errno` until cleared.
    pub fn fail(&self, op: Op, name: &str, errno: i32) {
        self.add(Rule { op, name: name.into(), errno, skip: 0, times: u64::MAX, partial: false });
    }

    /// Removes every rule and the space budget.
    pub fn clear(&self) {
        let mut s = self.state.lock().unwrap();
        s.rules.clear();
        s.budget = None;
    }

    /// Reservations past `bytes` in all fail with ENOSPC.
    pub fn space_budget(&self, bytes: u64) {
        self.state.lock().unwrap().budget = Some(bytes);
    }

    pub fn calls(&self, op: Op) -> u64 {
        self.state.lock().unwrap().calls.get(&op).copied().unwrap_or(0)
    }

    pub fn failures(&self) -> u64 {
        self.state.lock().unwrap().failures
    }

    /// Whether `[off, off+len)` of `path` was made durable by a successful sync.
    pub fn is_synced(&self, path: &Path, off: u64, len: u64) -> bool {
        let s = self.state.lock().unwrap();
        let Some(ranges) = s.synced.get(path) else { return false };
        let mut covered = off;
        let mut sorted = ranges.clone();
        sorted.sort_unstable();
        for (a, b) in sorted {
            if a <= covered && b > covered {
                covered = b;
            }
        }
        covered >= off + len
    }

    /// Counts the call and returns the fault to inject, if any.
    fn check(&self, op: Op, path: &Path) -> Option<(io::Error, bool)> {
        let mut s = self.state.lock().unwrap();
        *s.calls.entry(op).or_default() += 1;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let hit = s.rules.iter_mut().find(|r| r.op == op && name.ends_with(&r.name) && r.times > 0)?;
        if hit.skip > 0 {
            hit.skip -= 1;
            return None;
        }
        hit.times = hit.times.saturating_sub(1);
        let fault = (io::Error::from_raw_os_error(hit.errno), hit.partial);
        s.failures += 1;
        Some(fault)
    }
}

struct FaultFile {
    inner: Box<dyn LayerFile>,
    path: PathBuf,
    layer: Arc<FaultFiles>,
}

impl LayerFile for FaultFile {
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        if let Some((e, partial)) = self.layer.check(Op::Write, &self.path) {
            if partial {
                let half = (off, off + buf.len() as u64 / 2);
                if let Some(synced) = self.layer.state.lock().unwrap().synced.get_mut(&self.path) {
                    *synced = subtract(synced, half);
                }
                self.inner.write_at(&buf[..buf.len() / 2], off)?;
            }
            return Err(e);
        }
        let range = (off, off + buf.len() as u64);
        {
            // The range's new bytes are not durable until the next sync (even if its old ones were).
            let mut s = self.layer.state.lock().unwrap();
            if let Some(synced) = s.synced.get_mut(&self.path) {
                *synced = subtract(synced, range);
            }
        }
        self.inner.write_at(buf, off)?;
        let mut s = self.layer.state.lock().unwrap();
        s.pending.entry(self.path.clone()).or_default().push(range);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        if let Some((e, _)) = self.layer.check(Op::Sync, &self.path) {
            // What was written may or may not have reached the disk: count none of it as durable.
            self.layer.state.lock().unwrap().pending.remove(&self.path);
            return Err(e);
        }
        self.inner.sync_data()?;
        let mut s = self.layer.state.lock().unwrap();
        let done = s.pending.remove(&self.path).unwrap_or_default();
        let synced = s.synced.entry(self.path.clone()).or_default();
        for r in done {
            *synced = subtract(synced, r);
            synced.push(r);
        }
        Ok(())
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        if let Some((e, _)) = self.layer.check(Op::Allocate, &self.path) {
            return Err(e);
        }
        {
            let mut s = self.layer.state.lock().unwrap();
            if let Some(b) = s.budget.as_mut() {
                if len > *b {
                    s.failures += 1;
                    return Err(io::Error::from_raw_os_error(libc::ENOSPC));
                }
                *b -= len;
            }
        }
        self.inner.allocate(len)
    }
}

/// `FileLayer` for `Arc<FaultFiles>` (the handles need the layer to report back).
pub struct Layer(pub Arc<FaultFiles>);

impl FileLayer for Layer {
    fn open(&self, path: &Path) -> io::Result<Box<dyn LayerFile>> {
        if let Some((e, _)) = self.0.check(Op::Open, path) {
            return Err(e);
        }
        let inner = RealFiles.open(path)?;
        Ok(Box::new(FaultFile { inner, path: path.to_path_buf(), layer: self.0.clone() }))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn LayerFile>> {
        if let Some((e, _)) = self.0.check(Op::Create, path) {
            return Err(e);
        }
        let inner = RealFiles.create(path)?;
        let mut s = self.0.state.lock().unwrap();
        s.pending.remove(path);
        s.synced.remove(path);
        drop(s);
        Ok(Box::new(FaultFile { inner, path: path.to_path_buf(), layer: self.0.clone() }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if let Some((e, _)) = self.0.check(Op::Rename, to) {
            return Err(e);
        }
        RealFiles.rename(from, to)?;
        let mut guard = self.0.state.lock().unwrap();
        let s = &mut *guard;
        for map in [&mut s.pending, &mut s.synced] {
            if let Some(r) = map.remove(from) {
                map.insert(to.to_path_buf(), r);
            }
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        if let Some((e, _)) = self.0.check(Op::SyncDir, dir) {
            return Err(e);
        }
        RealFiles.sync_dir(dir)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        RealFiles.remove(path)
    }
}

/// `ranges` minus `cut`.
fn subtract(ranges: &[(u64, u64)], cut: (u64, u64)) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(ranges.len() + 1);
    for &(a, b) in ranges {
        if b <= cut.0 || a >= cut.1 {
            out.push((a, b));
            continue;
        }
        if a < cut.0 {
            out.push((a, cut.0));
        }
        if b > cut.1 {
            out.push((cut.1, b));
        }
    }
    out
}
