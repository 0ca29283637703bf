//! Corruption of stored, acknowledged frames is detected — by opening the store and by
//! `od log verify` (`verify_dir`) — as a clear `StoreError::Corrupt`, never repaired silently and
//! never a panic.
//!
//! Each case writes a log whose note texts carry unique markers, copies the data dir, flips one
//! byte of a marker inside a stored frame in the copy (frames live in the segment files under
//! `log/`), and opens / verifies the copy; every occurrence of a marker is tried in its own copy.
//! Bytes flipped in sled's index (`sled/db`) must likewise be reported or be harmless — never
//! ignored while frames read back wrong, never a panic.

use crate::common;
use common::*;
use od::store::{verify_dir, Append, BadFrame, EventLog, SledLog, StoreConfig, StoreError};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// Events in each test log (one per append, across 5 streams).
const EVENTS: u64 = 3000;
/// Events whose stored frames get a flipped byte: early, middle and last in the log.
const TARGETS: [u64; 3] = [5, EVENTS / 2, EVENTS - 5];

/// The unique prefix of event `i`'s text (event `i` has seq `i + 1`).
fn marker(i: u64) -> String {
    format!("marker-{i:05}-")
}

fn open_store(dir: &Path) -> Result<std::sync::Arc<SledLog>, StoreError> {
    let mut cfg = StoreConfig::new(dir);
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    SledLog::open(cfg)
}

/// Opens a store in `dir` and writes the test log; returns the store (still open). No checkpoint
/// happens while it is open (the time bound is set far off), so a copy taken while it is open has
/// every record after its last checkpoint.
fn write_log(dir: &Path) -> std::sync::Arc<SledLog> {
    let mut cfg = StoreConfig::new(dir);
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    cfg.checkpoint_interval = std::time::Duration::from_secs(3600);
    let s = SledLog::open(cfg).unwrap();
    for i in 0..EVENTS {
        let text = format!("{}{}", marker(i), "p".repeat(100));
        let r = s.append(Append::new(sid(&format!("note:s{}", i % 5)), vec![note(&text)])).unwrap();
        assert_eq!(r.first_seq, i + 1);
    }
    s
}

/// Flushes sled (without a checkpoint, so recovery still rescans the records) so that its files are
/// not being written while an open store's dir is copied: a file copied while sled's background
/// flusher writes to it could be a state that never existed on disk.
fn quiesce_sled(s: &std::sync::Arc<SledLog>) {
    s.projections_tree().flush().unwrap();
}

/// Every frame's bytes, in seq order.
fn all_frames(s: &dyn EventLog) -> Result<Vec<Vec<u8>>, StoreError> {
    Ok(s.read_from(1, usize::MAX)?.iter().map(|f| f.bytes().to_vec()).collect())
}

fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    hay.windows(needle.len()).enumerate().filter(|(_, w)| *w == needle).map(|(i, _)| i).collect()
}

/// Flips the low bit of the byte at `offset` of `file`.
fn flip(file: &Path, offset: usize) {
    let mut b = std::fs::read(file).unwrap();
    b[offset] ^= 0x01;
    std::fs::write(file, &b).unwrap();
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic)".into())
}

/// What opening a corrupted copy did.
#[derive(Debug)]
enum Opened {
    /// The store refused to open.
    Refused(StoreError),
    /// It opened and every frame reads back exactly as written: the flip hit dead bytes.
    Intact,
    /// It opened although stored frames are damaged; what reading and `verify` then said.
    Damaged { read: String, verify: String },
    /// Something panicked (sled, or the store).
    Panicked(String),
}

