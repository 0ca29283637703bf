//! The first-party plugins embedded in `od` (`od::plugins::bundled`): every one materializes into
//! a folder that loads and passes `doctor` without a single diagnostic, ids and kinds match their
//! folders and manifests, the atom plugins are exactly the bundled atoms of the vocabulary, the
//! scenario pipelines are the reference ones, and `bundled()` embeds every file under `bundled/`.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use od::plugins::bundled::{bundled, find, materialize, BundledPlugin};
use od::plugins::until::{parse_until, Literal};
use od::plugins::vocab::{is_known_atom, signal_kind, AtomSource, ATOMS};
use od::plugins::{doctor, load_folder, LoadedPlugin};
use serde_json::Value;

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/bundled");

/// Materializes `p` into a fresh folder named after its id and loads it.
fn load(p: &BundledPlugin) -> (tempfile::TempDir, LoadedPlugin) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(p.id);
    materialize(p, &dir).unwrap();
    let report = doctor(&dir);
    assert!(report.ok, "{}: doctor failed: {:#?}", p.id, report.diagnostics);
    assert!(report.diagnostics.is_empty(), "{}: doctor reported diagnostics: {:#?}", p.id, report.diagnostics);
    let loaded = load_folder(&dir).unwrap_or_else(|e| panic!("{}: {e}", p.id));
    assert!(loaded.diagnostics.is_empty(), "{}: warnings: {:#?}", p.id, loaded.diagnostics);
    assert_eq!((report.id.as_deref(), report.version.as_deref()), (Some(p.id), Some(loaded.version.as_str())));
    (tmp, loaded)
}

fn strs(value: &Value) -> Vec<&str> {
    value.as_array().map_or(Vec::new(), |a| a.iter().filter_map(Value::as_str).collect())
}

#[test]
fn every_bundled_plugin_loads_without_diagnostics() {
    assert!(!bundled().is_empty());
    for p in bundled() {
        let (_tmp, loaded) = load(p);
        let m = &loaded.manifest;
        assert_eq!(loaded.id, p.id);
        assert_eq!(m["name"], p.id);
        assert_eq!(m["od"]["kind"], p.kind, "{}: od.kind", p.id);
        assert_eq!(loaded.version, "1.0.0", "{}", p.id);
        assert_eq!(m["specVersion"], "1.0.0", "{}", p.id);
        let published = m["publishedAt"].as_str().unwrap_or_else(|| panic!("{}: publishedAt", p.id));
        assert!(published.len() == 20 && published.ends_with('Z') && published.as_bytes()[10] == b'T', "{published}");
        for key in ["title", "description"] {
            assert!(m[key].as_str().is_some_and(|s| !s.trim().is_empty()), "{}: {key}", p.id);
        }
        let caps = strs(&m["od"]["capabilities"]);
        assert!(caps.contains(&"prompt:inject"), "{}: {caps:?}", p.id);
        let files: Vec<&str> = p.files.iter().map(|(rel, _)| *rel).collect();
        assert_eq!(loaded.files, files, "{}: files read back", p.id);
        let skill = p.files.iter().find(|(rel, _)| *rel == "SKILL.md").map(|(_, c)| *c).unwrap();
        assert!(skill.starts_with(&format!("---\nname: {}\n", p.id)), "{}: SKILL.md frontmatter", p.id);
        assert!(skill.contains("\n# "), "{}: SKILL.md has a heading", p.id);
    }
}

#[test]
fn list_is_sorted_unique_and_findable() {
    let keys: Vec<(&str, &str)> = bundled().iter().map(|p| (p.kind, p.id)).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(keys, sorted, "bundled() must be sorted by kind then id, without duplicates");
    for p in bundled() {
        assert!(matches!(p.kind, "atom" | "scenario"), "{}: kind {}", p.id, p.kind);
        assert_eq!(find(p.id), Some(p));
        let rels: Vec<&str> = p.files.iter().map(|(rel, _)| *rel).collect();
        let mut sorted = rels.clone();
        sorted.sort();
        assert_eq!(rels, sorted, "{}: files sorted by path", p.id);
    }
    assert_eq!(find("no-such-plugin"), None);
}

