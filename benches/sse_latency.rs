//! Append-to-SSE-delivery latency: how long after an event is submitted to the log does a client of
//! `GET /api/runs/{id}/events` on loopback read it off its socket.
//!
//! The real router (`od::http::router`) is served on 127.0.0.1:0 by a 2-worker tokio runtime over a
//! log in a fresh dir on the real disk; 1, 4 and 64 runs are created (queued, never started, so the
//! only writers are the bench's). Each run has one appender thread that appends one agent
//! `text_delta` event (~500 bytes of JSON) at a time to `run:<id>` and waits for its durable ack
//! before the next, and one SSE client (raw TCP, HTTP/1.1, on its own current-thread runtime that
//! reads all the runs' streams). Just before each submit the appender records the time in a side
//! table keyed by the event's sample id (carried in the delta text); the client stamps each event as
//! its frame is parsed. Latency = receipt - submit; samples submitted in the first `WARMUP` are
//! dropped. Side by side, the same workload with in-process run tails (`StreamTail`, what the SSE
//! route reads) instead of HTTP clients: the difference is what HTTP/SSE framing adds. Ack latency
//! (submit -> durable ack) is reported too — most of the figure is the commit's fdatasync — and
//! ack-to-receipt, what the streaming path adds once the append is durable.
//!
//! Run: `cargo bench --bench sse_latency` (`OD_BENCH_SECS` sets seconds per cell, default 2).
//! Results: a table on stdout and `target/bench-results/sse_latency.json`.

mod common;
#[path = "../tests/api/sse/sse_client.rs"]
mod sse_client;

use common::*;
use od::http::tail::StreamTail;
use od::store::{Append, SledLog, StoreConfig};
use od_events::runs::AgentOutput;
use od_events::{Event, StreamId};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RUNS: [usize; 3] = [1, 4, 64];
/// Most events one appender submits per cell (sizes the side table).
const PER_RUN: u64 = 1 << 16;
const WARMUP: Duration = Duration::from_millis(300);
/// The sample id that tells a reader to stop.
const STOP: u64 = u64::MAX;
const TARGETS_P99_US: [(usize, f64); 2] = [(4, 1000.0), (64, 5000.0)];

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Sse,
    Tail,
}

struct Cell {
    runs: usize,
    mode: Mode,
    events: u64,
    secs: f64,
    /// Submit-to-receipt, µs, sorted.
    lat: Vec<f64>,
    /// Submit-to-ack, µs, sorted.
    ack: Vec<f64>,
    /// Ack-to-receipt, µs, sorted: what the streaming path adds once the append is durable
    /// (negative when the reader got the event before the appender's thread saw its ack).
    after_ack: Vec<f64>,
}

fn event(run: &str, id: u64) -> Event {
    let delta = format!("{id:016x}{}", "x".repeat(420));
    Event::AgentOutput(AgentOutput {
        run_id: run.into(),
        stage_id: "bench".into(),
        iteration: 0,
        channel: "agent".into(),
        payload_json: json!({ "type": "text_delta", "delta": delta }).to_string(),
    })
}

/// The sample id in an SSE data line or a stored payload: 16 hex digits after `"delta":"`.
fn sample_id(text: &str) -> u64 {
    let at = text.find("\"delta\":\"").expect("a delta") + 9;
    u64::from_str_radix(&text[at..at + 16], 16).expect("hex id")
}

/// The served engine: the log, the router on loopback, and `runs` queued runs.
struct Served {
    store: od::store::Store,
    rt: tokio::runtime::Runtime,
    addr: String,
    run_ids: Vec<String>,
    stop: Arc<tokio::sync::watch::Sender<bool>>,
    _dir: tempfile::TempDir,
}

fn serve(runs: usize) -> Served {
    let dir = tempdir();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let store = SledLog::open(StoreConfig::new(dir.path().join("data"))).expect("open od");
    let clock: od::clock::SharedClock = Arc::new(od::clock::SystemClock);
    let ids: od::ids::SharedIds = Arc::new(od::ids::RandomIds);
    let data = dir.path().join("data");
    let parts = od::daemon::engine_parts(store.clone(), data.clone(), &data, clock.clone(), ids);
    let engine = Arc::new(od::engine::Engine::new(parts).expect("engine"));
    let tools = Arc::new(od::tools::Tools::start(engine.clone()).expect("tools"));
    let run_ids: Vec<String> = (0..runs)
        .map(|_| {
            let r = engine.create_run(od::engine::runs::NewRun::default()).expect("create run");
            r.run.run_id
        })
        .collect();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let listen = Arc::new(std::sync::OnceLock::from(addr.clone()));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stop = Arc::new(stop_tx);
    let state = od::http::AppState {
        store: store.clone(),
        runner: od::runner::Runner::new(engine.clone(), listen.clone(), "http"),
        engine,
        tools,
        stats: Arc::new(od::projector::Projector::load(&(store.clone() as od::store::Store)).expect("stats")),
        clock,
        data_dir: data,
        listen,
        started_at: 0,
        shutdown: stop_rx.clone(),
        stop: stop.clone(),
        embedded: false,
        http: Default::default(),
    };
    let app = od::http::router(state);
    let mut shutdown = stop_rx;
    rt.spawn(async move {
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = shutdown.wait_for(|v| *v).await;
            })
            .await;
    });
    Served { store, rt, addr, run_ids, stop, _dir: dir }
}

