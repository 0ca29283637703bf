//! Memory that grew with every burst of runs: sled 0.34.7 retires each filled log buffer (a
//! 512 KiB allocation aligned to 8 KiB) through crossbeam-epoch's deferred destruction, which frees
//! it only once the retiring thread's bag is flushed. The daemon's threads that write to sled (the
//! projection follower, HTTP handlers whose reads catch projections up, run executors) flush it
//! after their work (`od::reclaim`); before, the buffers of every sled segment written stayed
//! allocated (heaptrack after 5 more bursts of 50 runs: +7.9 MB of them, 15 buffers).
//!
//! Counted, not timed: a counting global allocator tracks the live allocations with sled's log
//! buffer layout (8 KiB alignment, at least 256 KiB) while runs are recorded back to back.

use crate::common;
use common::harness::Engine;
use serde_json::{json, Value};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Live allocations shaped like sled's log buffers (`AlignedBuf`).
static LIVE_LOG_BUFFERS: AtomicUsize = AtomicUsize::new(0);

fn is_log_buffer(l: &Layout) -> bool {
    l.align() == 8192 && l.size() >= 256 * 1024
}

struct Counting;

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() && is_log_buffer(&l) {
            LIVE_LOG_BUFFERS.fetch_add(1, Ordering::SeqCst);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if is_log_buffer(&l) {
            LIVE_LOG_BUFFERS.fetch_sub(1, Ordering::SeqCst);
        }
        System.dealloc(p, l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() && is_log_buffer(&l) {
            LIVE_LOG_BUFFERS.fetch_add(1, Ordering::SeqCst);
        }
        p
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        let q = System.realloc(p, l, new_size);
        if !q.is_null() {
            let after = Layout::from_size_align_unchecked(new_size, l.align());
            if is_log_buffer(&l) {
                LIVE_LOG_BUFFERS.fetch_sub(1, Ordering::SeqCst);
            }
            if is_log_buffer(&after) {
                LIVE_LOG_BUFFERS.fetch_add(1, Ordering::SeqCst);
            }
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const NOW: i64 = 1_800_000_000_000;

fn body() -> Value {
    json!({ "pluginId": "od-new-generation", "agent": "dry-run",
            "pluginInputs": { "topic": "tea", "audience": "tea lovers", "artifactKind": "landing-page" } })
}

/// The live log buffers once the daemon settles (polled: the follower may still be folding the
/// last run), or the smallest count seen before a generous deadline.
fn settled_buffers(bound: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut least = usize::MAX;
    loop {
        least = least.min(LIVE_LOG_BUFFERS.load(Ordering::SeqCst));
        if least <= bound || Instant::now() > deadline {
            return least;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sled_log_buffers_are_freed_as_runs_are_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    // sled keeps its current buffer (and may have one being written); a retired one is garbage.
    const BOUND: usize = 3;
    const BURSTS: usize = 5;
    const BURST: usize = 40;
    let mut seen = Vec::new();
    for _ in 0..BURSTS {
        // A burst: every run started at once, each watched to its end (many handler threads each
        // write to sled a little, as under the runs bench's bursts).
        let bar = std::sync::Barrier::new(BURST);
        std::thread::scope(|s| {
            for _ in 0..BURST {
                s.spawn(|| {
                    bar.wait();
                    let (_, ev) = e.run(body());
                    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
                });
            }
        });
        seen.push(settled_buffers(BOUND));
    }
    // The bursts write sled's log through many 512 KiB segments: without the flush, their buffers
    // stayed allocated in the bags of the threads that retired them.
    assert!(seen.iter().all(|n| *n <= BOUND), "live sled log buffers after each burst: {seen:?}");
    e.stop();
}
