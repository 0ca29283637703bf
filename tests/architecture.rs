//! The layers of `src/`, held by a test: every `crate::X` path in the code of a top-level module
//! (a folder of `src/` or a single file) may only point to a module on a LOWER floor of [`FLOORS`]
//! (or inside its own module), and no two top-level modules use each other, even through others.
//! It reads the source text (comments, doc comments, strings and `#[cfg(test)]` items left out),
//! so it needs no od build: a binary of its own that compiles in seconds.
//!
//! Arrows other slices are removing while this lands sit in [`PENDING`]; an entry that is no
//! longer in the code fails the test too, so the list only shrinks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Floors, bottom first. A module may use only modules of lower floors; modules sharing a floor
/// do not use each other.
const FLOORS: &[(&str, &[&str])] = &[
    // The bounds, each with its reason.
    ("limits", &["limits"]),
    // Leaf helpers: identifiers, the injected clock, media types, space reclaiming.
    ("leaves", &["ids", "clock", "mime", "reclaim"]),
    // Plumbing: durable file writes, page cursors, the outbound network policy, the daemon's log.
    ("plumbing", &["durable", "page", "net", "daemon_log"]),
    // Content that needs no log: plugin folders and their checks, content-addressed blobs, the
    // agent catalog with its detection and config checks.
    ("content", &["plugins", "blobs", "agents"]),
    // The event log (sled or PostgreSQL) and its seam.
    ("store", &["store"]),
    // Projections folded from the log.
    ("projector", &["projector"]),
    // Connectors: catalog, credentials, OAuth, outbound calls.
    ("connectors", &["connectors"]),
    // The engine: commands that check and record facts (runs, plugins, projects, forks, the run's
    // prompt and wire shapes).
    ("engine", &["engine"]),
    // Tools agents call back (files, browser, connectors' tools).
    ("tools", &["tools"]),
    // The executor: pipelines, agent processes and their dialects.
    ("runner", &["runner"]),
    // Servers: the HTTP API (with the web UI under http/ui), MCP, the background tasks.
    ("servers", &["http", "mcp", "daemon_background"]),
    // The daemon that wires them.
    ("daemon", &["daemon"]),
    // The command line.
    ("cli", &["cli"]),
    // The crate roots.
    ("roots", &["lib", "main"]),
];

/// Arrows against the order that other slices of issue 32 are removing (the lead empties this
/// after merging them): `(from, to)`.
/// (`store -> projector` is not here: only a doc comment of store/tables.rs names the projector.)
const PENDING: &[(&str, &str)] = &[];

/// One `crate::X` use: the line it is on and the top-level module it names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Use {
    line: usize,
    target: String,
}

