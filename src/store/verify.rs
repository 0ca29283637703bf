//! Full verification: walk the whole log in global order, checking every frame's hash, its place
//! in the chain, its seq and stream position, and that its payload decodes. Names the first bad
//! frame. Works on a live store (up to the tail at the start of the walk) and on a data dir that no
//! longer opens (`verify_dir`).

use od_events::FrameRef;
use serde::{Deserialize, Serialize};
use std::path::Path;

pub use super::pass::VerifyPass;
use super::segments::Segments;
use super::tables::Tables;
use super::StoreError;

/// The first frame that failed verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BadFrame {
    pub seq: u64,
    pub reason: String,
}

/// What a full verification found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// Frames that verified, in order from seq 1.
    pub verified: u64,
    /// Hex hash of the last verified frame (the chain's head).
    pub head_hash: String,
    /// The first bad frame, if any.
    pub first_bad: Option<BadFrame>,
    /// Runs whose stream holds more than one `run_ended` — a log written before od refused
    /// appends after a run's end (the read models take the first end). At most
    /// [`crate::limits::MAX_VERIFY_DOUBLE_ENDS`] are named. Not corruption: the chain is intact.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs_ended_twice: Vec<String>,
}

impl VerifyReport {
    /// True when nothing was wrong.
    pub fn ok(&self) -> bool {
        self.first_bad.is_none()
    }
}

pub(crate) fn hex(h: &[u8]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

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

pub(crate) fn check_frame(bytes: &[u8], seq: u64, prev: &[u8; 32]) -> Result<(), String> {
    let f = FrameRef::parse_verified(bytes).map_err(|e| e.to_string())?;
    if f.seq() != seq {
        return Err(format!("frame says seq {} but is stored at {seq}", f.seq()));
    }
    if f.prev_hash() != prev {
        return Err("hash chain broken: prev_hash does not match the previous frame".into());
    }
    f.stream().map_err(|e| e.to_string())?;
    od_migrations::decode_any(f.kind(), f.schema(), f.payload()).map_err(|e| e.to_string())?;
    Ok(())
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
