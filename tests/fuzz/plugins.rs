//! Targets of the plugin layer: a plugin folder (SKILL.md frontmatter, `open-design.json`,
//! `.claude-plugin/plugin.json`) through `od plugin doctor`'s loader, the `until` grammar, GenUI
//! answers against a surface's schema, and agent stdout lines (od's protocol and Claude's
//! stream-json).

use super::harness::{unpack, Bounds, Rng, Target};
use super::mutate::{folder, havoc, json_or_havoc, lines};
use od::plugins::until::{parse_until, Literal, UntilExpr};
use od::runner::dialects::{LineParser, Protocol};
use serde_json::Value;
use std::time::Duration;

/// Inputs are kept under 64 KiB; a heap of 1 MiB plus 64 bytes per input byte leaves room for a
/// JSON tree of small values (a `Value` is 32 bytes plus its container's growth) and nothing for
/// an allocation sized by a length the input claims.
fn text_bound(n: usize) -> usize {
    (1 << 20) + 64 * n
}

// ---- plugin folders ---------------------------------------------------------------------------------

/// The bundled plugins, packed (they go through the same loader as any third-party folder).
pub fn bundled_seeds() -> Vec<(String, Vec<u8>)> {
    od::plugins::bundled::bundled()
        .iter()
        .map(|p| {
            let files =
                p.files.iter().map(|(path, text)| (path.to_string(), text.as_bytes().to_vec())).collect::<Vec<_>>();
            (format!("bundled:{}", p.id), super::harness::pack(&files))
        })
        .collect()
}

/// Writes the packed files as a plugin folder and loads it: doctor and the loader agree, every
/// diagnostic names its file and code, a refused folder says why.
pub fn check_plugin(input: &[u8]) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugin");
    std::fs::create_dir_all(&dir).unwrap();
    for (path, bytes) in unpack(input) {
        let manifest = ["SKILL.md", "open-design.json", ".claude-plugin/plugin.json"];
        let rel = if manifest.contains(&path.as_str()) { path } else { "SKILL.md".to_string() };
        let p = dir.join(&rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    let report = od::plugins::doctor(&dir);
    let loaded = od::plugins::load_folder(&dir);
    assert_eq!(report.ok, loaded.is_ok(), "doctor and the loader agree: {:?}", report.diagnostics);
    for d in &report.diagnostics {
        assert!(!d.code.is_empty() && !d.file.is_empty() && !d.message.is_empty(), "{d:?}");
    }
    match loaded {
        Ok(p) => {
            assert!(od::plugins::is_plugin_id(&p.id), "loaded id {:?}", p.id);
            assert_eq!(p.manifest["name"], p.id.as_str());
        }
        Err(e) => assert!(e.diagnostics.iter().any(|d| d.is_error()), "a refusal carries an error"),
    }
}

pub fn plugin_target() -> Target {
    Target {
        name: "plugin",
        iterations: 600,
        // A frontmatter may expand (through aliases) to MAX_FRONTMATTER_NODES values, ~75 bytes
        // each as YAML and then JSON.
        bounds: Bounds {
            deadline: Duration::from_secs(10),
            memory: |n| (4 << 20) + 64 * n + 128 * od::limits::MAX_FRONTMATTER_NODES,
        },
        seeds: bundled_seeds(),
        mutate: folder,
    }
}

// ---- until ------------------------------------------------------------------------------------------

fn render(e: &UntilExpr) -> String {
    let conj =
        |c: &Vec<od::plugins::until::Comparison>| c.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" && ");
    e.any.iter().map(|c| format!("({})", conj(c))).collect::<Vec<_>>().join(" || ")
}

/// An expression that parses renders to one that parses to the same thing; errors carry a column
/// inside the expression; evaluation is total.
pub fn check_until(input: &[u8]) {
    let Ok(src) = std::str::from_utf8(input) else { return };
    match parse_until(src) {
        Ok(expr) => {
            let again = parse_until(&render(&expr)).expect("a rendered expression parses");
            assert_eq!(again, expr, "render then parse is the identity");
            for v in [Literal::Bool(true), Literal::Bool(false), Literal::Number(4.0), Literal::Number(f64::NAN)] {
                let _ = expr.evaluate(|_| Some(v));
                let _ = expr.matched(|_| Some(v));
            }
            let _ = expr.evaluate(|_| None);
        }
        Err(e) => {
            assert!(e.column >= 1 && e.column <= src.chars().count() + 1, "column {} of {src:?}", e.column);
            assert!(!e.message.is_empty());
        }
    }
}

pub fn until_target() -> Target {
    Target {
        name: "until",
        iterations: 3000,
        bounds: Bounds { deadline: Duration::from_secs(10), memory: text_bound },
        seeds: Vec::new(),
        mutate: havoc,
    }
}

// ---- GenUI answers ----------------------------------------------------------------------------------

/// `{"surface": …, "answer": …}`: checking the answer against the surface ends, a skip (`null`)
/// is always allowed, and a refusal says why in a bounded list.
pub fn check_genui(input: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(input) else { return };
    let (spec, answer) = (&v["surface"], &v["answer"]);
    match od::engine::genui::check_answer(spec, answer) {
        Ok(()) => {}
        Err(od::engine::errors::WorkError::InvalidAnswer { violations, .. }) => {
            assert!(!answer.is_null(), "a skip is refused");
            assert!((1..=od::limits::MAX_SCHEMA_VIOLATIONS).contains(&violations.len()), "{}", violations.len());
        }
        Err(other) => panic!("not an answer verdict: {other}"),
    }
}

/// Mutates the surface's schema or the answer (JSON-aware), or the bytes.
fn mutate_genui(rng: &mut Rng, input: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    json_or_havoc(rng, input, pool)
}

pub fn genui_target() -> Target {
    Target {
        name: "genui",
        iterations: 1000,
        bounds: Bounds { deadline: Duration::from_secs(10), memory: text_bound },
        seeds: Vec::new(),
        mutate: mutate_genui,
    }
}

// ---- agent stdout -----------------------------------------------------------------------------------

/// Every line through each protocol's parser: it never panics, and what it returns is bounded by
/// what it was given.
pub fn check_agent_lines(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    for protocol in [
        Protocol::Auto,
        Protocol::Od,
        Protocol::ClaudeStreamJson,
        Protocol::CodexJson,
        Protocol::GeminiStreamJson,
        Protocol::OpencodeJson,
        Protocol::CopilotJson,
        Protocol::CursorStreamJson,
    ] {
        let mut p = LineParser::new(protocol);
        let mut items = 0;
        for line in text.split('\n') {
            items += p.feed(line).len();
        }
        assert!(items <= input.len() + 1, "{items} items from {} bytes", input.len());
    }
}

pub fn agent_lines_target() -> Target {
    Target {
        name: "agent-lines",
        iterations: 2000,
        bounds: Bounds { deadline: Duration::from_secs(10), memory: text_bound },
        seeds: Vec::new(),
        mutate: lines,
    }
}
