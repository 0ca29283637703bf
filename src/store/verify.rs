//! Full verification: walk the whole log in global order, checking every frame's hash, its place
//! in the chain, its seq and stream position, and that its payload decodes. Names the first bad
//! frame. Works on a live store (up to the tail at the start of the walk) and on a data dir that no
//! longer opens (`verify_dir`).

use od_events::{FrameRef, GENESIS_HASH};
use serde::Serialize;
use std::path::Path;

use super::journal::Journal;
use super::tables::{frame_key, Tables};
use super::StoreError;

/// The first frame that failed verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BadFrame {
    pub seq: u64,
    pub reason: String,
}

/// What a full verification found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// Frames that verified, in order from seq 1.
    pub verified: u64,
    /// Hex hash of the last verified frame (the chain's head).
    pub head_hash: String,
    /// The first bad frame, if any.
    pub first_bad: Option<BadFrame>,
}

impl VerifyReport {
    /// True when nothing was wrong.
    pub fn ok(&self) -> bool {
        self.first_bad.is_none()
    }
}

fn hex(h: &[u8]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// Walks sled's global order up to `upto` (inclusive).
pub fn verify_tables(tables: &Tables, upto: u64) -> Result<VerifyReport, StoreError> {
    let mut prev = GENESIS_HASH;
    let mut expected = 1u64;
    let bad = |seq: u64, reason: String, verified: u64, prev: &[u8]| VerifyReport {
        verified,
        head_hash: hex(prev),
        first_bad: Some(BadFrame { seq, reason }),
    };
    for item in tables.global.iter() {
        let (k, key) = item.map_err(|e| StoreError::io("reading the global index", e))?;
        let seq = u64::from_be_bytes(k.as_ref().try_into().unwrap_or([0; 8]));
        if seq > upto {
            break;
        }
        if seq != expected {
            return Ok(bad(
                expected,
                format!("frame is missing (next present is {seq})"),
                expected - 1,
                &prev,
            ));
        }
        let Some(bytes) = tables
            .frames
            .get(&key)
            .map_err(|e| StoreError::io("reading a frame", e))?
        else {
            return Ok(bad(
                seq,
                "frame is missing from the frames tree".into(),
                expected - 1,
                &prev,
            ));
        };
        if let Err(reason) = check_frame(&bytes, seq, &prev, &key) {
            return Ok(bad(seq, reason, expected - 1, &prev));
        }
        prev = *FrameRef::parse(&bytes).expect("checked").hash();
        expected += 1;
    }
    Ok(VerifyReport {
        verified: expected - 1,
        head_hash: hex(&prev),
        first_bad: None,
    })
}

fn check_frame(bytes: &[u8], seq: u64, prev: &[u8; 32], key: &[u8]) -> Result<(), String> {
    let f = FrameRef::parse_verified(bytes).map_err(|e| e.to_string())?;
    if f.seq() != seq {
        return Err(format!(
            "frame says seq {} but is indexed at {seq}",
            f.seq()
        ));
    }
    if f.prev_hash() != prev {
        return Err("hash chain broken: prev_hash does not match the previous frame".into());
    }
    let stream = f.stream().map_err(|e| e.to_string())?;
    if frame_key(stream, f.version()) != key {
        return Err("frame is stored under another stream position".into());
    }
    od_migrations::decode_any(f.kind(), f.schema(), f.payload()).map_err(|e| e.to_string())?;
    Ok(())
}

/// Verifies a data dir without opening it for writing: sled's whole log, then the journal's link
/// to it. For `od log verify` when no daemon holds the dir (and when the store refuses to open).
pub fn verify_dir(dir: &Path) -> Result<VerifyReport, StoreError> {
    let tables = Tables::open(&dir.join("sled"))?;
    let mut report = verify_tables(&tables, u64::MAX)?;
    if !report.ok() {
        return Ok(report);
    }
    if dir.join("journal.dat").exists() {
        let journal = Journal::open(dir, 0)?;
        let head = journal.head();
        if report.verified + 1 < head.start_seq {
            report.first_bad = Some(BadFrame {
                seq: report.verified + 1,
                reason: format!(
                    "checkpointed frames up to {} are missing from sled",
                    head.start_seq - 1
                ),
            });
            return Ok(report);
        }
        let scan = journal.scan()?;
        let next = head.start_seq + scan.frames.len() as u64;
        if scan.later_batch_seq.is_some() || report.verified >= next {
            report.first_bad = Some(BadFrame {
                seq: next,
                reason: "journal record is damaged".into(),
            });
        }
    }
    Ok(report)
}