/// Reads every run's events (SSE clients or in-process tails) on one current-thread runtime until
/// each run's STOP; returns (sample id, receipt ns) pairs.
fn readers(s: &Served, mode: Mode, base: Instant) -> std::thread::JoinHandle<Vec<(u64, u64)>> {
    let (addr, store, runs) = (s.addr.clone(), s.store.clone(), s.run_ids.clone());
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async move {
            let mut tasks = Vec::new();
            for run in runs {
                match mode {
                    Mode::Sse => {
                        let path = format!("/api/runs/{run}/events");
                        let mut c = sse_client::SseConn::open(&addr, &path, &[]).await.expect("connect");
                        assert_eq!(c.status, 200);
                        tasks.push(tokio::spawn(async move {
                            let mut got = Vec::new();
                            while let Some(e) = c.next().await.expect("sse") {
                                let now = base.elapsed().as_nanos() as u64;
                                let id = sample_id(&e.data);
                                if id == STOP {
                                    break;
                                }
                                got.push((id, now));
                            }
                            got
                        }));
                    }
                    Mode::Tail => {
                        let mut t = StreamTail::new(&store, format!("run:{run}"), 1);
                        tasks.push(tokio::spawn(async move {
                            let mut got = Vec::new();
                            while let Some(f) = t.next().await {
                                let now = base.elapsed().as_nanos() as u64;
                                let f = f.expect("frame");
                                let stored = f.decode().expect("decode");
                                let Event::AgentOutput(o) = stored.event else { continue };
                                let id = sample_id(&o.payload_json);
                                if id == STOP {
                                    break;
                                }
                                got.push((id, now));
                            }
                            got
                        }));
                    }
                }
            }
            ready_tx.send(()).expect("ready");
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await.expect("reader"));
            }
            all
        })
    });
    ready_rx.recv().expect("readers connected");
    h
}

fn cell(runs: usize, mode: Mode, dur: Duration) -> Cell {
    let s = serve(runs);
    let submitted: Vec<AtomicU64> = (0..runs as u64 * PER_RUN).map(|_| AtomicU64::new(0)).collect();
    let acked: Vec<AtomicU64> = (0..runs as u64 * PER_RUN).map(|_| AtomicU64::new(0)).collect();
    let base = Instant::now();
    let reader = readers(&s, mode, base);
    let warm = WARMUP.as_nanos() as u64;
    let start = Instant::now();
    let deadline = start + WARMUP + dur;
    let (acks, events) = std::thread::scope(|sc| {
        let handles: Vec<_> = s
            .run_ids
            .iter()
            .enumerate()
            .map(|(r, run)| {
                let (store, submitted, acked) = (&s.store, &submitted, &acked);
                sc.spawn(move || {
                    let stream = StreamId::typed("run", run).expect("stream id");
                    let mut acks = Vec::new();
                    let mut j = 0u64;
                    while j < PER_RUN && Instant::now() < deadline {
                        let id = r as u64 * PER_RUN + j;
                        let append = Append::new(stream.clone(), vec![event(run, id)]);
                        let at = base.elapsed().as_nanos() as u64;
                        submitted[id as usize].store(at + 1, Ordering::Release);
                        let t0 = Instant::now();
                        store.append(append).expect("append");
                        acked[id as usize].store(base.elapsed().as_nanos() as u64 + 1, Ordering::Release);
                        if at >= warm {
                            acks.push(t0.elapsed().as_nanos() as f64 / 1e3);
                        }
                        j += 1;
                    }
                    store.append(Append::new(stream, vec![event(run, STOP)])).expect("stop");
                    (acks, j)
                })
            })
            .collect();
        let mut acks = Vec::new();
        let mut events = 0;
        for h in handles {
            let (a, n) = h.join().expect("appender");
            acks.extend(a);
            events += n;
        }
        (acks, events)
    });
    let secs = start.elapsed().as_secs_f64();
    let got = reader.join().expect("reader thread");
    assert_eq!(got.len() as u64, events, "every event delivered once");
    let mut lat = Vec::new();
    let mut after_ack = Vec::new();
    for &(id, now) in &got {
        let stamp = submitted[id as usize].load(Ordering::Acquire);
        assert!(stamp > 0, "event {id} delivered before it was submitted");
        let sent = stamp - 1;
        if sent >= warm {
            lat.push((now - sent) as f64 / 1e3);
            let acked_at = acked[id as usize].load(Ordering::Acquire) - 1;
            after_ack.push((now as f64 - acked_at as f64) / 1e3);
        }
    }
    s.stop.send_replace(true);
    drop(s.rt);
    lat.sort_by(f64::total_cmp);
    let mut ack = acks;
    ack.sort_by(f64::total_cmp);
    after_ack.sort_by(f64::total_cmp);
    Cell { runs, mode, events, secs, lat, ack, after_ack }
}

