//! Plugins: loading the whole fixture corpus, and apply latency over HTTP.
//!
//! Corpus: every folder holding `SKILL.md`, `open-design.json` or `.claude-plugin/plugin.json` under
//! `../shared/fixtures/plugins-open-design` and `../shared/fixtures/skills-anthropic` (found the way
//! `tests/plugins/plugin_load.rs` finds them) is loaded with `od::plugins::load_folder`, in sorted order, in
//! `PASSES` timed passes on one thread; the table reports the median pass (and the fastest and
//! slowest), folders/s over the median, and how many folders load vs fail with diagnostics.
//!
//! Apply: the daemon runs in-process (`od::daemon::start`, multi-thread tokio runtime, loopback,
//! port 0) on a fresh data dir on disk. Three local plugins built in a temp dir are installed
//! through `POST /api/plugins/install` (ND-JSON): a plain SKILL.md skill; a trusted plugin with
//! inputs, an MCP server and a pipeline of bundled atoms (todo-write, file-write, critique-theater
//! with repeat/until); and a restricted plugin applied with `grantCaps`. With the bundled
//! `od-new-generation` scenario that makes four apply targets. One client thread (ureq agent,
//! keep-alive) sends `WARMUP` applies, then `REQUESTS` sequential `POST /api/plugins/{id}/apply`,
//! round-robin over the four; latency = send until the whole response body is read. Every response
//! is checked afterwards (200, `ok`, one digest per plugin) and the log's `lastSeq` must not move
//! (apply is pure).
//!
//! Reference: OpenDesign's own daemon, measured on this kind of machine, takes 226 ms p50 / 281 ms
//! p99 per apply (it rescans every plugin on each call); the targets are p50 < 2 ms, p99 < 10 ms.
//!
//! Run: `cargo bench --bench plugins`. Results: tables on stdout, `target/bench-results/plugins.json`.

mod common;

use common::*;
use od::daemon::{start, DaemonConfig};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The fixture trees the corpus is drawn from.
const TREES: [(&str, &str); 2] = [
    ("plugins-open-design", concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/plugins-open-design")),
    ("skills-anthropic", concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/skills-anthropic")),
];
/// A folder holding one of these is a plugin or skill folder.
const MANIFESTS: [&str; 3] = ["SKILL.md", "open-design.json", ".claude-plugin/plugin.json"];
/// Timed passes over the corpus.
const PASSES: usize = 5;
/// Applies sent before measuring.
const WARMUP: usize = 100;
/// Measured applies.
const REQUESTS: usize = 2_000;
/// Targets (ms).
const TARGET_P50_MS: f64 = 2.0;
const TARGET_P99_MS: f64 = 10.0;
/// OpenDesign's own daemon per apply on this kind of machine (ms), from the issue.
const REFERENCE_P50_MS: f64 = 226.0;
const REFERENCE_P99_MS: f64 = 281.0;

// ---------------------------------------------------------------- corpus

struct Folder {
    tree: &'static str,
    rel: String,
    path: PathBuf,
}

fn corpus() -> Vec<Folder> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        if MANIFESTS.iter().any(|f| dir.join(f).is_file()) {
            out.push(dir.to_path_buf());
        }
        for entry in std::fs::read_dir(dir).expect("read fixture dir").flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&entry.path(), out);
            }
        }
    }
    let mut folders = Vec::new();
    for (tree, root) in TREES {
        let root = Path::new(root);
        assert!(root.is_dir(), "fixture tree {} is missing", root.display());
        let mut found = Vec::new();
        walk(root, &mut found);
        found.sort();
        folders.extend(found.into_iter().map(|path| Folder {
            tree,
            rel: format!("{tree}/{}", path.strip_prefix(root).expect("under root").display()),
            path,
        }));
    }
    folders
}

struct TreeTimes {
    tree: &'static str,
    folders: usize,
    ok: usize,
    /// Folders that failed, with their error codes (`code@file`).
    failed: Vec<(String, Vec<String>)>,
    /// Seconds per pass.
    passes: Vec<f64>,
}

impl TreeTimes {
    fn median_s(&self) -> f64 {
        median(&mut self.passes.clone())
    }
    fn min_s(&self) -> f64 {
        self.passes.iter().copied().fold(f64::INFINITY, f64::min)
    }
    fn max_s(&self) -> f64 {
        self.passes.iter().copied().fold(0.0, f64::max)
    }
}