fn try_open(dir: &Path, original: &[Vec<u8>]) -> Opened {
    let r = catch_unwind(AssertUnwindSafe(|| match open_store(dir) {
        Err(e) => Opened::Refused(e),
        Ok(s) => {
            let frames = all_frames(&*s);
            let verify = s.verify();
            match (&frames, &verify) {
                (Ok(f), Ok(v)) if f.as_slice() == original && v.ok() => Opened::Intact,
                _ => Opened::Damaged {
                    read: match frames {
                        Ok(f) if f.as_slice() == original => "all frames read back intact".into(),
                        Ok(f) => {
                            format!("{} frames read, differing from what was written", f.len())
                        }
                        Err(e) => format!("read failed: {e:?}"),
                    },
                    verify: format!("{verify:?}"),
                },
            }
        }
    }));
    r.unwrap_or_else(|p| Opened::Panicked(panic_text(p)))
}

/// What `od log verify` said about a corrupted copy.
#[derive(Debug)]
enum Verified {
    /// It named the first bad frame.
    FirstBad(BadFrame),
    /// It returned an error.
    Error(StoreError),
    /// It found nothing wrong.
    Clean,
    Panicked(String),
}

fn try_verify_dir(dir: &Path) -> Verified {
    match catch_unwind(AssertUnwindSafe(|| verify_dir(dir))) {
        Ok(Ok(r)) => match r.first_bad {
            Some(b) => Verified::FirstBad(b),
            None => Verified::Clean,
        },
        Ok(Err(e)) => Verified::Error(e),
        Err(p) => Verified::Panicked(panic_text(p)),
    }
}

/// One flipped byte, tried in two identical copies (one opened, one verified).
#[derive(Debug)]
struct Case {
    file: &'static str,
    event: u64,
    offset: usize,
    open: Opened,
    reopen: Option<Opened>,
    verify: Verified,
}

impl Case {
    /// Why this case breaks the contract, if it does.
    fn problem(&self) -> Option<String> {
        let dead = matches!(self.open, Opened::Intact);
        let open = match &self.open {
            Opened::Refused(StoreError::Corrupt { .. }) | Opened::Intact => None,
            Opened::Refused(e) => Some(format!("open refused with a non-`Corrupt` error ({})", e.code())),
            Opened::Damaged { read, verify } => {
                Some(format!("open succeeded on a damaged log (then reading: {read}; verify(): {verify})"))
            }
            Opened::Panicked(m) => Some(format!("open panicked: {m}")),
        };
        let reopen = match &self.reopen {
            None | Some(Opened::Refused(StoreError::Corrupt { .. })) => None,
            Some(Opened::Panicked(m)) => Some(format!("second open panicked: {m}")),
            Some(o) => Some(format!("second open did not refuse: {o:?}")),
        };
        let verify = match &self.verify {
            Verified::FirstBad(..) | Verified::Error(StoreError::Corrupt { .. }) if !dead => None,
            Verified::Clean if dead => None,
            Verified::Clean => Some("verify_dir found nothing wrong".into()),
            Verified::Error(e) => {
                Some(format!("verify_dir returned a non-`Corrupt` error ({}) naming no frame", e.code()))
            }
            Verified::Panicked(m) => Some(format!("verify_dir panicked: {m}")),
            Verified::FirstBad(..) => Some("verify_dir flagged an intact log".into()),
        };
        let all: Vec<String> = [open, reopen, verify].into_iter().flatten().collect();
        (!all.is_empty()).then(|| all.join("; "))
    }
}

/// Flips a byte of each occurrence of each target marker in `file` (relative to the data dir),
/// each in fresh copies of `src`, and records what open and verify_dir do.
fn flip_each_occurrence(src: &Path, work: &Path, file: &'static str, original: &[Vec<u8>]) -> Vec<Case> {
    let bytes = std::fs::read(src.join(file)).unwrap();
    let mut cases = Vec::new();
    for event in TARGETS {
        let found = find_all(&bytes, marker(event).as_bytes());
        assert!(!found.is_empty(), "{file} does not hold event {event}");
        for (k, at) in found.into_iter().enumerate() {
            // A digit of the marker: inside the frame's payload, covered by the frame's hash.
            let offset = at + 9;
            let (a, b) = (work.join(format!("open-{event}-{k}")), work.join(format!("verify-{event}-{k}")));
            for copy in [&a, &b] {
                copy_dir(src, copy);
                flip(&copy.join(file), offset);
            }
            let open = try_open(&a, original);
            // A refusal must not be a one-off: the next open refuses too (nothing was "repaired").
            let reopen = matches!(open, Opened::Refused(_)).then(|| try_open(&a, original));
            let verify = try_verify_dir(&b);
            std::fs::remove_dir_all(&a).unwrap();
            std::fs::remove_dir_all(&b).unwrap();
            cases.push(Case { file, event, offset, open, reopen, verify });
        }
    }
    cases
}