#[test]
fn bundled_covers_every_folder_and_file_under_bundled() {
    fn files(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) {
        for entry in fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let name = entry.file_name().into_string().unwrap();
            let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
            if entry.file_type().unwrap().is_dir() {
                files(&entry.path(), &rel, out);
            } else {
                out.insert(rel);
            }
        }
    }
    let mut on_disk = BTreeSet::new();
    for entry in fs::read_dir(SOURCE).unwrap().map(Result::unwrap) {
        let group = entry.file_name().into_string().unwrap();
        assert!(entry.file_type().unwrap().is_dir(), "bundled/{group} must be a folder");
        let kind = match group.as_str() {
            "atoms" => "atom",
            "scenarios" => "scenario",
            other => panic!("bundled/{other}: unknown group (expected atoms or scenarios)"),
        };
        for plugin in fs::read_dir(entry.path()).unwrap().map(Result::unwrap) {
            let id = plugin.file_name().into_string().unwrap();
            assert!(plugin.file_type().unwrap().is_dir(), "bundled/{group}/{id} must be a folder");
            let p = find(&id).unwrap_or_else(|| panic!("bundled/{group}/{id} has no entry in bundled()"));
            assert_eq!(p.kind, kind, "bundled/{group}/{id}");
            let mut disk_files = BTreeSet::new();
            files(&plugin.path(), "", &mut disk_files);
            let embedded: BTreeSet<String> = p.files.iter().map(|(rel, _)| rel.to_string()).collect();
            assert_eq!(embedded, disk_files, "bundled/{group}/{id}: embedded files differ from the folder");
            for (rel, contents) in p.files {
                let disk = fs::read_to_string(plugin.path().join(rel)).unwrap();
                assert_eq!(*contents, disk, "bundled/{group}/{id}/{rel}");
            }
            on_disk.insert((kind, id));
        }
    }
    let embedded: BTreeSet<(&str, String)> = bundled().iter().map(|p| (p.kind, p.id.to_string())).collect();
    assert_eq!(embedded, on_disk, "bundled() and bundled/ disagree");
}

#[test]
fn atom_plugins_are_exactly_the_bundled_atoms_of_the_vocabulary() {
    let vocab: BTreeSet<&str> =
        ATOMS.iter().filter(|(_, s)| *s == AtomSource::BundledPlugin).map(|(id, _)| *id).collect();
    let plugins: BTreeSet<&str> = bundled().iter().filter(|p| p.kind == "atom").map(|p| p.id).collect();
    assert_eq!(plugins.len(), 13);
    assert_eq!(plugins, vocab);
}

#[test]
fn atoms_declare_the_signals_and_surfaces_they_use() {
    let expected_signals: &[(&str, &[&str])] = &[
        ("build-test", &["build.passing", "tests.passing"]),
        ("critique-theater", &["critique.score"]),
        ("diff-review", &["user.confirmed"]),
    ];
    for p in bundled().iter().filter(|p| p.kind == "atom") {
        let (_tmp, loaded) = load(p);
        let declared = strs(&loaded.manifest["od"]["atom"]["untilSignals"]);
        let expected = expected_signals.iter().find(|(id, _)| *id == p.id).map_or(&[][..], |(_, s)| *s);
        assert_eq!(declared, expected, "{}: od.atom.untilSignals", p.id);
        let body = p.files.iter().find(|(rel, _)| *rel == "SKILL.md").unwrap().1;
        for signal in declared {
            assert!(signal_kind(signal).is_some(), "{}: {signal} is not an until signal", p.id);
            assert!(body.contains(&format!("signal: {signal}=")), "{}: SKILL.md never emits {signal}", p.id);
        }
    }
    let (_tmp, form) = load(find("discovery-question-form").unwrap());
    let surface = &form.manifest["od"]["genui"]["surfaces"][0];
    assert_eq!((surface["kind"].as_str(), surface["persist"].as_str()), (Some("form"), Some("conversation")));
    assert!(strs(&form.manifest["od"]["capabilities"]).contains(&"genui:form"));
    let (_tmp, picker) = load(find("direction-picker").unwrap());
    assert_eq!(picker.manifest["od"]["genui"]["surfaces"][0]["kind"], "choice");
}

