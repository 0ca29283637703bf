//! The README and the book in `docs/` hold together: every relative Markdown link (and image) in
//! `README.md` and `docs/*.md` names a file or folder that exists, and every `#anchor` a heading of
//! its target (GitHub's slug rules: lowercase, punctuation dropped, spaces to `-`, `-1`, `-2` … for
//! repeats). And the README's shell commands are ones the tests run: its `od …` lines match an
//! invocation of a test under `tests/` (`tests/runs/runs_cli.rs` runs the two commands' run and the
//! tour), and the test suite's command line is the one `.ci/run` runs.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// `README.md` and every `docs/*.md`.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The lines of `text` outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        match fence {
            Some(f) if t.starts_with(f) => fence = None,
            Some(_) => {}
            None if t.starts_with("```") || t.starts_with("~~~") => fence = Some(&t[..3]),
            None => out.push((i + 1, line)),
        }
    }
    out
}

/// `line` without its inline code spans (a link shown as code is not a link).
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut parts = line.split('`');
    if let Some(first) = parts.next() {
        out.push_str(first);
    }
    for (i, p) in parts.enumerate() {
        if i % 2 == 1 {
            out.push_str(p);
        }
    }
    out
}

/// GitHub's anchor for a heading's text: inline markup dropped, lowercase, every character but
/// letters, digits, `-`, `_` and spaces dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // A link in a heading reads as its text.
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](").map(|m| open + m) else { break };
        let Some(close) = rest[mid..].find(')').map(|c| mid + c) else { break };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..mid]);
        rest = &rest[close + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown text's headings, repeats numbered as GitHub numbers them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.bytes().take_while(|b| *b == b'#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim());
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 { base.clone() } else { format!("{base}-{n}") });
        *n += 1;
    }
    out
}

/// The targets of a text's inline links and images, `(line, target)`.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose_lines(text) {
        let line = without_code(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push((n, target.trim_matches(|c| c == '<' || c == '>').to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// Every relative link of `files` (under `root`) that names no file, or an anchor its target's
/// headings do not have: `file:line: target — why`.
fn broken_links(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut problems = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(root).unwrap_or(file).display().to_string();
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() { file.clone() } else { file.parent().unwrap().join(path) };
            if !resolved.exists() {
                problems.push(format!("{name}:{line}: {target} — no such file"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if resolved.extension().is_none_or(|x| x != "md") {
                problems.push(format!("{name}:{line}: {target} — an anchor into a file that is not Markdown"));
                continue;
            }
            let headings = anchors(&std::fs::read_to_string(&resolved).unwrap());
            if !headings.contains(anchor) {
                problems.push(format!("{name}:{line}: {target} — no heading with that anchor"));
            }
        }
    }
    problems
}

#[test]
fn every_relative_link_and_anchor_in_the_readme_and_docs_resolves() {
    let root = Path::new(ROOT);
    let files = markdown_files(root);
    assert!(files.len() > 10, "README.md and the book: {files:?}");
    let problems = broken_links(root, &files);
    assert!(problems.is_empty(), "broken links:\n{}", problems.join("\n"));
}

#[test]
fn a_missing_file_or_anchor_is_reported_and_code_is_not_a_link() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir(root.join("docs")).unwrap();
    std::fs::write(
        root.join("README.md"),
        "# Top\n\n## Runs as data: files, forks (§2)\n\nSee [a](docs/a.md#the-part), [b](docs/gone.md), \
         [c](docs/a.md#nowhere), [d](#runs-as-data-files-forks-2), [e](https://example.com/x#y) \
         and `[f](docs/missing.md)`.\n\n```sh\n[g](docs/also-missing.md)\n```\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/a.md"),
        "# The part\n\n## Again\n\n## Again\n\n[up](../README.md#top) [r](#again-1)\n",
    )
    .unwrap();
    let problems = broken_links(root, &markdown_files(root));
    assert_eq!(
        problems,
        ["README.md:5: docs/gone.md — no such file", "README.md:5: docs/a.md#nowhere — no heading with that anchor",],
        "only the broken ones, with file and line"
    );
}

#[test]
fn anchors_follow_githubs_slug_rules() {
    let text = "# `od mcp`\n## Connectors (spec §5, §9, §10.3.1)\n## Again\n## Again\n## A [link](x.md) here\n\
                ```\n# not a heading\n```\n#nospace\n";
    let got: Vec<String> = anchors(text).into_iter().collect();
    assert_eq!(got, ["a-link-here", "again", "again-1", "connectors-spec-5-9-1031", "od-mcp"]);
}

/// A command line's words as the shell splits them (double and single quotes; no expansions),
/// without a trailing `# comment`.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut quote, mut any) = (None::<char>, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => (quote, any) = (Some(c), true),
            (None, '#') if !any => break,
            (None, c) if c.is_whitespace() => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// The README's fenced `sh`/`bash` blocks, each with the heading of its section.
fn shell_blocks(readme: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut block: Option<Vec<String>> = None;
    for line in readme.lines() {
        match &mut block {
            Some(b) if line.trim_start().starts_with("```") => {
                out.push((section.clone(), std::mem::take(b)));
                block = None;
            }
            Some(b) => b.push(line.to_string()),
            None if line.starts_with("```sh") || line.starts_with("```bash") => block = Some(Vec::new()),
            None if line.starts_with("## ") => section = line[3..].trim().to_string(),
            None => {}
        }
    }
    out
}

/// One argument of an `od` invocation in a test: a string literal, or a value computed there.
#[derive(Debug, PartialEq)]
enum Arg {
    Lit(String),
    Computed,
}

/// The argument lists the tests pass to `od`: every `&[…]` array literal under `tests/` whose
/// first element is a string literal (`&["run", "info", &run_id, "--json"]`, and multi-line
/// constants such as runs_cli.rs's `QUICKSTART`).
fn test_invocations(dir: &Path, out: &mut Vec<(String, Vec<Arg>)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            test_invocations(&p, out);
            continue;
        }
        if p.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("&[") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(']') else { break };
            let inner = &rest[..end];
            if inner.contains('[') || !inner.trim_start().starts_with('"') {
                continue;
            }
            let args = split_elements(inner);
            out.push((p.display().to_string(), args));
        }
    }
}

