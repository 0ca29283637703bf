//! The table `benches/history` prints (one column per size, as the README carries it), the targets
//! judged at the largest size, and the per-size JSON.

use crate::common::mb;
use crate::common::{quantile, verdict};
use crate::seed::Template;
use crate::Cell;
use serde_json::{json, Value};

fn lat(v: &[f64]) -> Value {
    json!({ "n": v.len(), "min": v.first(), "p50": quantile(v, 0.5), "p99": quantile(v, 0.99), "max": v.last() })
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

fn per_event(bytes: f64, c: &Cell) -> f64 {
    if c.seeded.events == 0 {
        f64::NAN
    } else {
        bytes / c.seeded.events as f64
    }
}

fn row(name: &str, cells: &[Cell], f: impl Fn(&Cell) -> String) {
    let cols: Vec<String> = cells.iter().map(f).collect();
    println!("| {name} | {} |", cols.join(" | "));
}

/// Prints the table and the targets; returns the per-size JSON.
pub fn print(cells: &[Cell], t: &Template) -> Value {
    println!();
    let head: Vec<String> = cells.iter().map(|c| format!("{} runs", c.runs)).collect();
    println!("| figure | {} |", head.join(" | "));
    println!("|---|{}", "---:|".repeat(cells.len()));
    row("events in the log (seeded)", cells, |c| c.seeded.events.to_string());
    row("seeding through the store", cells, |c| format!("{:.1} s", c.seeded.secs));
    row("first start after seeding (warm-up fold) → health", cells, |c| format!("{:.0} ms", c.warm_ms));
    let p50 = |v: &[f64]| quantile(&sorted(v), 0.5);
    row("start after a clean stop → health (p50)", cells, |c| format!("{:.1} ms", p50(&c.clean_ms)));
    row("… → first runs list answered (p50)", cells, |c| format!("{:.1} ms", p50(&c.clean_list_ms)));
    row("start after kill -9 → health (p50)", cells, |c| format!("{:.1} ms", p50(&c.kill_ms)));
    row("… → first runs list answered (p50)", cells, |c| format!("{:.1} ms", p50(&c.kill_list_ms)));
    let idle = |c: &Cell, f: fn(&crate::common::Mem) -> u64| c.idle.iter().map(|m| mb(f(m))).fold(f64::NAN, f64::max);
    row("idle VmRSS / RssAnon (max of starts)", cells, |c| {
        format!("{:.1} / {:.1} MB", idle(c, |m| m.rss_kib), idle(c, |m| m.anon_kib))
    });
    row("`GET /api/runs?limit=50` p50 / p99", cells, |c| {
        format!("{:.2} / {:.2} ms", quantile(&c.list_ms, 0.5), quantile(&c.list_ms, 0.99))
    });
    row("… body bytes (items)", cells, |c| format!("{} ({})", c.list_body_bytes, c.list_items));
    row("one project's runs `?projectId=…&limit=50` p50 / p99", cells, |c| {
        if c.project_ms.is_empty() {
            "-".into()
        } else {
            format!(
                "{:.2} / {:.2} ms ({})",
                quantile(&c.project_ms, 0.5),
                quantile(&c.project_ms, 0.99),
                c.project_items
            )
        }
    });
    row("new run: POST → first event p50", cells, |c| format!("{:.2} ms", quantile(&c.first_ms, 0.5)));
    row("runs/s back to back", cells, |c| format!("{:.1}", c.runs_per_s));
    row("VmRSS / RssAnon after those runs", cells, |c| {
        format!("{:.1} / {:.1} MB", mb(c.after_runs.rss_kib), mb(c.after_runs.anon_kib))
    });
    row("disk: segments, used (allocated)", cells, |c| {
        format!("{:.1} MB ({:.1})", c.disk.segments_used as f64 / 1e6, c.disk.segments_alloc as f64 / 1e6)
    });
    row("disk: sled files (log index)", cells, |c| format!("{:.1} MB", c.disk.sled_files as f64 / 1e6));
    row("disk: read models (SQLite files)", cells, |c| format!("{:.1} MB", c.disk.sqlite_files as f64 / 1e6));
    row("disk: other (projects, …)", cells, |c| format!("{:.1} MB", c.disk.other as f64 / 1e6));
    row("bytes/event: segments (used)", cells, |c| format!("{:.0}", per_event(c.disk.segments_used as f64, c)));
    row("bytes/event: sled files (all)", cells, |c| format!("{:.0}", per_event(c.disk.sled_files as f64, c)));
    row("bytes/event: index trees, logical (share of sled files)", cells, |c| {
        format!("{:.1} ({:.0})", per_event(c.disk.index_logical as f64, c), per_event(c.disk.index_bytes(), c))
    });
    row("bytes/event: read models, logical (on disk)", cells, |c| {
        let logical = (c.disk.models_logical + c.disk.sled_models_logical) as f64;
        format!("{:.1} ({:.0})", per_event(logical, c), per_event(c.disk.models_bytes(), c))
    });
    row("index + read models (sled + SQLite files) / segments", cells, |c| {
        if c.seeded.events == 0 {
            "-".into()
        } else {
            format!("{:.0}%", 100.0 * c.disk.index_and_models() as f64 / c.disk.segments_used.max(1) as f64)
        }
    });
    println!("(template: {} events, {} payload bytes per run)", t.events, t.payload_bytes);

    let targets = targets(cells);
    let sizes: Vec<Value> = cells
        .iter()
        .map(|c| {
            json!({
                "runs": c.runs, "events": c.seeded.events, "seed_secs": c.seeded.secs,
                "warmup_start_ms": c.warm_ms, "warmup_list_ms": c.warm_list_ms, "warmup_stop_ms": c.warm_stop_ms,
                "start_after_clean_stop_ms": lat(&sorted(&c.clean_ms)),
                "list_after_clean_stop_ms": lat(&sorted(&c.clean_list_ms)),
                "start_after_kill9_ms": lat(&sorted(&c.kill_ms)),
                "list_after_kill9_ms": lat(&sorted(&c.kill_list_ms)),
                "idle": c.idle.iter().map(|m| m.json()).collect::<Vec<_>>(),
                "runs_list_ms": lat(&c.list_ms), "runs_list_items": c.list_items, "runs_list_body_bytes": c.list_body_bytes,
                "project_runs_ms": lat(&c.project_ms), "project_runs_items": c.project_items,
                "first_event_ms": lat(&c.first_ms), "runs_per_s": c.runs_per_s, "after_runs": c.after_runs.json(),
                "disk": c.disk.json,
                "bytes_per_event": {
                    "segments_used": per_event(c.disk.segments_used as f64, c),
                    "segments_allocated": per_event(c.disk.segments_alloc as f64, c),
                    "sled_files": per_event(c.disk.sled_files as f64, c),
                    "read_models_sqlite_files": per_event(c.disk.sqlite_files as f64, c),
                    "index_share": per_event(c.disk.index_bytes(), c),
                    "read_models_share": per_event(c.disk.models_bytes(), c),
                    "other": per_event(c.disk.other as f64, c),
                },
            })
        })
        .collect();
    json!({ "cells": sizes, "targets": targets })
}

/// The targets at the largest size (relative ones against the empty data dir, if measured).
fn targets(cells: &[Cell]) -> Value {
    let Some(big) = cells.iter().max_by_key(|c| c.runs) else { return json!([]) };
    let empty = cells.iter().find(|c| c.runs == 0);
    let p50 = |v: &[f64]| quantile(&sorted(v), 0.5);
    let anon = big.idle.iter().map(|m| mb(m.anon_kib)).fold(f64::NAN, f64::max);
    let ratio = 100.0 * big.disk.index_and_models() as f64 / big.disk.segments_used.max(1) as f64;
    let mut out = vec![
        ("start after a clean stop < 200 ms", p50(&big.clean_ms), p50(&big.clean_ms) < 200.0),
        ("start after kill -9 < 500 ms", p50(&big.kill_ms), p50(&big.kill_ms) < 500.0),
        ("idle RssAnon < 64 MB", anon, anon < 64.0),
        ("runs list p99 < 5 ms", quantile(&big.list_ms, 0.99), quantile(&big.list_ms, 0.99) < 5.0),
        ("index + read models ≤ 50% of segments (%)", ratio, ratio <= 50.0),
    ];
    if !big.project_ms.is_empty() {
        let p = quantile(&big.project_ms, 0.99);
        out.push(("one project's runs p99 < 5 ms", p, p < 5.0));
    }
    if let Some(e) = empty.filter(|e| e.runs != big.runs) {
        let (f0, f1) = (quantile(&e.first_ms, 0.5), quantile(&big.first_ms, 0.5));
        out.push(("first event p50 within 10% of empty (ms)", f1, f1 <= f0 * 1.1));
        out.push(("runs/s within 10% of empty", big.runs_per_s, big.runs_per_s >= e.runs_per_s * 0.9));
    }
    println!("\ntargets at {} runs:", big.runs);
    for (name, v, pass) in &out {
        println!("  {} {name}: {v:.2}", verdict(*pass));
    }
    Value::Array(out.into_iter().map(|(n, v, p)| json!({ "target": n, "measured": v, "pass": p })).collect())
}
