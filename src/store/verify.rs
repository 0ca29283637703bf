//! Full verification: walk the whole log in global order, checking every frame's hash, its place
//! in the chain, its seq and stream position, and that its payload decodes. Names the first bad
//! frame. Works on a live store (up to the tail at the start of the walk) and on a data dir that no
//! longer opens (`verify_dir`).

use od_events::{FrameRef, GENESIS_HASH};
use serde::Serialize;
use std::path::Path;

use super::chunks::{key_version, Chunk};
use super::pack::Loc;
use super::segments::Segments;
use super::tables::Tables;
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

/// Walks sled's global order up to `upto` (inclusive; `u64::MAX` = whatever sled holds), then
/// every stream's copy of the frames.
pub fn verify_tables(tables: &Tables, upto: u64) -> Result<VerifyReport, StoreError> {
    let mut w = Walk { prev: GENESIS_HASH, expected: 1 };
    if let Some(bad) = w.log(tables, upto) {
        return Ok(w.report(Some(bad)));
    }
    if upto != u64::MAX && w.expected <= upto {
        let bad = BadFrame { seq: w.expected, reason: format!("frame is missing (the log should go on to {upto})") };
        return Ok(w.report(Some(bad)));
    }
    let bad = stream_index(tables, w.expected - 1);
    Ok(w.report(bad))
}

struct Walk {
    prev: [u8; 32],
    expected: u64,
}

impl Walk {
    fn report(&self, first_bad: Option<BadFrame>) -> VerifyReport {
        let verified = match &first_bad {
            Some(b) if b.seq > 0 => b.seq.min(self.expected) - 1,
            _ => self.expected - 1,
        };
        VerifyReport { verified, head_hash: hex(&self.prev), first_bad }
    }

    /// The global order: every frame's hash, chain, seq, and payload.
    fn log(&mut self, tables: &Tables, upto: u64) -> Option<BadFrame> {
        let bad = |seq, reason: String| Some(BadFrame { seq, reason });
        for item in tables.log.iter() {
            let (k, v) = match item {
                Ok(kv) => kv,
                Err(e) => return bad(self.expected, format!("the log index is unreadable: {e}")),
            };
            let first = u64::from_be_bytes(k.as_ref().try_into().unwrap_or([0; 8]));
            if first > upto {
                return None;
            }
            if first != self.expected {
                return bad(self.expected, format!("frame is missing (next present is {first})"));
            }
            let Some(loc) = Loc::decode(&v) else { return bad(first, "index entry is malformed".into()) };
            let frames = match tables.pack_frames(first, &loc) {
                Ok(f) => f,
                Err(e) => return bad(first, e.to_string()),
            };
            for bytes in frames {
                if self.expected > upto {
                    return None;
                }
                if let Err(reason) = check_frame(&bytes, self.expected, &self.prev) {
                    return bad(self.expected, reason);
                }
                self.prev = *FrameRef::parse(&bytes).expect("checked").hash();
                self.expected += 1;
            }
        }
        None
    }
}

/// The stream index: every chunk's runs point at packs the log index holds with the same location,
/// whose frames all belong to that stream; per stream, versions run from 0 with no gap; the index
/// covers every frame.
fn stream_index(tables: &Tables, total: u64) -> Option<BadFrame> {
    let mut count = 0u64;
    let mut current: Option<(Vec<u8>, u64)> = None; // stream bytes and its next expected version
    for item in tables.stream_index.iter() {
        let (k, v) = match item {
            Ok(kv) => kv,
            Err(e) => return Some(BadFrame { seq: 0, reason: format!("the stream index is unreadable: {e}") }),
        };
        let at = describe_key(&k);
        let (stream, _) = k.split_at(k.len().saturating_sub(9));
        let Some(chunk) = (k.len() >= 9).then(|| Chunk::decode(key_version(&k), &v)).flatten() else {
            return Some(BadFrame { seq: 0, reason: format!("the index chunk for {at} is malformed") });
        };
        let mut next = match &current {
            Some((s, n)) if s.as_slice() == stream => *n,
            _ => 0,
        };
        if chunk.first_version != next {
            return Some(BadFrame { seq: 0, reason: format!("{at}: the stream's versions have a gap before it") });
        }
        for (seq, loc) in &chunk.runs {
            let same =
                matches!(tables.log.get(seq.to_be_bytes()), Ok(Some(l)) if l.as_ref() == loc.encode().as_slice());
            let pack = (same && *seq > 0 && *seq <= total).then(|| tables.pack_frames(*seq, loc).ok()).flatten();
            let Some(pack) = pack else {
                return Some(BadFrame { seq: *seq, reason: format!("the index chunk for {at} points at no pack") });
            };
            for frame in pack {
                let ok = FrameRef::parse(&frame)
                    .is_ok_and(|f| f.version() == next && f.stream().is_ok_and(|s| s.as_bytes() == stream));
                if !ok {
                    return Some(BadFrame {
                        seq: *seq,
                        reason: format!("the pack indexed for {at} holds another frame"),
                    });
                }
                next += 1;
                count += 1;
            }
        }
        current = Some((stream.to_vec(), next));
    }
    (count != total).then(|| BadFrame {
        seq: 0,
        reason: format!("the stream index covers {count} frames but the log holds {total}"),
    })
}

/// `stream@version` for a streams-tree key.
fn describe_key(k: &[u8]) -> String {
    match k.len().checked_sub(9) {
        Some(n) => {
            let v = u64::from_be_bytes(k[n + 1..].try_into().unwrap_or([0; 8]));
            format!("stream {} from version {v}", String::from_utf8_lossy(&k[..n]))
        }
        None => "an unreadable stream key".to_string(),
    }
}

fn check_frame(bytes: &[u8], seq: u64, prev: &[u8; 32]) -> Result<(), String> {
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