/// The source with comments, strings and char literals blanked to spaces (newlines kept, so
/// offsets and line numbers still match the file).
fn blank_comments_and_strings(src: &str) -> Vec<u8> {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let ident_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if b[i..].starts_with(b"//") {
            let end = b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (0usize, i);
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j.min(b.len()));
            i = j;
        } else if !ident_before && (b[i] == b'r' || b[i..].starts_with(b"br")) && raw_string_end(b, i).is_some() {
            let end = raw_string_end(b, i).unwrap();
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i, (j + 1).min(b.len()));
            i = j + 1;
        } else if b[i] == b'\'' {
            // A char literal ('a', '\n', '\u{1F600}', '"') — not a lifetime ('a without a close).
            let end = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..].iter().position(|&c| c == b'\'').map(|p| i + 2 + p + 1)
            } else {
                let ch_len = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch_len) == Some(&b'\'')).then_some(i + 2 + ch_len)
            };
            match end {
                Some(end) => {
                    blank(&mut out, i, end);
                    i = end;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Where a raw string starting at `i` (`r"…"`, `r#"…"#`, `br"…"`) ends, if one starts there.
fn raw_string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + if b[i] == b'b' { 2 } else { 1 };
    let hashes = b[j..].iter().take_while(|&&c| c == b'#').count();
    j += hashes;
    if b.get(j) != Some(&b'"') {
        return None;
    }
    let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
    b[j + 1..].windows(close.len()).position(|w| w == close).map(|p| j + 1 + p + close.len())
}

/// The index just past the brace matching the `{` at `open`.
fn matching_brace(b: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    b.len()
}

/// Blanks every `#[cfg(test)]` item of the (already comment-free) text; returns the files of the
/// `#[cfg(test)] mod x;` declarations (by name or `#[path]`), which are test code as a whole.
fn blank_test_items(text: &mut [u8], src: &str) -> Vec<String> {
    let mut test_files = Vec::new();
    let needle = b"#[cfg(test)]";
    let mut i = 0;
    while let Some(p) = text[i..].windows(needle.len()).position(|w| w == needle) {
        let start = i + p;
        let mut j = start + needle.len();
        let mut path_attr = None;
        // Further attributes of the same item (`#[path = "x.rs"]`, `#[allow(…)]`).
        loop {
            while j < text.len() && text[j].is_ascii_whitespace() {
                j += 1;
            }
            if !text[j..].starts_with(b"#[") {
                break;
            }
            let end = j + text[j..].iter().position(|&c| c == b']').unwrap_or(0) + 1;
            let attr = &src[j..end];
            if attr.starts_with("#[path") {
                path_attr = attr.split('"').nth(1).map(str::to_string);
            }
            j = end;
        }
        // The item runs to its first `;` or through the block its first `{` opens.
        let semi = text[j..].iter().position(|&c| c == b';').map(|p| j + p);
        let brace = text[j..].iter().position(|&c| c == b'{').map(|p| j + p);
        let end = match (semi, brace) {
            (Some(s), Some(b)) if b < s => matching_brace(text, b),
            (Some(s), _) => {
                let head = String::from_utf8_lossy(&text[j..s]).to_string();
                let mut words = head.split_whitespace().filter(|w| *w != "pub" && !w.starts_with("pub("));
                if words.next() == Some("mod") {
                    let name = words.next().unwrap_or_default().to_string();
                    test_files.push(path_attr.clone().unwrap_or(format!("{name}.rs")));
                }
                s + 1
            }
            (None, Some(b)) => matching_brace(text, b),
            (None, None) => text.len(),
        };
        for c in &mut text[start..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        i = end;
    }
    test_files
}

/// The top-level module of each `crate::` path in `src` (comments, strings and `#[cfg(test)]`
/// items left out), and the test-only files it declares. `module` is the file's module path
/// (`["runner", "prompt", "stack"]`), to resolve `super::` chains that climb to the crate root;
/// `is_top` says which names are top-level modules (others are items of lib.rs).
fn crate_uses(src: &str, module: &[String], is_top: &dyn Fn(&str) -> bool) -> (Vec<Use>, Vec<String>) {
    let mut text = blank_comments_and_strings(src);
    let test_files = blank_test_items(&mut text, src);
    let text = String::from_utf8(text).expect("blanking keeps UTF-8");
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let top_of = |name: &str| if is_top(name) { name.to_string() } else { "lib".to_string() };
    let mut uses = Vec::new();
    let bytes = text.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < bytes.len() {
        let boundary = i == 0 || !(ident(bytes[i - 1]) || bytes[i - 1] == b'$' || bytes[i - 1] == b':');
        if boundary && text[i..].starts_with("crate") && text[i + 5..].trim_start().starts_with("::") {
            let rest = text[i + 5..].trim_start()[2..].trim_start();
            let at = text.len() - rest.len();
            if let Some(group) = rest.strip_prefix('{') {
                // `crate::{a, b::c, d as e}`: the first segment of each top-level entry.
                let inner = &group[..matching_brace(rest.as_bytes(), 0) - 2];
                let (mut depth, mut entry_start) = (0, 0);
                for (k, c) in inner.char_indices().chain(std::iter::once((inner.len(), ','))) {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            let entry = inner[entry_start..k].trim_start();
                            let name: String = entry.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                            if !name.is_empty() && name != "self" {
                                let off = at + 1 + entry_start + (inner[entry_start..k].len() - entry.len());
                                uses.push(Use { line: line_of(off), target: top_of(&name) });
                            }
                            entry_start = k + 1;
                        }
                        _ => {}
                    }
                }
            } else {
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() {
                    uses.push(Use { line: line_of(i), target: top_of(&name) });
                }
            }
            i = at;
        } else if boundary && text[i..].starts_with("super::") {
            // `super::super::x` from a file deep enough to reach the crate root.
            let mut j = i;
            let mut ups = 0;
            while text[j..].starts_with("super::") {
                ups += 1;
                j += "super::".len();
            }
            if ups >= module.len() {
                let name: String = text[j..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() {
                    uses.push(Use { line: line_of(i), target: top_of(&name) });
                }
            }
            i = j;
        } else {
            i += 1;
        }
    }
    (uses, test_files)
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
}

/// The module path of a file under `src/` (`runner/prompt/stack.rs` → `[runner, prompt, stack]`,
/// `runner/mod.rs` → `[runner]`, `lib.rs` → `[]`).
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().to_string()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && !(parts.is_empty() && (stem == "lib" || stem == "main")) {
        parts.push(stem.to_string());
    }
    parts
}

