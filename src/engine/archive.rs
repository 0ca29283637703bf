//! Unpacking plugin archives (`.tgz`/`.tar.gz`/`.tar`/`.zip`) safely, all or nothing.
//!
//! Every entry is checked before anything is kept: a relative path with no `..`, no absolute or
//! drive prefix; regular files and directories only (symlinks and hard links are refused — they are
//! how archives escape their folder); at most [`MAX_ARCHIVE_FILES`] files and
//! [`MAX_ARCHIVE_BYTES`] unpacked bytes (counted as they are written, not as the headers claim). A
//! bad archive is rejected whole: the scratch directory is removed and nothing is installed.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use super::plugins::PluginError;
use crate::limits::MAX_TAR_META_BYTES;

/// Most files an archive may unpack to (the loader's own folder cap).
pub const MAX_ARCHIVE_FILES: usize = crate::plugins::MAX_FOLDER_ENTRIES;
/// Most bytes an archive may unpack to (OpenDesign's install size cap).
pub const MAX_ARCHIVE_BYTES: u64 = 50 * 1024 * 1024;

fn bad(why: impl Into<String>) -> PluginError {
    PluginError::BadArchive(why.into())
}

/// The checked relative path of an entry.
fn safe_path(raw: &Path) -> Result<PathBuf, PluginError> {
    let mut out = PathBuf::new();
    for c in raw.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => return Err(bad(format!("entry {} climbs out with ..", raw.display()))),
            Component::RootDir | Component::Prefix(_) => {
                return Err(bad(format!("entry {} has an absolute path", raw.display())))
            }
        }
    }
    Ok(out)
}

struct Budget {
    files: usize,
    bytes: u64,
}

impl Budget {
    fn file(&mut self) -> Result<(), PluginError> {
        self.files += 1;
        if self.files > MAX_ARCHIVE_FILES {
            return Err(bad(format!("more than {MAX_ARCHIVE_FILES} files")));
        }
        Ok(())
    }

    /// Copies at most the remaining byte budget; more is an error.
    fn copy(&mut self, r: &mut dyn Read, to: &Path) -> Result<(), PluginError> {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| PluginError::Io(e.to_string()))?;
        }
        let mut f = std::fs::File::create(to).map_err(|e| PluginError::Io(e.to_string()))?;
        let left = MAX_ARCHIVE_BYTES - self.bytes;
        let n = std::io::copy(&mut r.take(left + 1), &mut f).map_err(|e| bad(format!("unreadable entry: {e}")))?;
        if n > left {
            return Err(bad(format!("unpacks to more than {MAX_ARCHIVE_BYTES} bytes")));
        }
        self.bytes += n;
        Ok(())
    }
}

fn untar(reader: impl Read, dst: &Path) -> Result<(), PluginError> {
    let mut ar = tar::Archive::new(reader);
    let mut budget = Budget { files: 0, bytes: 0 };
    for entry in ar.entries().map_err(|e| bad(format!("not a tar archive: {e}")))? {
        let mut entry = entry.map_err(|e| bad(format!("corrupt tar entry: {e}")))?;
        let raw = entry.path().map_err(|e| bad(format!("bad entry path: {e}")))?.into_owned();
        let rel = safe_path(&raw)?;
        match entry.header().entry_type() {
            tar::EntryType::Directory => {}
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                budget.file()?;
                budget.copy(&mut entry, &dst.join(&rel))?;
            }
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader => {}
            other => return Err(bad(format!("entry {} is a {other:?}, not a file or folder", raw.display()))),
        }
    }
    Ok(())
}

/// The tar reader holds a long-name, long-link or pax record in memory whole before the entry it
/// describes: a first pass over the raw entries refuses one bigger than [`MAX_TAR_META_BYTES`].
fn tar_records_fit(reader: impl Read) -> Result<(), PluginError> {
    let mut ar = tar::Archive::new(reader);
    for entry in ar.entries().map_err(|e| bad(format!("not a tar archive: {e}")))?.raw(true) {
        let entry = entry.map_err(|e| bad(format!("corrupt tar entry: {e}")))?;
        let t = entry.header().entry_type();
        let meta = t.is_gnu_longname() || t.is_gnu_longlink() || t.is_pax_local_extensions();
        if meta && entry.size() > MAX_TAR_META_BYTES {
            return Err(bad(format!("a {t:?} record of {} bytes (most {MAX_TAR_META_BYTES})", entry.size())));
        }
    }
    Ok(())
}

fn reopen(archive: &Path) -> Result<std::fs::File, PluginError> {
    std::fs::File::open(archive).map_err(|e| bad(format!("cannot open {}: {e}", archive.display())))
}

fn unzip(file: std::fs::File, dst: &Path) -> Result<(), PluginError> {
    let mut ar = zip::ZipArchive::new(file).map_err(|e| bad(format!("not a zip archive: {e}")))?;
    let mut budget = Budget { files: 0, bytes: 0 };
    for i in 0..ar.len() {
        let mut entry = ar.by_index(i).map_err(|e| bad(format!("corrupt zip entry: {e}")))?;
        let raw = PathBuf::from(entry.name());
        let rel = safe_path(&raw)?;
        if entry.is_symlink() {
            return Err(bad(format!("entry {} is a symlink", raw.display())));
        }
        if entry.is_dir() {
            continue;
        }
        budget.file()?;
        budget.copy(&mut entry, &dst.join(&rel))?;
    }
    Ok(())
}

/// Unpacks `archive` into `scratch` (created fresh) and returns the plugin root inside it (the
/// single top-level folder, when the archive has nothing else). On any error `scratch` is removed.
pub fn unpack(archive: &Path, scratch: &Path) -> Result<PathBuf, PluginError> {
    let _ = std::fs::remove_dir_all(scratch);
    std::fs::create_dir_all(scratch).map_err(|e| PluginError::Io(e.to_string()))?;
    let result = (|| {
        let f = std::fs::File::open(archive).map_err(|e| bad(format!("cannot open {}: {e}", archive.display())))?;
        let name = archive.to_string_lossy().to_lowercase();
        if name.ends_with(".zip") {
            unzip(f, scratch)?;
        } else if name.ends_with(".tgz") || name.ends_with(".tar.gz") {
            tar_records_fit(flate2::read::GzDecoder::new(reopen(archive)?))?;
            untar(flate2::read::GzDecoder::new(f), scratch)?;
        } else {
            tar_records_fit(reopen(archive)?)?;
            untar(f, scratch)?;
        }
        root_of(scratch)
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(scratch);
    }
    result
}

fn root_of(dir: &Path) -> Result<PathBuf, PluginError> {
    let entries: Vec<_> = std::fs::read_dir(dir).map_err(|e| PluginError::Io(e.to_string()))?.flatten().collect();
    match entries.as_slice() {
        [] => Err(bad("the archive is empty")),
        [only] if only.file_type().is_ok_and(|t| t.is_dir()) => Ok(only.path()),
        _ => Ok(dir.to_path_buf()),
    }
}

/// Whether `source` names an archive file this module unpacks.
pub fn is_archive(source: &str) -> bool {
    let s = source.to_lowercase();
    [".tgz", ".tar.gz", ".tar", ".zip"].iter().any(|ext| s.ends_with(ext))
}