/// The elements of an array literal's inside: string literals (no escapes beyond `\"`) or
/// anything else.
fn split_elements(inner: &str) -> Vec<Arg> {
    let mut out = Vec::new();
    let mut chars = inner.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            chars.next();
        }
        match chars.peek() {
            None => return out,
            Some('"') => {
                chars.next();
                let mut s = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => s.extend(chars.next()),
                        '"' => break,
                        c => s.push(c),
                    }
                }
                out.push(Arg::Lit(s));
            }
            Some(_) => {
                while chars.peek().is_some_and(|c| *c != ',') {
                    chars.next();
                }
                out.push(Arg::Computed);
            }
        }
    }
}

/// Whether README's `words` (after `od`) are what a test passes: the same literals, a `<placeholder>`
/// where the test passes a value it computed (or any literal); `--json`, which the tests add to
/// read the output, left out on both sides.
fn matches(readme: &[String], test: &[Arg]) -> bool {
    let test: Vec<&Arg> = test.iter().filter(|a| **a != Arg::Lit("--json".into())).collect();
    let readme: Vec<&String> = readme.iter().filter(|w| *w != "--json").collect();
    readme.len() == test.len()
        && readme.iter().zip(&test).all(|(w, a)| match a {
            Arg::Lit(l) => w == &l || (w.starts_with('<') && w.ends_with('>')),
            Arg::Computed => w.starts_with('<') && w.ends_with('>'),
        })
}

#[test]
fn the_readmes_commands_are_the_ones_the_tests_and_ci_run() {
    let root = Path::new(ROOT);
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut invocations = Vec::new();
    test_invocations(&root.join("tests"), &mut invocations);
    let blocks = shell_blocks(&readme);
    let two = blocks.iter().find(|(s, _)| s == "Two commands").expect("a `## Two commands` section with an sh block");
    assert_eq!(two.1.len(), 2, "the two commands: {:?}", two.1);
    let mut od_lines = 0;
    for (section, lines) in &blocks {
        for line in lines {
            let w = words(line);
            if w.first().map(String::as_str) != Some("od") {
                continue;
            }
            od_lines += 1;
            let found = invocations.iter().find(|(_, args)| matches(&w[1..], args));
            assert!(found.is_some(), "README ({section}): no test runs `{}`", line.trim());
        }
    }
    assert!(od_lines >= 8, "the README's od commands were read: {od_lines}");
    // The run of the two commands is the one runs_cli.rs's README test runs, word for word.
    let run = words(&two.1[0]);
    let quickstart = invocations
        .iter()
        .filter(|(file, _)| file.ends_with("runs_cli.rs"))
        .find(|(_, args)| matches(&run[1..], args) && args.iter().all(|a| matches!(a, Arg::Lit(_))));
    assert!(quickstart.is_some(), "runs_cli.rs's QUICKSTART is `{}`", two.1[0]);
    // The suite's command line: each of its steps is one .ci/run runs.
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    let ci_steps: Vec<Vec<String>> = ci.lines().map(words).collect();
    let suite = &two.1[1];
    for step in suite.split("&&") {
        let step = words(step);
        assert!(
            ci_steps.iter().any(|c| c.windows(step.len()).any(|win| win == step.as_slice())),
            "README's test command step `{}` is not in .ci/run",
            step.join(" ")
        );
    }
}