/// `(stage id, atoms, until)` — `until` set means `repeat: true`.
type Stage = (&'static str, &'static [&'static str], Option<&'static str>);

const CRITIQUE: Stage = ("critique", &["critique-theater"], Some("critique.score>=4 || iterations>=3"));
const TUNE: &[Stage] = &[
    ("direction", &["direction-picker"], None),
    ("patch", &["patch-edit"], None),
    CRITIQUE,
    ("handoff", &["handoff"], None),
];

/// The reference scenarios (contracts §10): id, taskKind, stages.
const SCENARIOS: &[(&str, &str, &[Stage])] = &[
    (
        "od-code-migration",
        "code-migration",
        &[
            ("import", &["code-import"], None),
            ("tokens", &["design-extract", "token-map"], None),
            ("plan", &["rewrite-plan"], None),
            ("verify", &["patch-edit", "build-test"], Some("(build.passing && tests.passing) || iterations>=8")),
            ("review", &["diff-review"], None),
            ("handoff", &["handoff"], None),
        ],
    ),
    (
        "od-default",
        "new-generation",
        &[
            ("discovery", &["discovery-question-form"], None),
            ("plan", &["direction-picker", "todo-write"], None),
            ("generate", &["file-write", "media-image", "media-video", "media-audio", "live-artifact"], None),
            CRITIQUE,
        ],
    ),
    ("od-design-refine", "tune-collab", TUNE),
    (
        "od-figma-migration",
        "figma-migration",
        &[
            ("extract", &["figma-extract"], None),
            ("tokens", &["token-map"], None),
            ("generate", &["file-write", "live-artifact"], None),
            CRITIQUE,
        ],
    ),
    (
        "od-media-generation",
        "new-generation",
        &[
            ("discovery", &["discovery-question-form"], None),
            ("plan", &["todo-write"], None),
            ("generate", &["media-image", "media-video", "media-audio", "live-artifact"], None),
            CRITIQUE,
        ],
    ),
    (
        "od-new-generation",
        "new-generation",
        &[
            ("discovery", &["discovery-question-form"], None),
            ("plan", &["direction-picker", "todo-write"], None),
            ("generate", &["file-write", "live-artifact"], None),
            CRITIQUE,
        ],
    ),
    ("od-tune-collab", "tune-collab", TUNE),
];

#[test]
fn scenario_pipelines_are_the_reference_ones() {
    let ids: Vec<&str> = bundled().iter().filter(|p| p.kind == "scenario").map(|p| p.id).collect();
    let expected: Vec<&str> = SCENARIOS.iter().map(|(id, _, _)| *id).collect();
    assert_eq!(ids, expected);
    for (id, task_kind, stages) in SCENARIOS {
        let (_tmp, loaded) = load(find(id).unwrap());
        let od = &loaded.manifest["od"];
        assert_eq!(od["taskKind"], *task_kind, "{id}: taskKind");
        let actual = od["pipeline"]["stages"].as_array().unwrap_or_else(|| panic!("{id}: no stages"));
        assert_eq!(actual.len(), stages.len(), "{id}: stage count");
        for (stage, (sid, atoms, until)) in actual.iter().zip(stages.iter()) {
            assert_eq!(stage["id"], *sid, "{id}");
            assert_eq!(strs(&stage["atoms"]), *atoms, "{id}/{sid}: atoms");
            assert!(strs(&stage["atoms"]).iter().all(|a| is_known_atom(a)), "{id}/{sid}");
            assert_eq!(stage["until"].as_str(), *until, "{id}/{sid}: until");
            assert_eq!(stage["repeat"].as_bool().unwrap_or(false), until.is_some(), "{id}/{sid}: repeat");
        }
        // Every `{{var}}` of the brief names a declared input.
        let inputs: Vec<&str> = od["inputs"].as_array().unwrap().iter().filter_map(|i| i["name"].as_str()).collect();
        let query = od["useCase"]["query"]["en"].as_str().unwrap_or_else(|| panic!("{id}: useCase.query.en"));
        for var in query.split("{{").skip(1).map(|rest| rest.split("}}").next().unwrap().trim()) {
            assert!(inputs.contains(&var), "{id}: {{{{{var}}}}} is not an input ({inputs:?})");
        }
    }
}

#[test]
fn code_migration_verify_loop_converges_on_build_and_tests() {
    let (_tmp, loaded) = load(find("od-code-migration").unwrap());
    let verify = &loaded.manifest["od"]["pipeline"]["stages"][3];
    assert_eq!(verify["id"], "verify");
    assert_eq!(verify["repeat"], true);
    assert_eq!(verify["until"], "(build.passing && tests.passing) || iterations>=8");
    let until = parse_until(verify["until"].as_str().unwrap()).unwrap();
    let eval = |build: bool, tests: bool, iterations: f64| {
        until.evaluate(|s| match s {
            "build.passing" => Some(Literal::Bool(build)),
            "tests.passing" => Some(Literal::Bool(tests)),
            "iterations" => Some(Literal::Number(iterations)),
            _ => None,
        })
    };
    assert!(eval(true, true, 1.0));
    assert!(!eval(true, false, 7.0));
    assert!(eval(false, false, 8.0));
    let (_tmp, figma) = load(find("od-figma-migration").unwrap());
    assert_eq!(figma.manifest["od"]["connectors"]["required"][0]["id"], "figma");
    assert!(strs(&figma.manifest["od"]["capabilities"]).contains(&"connector:figma"));
    let (_tmp, default) = load(find("od-default").unwrap());
    assert_eq!(default.manifest["od"]["hidden"], true);
}

#[test]
fn materialize_overwrites_and_keeps_other_files() {
    let tmp = tempfile::tempdir().unwrap();
    let p = find("todo-write").unwrap();
    let dir = tmp.path().join("nested/todo-write");
    materialize(p, &dir).unwrap();
    fs::write(dir.join("SKILL.md"), "stale").unwrap();
    fs::write(dir.join("notes.txt"), "kept").unwrap();
    materialize(p, &dir).unwrap();
    assert_eq!(fs::read_to_string(dir.join("SKILL.md")).unwrap(), p.files[0].1);
    assert_eq!(fs::read_to_string(dir.join("notes.txt")).unwrap(), "kept");
    let bad = BundledPlugin { id: "bad", kind: "atom", files: &[("../escape.md", "x")] };
    let err = materialize(&bad, &tmp.path().join("bad")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(!tmp.path().join("escape.md").exists());
}
