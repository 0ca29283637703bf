//! Replay: read one 10,000-event stream back and fold it, od vs SQLite, in the same run.
//!
//! Both stores are filled with the same log: 20 streams x 10,000 events of 500 bytes, written
//! round-robin over the streams in runs of `interleave` events (1: every stream's events are
//! interleaved one by one with the others', as when many runs write at once; 64: in runs of 64).
//! od gets one append per run (pipelined); SQLite the same rows in the same order, in transactions
//! of >= 1024 rows (the row order alone shapes its table). Then one stream is read in version order
//! and folded, two ways:
//! - zero-copy: validated rkyv access to each payload, summing text lengths;
//! - decode: full owned decode through `od_migrations::decode_any` (what projections do).
//!
//! Cache states, each measured on od and SQLite:
//! - cold (reopen): right after reopening the store (process caches empty, OS page cache warm).
//!   od is opened as the daemon opens it (`VerifyOnOpen::FromCheckpoint`: the tail only); the
//!   full verify's open (every frame, as `od log verify`) and sled's own open are reported
//!   separately, per fill;
//! - cold (disk): reopened after evicting the store's files from the OS page cache
//!   (`posix_fadvise(DONTNEED)`), so the scan reads from disk;
//! - warm: repeated folds on an open store.
//!
//! Cold figures are the median of `REOPENS` reopens, warm the median of `WARM_REPS` folds. SQLite
//! gets `cache_size` = 256 MiB, the same budget as od's sled cache, and reads with
//! `SELECT payload FROM events WHERE stream = ? ORDER BY version`, borrowing each blob.
//!
//! Run: `cargo bench --bench replay`. Results: table on stdout, `target/bench-results/replay.json`.
//! `OD_REPLAY_OPEN_ONLY=1` measures the fills' bytes and open times only (no folds, no JSON).
//! `OD_REPLAY_REOPENS=<n>` (default 5) and `OD_REPLAY_WARM_REPS=<n>` (default 15) set how many
//! cold reopens and warm folds each figure is the median of; `OD_REPLAY_INTERLEAVES=1,64` (the
//! default) picks the fill layouts.

mod common;

use common::*;
use od::store::{Append, EventLog, SledLog, StoreConfig, VerifyOnOpen};
use od_events::FrameRef;
use rusqlite::Connection;
use serde_json::json;
use std::path::Path;
use std::time::Instant;

const STREAM_EVENTS: usize = 10_000;
/// Fill layouts: events of one stream written back to back before the next stream's.
const INTERLEAVES: [usize; 2] = [1, 64];
/// od appends in flight during the fill.
const PIPELINE: usize = 2048;
/// Smallest SQLite fill transaction.
const FILL_TX_EVENTS: usize = 1024;
const REOPENS: usize = 5;
const WARM_REPS: usize = 15;

/// `name` from the environment (a count), else `default`.
fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(default)
}

fn reopens() -> usize {
    env_count("OD_REPLAY_REOPENS", REOPENS)
}

fn warm_reps() -> usize {
    env_count("OD_REPLAY_WARM_REPS", WARM_REPS)
}