/// Loads every folder `PASSES` times; per tree and in total.
fn load_corpus(folders: &[Folder]) -> (Vec<TreeTimes>, TreeTimes) {
    let mut trees: Vec<TreeTimes> = TREES
        .iter()
        .map(|&(tree, _)| TreeTimes {
            tree,
            folders: folders.iter().filter(|f| f.tree == tree).count(),
            ok: 0,
            failed: Vec::new(),
            passes: Vec::new(),
        })
        .collect();
    for pass in 0..PASSES {
        let mut secs = vec![0.0; trees.len()];
        for f in folders {
            let t0 = Instant::now();
            let r = od::plugins::load_folder(&f.path);
            let dt = t0.elapsed().as_secs_f64();
            let i = trees.iter().position(|t| t.tree == f.tree).expect("known tree");
            secs[i] += dt;
            if pass == 0 {
                match r {
                    Ok(_) => trees[i].ok += 1,
                    Err(e) => {
                        let mut codes: Vec<String> = e
                            .diagnostics
                            .iter()
                            .filter(|d| d.is_error())
                            .map(|d| format!("{}@{}", d.code, d.file))
                            .collect();
                        codes.dedup();
                        trees[i].failed.push((f.rel.clone(), codes));
                    }
                }
            } else {
                std::hint::black_box(r.is_ok());
            }
        }
        for (t, s) in trees.iter_mut().zip(secs) {
            t.passes.push(s);
        }
    }
    let total = TreeTimes {
        tree: "total",
        folders: folders.len(),
        ok: trees.iter().map(|t| t.ok).sum(),
        failed: trees.iter().flat_map(|t| t.failed.clone()).collect(),
        passes: (0..PASSES).map(|p| trees.iter().map(|t| t.passes[p]).sum()).collect(),
    };
    (trees, total)
}

// ---------------------------------------------------------------- apply over HTTP

/// One apply target: which plugin, with what body, installed how.
struct Target {
    id: &'static str,
    trust: &'static str,
    body: String,
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write fixture");
}

/// The three local plugins: (folder, trust) each.
fn build_plugins(root: &Path) -> Vec<(PathBuf, &'static str)> {
    let plain = root.join("bench-plain");
    write(
        &plain.join("SKILL.md"),
        "---\nname: bench-plain\ndescription: Writes a short product note.\nversion: 1.0.0\n---\n\
         # Bench plain\n\nWrite a short, friendly product note.\n",
    );

    let pipeline = root.join("bench-pipeline");
    write(
        &pipeline.join("SKILL.md"),
        "---\nname: bench-pipeline\ndescription: Designs a page from a brief, then critiques it.\n---\n\
         # Bench pipeline\n\nDesign a {{artifactKind}} about {{topic}}; plan it, build it, critique it.\n",
    );
    let manifest = json!({
        "specVersion": "1.0.0", "name": "bench-pipeline", "title": "Bench pipeline", "version": "1.2.0",
        "description": "Designs a page from a brief, then critiques it until the score converges.",
        "od": {
            "kind": "scenario",
            "taskKind": "new-generation",
            "useCase": { "query": {
                "en": "Design a {{artifactKind}} about {{topic}} for {{audience}}.",
                "fr": "Concevoir un {{artifactKind}} sur {{topic}}."
            } },
            "inputs": [
                { "name": "artifactKind", "type": "string", "required": true },
                { "name": "topic", "type": "string", "required": true },
                { "name": "audience", "type": "string", "default": "everyone" }
            ],
            "context": { "mcp": [ { "name": "figma", "command": "npx", "args": ["figma-mcp"] } ] },
            "pipeline": { "stages": [
                { "id": "plan", "atoms": ["todo-write"] },
                { "id": "generate", "atoms": ["file-write"] },
                { "id": "critique", "atoms": ["critique-theater"], "repeat": true,
                  "until": "critique.score>=4 || iterations>=3" }
            ] },
            "capabilities": ["prompt:inject", "fs:write"]
        }
    });
    write(&pipeline.join("open-design.json"), &serde_json::to_string_pretty(&manifest).expect("json"));

    let restricted = root.join("bench-restricted");
    write(
        &restricted.join("SKILL.md"),
        "---\nname: bench-restricted\ndescription: Reads designs through an MCP server.\n---\n\
         # Bench restricted\n\nSummarise {{topic}}.\n",
    );
    let manifest = json!({
        "specVersion": "1.0.0", "name": "bench-restricted", "version": "0.3.0",
        "od": {
            "kind": "skill",
            "useCase": { "query": { "en": "Summarise {{topic}}" } },
            "inputs": [ { "name": "topic", "type": "string", "required": true } ],
            "context": { "mcp": [ { "name": "figma", "command": "npx", "args": ["figma-mcp"] } ] },
            "capabilities": ["fs:write"]
        }
    });
    write(&restricted.join("open-design.json"), &serde_json::to_string_pretty(&manifest).expect("json"));

    vec![(plain, "trusted"), (pipeline, "trusted"), (restricted, "restricted")]
}

