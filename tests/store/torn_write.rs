//! A crash in the middle of a segment write: the batch's first pages on disk and not the rest.

use crate::common;
use common::*;
use od::store::{Append, SledLog, Store, StoreConfig, StoreError};
use od_events::Event;
use std::path::Path;

fn open_store(dir: &Path) -> Result<Store, StoreError> {
    let mut cfg = StoreConfig::new(dir);
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    SledLog::open(cfg).map(|s| s as Store)
}

/// What a crash in the middle of a segment write leaves: the first pages of the batch on disk and
/// not the rest. A SIGKILL does this — Linux's buffered write copies page by page and stops with a
/// short write once a fatal signal is pending — and so does a power loss before the batch's
/// fdatasync completes. Such a batch was never acknowledged, so recovery may drop it; it must not
/// keep part of an append (appends are all or nothing), nor record that part under its op id.
///
/// The random kills in `crash_cycles` rarely land inside the few microseconds of a `pwrite`; this
/// builds that state directly: sled as of a checkpoint, plus a segment whose only batch after the
/// checkpoint — one append of 8 events of ~3 KB — is cut at the first page boundary after its
/// second frame.
///
/// (This caught a real bug: the scan once accepted frames one by one; records now carry their
/// batch's extent and recovery keeps whole batches only.)
#[test]
fn torn_segment_write_never_keeps_part_of_an_append() {
    const PAGE: usize = 4096;
    let tmp = tempfile::tempdir().unwrap();
    let (src, torn) = (tmp.path().join("src"), tmp.path().join("torn"));
    let s = open_store(&src).unwrap();
    for i in 0..20 {
        append_note(&s, "note:small", &format!("small {i}"));
    }
    s.checkpoint().unwrap(); // sled durable and idle; recovery will rescan from seq 21
    copy_dir(&src, &torn);
    let n = 8;
    let big: Vec<Event> = (0..n).map(|k| note(&format!("big {k} of {n} {}", "b".repeat(3000)))).collect();
    let r = s.append(Append::new(sid("note:torn"), big).op_id("big")).unwrap();
    assert_eq!((r.first_seq, r.last_seq), (21, 28));
    // The segment holds the 20 small records, then that batch; each record is
    // `[u32 len][u64 batch first seq][u64 batch last seq][frame]`.
    let segment = "log/00000001.seg";
    let mut bytes = std::fs::read(src.join(segment)).unwrap();
    drop(s);
    let mut ends = Vec::new();
    let mut pos = 0;
    for _ in 0..20 {
        pos += 20 + u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
    }
    for _ in 0..n {
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        pos += 20 + len;
        ends.push(pos);
    }
    let tear = (ends[1] / PAGE + 1) * PAGE;
    assert!(ends[1] < tear && tear < ends[2], "tear inside the third frame");
    bytes[tear..ends[n - 1]].fill(0);
    std::fs::write(torn.join(segment), &bytes).unwrap();

    let s = open_store(&torn).unwrap_or_else(|e| panic!("a torn, unacknowledged tail is not corruption: {e}"));
    let kept = s.last_seq();
    let torn_events = s.read_stream("note:torn", 0, usize::MAX).unwrap().len();
    let op = s.append(Append::new(sid("note:torn"), vec![note("retry")]).op_id("big")).unwrap();
    assert!(
        kept == 20 && torn_events == 0,
        "STORE BUG: recovery kept {torn_events} of the 8 events of a torn, unacknowledged append \
         (log now ends at seq {kept}); a retry of its op id then returns {op:?}"
    );
    assert!(!op.deduplicated, "the retry was deduplicated against a torn append: {op:?}");
}