/// Fails with every case listed when any case breaks the contract, or when some target had no
/// live occurrence at all (the test would then prove nothing).
fn assert_all_detected(what: &str, cases: &[Case]) {
    let mut report = String::new();
    let mut bad = 0;
    for c in cases {
        let p = c.problem();
        bad += p.is_some() as usize;
        report += &format!(
            "\n  {} event {} (seq {}) byte {}: {}\n    open: {:?}\n    reopen: {:?}\n    verify_dir: {:?}",
            c.file,
            c.event,
            c.event + 1,
            c.offset,
            p.as_deref().unwrap_or("ok"),
            c.open,
            c.reopen,
            c.verify
        );
    }
    for event in TARGETS {
        let live = cases.iter().any(|c| c.event == event && !matches!(c.open, Opened::Intact));
        if !live {
            bad += 1;
            report += &format!("\n  event {event}: no flipped occurrence mattered (no live copy found)");
        }
    }
    assert!(bad == 0, "{what}: {bad} problem(s):{report}");
    eprintln!("{what}: all detected:{report}");
}

const SEGMENT: &str = "log/00000001.seg";

/// A byte flipped in a stored frame of a store that was written and closed once (a clean close
/// checkpoints, so these frames are before the checkpoint: only a full verification reads them).
#[test]
fn flipped_byte_in_a_segment_is_detected_after_one_session() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let s = write_log(&src);
    let original = all_frames(&*s).unwrap();
    drop(s);
    let cases = flip_each_occurrence(&src, tmp.path(), SEGMENT, &original);
    assert_all_detected("segment, one session", &cases);
}

/// The same on a store that was reopened after being written.
#[test]
fn flipped_byte_in_a_segment_is_detected_after_a_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let s = write_log(&src);
    let original = all_frames(&*s).unwrap();
    drop(s);
    let s = open(&src);
    assert_eq!(all_frames(&*s).unwrap(), original);
    drop(s);
    let cases = flip_each_occurrence(&src, tmp.path(), SEGMENT, &original);
    assert_all_detected("segment, reopened", &cases);
}

/// Bytes flipped across sled's own file (the index). sled 0.34.7 reacts to damage by panicking
/// inside `Config::open`, by refusing with a checksum error, or by truncating its log so that the
/// index loses a range; the store must turn each into `Corrupt`. A flip in bytes sled no longer
/// uses is harmless; what must never happen is an open that succeeds while frames read back wrong,
/// or a verification that finds nothing wrong with a store that refused to open.
#[test]
fn flipped_bytes_in_the_sled_index_are_detected_or_harmless() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let s = write_log(&src);
    let original = all_frames(&*s).unwrap();
    drop(s);
    let len = std::fs::metadata(src.join("sled/db")).unwrap().len() as usize;
    let mut report = String::new();
    for tenth in 1..10 {
        let offset = len * tenth / 10;
        let (a, b) = (tmp.path().join(format!("open-{tenth}")), tmp.path().join(format!("verify-{tenth}")));
        for copy in [&a, &b] {
            copy_dir(&src, copy);
            flip(&copy.join("sled/db"), offset);
        }
        let open = try_open(&a, &original);
        let verify = try_verify_dir(&b);
        let ok = match (&open, &verify) {
            (Opened::Intact, Verified::Clean) => true,
            (
                Opened::Refused(StoreError::Corrupt { .. }),
                Verified::FirstBad(_) | Verified::Error(StoreError::Corrupt { .. }),
            ) => true,
            // The two copies are identical, but sled may hit the damage on one path and not the other
            // (e.g. a page only a full walk reads); both answers are honest as long as none panics.
            (Opened::Intact, Verified::FirstBad(_))
            | (Opened::Refused(StoreError::Corrupt { .. }), Verified::Clean) => true,
            _ => false,
        };
        if !ok {
            report += &format!("\n  byte {offset}: open {open:?}; verify_dir {verify:?}");
        }
    }
    assert!(report.is_empty(), "flips in sled/db were mishandled:{report}");
}

