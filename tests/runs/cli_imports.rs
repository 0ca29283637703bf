//! The files of `src/cli/` use each other without a circle: a file names a sibling
//! (`super::conn::…`, `use super::{args::PluginArgs, …}`, `crate::cli::follow::…`) only when that
//! sibling does not, through any chain, name it back. Shared helpers live in the file that owns
//! their concern (`discover.rs`, `backend.rs`, `args.rs`, `conn.rs`) below the commands that use
//! them. `mod.rs` (the parent: `Ctx`, the dispatch) is not a sibling; comments and `#[cfg(test)]`
//! modules do not count.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `text` without comments and without its `#[cfg(test)]` tail (od keeps unit tests last).
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The siblings (of `names`) a file's code names.
fn uses(code: &str, me: &str, names: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for prefix in ["super::", "crate::cli::"] {
        let mut rest = code;
        while let Some(at) = rest.find(prefix) {
            rest = &rest[at + prefix.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // `use super::{a, b::c, d::{e, f}}`: the first name of each top-level item.
                let (mut depth, mut item) = (0, String::new());
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            out.insert(std::mem::take(&mut item));
                            continue;
                        }
                        _ => {}
                    }
                    if depth == 0 {
                        item.push(c);
                    }
                }
                out.insert(item);
                continue;
            }
            out.insert(rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect());
        }
    }
    out.into_iter()
        .map(|i| i.trim().split("::").next().unwrap_or("").trim().to_string())
        .filter(|n| names.contains(n) && n != me)
        .collect()
}

/// A circle in `edges`, if any: the files on it, in order, the first repeated at the end.
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == n) {
            let mut c = path[at..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

/// The sibling graph of the `.rs` files `files` (name → text).
fn graph(files: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let names: BTreeSet<String> = files.keys().filter(|n| *n != "mod").cloned().collect();
    names.iter().map(|n| (n.clone(), uses(&code_of(&files[n]), n, &names))).collect()
}

#[test]
fn the_files_of_cli_use_each_other_without_a_circle() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
    let files: BTreeMap<String, String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| (p.file_stem().unwrap().to_string_lossy().to_string(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    let edges = graph(&files);
    assert!(edges.len() > 30, "the files of src/cli were read: {:?}", edges.keys());
    assert!(edges["conn"].contains("autostart"), "the graph sees `super::x::` paths: {:?}", edges["conn"]);
    assert!(edges["run_cmd"].contains("args"), "the graph sees `use super::{{…}}`: {:?}", edges["run_cmd"]);
    if let Some(c) = circle(&edges) {
        panic!("a circle between the files of src/cli: {}", c.join(" -> "));
    }
}

#[test]
fn a_circle_through_a_use_group_is_found_and_comments_and_tests_are_not_uses() {
    let files: BTreeMap<String, String> = [
        ("mod", "mod a; mod b; mod c; pub fn run() { a::x(); }"),
        ("a", "use super::{b::{f, g}, Ctx};\npub fn x() {}"),
        ("b", "// super::a::x() is only a comment\npub fn f() { super::c::h() }"),
        ("c", "pub fn h() { crate::cli::a::x() }\n#[cfg(test)]\nmod tests { use super::super::b; }"),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_string(), t.to_string()))
    .collect();
    let edges = graph(&files);
    assert_eq!(edges["b"], BTreeSet::from(["c".to_string()]), "a comment is not a use");
    assert_eq!(circle(&edges), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    let mut cut = files.clone();
    cut.insert("c".into(), "pub fn h() {}".into());
    assert_eq!(circle(&graph(&cut)), None);
}