fn targets() -> Vec<Target> {
    let body = |v: Value| v.to_string();
    vec![
        Target { id: "bench-plain", trust: "trusted", body: body(json!({ "inputs": {} })) },
        Target {
            id: "bench-pipeline",
            trust: "trusted",
            body: body(json!({ "inputs": { "artifactKind": "landing page", "topic": "weekly planning" } })),
        },
        Target {
            id: "bench-restricted",
            trust: "restricted",
            body: body(json!({
                "inputs": { "topic": "the design system" },
                "grantCaps": ["fs:write", "mcp:figma", "network", "subprocess"]
            })),
        },
        Target {
            id: "od-new-generation",
            trust: "bundled",
            body: body(json!({
                "inputs": { "artifactKind": "pitch deck", "audience": "seed investors", "topic": "calm planning" }
            })),
        },
    ]
}

/// Installs `source` over HTTP; returns the milliseconds the whole ND-JSON stream took.
fn install(agent: &ureq::Agent, url: &str, source: &Path, trust: &str) -> f64 {
    let mut body = json!({ "source": source.display().to_string() });
    if trust == "restricted" {
        body["trust"] = json!("restricted");
    }
    let t0 = Instant::now();
    let text = agent
        .post(&format!("{url}/api/plugins/install"))
        .send_json(body)
        .unwrap_or_else(|e| panic!("install {}: {e}", source.display()))
        .into_string()
        .expect("install body");
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let last: Value = serde_json::from_str(text.lines().last().expect("ND-JSON lines")).expect("ND-JSON line");
    assert_eq!(last["event"], "success", "install {}: {text}", source.display());
    assert_eq!(last["data"]["plugin"]["trust"], trust);
    ms
}

fn last_seq(agent: &ureq::Agent, url: &str) -> u64 {
    let v: Value = agent.get(&format!("{url}/api/log/stats")).call().expect("stats").into_json().expect("stats json");
    v["lastSeq"].as_u64().expect("lastSeq")
}

/// One apply: (latency s, status, body).
fn apply_once(agent: &ureq::Agent, url: &str, t: &Target) -> (f64, u16, String) {
    let t0 = Instant::now();
    let r = agent
        .post(&format!("{url}/api/plugins/{}/apply", t.id))
        .set("Content-Type", "application/json")
        .send_string(&t.body);
    let (status, text) = match r {
        Ok(resp) => (resp.status(), resp.into_string().expect("apply body")),
        Err(ureq::Error::Status(code, resp)) => (code, resp.into_string().unwrap_or_default()),
        Err(e) => panic!("apply {}: {e}", t.id),
    };
    (t0.elapsed().as_secs_f64(), status, text)
}

