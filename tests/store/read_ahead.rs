//! Reading a stream ahead (`store/sled/ahead.rs`): with the page cache dropped (so every window of
//! packs is hinted to the OS), stream reads and folds return exactly the frames the global order
//! holds for that stream, at any start version and limit, across segments, before and after a
//! reopen; and the log still verifies.

use crate::common;
use common::*;
use od::store::{Append, RawFrame, Store};
use std::collections::BTreeMap;
use std::path::Path;

const STREAMS: usize = 5;
/// ~1.6 KB events: enough bytes to fill more than one 16 MiB segment with few events.
const TEXT: usize = 1_500;

/// Evicts every file under `dir` from the page cache, so the next reads miss it.
fn drop_page_cache(dir: &Path) {
    use std::os::fd::AsRawFd;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            drop_page_cache(&p);
        } else if let Ok(f) = std::fs::File::open(&p) {
            f.sync_data().unwrap();
            // SAFETY: a valid open fd; advisory call with no memory effects.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }
}

/// Writes the streams interleaved in runs of varying length (1, 2, 3, … 70 events per append,
/// cycling), so packs of one stream are scattered, some single frames, some long.
fn fill(s: &Store) {
    let mut version = [0usize; STREAMS];
    let mut acks = Vec::new();
    let mut n = 0;
    while s.last_seq() < 12_000 {
        for (k, v) in version.iter_mut().enumerate() {
            let run = 1 + (n * 7 + k * 13) % 70;
            n += 1;
            let events = (0..run).map(|i| note(&format!("s{k}v{:06}{}", *v + i, "x".repeat(TEXT)))).collect();
            *v += run;
            acks.push(s.submit(Append::new(sid(&format!("note:s{k}")), events)).unwrap());
        }
        for a in acks.drain(..) {
            a.blocking_recv().unwrap().unwrap();
        }
    }
}

/// Each stream's frames, from the global order.
fn by_stream(s: &Store) -> BTreeMap<String, Vec<RawFrame>> {
    let mut out: BTreeMap<String, Vec<RawFrame>> = BTreeMap::new();
    let mut from = 1;
    while from <= s.last_seq() {
        let page = s.read_from(from, 5_000).unwrap();
        from = page.last().unwrap().seq() + 1;
        for f in page {
            out.entry(f.view().stream().unwrap().to_string()).or_default().push(f);
        }
    }
    out
}

fn seqs(frames: &[RawFrame]) -> Vec<(u64, u64)> {
    frames.iter().map(|f| (f.seq(), f.view().version())).collect()
}

/// Every stream read whole, from a few start versions with a few limits, and folded, each with
/// the page cache dropped first, equals the global order's frames of that stream, byte for byte.
fn check_reads(s: &Store, dir: &Path, want: &BTreeMap<String, Vec<RawFrame>>) {
    for (stream, frames) in want {
        drop_page_cache(dir);
        let whole = s.read_stream(stream, 0, usize::MAX).unwrap();
        assert_eq!(seqs(&whole), seqs(frames), "{stream} whole");
        assert!(whole.iter().zip(frames).all(|(a, b)| a.bytes() == b.bytes()), "{stream} bytes");
        let n = frames.len() as u64;
        for (from, limit) in [(1, 1), (n / 3, 5), (n / 2, 1_000), (n - 1, 10), (n, 10), (7, usize::MAX)] {
            drop_page_cache(dir);
            let got = s.read_stream(stream, from, limit).unwrap();
            let expect: Vec<_> = frames.iter().skip(from as usize).take(limit).cloned().collect();
            assert_eq!(seqs(&got), seqs(&expect), "{stream} from {from} limit {limit}");
        }
        drop_page_cache(dir);
        let mut folded = Vec::new();
        let count = s.fold_stream(stream, &mut |b| folded.push(b.to_vec())).unwrap();
        assert_eq!(count, n);
        assert!(folded.iter().zip(frames).all(|(a, b)| a.as_slice() == b.bytes()), "{stream} fold");
    }
}

#[test]
fn cold_stream_reads_equal_the_global_order_across_segments_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    fill(&s);
    let want = by_stream(&s);
    assert_eq!(want.len(), STREAMS);
    let segments = std::fs::read_dir(dir.path().join("log")).unwrap().flatten().count();
    assert!(segments >= 2, "the fill spans segments ({segments} files)");
    // Before a checkpoint (the index partly in memory), then after a reopen (all of it in sled).
    check_reads(&s, dir.path(), &want);
    s.close();
    drop(s);
    drop_page_cache(dir.path());
    let s = open(dir.path());
    check_reads(&s, dir.path(), &want);
    assert!(s.verify().unwrap().ok());
}