fn main() {
    let dur = cell_secs(2.0);
    println!(
        "sse_latency: one ~500-byte agent event per append to each run's stream, each appender waiting \
         for its durable ack; one reader per run; {:.1} s per cell after {} ms warm-up",
        dur.as_secs_f64(),
        WARMUP.as_millis()
    );
    let started = Instant::now();
    let mut cells = Vec::new();
    for &runs in &RUNS {
        for mode in [Mode::Tail, Mode::Sse] {
            cells.push(cell(runs, mode, dur));
        }
    }
    let q = |v: &[f64], p: f64| quantile(v, p);
    println!();
    println!(
        "| runs | reader | events/s | p50 µs | p90 | p99 | p99.9 | max | ack p50 µs | ack p99 | after ack p50 µs \
         | after ack p99 | samples |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for c in &cells {
        println!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} |",
            c.runs,
            if c.mode == Mode::Sse { "SSE over loopback" } else { "in-process tail" },
            si(c.events as f64 / c.secs),
            q(&c.lat, 0.5),
            q(&c.lat, 0.9),
            q(&c.lat, 0.99),
            q(&c.lat, 0.999),
            c.lat.last().copied().unwrap_or(f64::NAN),
            q(&c.ack, 0.5),
            q(&c.ack, 0.99),
            q(&c.after_ack, 0.5),
            q(&c.after_ack, 0.99),
            c.lat.len()
        );
    }
    let sse = |runs: usize| cells.iter().find(|c| c.runs == runs && c.mode == Mode::Sse).expect("cell");
    println!("\ntargets:");
    let mut targets = Vec::new();
    for (runs, max) in TARGETS_P99_US {
        let p99 = q(&sse(runs).lat, 0.99);
        let pass = p99 < max;
        println!("  {} append-to-SSE p99 < {:.0} ms at {runs} runs: {p99:.0} µs", verdict(pass), max / 1000.0);
        targets.push(json!({ "target": format!("append-to-SSE-delivery p99 < {max} µs at {runs} concurrent runs"),
                             "measured_p99_us": p99, "pass": pass }));
    }
    println!("total bench time {:.1} s", started.elapsed().as_secs_f64());
    let cells_json: Vec<_> = cells
        .iter()
        .map(|c| {
            json!({
                "runs": c.runs,
                "reader": if c.mode == Mode::Sse { "sse-loopback" } else { "in-process-tail" },
                "events": c.events, "secs": c.secs, "events_per_s": c.events as f64 / c.secs,
                "samples": c.lat.len(),
                "latency_us": { "p50": q(&c.lat, 0.5), "p90": q(&c.lat, 0.9), "p99": q(&c.lat, 0.99),
                                "p999": q(&c.lat, 0.999), "max": c.lat.last() },
                "ack_us": { "p50": q(&c.ack, 0.5), "p99": q(&c.ack, 0.99), "max": c.ack.last() },
                "after_ack_us": { "p50": q(&c.after_ack, 0.5), "p99": q(&c.after_ack, 0.99) },
            })
        })
        .collect();
    write_json(
        "sse_latency",
        &json!({
            "bench": "sse_latency",
            "workload": {
                "event": "agent text_delta, ~500 bytes of JSON, one per append, appender waits for the ack",
                "secs_per_cell": dur.as_secs_f64(), "warmup_ms": WARMUP.as_millis() as u64,
                "timing": "submit instant in a side table keyed by the sample id in the event; receipt stamped when \
                           the client has parsed the SSE frame (or the in-process tail yielded the frame)",
            },
            "machine": machine(),
            "cells": cells_json,
            "targets": targets,
        }),
    );
}