struct ApplyRun {
    install_ms: Vec<(&'static str, f64)>,
    /// Per target: latencies (ms, sorted).
    per_target: Vec<Vec<f64>>,
    /// All latencies (ms, sorted).
    all: Vec<f64>,
    secs: f64,
    /// Per target: the `manifestSourceDigest` every response carried.
    digests: Vec<String>,
    events_written: u64,
}

fn run_apply(targets: &[Target]) -> ApplyRun {
    let dir = tempdir();
    let data = dir.path().join("data");
    let src = dir.path().join("src");
    let plugins = build_plugins(&src);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let running = rt.block_on(start(DaemonConfig::new(data))).expect("daemon start");
    let url = running.url();

    // The client runs on a plain thread, outside the runtime, as a separate process would.
    let run = std::thread::scope(|s| {
        s.spawn(|| {
            let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
            let install_ms: Vec<(&'static str, f64)> = plugins
                .iter()
                .zip(targets)
                .map(|((path, trust), t)| {
                    assert_eq!(t.trust, *trust);
                    (t.id, install(&agent, &url, path, trust))
                })
                .collect();
            // The restricted plugin really is gated: without grantCaps it is refused.
            let ungated = Target { id: "bench-restricted", trust: "restricted", body: targets[2].body.clone() };
            let mut ungated_body: Value = serde_json::from_str(&ungated.body).expect("body");
            ungated_body.as_object_mut().expect("object").remove("grantCaps");
            let ungated = Target { body: ungated_body.to_string(), ..ungated };
            let (_, status, text) = apply_once(&agent, &url, &ungated);
            assert!(status == 409 && text.contains("capabilities-required"), "ungated apply: {status} {text}");
            for i in 0..WARMUP {
                let t = &targets[i % targets.len()];
                let (_, status, text) = apply_once(&agent, &url, t);
                assert_eq!(status, 200, "warm-up apply {}: {text}", t.id);
            }
            let seq_before = last_seq(&agent, &url);
            let mut samples: Vec<(usize, f64, u16, String)> = Vec::with_capacity(REQUESTS);
            let start = Instant::now();
            for i in 0..REQUESTS {
                let k = i % targets.len();
                let (s, status, text) = apply_once(&agent, &url, &targets[k]);
                samples.push((k, s, status, text));
            }
            let secs = start.elapsed().as_secs_f64();
            let events_written = last_seq(&agent, &url) - seq_before;

            let mut digests: Vec<Option<String>> = vec![None; targets.len()];
            let mut per_target: Vec<Vec<f64>> = vec![Vec::new(); targets.len()];
            for (k, s, status, text) in samples {
                let t = &targets[k];
                assert_eq!(status, 200, "apply {}: {text}", t.id);
                let v: Value = serde_json::from_str(&text).expect("apply json");
                assert_eq!(v["ok"], true, "apply {}: {text}", t.id);
                assert_eq!(v["appliedPlugin"]["pluginId"], t.id);
                let query = v["query"].as_str().expect("query");
                assert!(!query.contains("{{"), "{}: every placeholder filled: {query}", t.id);
                if t.id == "bench-pipeline" {
                    assert_eq!(v["pipeline"]["stages"].as_array().map(Vec::len), Some(3), "{text}");
                    assert_eq!(v["mcpServers"][0]["name"], "figma", "{text}");
                }
                let d = v["manifestSourceDigest"].as_str().expect("digest").to_string();
                match &digests[k] {
                    Some(first) => assert_eq!(first, &d, "{}: apply is deterministic", t.id),
                    None => digests[k] = Some(d),
                }
                per_target[k].push(s * 1e3);
            }
            let mut all: Vec<f64> = per_target.iter().flatten().copied().collect();
            all.sort_by(f64::total_cmp);
            for v in &mut per_target {
                v.sort_by(f64::total_cmp);
            }
            let digests = digests.into_iter().map(|d| d.expect("a response per target")).collect();
            ApplyRun { install_ms, per_target, all, secs, digests, events_written }
        })
        .join()
        .expect("client thread")
    });
    rt.block_on(running.stop());
    drop(rt);
    run
}

// ---------------------------------------------------------------- report

fn main() {
    let started = Instant::now();
    let folders = corpus();
    println!(
        "plugins: load the fixture corpus ({} folders, {PASSES} passes, one thread) with \
         od::plugins::load_folder; then {REQUESTS} sequential applies over loopback HTTP \
         (after {WARMUP} warm-up) to an in-process daemon, round-robin over 4 plugins",
        folders.len()
    );
    let (trees, total) = load_corpus(&folders);

    println!();
    println!("| corpus | folders | load | fail | median ms | min ms | max ms | folders/s |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for t in trees.iter().chain(std::iter::once(&total)) {
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {} |",
            t.tree,
            t.folders,
            t.ok,
            t.failed.len(),
            t.median_s() * 1e3,
            t.min_s() * 1e3,
            t.max_s() * 1e3,
            si(t.folders as f64 / t.median_s())
        );
    }
    for (rel, codes) in &total.failed {
        println!("  fails with diagnostics: {rel}: {}", codes.join(", "));
    }

    let targets = targets();
    let run = run_apply(&targets);
    println!();
    println!(
        "installs over HTTP (ND-JSON): {}",
        run.install_ms.iter().map(|(id, ms)| format!("{id} {ms:.1} ms")).collect::<Vec<_>>().join(", ")
    );
    println!();
    println!("| apply | trust | requests | p50 ms | p90 ms | p99 ms | max ms |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    let row = |name: &str, trust: &str, v: &[f64]| {
        println!(
            "| {name} | {trust} | {} | {:.3} | {:.3} | {:.3} | {:.3} |",
            v.len(),
            quantile(v, 0.5),
            quantile(v, 0.9),
            quantile(v, 0.99),
            v.last().copied().unwrap_or(f64::NAN)
        );
    };
    for (t, v) in targets.iter().zip(&run.per_target) {
        row(t.id, t.trust, v);
    }
    row("all", "-", &run.all);
    let rps = run.all.len() as f64 / run.secs;
    println!(
        "requests/s (sequential, one client): {rps:.0}; events written during the applies: {}",
        run.events_written
    );

    let p50 = quantile(&run.all, 0.5);
    let p99 = quantile(&run.all, 0.99);
    let max = run.all.last().copied().unwrap_or(f64::NAN);
    let (pass50, pass99) = (p50 < TARGET_P50_MS, p99 < TARGET_P99_MS);
    println!();
    println!("| apply over HTTP | od | target | OpenDesign daemon | OpenDesign / od | verdict |");
    println!("|---|---:|---:|---:|---:|:-:|");
    println!(
        "| p50 | {p50:.3} ms | < {TARGET_P50_MS} ms | {REFERENCE_P50_MS} ms | {:.0}x | {} |",
        REFERENCE_P50_MS / p50,
        verdict(pass50)
    );
    println!(
        "| p99 | {p99:.3} ms | < {TARGET_P99_MS} ms | {REFERENCE_P99_MS} ms | {:.0}x | {} |",
        REFERENCE_P99_MS / p99,
        verdict(pass99)
    );

    println!("\ntargets:");
    println!("  {} apply p50 < {TARGET_P50_MS} ms over HTTP: {p50:.3} ms", verdict(pass50));
    println!("  {} apply p99 < {TARGET_P99_MS} ms over HTTP: {p99:.3} ms", verdict(pass99));
    println!("total bench time {:.1} s", started.elapsed().as_secs_f64());

    let tree_json = |t: &TreeTimes| {
        json!({
            "tree": t.tree,
            "folders": t.folders,
            "ok": t.ok,
            "failed": t.failed.len(),
            "failed_folders": t.failed.iter().map(|(rel, codes)| json!({ "folder": rel, "errors": codes }))
                .collect::<Vec<_>>(),
            "pass_ms": t.passes.iter().map(|s| s * 1e3).collect::<Vec<_>>(),
            "median_ms": t.median_s() * 1e3,
            "min_ms": t.min_s() * 1e3,
            "max_ms": t.max_s() * 1e3,
            "folders_per_s": t.folders as f64 / t.median_s(),
        })
    };
    let lat = |v: &[f64]| {
        json!({
            "requests": v.len(),
            "p50": quantile(v, 0.5), "p90": quantile(v, 0.9), "p99": quantile(v, 0.99),
            "p999": quantile(v, 0.999), "max": v.last(), "min": v.first(),
        })
    };
    let per_target: Vec<_> = targets
        .iter()
        .zip(&run.per_target)
        .zip(&run.digests)
        .map(|((t, v), d)| {
            json!({ "plugin": t.id, "trust": t.trust, "body": serde_json::from_str::<Value>(&t.body).expect("body"),
                    "manifest_source_digest": d, "latency_ms": lat(v) })
        })
        .collect();
    write_json(
        "plugins",
        &json!({
            "bench": "plugins",
            "machine": machine(),
            "corpus": {
                "loader": "od::plugins::load_folder, one thread, sorted folder order",
                "passes": PASSES,
                "trees": trees.iter().map(tree_json).collect::<Vec<_>>(),
                "total": tree_json(&total),
            },
            "apply": {
                "transport": "POST /api/plugins/{id}/apply over loopback HTTP/1.1 (ureq agent, keep-alive), \
                              one client thread, sequential; in-process daemon on a multi-thread tokio runtime",
                "warmup_requests": WARMUP,
                "installs_ms": run.install_ms.iter().map(|(id, ms)| json!({ "plugin": id, "ms": ms }))
                    .collect::<Vec<_>>(),
                "plugins": per_target,
                "latency_ms": lat(&run.all),
                "secs": run.secs,
                "requests_per_s": rps,
                "events_written_during_applies": run.events_written,
                "reference": {
                    "system": "OpenDesign's own daemon (rescans every plugin per apply), this kind of machine",
                    "p50_ms": REFERENCE_P50_MS,
                    "p99_ms": REFERENCE_P99_MS,
                    "ratio_p50": REFERENCE_P50_MS / p50,
                    "ratio_p99": REFERENCE_P99_MS / p99,
                },
            },
            "targets": [
                { "target": "apply p50 < 2 ms over HTTP", "measured_ms": p50, "reference_ms": REFERENCE_P50_MS,
                  "pass": pass50 },
                { "target": "apply p99 < 10 ms over HTTP", "measured_ms": p99, "reference_ms": REFERENCE_P99_MS,
                  "pass": pass99 },
            ],
            "max_apply_ms": max,
            "total_bench_secs": started.elapsed().as_secs_f64(),
        }),
    );
}
