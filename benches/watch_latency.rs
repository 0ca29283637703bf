//! Append-to-subscriber latency: how long after an appender submits an event does a live
//! subscriber (as `od run watch` / SSE use) receive it.
//!
//! 1, 4 and 16 appender threads each append one 500-byte event at a time (round-robin over 20
//! streams) and wait for its durable ack before the next. Just before each submit the appender
//! records the time in a side table indexed by the event's id (carried in the event's text, never
//! in the store). One subscriber, on a current-thread tokio runtime, awaits `Subscription::next()`
//! and stamps each frame on receipt; latency = receipt - submit. The first `WARMUP` of each run is
//! discarded. Ack latency (submit -> durable ack, seen by the appender) is reported alongside.
//!
//! Run: `cargo bench --bench watch_latency`. Results: table on stdout and
//! `target/bench-results/watch_latency.json`.

mod common;

use common::*;
use od::store::{Append, EventLog, SledLog, StoreConfig};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const APPENDERS: [usize; 3] = [1, 4, 16];
/// Most events one appender submits per run (sizes the side table).
const PER_APPENDER: u64 = 1 << 18;
/// Samples submitted before this are discarded.
const WARMUP: Duration = Duration::from_millis(200);
/// The id of the event that tells the subscriber to stop.
const STOP: u64 = u64::MAX;
/// p99 required at 4 appenders.
const TARGET_P99_US: f64 = 1000.0;

struct Run {
    appenders: usize,
    events: u64,
    secs: f64,
    /// Append-to-subscriber latencies, µs, sorted.
    watch: Vec<f64>,
    /// Submit-to-ack latencies, µs, sorted.
    ack: Vec<f64>,
    fallbacks: u64,
}

fn run(appenders: usize, dur: Duration) -> Run {
    let dir = tempdir();
    let store = SledLog::open(StoreConfig::new(dir.path())).expect("open od");
    let ids = stream_ids();
    // Submit times, ns since `base` (+1 so that 0 means "not submitted").
    let submitted: Vec<AtomicU64> = (0..appenders as u64 * PER_APPENDER).map(|_| AtomicU64::new(0)).collect();
    let base = Instant::now();
    let warm = WARMUP.as_nanos() as u64;
    let mut sub = store.subscribe(store.last_seq());
    let (watch, fallbacks, acks, events, secs) = std::thread::scope(|s| {
        let submitted = &submitted;
        let subscriber = s.spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async {
                let mut lat = Vec::new();
                while let Some(f) = sub.next().await {
                    let now = base.elapsed().as_nanos() as u64;
                    let f = f.expect("frame");
                    let id = id_of_payload(f.view().payload());
                    if id == STOP {
                        break;
                    }
                    let stamp = submitted[id as usize].load(Ordering::Acquire);
                    assert!(stamp > 0, "event {id} delivered before it was submitted");
                    let sent = stamp - 1;
                    if sent >= warm {
                        lat.push((now - sent) as f64 / 1e3);
                    }
                }
                (lat, sub.fallbacks)
            })
        });
        let start = Instant::now();
        let deadline = start + WARMUP + dur;
        let appender_handles: Vec<_> = (0..appenders)
            .map(|t| {
                let (store, ids) = (&store, &ids);
                s.spawn(move || {
                    let mut acks = Vec::new();
                    let mut j = 0u64;
                    while j < PER_APPENDER && Instant::now() < deadline {
                        let id = t as u64 * PER_APPENDER + j;
                        let stream = ids[(t + j as usize * appenders) % STREAMS].clone();
                        let append = Append::new(stream, vec![note_with_id(id)]);
                        let at = base.elapsed().as_nanos() as u64;
                        submitted[id as usize].store(at + 1, Ordering::Release);
                        let t0 = Instant::now();
                        store.append(append).expect("append");
                        if at >= warm {
                            acks.push(t0.elapsed().as_nanos() as f64 / 1e3);
                        }
                        j += 1;
                    }
                    (acks, j)
                })
            })
            .collect();
        let mut acks = Vec::new();
        let mut events = 0;
        for h in appender_handles {
            let (a, n) = h.join().expect("appender");
            acks.extend(a);
            events += n;
        }
        let secs = start.elapsed().as_secs_f64();
        store.append(Append::new(ids[0].clone(), vec![note_with_id(STOP)])).expect("stop event");
        let (watch, fallbacks) = subscriber.join().expect("subscriber");
        (watch, fallbacks, acks, events, secs)
    });
    drop(store);
    let sorted = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v
    };
    Run { appenders, events, secs, watch: sorted(watch), ack: sorted(acks), fallbacks }
}

fn main() {
    let dur = cell_secs(2.0);
    println!(
        "watch_latency: {EVENT_BYTES}-byte events, one per append, each appender waiting for its \
         durable ack; one live subscriber; {:.1} s per run after {} ms warm-up",
        dur.as_secs_f64(),
        WARMUP.as_millis()
    );
    let started = Instant::now();
    let runs: Vec<Run> = APPENDERS.iter().map(|&n| run(n, dur)).collect();

    println!();
    println!(
        "| appenders | events/s | watch p50 µs | p90 | p99 | p99.9 | max | ack p50 µs | ack p99 \
         | samples | fallbacks |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let q = |v: &[f64], p: f64| quantile(v, p);
    for r in &runs {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} |",
            r.appenders,
            si(r.events as f64 / r.secs),
            q(&r.watch, 0.5),
            q(&r.watch, 0.9),
            q(&r.watch, 0.99),
            q(&r.watch, 0.999),
            r.watch.last().copied().unwrap_or(f64::NAN),
            q(&r.ack, 0.5),
            q(&r.ack, 0.99),
            r.watch.len(),
            r.fallbacks
        );
    }
    let at4 = runs.iter().find(|r| r.appenders == 4).expect("4 appenders");
    let p99 = q(&at4.watch, 0.99);
    let pass = p99 < TARGET_P99_US;
    println!("\ntargets:\n  {} append-to-subscriber p99 < 1 ms at 4 appenders: {p99:.0} µs", verdict(pass));
    println!("total bench time {:.1} s", started.elapsed().as_secs_f64());

    let runs_json: Vec<_> = runs
        .iter()
        .map(|r| {
            json!({
                "appenders": r.appenders,
                "events": r.events,
                "secs": r.secs,
                "events_per_s": r.events as f64 / r.secs,
                "samples": r.watch.len(),
                "watch_us": {
                    "p50": q(&r.watch, 0.5), "p90": q(&r.watch, 0.9), "p99": q(&r.watch, 0.99),
                    "p999": q(&r.watch, 0.999), "max": r.watch.last(),
                },
                "ack_us": {"p50": q(&r.ack, 0.5), "p99": q(&r.ack, 0.99), "max": r.ack.last()},
                "subscriber_fallbacks": r.fallbacks,
            })
        })
        .collect();
    write_json(
        "watch_latency",
        &json!({
            "bench": "watch_latency",
            "workload": {
                "event_payload_bytes": EVENT_BYTES,
                "events_per_append": 1,
                "streams": STREAMS,
                "secs_per_run": dur.as_secs_f64(),
                "warmup_ms": WARMUP.as_millis() as u64,
                "timing": "submit instant in a side table keyed by the event's id; receipt \
                           stamped by one subscriber awaiting Subscription::next()",
            },
            "machine": machine(),
            "runs": runs_json,
            "targets": [{
                "target": "append-to-subscriber p99 < 1000 µs at 4 appenders",
                "measured_p99_us": p99,
                "pass": pass,
            }],
        }),
    );
}
