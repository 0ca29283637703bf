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

/// Walks sled's global order up to `upto` (inclusive; `u64::MAX` = whatever sled holds).
pub fn verify_tables(tables: &Tables, upto: u64) -> Result<VerifyReport, StoreError> {
    let mut prev = GENESIS_HASH;
    let mut expected = 1u64;
    let bad = |seq: u64, reason: String, prev: &[u8]| VerifyReport {
        verified: seq - 1,
        head_hash: hex(prev),
        first_bad: Some(BadFrame { seq, reason }),
    };
    for item in tables.global.iter() {
        let (k, key) = match item {
            Ok(kv) => kv,
            Err(e) => {
                return Ok(bad(
                    expected,
                    format!("the global index is unreadable: {e}"),
                    &prev,
                ))
            }
        };
        let seq = u64::from_be_bytes(k.as_ref().try_into().unwrap_or([0; 8]));
        if seq > upto {
            break;
        }
        if seq != expected {
            return Ok(bad(
                expected,
                format!("frame is missing (next present is {seq})"),
                &prev,
            ));
        }
        let bytes = match tables.frames.get(&key) {
            Ok(Some(b)) => b,
            Ok(None) => {
                return Ok(bad(
                    seq,
                    "frame is missing from the frames tree".into(),
                    &prev,
                ))
            }
            Err(e) => return Ok(bad(seq, format!("frame is unreadable: {e}"), &prev)),
        };
        if let Err(reason) = check_frame(&bytes, seq, &prev, &key) {
            return Ok(bad(seq, reason, &prev));
        }
        prev = *FrameRef::parse(&bytes).expect("checked").hash();
        expected += 1;
    }
    if upto != u64::MAX && expected <= upto {
        return Ok(bad(
            expected,
            format!("frame is missing (the log should go on to {upto})"),
            &prev,
        ));
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

/// Verifies a data dir that no process has open, without changing it: the files are copied to a
/// scratch directory first (sled rewrites damaged segments when it opens them, which would destroy
/// the evidence), then sled's whole log is walked and the journal's link to it checked. For
/// `od log verify` when no daemon holds the dir, including when the store refuses to open.
pub fn verify_dir(dir: &Path) -> Result<VerifyReport, StoreError> {
    let scratch =
        std::env::temp_dir().join(format!("od-verify-{}-{}", std::process::id(), unique()));
    copy_dir(dir, &scratch).map_err(|e| StoreError::io("copying the data dir to verify it", e))?;
    let report = verify_copy(&scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    report
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
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

fn verify_copy(dir: &Path) -> Result<VerifyReport, StoreError> {
    let tables = match Tables::open(&dir.join("sled")) {
        Ok(t) => t,
        Err(StoreError::Corrupt { reason, .. }) => {
            return Ok(VerifyReport {
                verified: 0,
                head_hash: hex(&GENESIS_HASH),
                first_bad: Some(BadFrame { seq: 1, reason }),
            })
        }
        Err(e) => return Err(e),
    };
    let mut report = verify_tables(&tables, u64::MAX)?;
    if !report.ok() || !dir.join("journal.dat").exists() {
        return Ok(report);
    }
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
    Ok(report)
}
