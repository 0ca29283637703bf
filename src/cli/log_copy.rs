//! `od log copy --to <url|dir> [--from <url|dir>]`: copies a whole log from one backend to the
//! other (or to another data dir), frame by frame, verbatim. Both logs are opened here, never
//! through a daemon (one holding an embedded log makes this `data-dir-locked`). The source chain
//! is checked as it is read (hash, seq, prev hash), the target checks every frame again as it
//! imports it (`EventLog::import`). A non-empty target must be a prefix of the source — its head
//! frame the source's frame at that seq, hash for hash (the chain makes that enough) — else
//! `log-copy-diverged` and nothing is written; so running the command again after an interruption
//! continues from the target's head. At the end the target is verified up to its tail and its head
//! hash compared with the source's.

use clap::Args;
use od_events::{FrameRef, Hash, GENESIS_HASH};
use serde_json::json;
use std::collections::VecDeque;
use std::io::IsTerminal;
use std::path::PathBuf;

use super::{CliError, CliResult, Ctx};
use crate::limits::{COPY_PROGRESS_FRAMES, MAX_IMPORT_BYTES, MAX_IMPORT_FRAMES};
use crate::store::{RawFrame, Store, StoreConfig, StoreError, StoreSpec, VerifyOnOpen};

#[derive(Args, Debug)]
pub struct CopyArgs {
    /// Where the copy goes: a `postgres://` URL, or a data directory (the embedded log; created
    /// when missing). Must be empty or hold a prefix of the source.
    #[arg(long)]
    to: String,
    /// Where the log comes from: a `postgres://` URL or a data directory (default: the configured
    /// store — --store, OD_DATABASE_URL, OD_DAEMON_DB — else the data dir).
    #[arg(long)]
    from: Option<String>,
    /// Copy at most this many frames in this run (a later run continues from there).
    #[arg(long)]
    max_frames: Option<u64>,
}

/// One side of the copy.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    Pg(String),
    Dir(PathBuf),
}

impl Place {
    fn parse(s: &str) -> Place {
        let s = s.trim();
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Place::Pg(s.to_string())
        } else {
            Place::Dir(PathBuf::from(s))
        }
    }
}

/// An opened log, and the scratch data dir a PostgreSQL log was given (removed on drop).
struct Opened {
    log: Store,
    scratch: Option<PathBuf>,
}

