//! What a full verification reports, on every backend: the frames that verified from seq 1, the
//! chain's head, the first bad frame, the runs ended twice; and the check of one frame (hash, place
//! in the chain, seq, stream, payload). The walks are the backends' own (`sled/verify.rs`,
//! `pg/mod.rs`).

use od_events::FrameRef;
use serde::{Deserialize, Serialize};

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
