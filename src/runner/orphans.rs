//! Agents a killed daemon left running: each exec agent's process group is recorded when it starts
//! and forgotten when its invocation ends; the next engine start ends the groups still recorded.
//!
//! The record is a small file per run, `<data dir>/agents/running/<runId>.json` (`agents/` itself
//! holds the agent catalog's files, `src/agents/catalog.rs`; records an older od left directly in
//! `agents/` are read too, and only files that are records are removed there)
//! (`{runId, pid, pgid, startTime, token}`): one agent runs per run at a time, the file is written
//! (atomically: temp file, then rename) right after the spawn and removed once the invocation's
//! processes are ended ([`super::reap`]). A file rather than a log event: the record is machine
//! state that must be gone once the agent is (an event stays forever and would need a second one
//! to retract it, in the run's stream that also orders the run's facts), and reading it on start
//! must not depend on the projections being caught up.
//!
//! On start, [`end_recorded`] reads every record. A group counts as still ours when its leader is
//! alive with the recorded start time (`/proc/<pid>/stat` field 22, so a reused pid is never
//! signalled), or some live process started since then carries the invocation's token (the leader
//! exited, helpers of its group live on). Those processes get SIGTERM, then — after
//! [`ORPHAN_AGENT_GRACE_MS`] — SIGKILL for whatever is left ([`super::reap::sweep`]). The record
//! is removed either way. Only Linux (`/proc`) can tell; elsewhere nothing is found alive.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::reap;
use crate::limits::ORPHAN_AGENT_GRACE_MS;

/// The folder of the records, below the data dir.
pub const AGENTS_DIR: &str = "agents/running";
/// Where an older od kept them (shared with the agent catalog's files, which are left alone).
const LEGACY_DIR: &str = "agents";

/// One running agent's process group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub run_id: String,
    pub pid: u32,
    pub pgid: u32,
    /// The leader's start time, clock ticks after boot.
    pub start_time: u64,
    /// The invocation token its processes carry ([`reap::TOKEN_VAR`]).
    pub token: String,
}

fn path_of(data_dir: &Path, run_id: &str) -> PathBuf {
    // Run ids are od's own (letters, digits, `_`); anything else is kept out of the path.
    let name: String =
        run_id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    data_dir.join(AGENTS_DIR).join(format!("{name}.json"))
}

/// Records a started agent; returns where, for [`forget`].
pub fn record(data_dir: &Path, r: &Record) -> std::io::Result<PathBuf> {
    let path = path_of(data_dir, &r.run_id);
    std::fs::create_dir_all(path.parent().unwrap_or(data_dir))?;
    let tmp = path.with_extension(format!("tmp-{}", r.token));
    std::fs::write(&tmp, serde_json::to_vec(r).map_err(std::io::Error::other)?)?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Forgets a record once its agent's processes are ended.
pub fn forget(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// Ends the recorded groups still alive and removes every record; the pgid ended per run id.
pub fn end_recorded(data_dir: &Path) -> HashMap<String, u32> {
    let mut live: Vec<(Record, Vec<i32>)> = Vec::new();
    for (dir, legacy) in [(AGENTS_DIR, false), (LEGACY_DIR, true)] {
        let Ok(entries) = std::fs::read_dir(data_dir.join(dir)) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_file() {
                continue;
            }
            let rec = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice::<Record>(&b).ok());
            let is_record = rec.is_some();
            if let Some(rec) = rec {
                let procs = ours(&rec);
                if !procs.is_empty() {
                    live.push((rec, procs));
                }
            }
            let temp = path.extension().is_some_and(|e| e.to_string_lossy().starts_with("tmp-"));
            if is_record || (!legacy && path.extension().is_some_and(|e| e == "json")) {
                forget(&path);
            } else if !legacy || temp {
                let _ = std::fs::remove_file(&path); // a temp file a kill interrupted
            }
        }
    }
    for (rec, procs) in &live {
        if reap::start_time(rec.pid) == rec.start_time {
            // SAFETY: killpg only sends a signal; the leader is the recorded one (same start time).
            unsafe { libc::killpg(rec.pgid as i32, libc::SIGTERM) };
        }
        for pid in procs {
            // SAFETY: kill only sends a signal, to a process identified as the agent's.
            unsafe { libc::kill(*pid, libc::SIGTERM) };
        }
    }
    let deadline = Instant::now() + Duration::from_millis(ORPHAN_AGENT_GRACE_MS);
    while Instant::now() < deadline && live.iter().any(|(rec, _)| !ours(rec).is_empty()) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut ended = HashMap::new();
    for (rec, _) in live {
        if !ours(&rec).is_empty() {
            reap::sweep(rec.pgid, &rec.token, rec.start_time);
        }
        ended.insert(rec.run_id, rec.pgid);
    }
    ended
}

/// The recorded invocation's live processes, or none when nothing of it can be identified.
fn ours(rec: &Record) -> Vec<i32> {
    let leader = reap::start_time(rec.pid) == rec.start_time && rec.start_time != 0;
    let found = reap::members(rec.pgid, &rec.token, rec.start_time);
    if leader || found.iter().any(|p| reap::carries_token(*p, &rec.token)) {
        found
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_removes_records_and_leaves_the_agent_catalog_files() {
        let tmp = tempfile::tempdir().unwrap();
        let rec = Record { run_id: "run_a".into(), pid: u32::MAX, pgid: u32::MAX, start_time: 0, token: "t".into() };
        let path = record(tmp.path(), &rec).unwrap();
        assert!(path.starts_with(tmp.path().join("agents/running")), "{path:?}");
        // A record an older od left beside the catalog, a temp file, and a catalog file.
        let legacy = tmp.path().join("agents/run_b.json");
        std::fs::write(&legacy, serde_json::to_vec(&Record { run_id: "run_b".into(), ..rec.clone() }).unwrap())
            .unwrap();
        let temp = tmp.path().join("agents/run_c.tmp-x");
        std::fs::write(&temp, b"{").unwrap();
        let catalog = tmp.path().join("agents/mine.json");
        std::fs::write(&catalog, br#"{"id":"mine"}"#).unwrap();
        let ended = end_recorded(tmp.path());
        assert!(ended.is_empty(), "nothing of them is alive: {ended:?}");
        assert!(!path.exists() && !legacy.exists() && !temp.exists());
        assert!(catalog.exists(), "the catalog's file is not a record");
    }
}