impl Drop for Opened {
    fn drop(&mut self) {
        self.log.close();
        if let Some(d) = &self.scratch {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn open(place: &Place, setting: &'static str, source: bool) -> CliResult<Opened> {
    match place {
        Place::Dir(dir) => {
            if source && !dir.join("sled").exists() {
                return Err(CliError::new("usage", format!("{setting}: {} holds no od log", dir.display())));
            }
            let mut cfg = StoreConfig::new(dir);
            cfg.verify_on_open = VerifyOnOpen::FromCheckpoint;
            let log = StoreSpec::Embedded.open(cfg).map_err(|e| match e {
                StoreError::Locked(_) => {
                    let mut e = super::backend::locked_error(dir, None);
                    e.message = format!(
                        "{setting}: {} is in use (a daemon?); od log copy opens both logs itself: stop the daemon \
                         first (`od daemon stop --data-dir {}`). {}",
                        dir.display(),
                        dir.display(),
                        e.message
                    );
                    e
                }
                other => super::backend::store_error(other),
            })?;
            Ok(Opened { log: log.store, scratch: None })
        }
        Place::Pg(url) => {
            // The log's own data dir (a lock file): a scratch one, so the copy holds no real one.
            let scratch = std::env::temp_dir().join(format!("od-log-copy-{}-{setting}", std::process::id()));
            let spec = StoreSpec::Postgres { url: url.clone(), setting };
            let log = spec.open(StoreConfig::new(&scratch)).map_err(super::backend::store_error)?.store;
            Ok(Opened { log, scratch: Some(scratch) })
        }
    }
}

fn hex(h: &Hash) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

fn corrupt(which: &str, seq: u64, why: impl std::fmt::Display) -> CliError {
    let mut e = CliError::new("log-corrupted", format!("the {which} log at seq {seq}: {why}"));
    e.data = json!({ "log": which, "seq": seq });
    e
}

/// The frame at `seq` of `log`, verified; its hash.
fn hash_at(log: &Store, which: &str, seq: u64) -> CliResult<Hash> {
    let f = log.read_from(seq, 1).map_err(super::backend::store_error)?;
    let f = f.first().filter(|f| f.seq() == seq).ok_or_else(|| corrupt(which, seq, "the frame is missing"))?;
    let v = FrameRef::parse_verified(f.bytes()).map_err(|e| corrupt(which, seq, e))?;
    Ok(*v.hash())
}

/// The op id of a frame (read by the chunker only: never fails, frames were verified).
fn op_of(f: &RawFrame) -> Option<String> {
    f.view().op_id().ok().flatten().map(str::to_string)
}

pub fn run(ctx: &Ctx, args: CopyArgs) -> CliResult {
    let (from, to) = places(ctx, &args)?;
    let src = open(&from, "--from", true)?;
    let dst = open(&to, "--to", false)?;
    let (source, target) = (&src.log, &dst.log);
    let source_last = source.last_seq();
    let target_last = target.last_seq();
    let prev = prefix_head(source, target)?;
    let upto = match args.max_frames {
        Some(n) => source_last.min(target_last.saturating_add(n)),
        None => source_last,
    };
    let people = !ctx.json || std::io::stderr().is_terminal();
    let copied = copy_frames(source, target, prev, upto, people)?;
    let (head_hash, last) = verify_target(source, target)?;
    let v = json!({
        "from": source.location(),
        "to": target.location(),
        "copied": copied,
        "lastSeq": last,
        "sourceLastSeq": source_last,
        "complete": last == source_last,
        "headHash": head_hash,
        "verified": true,
    });
    ctx.print(&v, |v| {
        let rest = if v["complete"] == true {
            String::new()
        } else {
            format!("; {} more to copy (run it again)", source_last - last)
        };
        format!(
            "copied {} frames from {} to {} (it now holds {} frames, head {}), verified{rest}",
            v["copied"],
            v["from"].as_str().unwrap_or(""),
            v["to"].as_str().unwrap_or(""),
            v["lastSeq"],
            v["headHash"].as_str().unwrap_or("")
        )
    });
    Ok(())
}

/// `--from` (default: the configured store, else the data dir) and `--to`, which must differ.
fn places(ctx: &Ctx, args: &CopyArgs) -> CliResult<(Place, Place)> {
    let from = match &args.from {
        Some(f) => Place::parse(f),
        None => match StoreSpec::from_env(ctx.backend.store.as_deref()).map_err(super::backend::store_error)? {
            StoreSpec::Postgres { url, .. } => Place::Pg(url),
            StoreSpec::Embedded => Place::Dir(ctx.data_dir.clone()),
        },
    };
    let to = Place::parse(&args.to);
    let same_dir = |a: &PathBuf, b: &PathBuf| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    let same = match (&from, &to) {
        (Place::Dir(a), Place::Dir(b)) => same_dir(a, b),
        (a, b) => a == b,
    };
    if same {
        return Err(CliError::new("usage", "--to names the log being copied: give another database or data dir"));
    }
    Ok((from, to))
}

/// The prefix rule: the target's head frame must be the source's frame at that seq
/// (`log-copy-diverged` otherwise, nothing written). The hash the copy chains on.
fn prefix_head(source: &Store, target: &Store) -> CliResult<Hash> {
    let (source_last, target_last) = (source.last_seq(), target.last_seq());
    if target_last == 0 {
        return Ok(GENESIS_HASH);
    }
    let head = hash_at(target, "target", target_last)?;
    if target_last <= source_last && hash_at(source, "source", target_last)? == head {
        return Ok(head);
    }
    let mut e = CliError::new(
        "log-copy-diverged",
        format!(
            "{} is not empty and is not a prefix of {}: its frames up to seq {} end in {}, which the source {}. \
             Nothing was written; copy into an empty database or data dir",
            target.location(),
            source.location(),
            target_last,
            hex(&head),
            if target_last > source_last {
                format!("does not reach (it ends at seq {source_last})")
            } else {
                format!("does not have at seq {target_last}")
            }
        ),
    );
    e.data = json!({ "targetLastSeq": target_last, "sourceLastSeq": source_last, "targetHeadHash": hex(&head) });
    Err(e)
}

/// Copies the source's frames after the target's head up to `upto`, in imports of whole groups
/// where it can; the number copied. `people`: progress on stderr.
fn copy_frames(source: &Store, target: &Store, prev: Hash, upto: u64, people: bool) -> CliResult<u64> {
    let total = upto.saturating_sub(target.last_seq());
    let mut next = target.last_seq() + 1;
    let mut copied = 0u64;
    let mut ahead = ReadAhead { next, prev, buf: VecDeque::new() };
    while next <= upto {
        ahead.fill(source, upto)?;
        let chunk = take_chunk(&mut ahead.buf);
        let n = chunk.len() as u64;
        let last = target.import(chunk).map_err(super::backend::store_error)?;
        if last != next + n - 1 {
            return Err(corrupt("target", next, format!("the import ended at seq {last}, not {}", next + n - 1)));
        }
        let before = copied;
        (next, copied) = (last + 1, copied + n);
        if people && (copied / COPY_PROGRESS_FRAMES > before / COPY_PROGRESS_FRAMES || next > upto) {
            eprintln!("copied {copied} of {total} frames (seq {last})");
        }
    }
    Ok(copied)
}

/// Source frames read ahead of the imports, checked as read.
struct ReadAhead {
    /// The next seq to read.
    next: u64,
    /// The hash the next frame must chain on.
    prev: Hash,
    buf: VecDeque<RawFrame>,
}

impl ReadAhead {
    /// Reads until more than an import's frames wait or `upto` is read: each frame verifies,
    /// carries the next seq, and chains on.
    fn fill(&mut self, source: &Store, upto: u64) -> CliResult {
        while self.buf.len() <= MAX_IMPORT_FRAMES && self.next <= upto {
            let want = ((upto - self.next + 1) as usize).min(MAX_IMPORT_FRAMES);
            let page = source.read_from(self.next, want).map_err(super::backend::store_error)?;
            if page.is_empty() {
                return Err(corrupt("source", self.next, "the frame is missing"));
            }
            for f in page.into_iter().take(want) {
                let v = FrameRef::parse_verified(f.bytes()).map_err(|e| corrupt("source", self.next, e))?;
                if v.seq() != self.next {
                    return Err(corrupt("source", self.next, format!("the frame says seq {}", v.seq())));
                }
                if v.prev_hash() != &self.prev {
                    return Err(corrupt("source", self.next, "the hash chain is broken (prev hash)"));
                }
                self.prev = *v.hash();
                self.next += 1;
                self.buf.push_back(f);
            }
        }
        Ok(())
    }
}

/// The target, verified up to its tail, must end where the source does at that seq: its head
/// hash and last seq.
fn verify_target(source: &Store, target: &Store) -> CliResult<(String, u64)> {
    let report = target.verify().map_err(super::backend::store_error)?;
    if let Some(bad) = &report.first_bad {
        return Err(corrupt("target", bad.seq, &bad.reason));
    }
    let last = target.last_seq();
    let want = if last == 0 { GENESIS_HASH } else { hash_at(source, "source", last)? };
    if report.verified != last || report.head_hash != hex(&want) {
        let why = format!(
            "verified {} frames ending in {}, the source has {} there",
            report.verified,
            report.head_hash,
            hex(&want)
        );
        return Err(corrupt("target", last, why));
    }
    Ok((report.head_hash, last))
}

/// The next import: up to [`MAX_IMPORT_FRAMES`] frames and [`MAX_IMPORT_BYTES`] from the front of
/// `buf`. When more follow, it ends at a group boundary if it holds one (an op id's frames then
/// land in one commit, so an interrupted copy leaves no half group); a group bigger than an import
/// is split, and the target extends its op record with the rest.
fn take_chunk(buf: &mut VecDeque<RawFrame>) -> Vec<RawFrame> {
    let mut n = 0;
    let mut bytes = 0;
    while n < buf.len() && n < MAX_IMPORT_FRAMES {
        let b = buf[n].bytes().len() + crate::store::RECORD_BYTES;
        if n > 0 && bytes + b > MAX_IMPORT_BYTES {
            break;
        }
        bytes += b;
        n += 1;
    }
    if n < buf.len() {
        let same_group = |i: usize| op_of(&buf[i - 1]).is_some_and(|op| Some(op) == op_of(&buf[i]));
        if same_group(n) {
            if let Some(cut) = (1..n).rev().find(|&i| !same_group(i)) {
                n = cut;
            }
        }
    }
    buf.drain(..n).collect()
}
