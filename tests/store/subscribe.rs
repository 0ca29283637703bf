//! Subscriptions: backlog then live with no gap and no duplicate, from any starting point; a
//! stalled subscriber never blocks the writer and catches up from the log.

use crate::common;
use common::*;
use od::store::{Append, EventLog};

async fn collect(sub: &mut od::store::Subscription, n: usize) -> Vec<u64> {
    let mut out = Vec::new();
    while out.len() < n {
        out.push(sub.next().await.unwrap().unwrap().seq());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backlog_then_live_without_gap_or_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for i in 0..30 {
        store.append_async(Append::new(sid("note:a"), vec![note(&i.to_string())])).await.unwrap();
    }
    for pick in 0..5u64 {
        let existing = store.last_seq();
        let after = [0, 1, existing / 2, existing - 1, existing][pick as usize];
        let mut sub = store.subscribe(after);
        let writer = {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..20 {
                    let evs = vec![note(&format!("live-{i}")), note("pair")];
                    store.append_async(Append::new(sid("note:b"), evs)).await.unwrap();
                }
            })
        };
        // Read while the writer is still appending: backlog and live interleave.
        let got = collect(&mut sub, (existing + 40 - after) as usize).await;
        writer.await.unwrap();
        assert_eq!(got, (after + 1..=existing + 40).collect::<Vec<_>>(), "after {after}");
        assert!(sub.try_next().is_none(), "nothing beyond the tail");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_subscriber_does_not_block_the_writer_and_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = od::store::StoreConfig::new(dir.path());
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    cfg.subscriber_buffer = 16;
    let store = od::store::SledLog::open(cfg).unwrap();
    let mut stalled = store.subscribe(0);
    store.append_async(Append::new(sid("note:s"), vec![note("first")])).await.unwrap();
    assert_eq!(stalled.next().await.unwrap().unwrap().seq(), 1);
    // Far more published batches than the live buffer holds, while the subscriber reads nothing.
    // Sequential appends: each is its own group commit, so each is one published batch.
    let n = 16 * 8;
    for i in 1..n {
        store.append_async(Append::new(sid("note:s"), vec![note(&i.to_string())])).await.unwrap();
    }
    assert_eq!(store.last_seq(), n);
    let got = collect(&mut stalled, n as usize - 1).await;
    assert_eq!(got, (2..=n).collect::<Vec<_>>());
    assert!(stalled.fallbacks > 0, "the live buffer overflowed and the subscriber fell back to the log");
    // And it continues live afterwards.
    store.append_async(Append::new(sid("note:s"), vec![note("after")])).await.unwrap();
    assert_eq!(stalled.next().await.unwrap().unwrap().seq(), n + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_subscribers_all_see_everything() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let mut subs: Vec<_> = (0..50).map(|_| store.subscribe(0)).collect();
    for i in 0..100 {
        store.append_async(Append::new(sid(&format!("note:{}", i % 4)), vec![note("x")])).await.unwrap();
    }
    for s in &mut subs {
        assert_eq!(collect(s, 100).await, (1..=100).collect::<Vec<_>>());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_batches_reach_live_subscribers_through_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let mut sub = store.subscribe(0);
    let big = "x".repeat(2048);
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            for round in 0..5 {
                // 64 × 2 KiB: over PUBLISH_INLINE_BYTES, published as a bare wake-up.
                let evs = (0..64).map(|i| note(&format!("{round}-{i}-{big}"))).collect();
                store.append_async(Append::new(sid("note:big"), evs)).await.unwrap();
                store.append_async(Append::new(sid("note:small"), vec![note("small")])).await.unwrap();
            }
        })
    };
    let got = collect(&mut sub, 5 * 65).await;
    writer.await.unwrap();
    assert_eq!(got, (1..=325).collect::<Vec<_>>());
}

// The big batches above really are over the inline limit.
const _: () = assert!(64 * 2048 > od::limits::PUBLISH_INLINE_BYTES);