/// An arrow of the code: from a top-level module to another, at a file and line.
#[derive(Debug)]
struct Arrow {
    from: String,
    to: String,
    file: String,
    line: usize,
}

/// Every arrow between top-level modules in the code of `src/` (test-only files left out).
fn arrows(src: &Path) -> Vec<Arrow> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let is_top = |name: &str| src.join(name).is_dir() || src.join(format!("{name}.rs")).is_file();
    let mut test_only = BTreeSet::new();
    let mut parsed = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(src).unwrap().to_path_buf();
        let text = std::fs::read_to_string(file).unwrap();
        let module = module_path(&rel);
        let (uses, tests) = crate_uses(&text, &module, &is_top);
        // `mod x;` in `a/mod.rs` or `a.rs` is `a/x.rs` (or `a/x/mod.rs`); `#[path]` is beside the file.
        let dir = match rel.file_name().unwrap().to_str().unwrap() {
            "mod.rs" | "lib.rs" | "main.rs" => rel.parent().unwrap().to_path_buf(),
            f => rel.parent().unwrap().join(f.trim_end_matches(".rs")),
        };
        for t in tests {
            test_only.insert(dir.join(&t));
            test_only.insert(rel.parent().unwrap().join(&t));
            test_only.insert(dir.join(t.trim_end_matches(".rs")).join("mod.rs"));
        }
        parsed.push((rel, module, uses));
    }
    let mut out = Vec::new();
    for (rel, module, uses) in parsed {
        if test_only.iter().any(|t| rel.starts_with(t) || rel == *t) {
            continue;
        }
        let from = module.first().cloned().unwrap_or_else(|| rel.to_string_lossy().trim_end_matches(".rs").to_string());
        for u in uses {
            if u.target != from {
                let file = format!("src/{}", rel.display());
                out.push(Arrow { from: from.clone(), to: u.target, file, line: u.line });
            }
        }
    }
    out
}

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|(_, mods)| mods.contains(&module))
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn arrows_point_down_the_floors() {
    let all = arrows(&src_dir());
    assert!(all.len() > 100, "the reader found only {} arrows in src/: is it still reading the code?", all.len());
    let mut wrong = Vec::new();
    let mut pending_seen = BTreeSet::new();
    for a in &all {
        let (Some(f), Some(t)) = (floor_of(&a.from), floor_of(&a.to)) else {
            let unknown = if floor_of(&a.from).is_none() { &a.from } else { &a.to };
            wrong.push(format!(
                "{}:{}: {} -> {}: module {unknown:?} is on no floor (add it to FLOORS)",
                a.file, a.line, a.from, a.to
            ));
            continue;
        };
        if PENDING.contains(&(a.from.as_str(), a.to.as_str())) {
            pending_seen.insert((a.from.as_str(), a.to.as_str()));
            continue;
        }
        if t >= f {
            let why = if t == f { "the same floor" } else { "a higher floor" };
            wrong.push(format!(
                "{}:{}: {} -> {}: {} (floor {}, {}) may not use {} ({why}, floor {}, {})",
                a.file,
                a.line,
                a.from,
                a.to,
                a.from,
                f + 1,
                FLOORS[f].0,
                a.to,
                t + 1,
                FLOORS[t].0
            ));
        }
    }
    for p in PENDING {
        if !pending_seen.contains(p) {
            wrong.push(format!(
                "PENDING holds {} -> {}, which the code no longer has: take it out of PENDING",
                p.0, p.1
            ));
        }
    }
    assert!(wrong.is_empty(), "{} arrow(s) against the layer order:\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn no_circles_between_top_level_modules() {
    let all = arrows(&src_dir());
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for a in all.iter().filter(|a| !PENDING.contains(&(a.from.as_str(), a.to.as_str()))) {
        graph.entry(&a.from).or_default().insert(&a.to);
    }
    // The way from `from` to `to`, if there is one (breadth first: the shortest).
    let path = |from: &str, to: &str| -> Option<Vec<String>> {
        let mut back: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([from]);
        while let Some(m) = queue.pop_front() {
            if m == to {
                let mut way = vec![to.to_string()];
                let mut at = to;
                while at != from {
                    at = back[at];
                    way.push(at.to_string());
                }
                way.reverse();
                return Some(way);
            }
            for &n in graph.get(m).into_iter().flatten() {
                if n != from && !back.contains_key(n) {
                    back.insert(n, m);
                    queue.push_back(n);
                }
            }
        }
        None
    };
    // Every circle holds an arrow that does not point down the floors: that one is named, once
    // per pair of modules, at its first place in the code, with the way back.
    let (mut circles, mut named) = (Vec::new(), BTreeSet::new());
    for a in all.iter().filter(|a| !PENDING.contains(&(a.from.as_str(), a.to.as_str()))) {
        let down = matches!((floor_of(&a.from), floor_of(&a.to)), (Some(f), Some(t)) if t < f);
        if down || named.contains(&(&a.from, &a.to)) {
            continue;
        }
        if let Some(way) = path(&a.to, &a.from) {
            named.insert((&a.from, &a.to));
            let (file, line, from, to) = (&a.file, a.line, &a.from, &a.to);
            circles.push(format!("{file}:{line}: {from} -> {to} closes a circle ({from} -> {})", way.join(" -> ")));
        }
    }
    assert!(
        circles.is_empty(),
        "{} arrow(s) in circles between top-level modules:\n{}",
        circles.len(),
        circles.join("\n")
    );
}

#[test]
fn the_reader_sees_groups_multi_line_uses_and_paths_but_not_comments_strings_or_tests() {
    let src = r##"
//! Uses [`crate::docs_only`] in a doc comment.
use crate::{alpha, beta::gamma, delta::{x, y}, self as me};
use crate::{
    epsilon::Thing,
    zeta,
};
use crate
    ::eta::Long;
// use crate::commented;
/* crate::blocked /* nested crate::deeper */ */
fn f() -> &'static str {
    let _ = crate::theta::call();
    let _c = '"';
    let _ = super::super::iota::x();
    "crate::in_a_string"
}
const R: &str = r#"crate::raw"#;
macro_rules! m { () => { $crate::kappa::x() } }
pub(crate) fn g() {}
#[cfg(test)]
mod tests {
    use crate::tested;
}
#[cfg(test)]
#[path = "x_tests.rs"]
mod more;
"##;
    let module = vec!["top".to_string(), "inner".to_string()];
    let (uses, tests) = crate_uses(src, &module, &|n| n != "delta");
    let seen: Vec<(usize, &str)> = uses.iter().map(|u| (u.line, u.target.as_str())).collect();
    assert_eq!(
        seen,
        vec![
            (3, "alpha"),
            (3, "beta"),
            (3, "lib"), // `delta` is no top-level module here: an item of lib.rs
            (5, "epsilon"),
            (6, "zeta"),
            (8, "eta"),
            (13, "theta"),
            (15, "iota"),
        ]
    );
    assert_eq!(tests, vec!["x_tests.rs".to_string()]);
}
