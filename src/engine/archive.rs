//! Unpacking plugin archives (`.tgz`/`.tar.gz`/`.tar`/`.zip`) safely, all or nothing.
//!
//! Every entry is checked before anything is kept: a relative path with no `..`, no absolute or
//! drive prefix; regular files and directories only (symlinks and hard links are refused — they are
//! how archives escape their folder); at most [`MAX_ARCHIVE_FILES`] entries of any kind (files,
//! directories, headers — a zip's count is read from its end record before its central directory
//! is loaded, so a zip of 300,000 folders costs nothing) and [`MAX_ARCHIVE_BYTES`] unpacked bytes
//! (counted as they are written, not as the headers claim). A bad archive is rejected whole: the
//! scratch directory is removed and nothing is installed.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use super::plugins::PluginError;
use crate::limits::MAX_TAR_META_BYTES;

/// Most entries (files, directories, anything) an archive may hold (the loader's own folder cap).
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

fn too_many() -> PluginError {
    bad(format!("more than {MAX_ARCHIVE_FILES} entries"))
}

struct Budget {
    entries: usize,
    bytes: u64,
}

impl Budget {
    /// Counts one entry, whatever its kind.
    fn entry(&mut self) -> Result<(), PluginError> {
        self.entries += 1;
        if self.entries > MAX_ARCHIVE_FILES {
            return Err(too_many());
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
    let mut budget = Budget { entries: 0, bytes: 0 };
    for entry in ar.entries().map_err(|e| bad(format!("not a tar archive: {e}")))? {
        let mut entry = entry.map_err(|e| bad(format!("corrupt tar entry: {e}")))?;
        budget.entry()?;
        let raw = entry.path().map_err(|e| bad(format!("bad entry path: {e}")))?.into_owned();
        let rel = safe_path(&raw)?;
        match entry.header().entry_type() {
            tar::EntryType::Directory => {}
            tar::EntryType::Regular | tar::EntryType::Continuous => {
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

/// The entry count a zip's end-of-central-directory record (or its zip64 record) declares; the
/// zip reader allocates one record per declared entry when it opens the archive. `None` when no
/// end record is found (the reader then refuses the file itself).
fn zip_declared_entries(f: &mut std::fs::File) -> std::io::Result<Option<u64>> {
    const EOCD: &[u8] = b"PK\x05\x06";
    const LOCATOR: &[u8] = b"PK\x06\x07";
    const EOCD64: &[u8] = b"PK\x06\x06";
    let len = f.seek(SeekFrom::End(0))?;
    // The end record is 22 bytes plus a comment of at most 65,535.
    let tail_len = len.min(22 + 65_535);
    let mut tail = vec![0u8; tail_len as usize];
    f.seek(SeekFrom::Start(len - tail_len))?;
    f.read_exact(&mut tail)?;
    let Some(at) = (0..tail.len().saturating_sub(21)).rev().find(|i| &tail[*i..*i + 4] == EOCD) else {
        return Ok(None);
    };
    let count = u64::from(u16::from_le_bytes([tail[at + 10], tail[at + 11]]));
    if count != 0xFFFF || at < 20 || &tail[at - 20..at - 16] != LOCATOR {
        return Ok(Some(count));
    }
    let mut off = [0u8; 8];
    off.copy_from_slice(&tail[at - 12..at - 4]);
    let mut rec = [0u8; 40];
    f.seek(SeekFrom::Start(u64::from_le_bytes(off)))?;
    f.read_exact(&mut rec)?;
    if &rec[..4] != EOCD64 {
        return Ok(Some(count));
    }
    let mut total = [0u8; 8];
    total.copy_from_slice(&rec[32..40]);
    Ok(Some(u64::from_le_bytes(total)))
}

fn unzip(mut file: std::fs::File, dst: &Path) -> Result<(), PluginError> {
    let declared = zip_declared_entries(&mut file).map_err(|e| bad(format!("unreadable zip: {e}")))?;
    if declared.is_some_and(|n| n > MAX_ARCHIVE_FILES as u64) {
        return Err(too_many());
    }
    file.seek(SeekFrom::Start(0)).map_err(|e| PluginError::Io(e.to_string()))?;
    let mut ar = zip::ZipArchive::new(file).map_err(|e| bad(format!("not a zip archive: {e}")))?;
    let mut budget = Budget { entries: 0, bytes: 0 };
    for i in 0..ar.len() {
        budget.entry()?;
        let mut entry = ar.by_index(i).map_err(|e| bad(format!("corrupt zip entry: {e}")))?;
        let raw = PathBuf::from(entry.name());
        let rel = safe_path(&raw)?;
        if entry.is_symlink() {
            return Err(bad(format!("entry {} is a symlink", raw.display())));
        }
        if entry.is_dir() {
            continue;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn zip_of_dirs(n: usize) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        let mut w = zip::ZipWriter::new(&mut f);
        let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        for i in 0..n {
            w.add_directory(format!("d{i}/"), opts).unwrap();
        }
        w.set_comment("a comment moves the end record");
        w.finish().unwrap();
        f
    }

    #[test]
    fn the_declared_zip_entry_count_is_read_from_the_end_records() {
        assert_eq!(zip_declared_entries(&mut zip_of_dirs(3)).unwrap(), Some(3));
        // Past 65,535 entries the count lives in the zip64 end record.
        assert_eq!(zip_declared_entries(&mut zip_of_dirs(70_000)).unwrap(), Some(70_000));
        let mut not_zip = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut not_zip, b"hello").unwrap();
        assert_eq!(zip_declared_entries(&mut not_zip).unwrap(), None);
    }
}
