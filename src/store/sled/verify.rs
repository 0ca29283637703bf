//! The embedded log's full verification: walk the whole log in global order, checking every
//! frame's hash, its place in the chain, its seq and stream position, and that its payload
//! decodes. Names the first bad frame. Works on a live store (up to the tail at the start of the
//! walk, stepped: `pass.rs`) and on a data dir that no longer opens (`verify_dir`).

use std::path::Path;

use super::pass::VerifyPass;
use super::segments::Segments;
use super::tables::Tables;
use crate::store::{BadFrame, StoreError, VerifyReport};

/// Walks sled's global order up to `upto` (inclusive; `u64::MAX` = whatever sled holds), then
/// every stream's copy of the frames, in one go (see [`VerifyPass`] for the stepped walk).
pub fn verify_tables(tables: &Tables, upto: u64) -> Result<VerifyReport, StoreError> {
    let mut pass = VerifyPass::new(upto, false);
    loop {
        if let Some(r) = pass.step(tables, u64::MAX) {
            return Ok(r);
        }
    }
}

/// Verifies a data dir that no process has open, without changing it: the segments and the commit
/// mark are read in place (mapped read-only), and recovery runs exactly as opening would — the same
/// [`super::open::recover`], so `od log verify` and the daemon judge the same damage alike — then
/// every frame is walked from genesis (hash, chain, seq, payload) and the index checked. sled has no
/// read-only mode and rewrites damaged files when it opens them, so only its directory (the index:
/// small next to the segments) is copied to a scratch directory and opened there; the segments are
/// never copied. For `od log verify` when no daemon holds the dir, including when the store refuses
/// to open.
pub fn verify_dir(dir: &Path) -> Result<VerifyReport, StoreError> {
    let scratch = std::env::temp_dir().join(format!("od-verify-{}-{}", std::process::id(), unique()));
    let sled_copy = scratch.join("sled");
    copy_dir(&dir.join("sled"), &sled_copy).map_err(|e| StoreError::io("copying the index to verify it", e))?;
    let report = verify_in_place(&dir.join("log"), &sled_copy);
    let _ = std::fs::remove_dir_all(&scratch);
    report
}

fn unique() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Recovers as opening would (re-indexing, in the index copy, the whole batches written since the
/// checkpoint), then walks everything. Damage found by recovery is reported as the first bad frame.
fn verify_in_place(log_dir: &Path, sled_copy: &Path) -> Result<VerifyReport, StoreError> {
    let bad = |seq: u64, reason: String| VerifyReport {
        verified: seq.saturating_sub(1),
        head_hash: String::new(),
        first_bad: Some(BadFrame { seq, reason }),
        runs_ended_twice: Vec::new(),
    };
    let segments = Segments::read_only(log_dir);
    let opened = Tables::open(sled_copy, segments.reader())
        .and_then(|t| Ok((t, super::mark::read(log_dir)?)))
        .and_then(|(t, m)| super::open::recover(&t, &segments, m.map(|(m, _)| m)).map(|rec| (t, rec)));
    match opened {
        Ok((tables, rec)) => verify_tables(&tables, rec.next_seq - 1),
        Err(StoreError::Corrupt { seq, reason }) => Ok(bad(seq.max(1), reason)),
        Err(e) => Err(e),
    }
}