/// A byte flipped in a record after the last checkpoint, in a copy taken while the store was open
/// (no checkpoint has happened yet, so recovery rescans every record and must stop at the damaged
/// one — and report it, since later batches were committed after it).
#[test]
fn flipped_byte_in_an_unchecked_record_is_detected() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let live = tmp.path().join("live-copy");
    let s = write_log(&src);
    let original = all_frames(&*s).unwrap();
    quiesce_sled(&s);
    copy_dir(&src, &live);
    drop(s);

    let segment = std::fs::read(live.join(SEGMENT)).unwrap();
    let event = EVENTS / 2;
    let found = find_all(&segment, marker(event).as_bytes());
    assert_eq!(found.len(), 1, "the segment holds each record once");
    let offset = found[0] + 9;
    let (a, b) = (tmp.path().join("open"), tmp.path().join("verify"));
    for copy in [&a, &b] {
        copy_dir(&live, copy);
        flip(&copy.join(SEGMENT), offset);
    }
    let open = try_open(&a, &original);
    let verify = try_verify_dir(&b);
    let seq = event + 1;
    assert!(
        matches!(&open, Opened::Refused(StoreError::Corrupt { seq: s, .. }) if *s == seq),
        "open of a copy with record {seq} damaged: {open:?}"
    );
    let again = try_open(&a, &original);
    assert!(
        matches!(&again, Opened::Refused(StoreError::Corrupt { seq: s, .. }) if *s == seq),
        "second open: {again:?}"
    );
    assert!(
        matches!(&verify, Verified::FirstBad(b) if b.seq == seq),
        "verify_dir of a copy with record {seq} damaged: {verify:?}"
    );
    // And the command line: `od log verify` exits 78 naming the frame; any other command refuses.
    let c = tmp.path().join("cli");
    copy_dir(&live, &c);
    flip(&c.join(SEGMENT), offset);
    let od = |args: &[&str]| common::harness::od_cli(&c, args);
    let out = od(&["log", "verify", "--json"]);
    assert_eq!(out.status.code(), Some(78), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["firstBad"]["seq"], seq);
    let err: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "log-corrupted");
    let out = od(&["log", "tail"]);
    assert_eq!(out.status.code(), Some(78), "a damaged log refuses to open: {}", String::from_utf8_lossy(&out.stderr));
}

/// Control: unmodified copies of the same data — of a closed store, and of an open one (whose
/// segments must be rescanned) — open with every frame intact and verify clean.
#[test]
fn clean_copies_open_and_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let s = write_log(&src);
    let original = all_frames(&*s).unwrap();
    let live: PathBuf = tmp.path().join("copy-while-open");
    quiesce_sled(&s);
    copy_dir(&src, &live);
    drop(s);
    let closed = tmp.path().join("copy-after-close");
    copy_dir(&src, &closed);
    for dir in [&closed, &live] {
        let r = verify_dir(dir).unwrap();
        assert!(r.ok(), "{}: {r:?}", dir.display());
        let s = open_store(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        assert_eq!(s.last_seq(), EVENTS);
        assert!(all_frames(&*s).unwrap() == original, "{}", dir.display());
        let v = s.verify().unwrap();
        assert!(v.ok() && v.verified == EVENTS, "{}: {v:?}", dir.display());
        assert_eq!(texts(&(s.clone() as od::store::Store), "note:s0")[1], format!("{}{}", marker(5), "p".repeat(100)));
        drop(s);
        let r = verify_dir(dir).unwrap();
        assert!(r.ok() && r.verified == EVENTS, "{}: {r:?}", dir.display());
    }
}
