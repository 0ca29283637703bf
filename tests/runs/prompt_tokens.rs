//! The prompt token estimator (`od::engine::prompt::tokens`) measured against tiktoken o200k_base on a
//! corpus of skill, design-system and craft texts: the project's own fixtures (every SKILL.md,
//! DESIGN.md and craft file under `tests/fixtures` but fuzz inputs and generated text, the copied
//! `tests/fixtures/prompt_stack/corpus` included) and, when present on the machine, the shared fixture sets under `/work/shared/fixtures`.
//! Fails when one document's error leaves [`PROMPT_ESTIMATOR_MAX_ERROR_PCT`] (documents under 40
//! tokens: 6 tokens) or the corpus total's leaves [`PROMPT_ESTIMATOR_MAX_TOTAL_ERROR_PCT`]; writes
//! the figures to `target/bench-results/prompt_tokens.json`.

use od::engine::prompt::tokens::{estimate, ESTIMATOR};
use od::limits::{PROMPT_ESTIMATOR_MAX_ERROR_PCT, PROMPT_ESTIMATOR_MAX_TOTAL_ERROR_PCT};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Markdown context texts below `dir`: SKILL.md, DESIGN.md and `.md` files in a `craft` folder.
fn corpus_below(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            // Fuzz inputs and the prompt-stack test plugin's generated design system are not prose.
            if !(p.ends_with("fuzz") || p.ends_with("prompt_stack/plugin")) {
                corpus_below(&p, out);
            }
            continue;
        }
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let craft = p.parent().is_some_and(|d| d.ends_with("craft")) && name.ends_with(".md");
        if name == "SKILL.md" || name == "DESIGN.md" || name.ends_with(".SKILL.md") || craft {
            out.push(p);
        }
    }
}

#[test]
fn the_estimator_stays_within_its_stated_error_of_o200k() {
    let mut files = Vec::new();
    corpus_below(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"), &mut files);
    let own = files.len();
    corpus_below(Path::new("/work/shared/fixtures"), &mut files);
    files.sort();
    assert!(own >= 20, "the project's own corpus is there ({own} files)");
    let bpe = tiktoken_rs::o200k_base().unwrap();
    let (mut est_total, mut real_total) = (0u64, 0u64);
    let mut worst: (f64, String) = (0.0, String::new());
    let mut docs = Vec::new();
    let mut failures = Vec::new();
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        let est = estimate(&text);
        let real = bpe.encode_with_special_tokens(&text).len() as u64;
        if real == 0 {
            continue;
        }
        est_total += est;
        real_total += real;
        let err = (est as f64 - real as f64) / real as f64 * 100.0;
        let ok = if real < 40 { est.abs_diff(real) <= 6 } else { err.abs() <= PROMPT_ESTIMATOR_MAX_ERROR_PCT };
        if !ok {
            failures.push(format!("{}: estimated {est}, o200k {real} ({err:+.1}%)", f.display()));
        }
        if real >= 40 && err.abs() > worst.0.abs() {
            worst = (err, f.display().to_string());
        }
        docs.push(json!({ "file": f.display().to_string(), "estimated": est, "o200k": real, "errorPct": (err * 10.0).round() / 10.0 }));
    }
    let total_err = (est_total as f64 - real_total as f64) / real_total as f64 * 100.0;
    let mut abs: Vec<f64> = docs.iter().map(|d| d["errorPct"].as_f64().unwrap().abs()).collect();
    abs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p = |q: f64| abs[((abs.len() - 1) as f64 * q).round() as usize];
    let report = json!({
        "estimator": ESTIMATOR, "reference": "tiktoken-rs o200k_base", "documents": docs.len(),
        "estimatedTokens": est_total, "o200kTokens": real_total, "totalErrorPct": (total_err * 100.0).round() / 100.0,
        "absErrorPctMedian": p(0.5), "absErrorPctP90": p(0.9), "absErrorPctMax": abs.last(),
        "worstDocument": { "errorPct": (worst.0 * 10.0).round() / 10.0, "file": worst.1 },
        "boundPct": PROMPT_ESTIMATOR_MAX_ERROR_PCT, "totalBoundPct": PROMPT_ESTIMATOR_MAX_TOTAL_ERROR_PCT,
        "perDocument": docs,
    });
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-results");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("prompt_tokens.json"), serde_json::to_vec_pretty(&report).unwrap()).unwrap();
    assert!(failures.is_empty(), "documents outside the bound:\n{}", failures.join("\n"));
    assert!(
        total_err.abs() <= PROMPT_ESTIMATOR_MAX_TOTAL_ERROR_PCT,
        "corpus total off by {total_err:.2}% (estimated {est_total}, o200k {real_total})"
    );
}