fn interleaves() -> Vec<usize> {
    std::env::var("OD_REPLAY_INTERLEAVES")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).filter(|&n| n > 0).collect::<Vec<usize>>())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| INTERLEAVES.to_vec())
}
/// Required fold rate, events/s.
const TARGET: f64 = 1_000_000.0;
/// The stream that is replayed.
const REPLAYED: usize = 7;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fold {
    ZeroCopy,
    Decode,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cache {
    Reopen,
    Disk,
    Warm,
}

/// The fill in write order: runs of `interleave` events of one stream, round-robin over streams.
fn fill_plan(interleave: usize) -> Vec<(usize, usize)> {
    let mut plan = Vec::new();
    let mut done = 0;
    while done < STREAM_EVENTS {
        let n = interleave.min(STREAM_EVENTS - done);
        plan.extend((0..STREAMS).map(|s| (s, n)));
        done += n;
    }
    plan
}

/// Each run of the plan is one append; appends are pipelined (submitted ahead, in order, acks
/// awaited later) so group commit keeps the fill quick. Seq order is submission order. Returns the
/// segment bytes holding records (the rest of the files is preallocated zeros).
fn fill_od(dir: &Path, interleave: usize) -> u64 {
    let store = SledLog::open(StoreConfig::new(dir)).expect("open od");
    let ids = stream_ids();
    let events = batch_events(interleave);
    let mut acks = std::collections::VecDeque::new();
    for (s, n) in fill_plan(interleave) {
        acks.push_back(store.submit(Append::new(ids[s].clone(), events[..n].to_vec())).expect("submit"));
        if acks.len() >= PIPELINE {
            let a = acks.pop_front().expect("ack");
            a.blocking_recv().expect("ack").expect("append");
        }
    }
    for a in acks {
        a.blocking_recv().expect("ack").expect("append");
    }
    store.segment_bytes_used()
}

/// The same rows in the same order; runs are grouped into transactions of at least
/// `FILL_TX_EVENTS` (only the row order shapes the table, so the fill need not commit per run).
fn fill_sqlite(path: &Path, interleave: usize) {
    let c = sqlite_open(path);
    let names: Vec<String> = (0..STREAMS).map(stream_name).collect();
    let mut next = [0i64; STREAMS];
    let payloads: Vec<Vec<u8>> = batch_events(interleave).iter().map(|e| e.encode_payload()).collect();
    for chunk in fill_plan(interleave).chunks(FILL_TX_EVENTS.div_ceil(interleave)) {
        let tx = c.unchecked_transaction().expect("begin");
        {
            let mut ins =
                tx.prepare_cached("INSERT INTO events(stream, version, payload) VALUES (?1, ?2, ?3)").expect("prepare");
            for &(s, n) in chunk {
                for p in &payloads[..n] {
                    ins.execute(rusqlite::params![names[s], next[s], p]).expect("insert");
                    next[s] += 1;
                }
            }
        }
        tx.commit().expect("commit");
    }
}

/// Opens without the full verify of the default config: that walk reads every frame, which would
/// leave the fold nothing cold to read.
fn open_cold(dir: &Path) -> od::store::Store {
    let mut cfg = StoreConfig::new(dir);
    cfg.verify_on_open = VerifyOnOpen::FromCheckpoint;
    SledLog::open(cfg).expect("open od")
}

/// Median time of an open with `verify` (the full walk, or the tail only), for the record.
fn open_secs(dir: &Path, verify: VerifyOnOpen) -> f64 {
    let mut v: Vec<f64> = (0..reopens())
        .map(|_| {
            let mut cfg = StoreConfig::new(dir);
            cfg.verify_on_open = verify;
            let t = Instant::now();
            let store = SledLog::open(cfg).expect("open od");
            let secs = t.elapsed().as_secs_f64();
            drop(store);
            secs
        })
        .collect();
    median(&mut v)
}

/// Median time of opening od's sled database alone (configured as the store configures it): the
/// part of od's open that is sled's own recovery.
fn sled_open_secs(dir: &Path) -> f64 {
    let mut v: Vec<f64> = (0..reopens())
        .map(|_| {
            let cfg = sled::Config::new()
                .path(dir.join("sled"))
                .mode(sled::Mode::HighThroughput)
                .cache_capacity(od::limits::SLED_CACHE_BYTES)
                .flush_every_ms(None);
            loop {
                // sled may hold its lock a moment after the last handle is dropped.
                let t = Instant::now();
                match cfg.open() {
                    Ok(db) => {
                        let secs = t.elapsed().as_secs_f64();
                        drop(db);
                        break secs;
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                }
            }
        })
        .collect();
    median(&mut v)
}

/// Median time of SQLite's open as the fold opens it.
fn sqlite_open_secs(db: &Path) -> f64 {
    let mut v: Vec<f64> = (0..reopens())
        .map(|_| {
            let t = Instant::now();
            let c = sqlite_open_reader(db);
            let secs = t.elapsed().as_secs_f64();
            drop(c);
            secs
        })
        .collect();
    median(&mut v)
}

fn sqlite_open_reader(path: &Path) -> Connection {
    let c = sqlite_open(path);
    c.pragma_update(None, "cache_size", -262_144).expect("cache");
    c
}

fn fold_od(store: &dyn od::store::EventLog, fold: Fold) -> (usize, usize) {
    let (mut n, mut sum) = (0, 0);
    store
        .fold_stream(&stream_name(REPLAYED), &mut |bytes| {
            let f = FrameRef::parse(bytes).expect("frame");
            sum += match fold {
                Fold::ZeroCopy => fold_zero_copy(f.payload()),
                Fold::Decode => fold_decode(f.kind(), f.schema(), f.payload()),
            };
            n += 1;
        })
        .expect("fold");
    (n, sum)
}

fn fold_sqlite(c: &Connection, fold: Fold) -> (usize, usize) {
    let (kind, schema) = note_kind();
    let mut st = c.prepare_cached("SELECT payload FROM events WHERE stream = ?1 ORDER BY version").expect("prepare");
    let mut rows = st.query([stream_name(REPLAYED)]).expect("query");
    let (mut n, mut sum) = (0, 0);
    while let Some(r) = rows.next().expect("row") {
        let p = r.get_ref(0).expect("col").as_blob().expect("blob");
        sum += match fold {
            Fold::ZeroCopy => fold_zero_copy(p),
            Fold::Decode => fold_decode(kind, schema, p),
        };
        n += 1;
    }
    (n, sum)
}

/// Times one fold and checks it saw the whole stream.
fn timed(f: impl FnOnce() -> (usize, usize)) -> f64 {
    let t = Instant::now();
    let (n, sum) = f();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(n, STREAM_EVENTS, "fold saw every event");
    assert_eq!(sum, STREAM_EVENTS * text_len(), "fold summed every text");
    secs
}

struct Row {
    interleave: usize,
    cache: Cache,
    fold: Fold,
    od_secs: f64,
    sqlite_secs: f64,
    od_open_secs: f64,
    sqlite_open_secs: f64,
}

impl Row {
    fn od(&self) -> f64 {
        STREAM_EVENTS as f64 / self.od_secs
    }
    fn sqlite(&self) -> f64 {
        STREAM_EVENTS as f64 / self.sqlite_secs
    }
    fn names(&self) -> (&'static str, &'static str) {
        let cache = match self.cache {
            Cache::Reopen => "cold (reopen)",
            Cache::Disk => "cold (disk)",
            Cache::Warm => "warm",
        };
        let fold = match self.fold {
            Fold::ZeroCopy => "zero-copy",
            Fold::Decode => "decode",
        };
        (cache, fold)
    }
}

fn measure(od_dir: &Path, db: &Path, interleave: usize, cache: Cache, fold: Fold) -> Row {
    let (mut od, mut sq, mut od_open, mut sq_open) = (vec![], vec![], vec![], vec![]);
    if cache == Cache::Warm {
        let store = SledLog::open(StoreConfig::new(od_dir)).expect("open od");
        let c = sqlite_open_reader(db);
        for i in 0..warm_reps() + 3 {
            let a = timed(|| fold_od(&*store, fold));
            let b = timed(|| fold_sqlite(&c, fold));
            if i >= 3 {
                od.push(a);
                sq.push(b);
            }
        }
    } else {
        for _ in 0..reopens() {
            if cache == Cache::Disk {
                drop_page_cache(od_dir);
            }
            let t = Instant::now();
            let store = open_cold(od_dir);
            od_open.push(t.elapsed().as_secs_f64());
            od.push(timed(|| fold_od(&*store, fold)));
            drop(store);

            if cache == Cache::Disk {
                drop_page_cache(db.parent().expect("db dir"));
            }
            let t = Instant::now();
            let c = sqlite_open_reader(db);
            sq_open.push(t.elapsed().as_secs_f64());
            sq.push(timed(|| fold_sqlite(&c, fold)));
        }
    }
    let med = |v: &mut Vec<f64>| if v.is_empty() { 0.0 } else { median(v) };
    Row {
        interleave,
        cache,
        fold,
        od_secs: med(&mut od),
        sqlite_secs: med(&mut sq),
        od_open_secs: med(&mut od_open),
        sqlite_open_secs: med(&mut sq_open),
    }
}

fn main() {
    let started = Instant::now();
    println!(
        "replay: fold one {STREAM_EVENTS}-event stream out of {STREAMS} ({EVENT_BYTES}-byte \
         events; interleave = events of one stream written back to back)"
    );
    let mut rows = Vec::new();
    let mut fills = Vec::new();
    for interleave in interleaves() {
        let od_tmp = tempdir();
        let sq_tmp = tempdir();
        let db = sq_tmp.path().join("events.db");
        let t = Instant::now();
        let seg_used = fill_od(od_tmp.path(), interleave);
        let od_fill = t.elapsed().as_secs_f64();
        let t = Instant::now();
        fill_sqlite(&db, interleave);
        let sq_fill = t.elapsed().as_secs_f64();
        let (seg_files, sled_bytes) = (dir_bytes(&od_tmp.path().join("log")), dir_bytes(&od_tmp.path().join("sled")));
        let od_bytes = dir_bytes(od_tmp.path());
        let sq_bytes = dir_bytes(sq_tmp.path());
        let events = (STREAMS * STREAM_EVENTS) as f64;
        let per = |b: u64| b as f64 / events;
        eprintln!(
            "  interleave {interleave}: filled od in {od_fill:.1} s, sqlite in {sq_fill:.1} s; bytes per event: \
             od {:.0} on disk (segments: {:.0} of records + {:.0} preallocated; sled index {:.0}), \
             od without preallocated space {:.0}, sqlite {:.0}",
            per(od_bytes),
            per(seg_used),
            per(seg_files - seg_used),
            per(sled_bytes),
            per(seg_used + sled_bytes),
            per(sq_bytes)
        );
        let (tail_open, full_open) =
            (open_secs(od_tmp.path(), VerifyOnOpen::FromCheckpoint), open_secs(od_tmp.path(), VerifyOnOpen::Full));
        let (sled_open, sq_open) = (sled_open_secs(od_tmp.path()), sqlite_open_secs(&db));
        eprintln!(
            "  interleave {interleave}: open (median of {}, page cache warm): od {:.2} ms (tail verify, \
             as the daemon; of which sled's own open {:.2} ms), od with full verify {:.0} ms, sqlite {:.2} ms",
            reopens(),
            tail_open * 1e3,
            sled_open * 1e3,
            full_open * 1e3,
            sq_open * 1e3
        );
        fills.push(json!({
            "interleave": interleave,
            "od": {"fill_secs": od_fill, "disk_bytes": od_bytes, "segment_record_bytes": seg_used,
                   "segment_file_bytes": seg_files, "sled_bytes": sled_bytes,
                   "bytes_per_event": per(od_bytes), "bytes_per_event_without_preallocation":
                   per(seg_used + sled_bytes), "open_secs_tail_verify": tail_open,
                   "open_secs_full_verify": full_open, "sled_open_secs": sled_open},
            "sqlite": {"fill_secs": sq_fill, "disk_bytes": sq_bytes, "bytes_per_event": per(sq_bytes),
                       "open_secs": sq_open},
        }));
        if std::env::var_os("OD_REPLAY_OPEN_ONLY").is_some() {
            continue;
        }
        for cache in [Cache::Reopen, Cache::Disk, Cache::Warm] {
            for fold in [Fold::ZeroCopy, Fold::Decode] {
                rows.push(measure(od_tmp.path(), &db, interleave, cache, fold));
            }
        }
    }

    if std::env::var_os("OD_REPLAY_OPEN_ONLY").is_some() {
        return;
    }
    println!();
    println!(
        "| interleave | cache | fold | od events/s | SQLite events/s | od/SQLite | od >= 1M/s \
         | od open ms | SQLite open ms |"
    );
    println!("|---:|---|---|---:|---:|---:|:-:|---:|---:|");
    let ms = |r: &Row, x: f64| match r.cache {
        Cache::Warm => "-".to_string(),
        _ => format!("{:.1}", x * 1e3),
    };
    for r in &rows {
        let (cache, fold) = r.names();
        println!(
            "| {} | {cache} | {fold} | {} | {} | {:.2}x | {} | {} | {} |",
            r.interleave,
            si(r.od()),
            si(r.sqlite()),
            r.od() / r.sqlite(),
            verdict(r.od() >= TARGET),
            ms(r, r.od_open_secs),
            ms(r, r.sqlite_open_secs)
        );
    }
    println!("\ntargets (replay fold >= 1,000,000 events/s; judged on reopen and warm):");
    for r in &rows {
        let (cache, fold) = r.names();
        println!(
            "  {} od interleave {}, {cache}, {fold}: {:.0} events/s{}",
            verdict(r.od() >= TARGET),
            r.interleave,
            r.od(),
            if r.cache == Cache::Disk { " (informational: OS page cache dropped)" } else { "" }
        );
    }
    println!("\ntargets (issue 33: cold-disk fold >= 1.0x SQLite; od open <= 2x SQLite's open):");
    for r in rows.iter().filter(|r| r.cache != Cache::Warm) {
        let (cache, fold) = r.names();
        let open = r.od_open_secs / r.sqlite_open_secs;
        if r.cache == Cache::Disk {
            println!(
                "  {} interleave {}, {cache}, {fold}: fold {:.2}x SQLite",
                verdict(r.od() >= r.sqlite()),
                r.interleave,
                r.od() / r.sqlite()
            );
        }
        println!("  {} interleave {}, {cache}, {fold}: open {open:.1}x SQLite's", verdict(open <= 2.0), r.interleave);
    }
    println!("total bench time {:.1} s", started.elapsed().as_secs_f64());
    let out: Vec<_> = rows
        .iter()
        .map(|r| {
            let (cache, fold) = r.names();
            json!({
                "interleave": r.interleave,
                "cache": cache,
                "fold": fold,
                "od": {"fold_secs": r.od_secs, "events_per_s": r.od(), "open_secs": r.od_open_secs},
                "ratio_open_od_sqlite": if r.sqlite_open_secs > 0.0 { r.od_open_secs / r.sqlite_open_secs } else { 0.0 },
                "sqlite": {"fold_secs": r.sqlite_secs, "events_per_s": r.sqlite(),
                           "open_secs": r.sqlite_open_secs},
                "ratio_od_sqlite": r.od() / r.sqlite(),
                "judged": r.cache != Cache::Disk,
                "pass": r.od() >= TARGET,
            })
        })
        .collect();
    let judged_pass = rows.iter().filter(|r| r.cache != Cache::Disk).all(|r| r.od() >= TARGET);
    write_json(
        "replay",
        &json!({
            "bench": "replay",
            "workload": {
                "streams": STREAMS,
                "events_per_stream": STREAM_EVENTS,
                "event_payload_bytes": EVENT_BYTES,
                "interleaves": interleaves(),
                "cold_reopens": reopens(),
                "warm_reps": warm_reps(),
            },
            "sqlite": {"config": "rusqlite bundled, WAL, synchronous=FULL, cache_size 256 MiB"},
            "fills": fills,
            "machine": machine(),
            "rows": out,
            "targets": [{
                "target": "replay fold >= 1000000 events/s (cold after reopen and warm, both folds)",
                "pass": judged_pass,
            }, {
                "target": "cold-disk fold >= 1.0x SQLite at every interleave (issue 33)",
                "pass": rows.iter().filter(|r| r.cache == Cache::Disk).all(|r| r.od() >= r.sqlite()),
            }, {
                "target": "od open <= 2x SQLite's open, cold states (issue 33)",
                "pass": rows.iter().filter(|r| r.cache != Cache::Warm)
                    .all(|r| r.od_open_secs <= 2.0 * r.sqlite_open_secs),
            }],
        }),
    );
}
