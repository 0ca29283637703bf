//! Opening the log: recovery from the journal and verification from the last verified checkpoint.
//!
//! Everything before the journal's `start_seq` is durable in sled and was verified when it passed
//! through the journal; the journal's frames are verified (hash and chain) as they are scanned and
//! re-applied to sled (idempotently). Damage is an error, never a silent repair: sled missing frames
//! the journal says it holds, a journal record broken before a later synced batch, or sled holding
//! frames past a break in the journal.

use od_events::{FrameRef, Hash, GENESIS_HASH};
use sled::IVec;
use std::path::Path;

use super::journal::Journal;
use super::pack::OpenPack;
use super::tables::{ops_of, Tables};
use super::StoreError;

/// What recovery established.
pub(crate) struct Recovered {
    pub next_seq: u64,
    pub prev_hash: Hash,
    /// The open packs after recovery, handed to the writer.
    pub packer: Option<OpenPack>,
}

/// Checks sled against the journal head, then re-applies the journal's frames to sled.
pub(crate) fn recover(tables: &Tables, journal: &mut Journal) -> Result<Recovered, StoreError> {
    let head = journal.head();
    let sled_last = tables.last_seq()?;
    if sled_last + 1 < head.start_seq {
        return Err(StoreError::Corrupt {
            seq: sled_last + 1,
            reason: format!(
                "frames {}..{} were acknowledged and checkpointed but sled no longer has them",
                sled_last + 1,
                head.start_seq - 1
            ),
        });
    }
    if let Some(hole) = tables.check_contiguous(sled_last)? {
        return Err(StoreError::Corrupt {
            seq: hole,
            reason: format!("frame {hole} is missing although the log goes on to {sled_last}"),
        });
    }
    check_link(tables, head.start_seq, &head.prev_hash)?;
    let scan = journal.scan()?;
    let next_seq = head.start_seq + scan.frames.len() as u64;
    if let Some(later) = scan.later_batch_seq {
        return Err(StoreError::Corrupt {
            seq: next_seq,
            reason: format!("journal record for seq {next_seq} is damaged, yet seq {later} was committed after it"),
        });
    }
    let sled_last = tables.last_seq()?;
    if sled_last >= next_seq {
        return Err(StoreError::Corrupt {
            seq: next_seq,
            reason: format!("journal record for seq {next_seq} is damaged, but sled holds frames up to {sled_last}"),
        });
    }
    let prev_hash = match scan.frames.last() {
        Some(f) => *FrameRef::parse(f).expect("scanned").hash(),
        None => head.prev_hash,
    };
    let frames: Vec<IVec> = scan.frames.into_iter().map(IVec::from).collect();
    let mut packer = tables.last_log_pack()?;
    for chunk in frames.chunks(4096) {
        tables.apply(chunk, &ops_of(chunk), &mut packer)?;
    }
    journal.set_pos(scan.end);
    Ok(Recovered { next_seq, prev_hash, packer })
}

/// The frame just before the journal must verify and hash to the journal's `prev_hash`.
fn check_link(tables: &Tables, start_seq: u64, prev_hash: &Hash) -> Result<(), StoreError> {
    if start_seq == 1 {
        return if prev_hash == &GENESIS_HASH {
            Ok(())
        } else {
            Err(StoreError::Corrupt { seq: 1, reason: "journal.head has a non-genesis hash at seq 1".into() })
        };
    }
    let seq = start_seq - 1;
    let bytes = tables
        .read_log(seq, seq, 1)?
        .pop()
        .map(|f| f.0)
        .ok_or_else(|| StoreError::Corrupt { seq, reason: "frame is missing".into() })?;
    let f = FrameRef::parse_verified(&bytes).map_err(|e| StoreError::Corrupt { seq, reason: e.to_string() })?;
    if f.seq() != seq || f.hash() != prev_hash {
        return Err(StoreError::Corrupt {
            seq,
            reason: "frame does not match the hash the journal chains from".into(),
        });
    }
    Ok(())
}

/// Creates the data directory layout if needed.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), StoreError> {
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io("creating the data directory", e))
}
