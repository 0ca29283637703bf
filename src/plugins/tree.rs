//! A plugin's files as one byte string, in the framing of the source digest (`folder.rs`): for each
//! file in byte order of its relative path, `u64le(path.len) ‖ path ‖ u64le(content.len) ‖
//! content`. Its blake3 hash *is* the plugin's source digest, so an installed plugin's archive is
//! kept as a blob named by the digest its `plugin_installed` records, and a damaged installed copy
//! is rebuilt from it (issue 38). Unpacking re-checks every path (plain relative components only)
//! and the total against the folder limit.

use std::path::{Component, Path};

use super::MAX_FOLDER_BYTES;

/// Why a packed tree could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The framing is cut short or a length runs past the end.
    #[error("the packed plugin tree is truncated")]
    Truncated,
    /// A path is not a plain relative path, or not UTF-8.
    #[error("the packed plugin tree names a bad path {0:?}")]
    BadPath(String),
    /// Paths are not in strictly increasing byte order (the digest's order).
    #[error("the packed plugin tree is not in path order at {0:?}")]
    Order(String),
    /// More bytes than a plugin folder may hold.
    #[error("the packed plugin tree holds more than MAX_FOLDER_BYTES ({MAX_FOLDER_BYTES})")]
    TooBig,
}

/// Packs `files` (relative path, content), which must be sorted by path.
pub fn pack<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    for (rel, bytes) in files {
        out.extend_from_slice(&(rel.len() as u64).to_le_bytes());
        out.extend_from_slice(rel.as_bytes());
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(bytes);
    }
    out
}

/// The source digest of `files` (sorted by path) without packing them.
pub fn digest<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> String {
    let mut h = blake3::Hasher::new();
    for (rel, bytes) in files {
        h.update(&(rel.len() as u64).to_le_bytes());
        h.update(rel.as_bytes());
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    h.finalize().to_hex().to_string()
}

fn take<'a>(b: &mut &'a [u8], n: u64) -> Result<&'a [u8], TreeError> {
    let n = usize::try_from(n).map_err(|_| TreeError::Truncated)?;
    if b.len() < n {
        return Err(TreeError::Truncated);
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Ok(head)
}

fn len(b: &mut &[u8]) -> Result<u64, TreeError> {
    Ok(u64::from_le_bytes(take(b, 8)?.try_into().expect("8 bytes")))
}

/// The files of a packed tree, every path checked.
pub fn unpack(mut b: &[u8]) -> Result<Vec<(String, &[u8])>, TreeError> {
    if b.len() as u64 > MAX_FOLDER_BYTES.saturating_mul(2) {
        return Err(TreeError::TooBig);
    }
    let mut out: Vec<(String, &[u8])> = Vec::new();
    while !b.is_empty() {
        let n = len(&mut b)?;
        let rel = std::str::from_utf8(take(&mut b, n)?).map_err(|_| TreeError::BadPath("(not UTF-8)".into()))?;
        let plain = !rel.is_empty()
            && !rel.contains('\0')
            && !rel.contains('\\')
            && Path::new(rel).components().all(|c| matches!(c, Component::Normal(_)));
        if !plain || rel.starts_with('/') {
            return Err(TreeError::BadPath(rel.to_string()));
        }
        if out.last().is_some_and(|(prev, _)| prev.as_str() >= rel) {
            return Err(TreeError::Order(rel.to_string()));
        }
        let n = len(&mut b)?;
        let content = take(&mut b, n)?;
        out.push((rel.to_string(), content));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_tree_hashes_to_its_digest_and_unpacks_checked() {
        let files: [(&str, &[u8]); 2] = [("SKILL.md", b"skill"), ("a/b.txt", b"bee")];
        let packed = pack(files);
        assert_eq!(blake3::hash(&packed).to_hex().to_string(), digest(files));
        let back = unpack(&packed).unwrap();
        assert_eq!(back, vec![("SKILL.md".to_string(), &b"skill"[..]), ("a/b.txt".to_string(), &b"bee"[..])]);
        assert!(matches!(unpack(&packed[..packed.len() - 1]), Err(TreeError::Truncated)));
        for bad in ["../x", "/etc/passwd", "a/../../b"] {
            assert!(matches!(unpack(&pack([(bad, &b""[..])])), Err(TreeError::BadPath(_))), "{bad}");
        }
        let swapped: [(&str, &[u8]); 2] = [("b", b""), ("a", b"")];
        assert!(matches!(unpack(&pack(swapped)), Err(TreeError::Order(_))));
    }
}
