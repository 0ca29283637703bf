//! Loading plugin folders (`od::plugins`): every folder of the project's own small corpus
//! (`tests/fixtures/plugins/`: atoms, a scenario, SKILL.md-only skills, a sidecar beside a SKILL.md
//! and a Claude plugin, a Claude-only plugin, a metadata-only design system, a loose frontmatter,
//! two that must fail) loads or fails with diagnostics naming the file; generated folders the loader
//! has never seen get the right diagnostic codes. The real-world corpora are in
//! `conformance_plugin_load.rs`; the no-panic property tests in `plugin_load_props.rs`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use od::plugins::{doctor, load_folder, Diagnostic, LoadedPlugin, Severity, MAX_FOLDER_BYTES, MAX_FOLDER_ENTRIES};
use serde_json::{json, Value};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/plugins");
const MANIFESTS: [&str; 3] = ["SKILL.md", "open-design.json", ".claude-plugin/plugin.json"];

fn corpus_folders() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        if MANIFESTS.iter().any(|f| dir.join(f).is_file()) {
            out.push(dir.to_path_buf());
        }
        for entry in fs::read_dir(dir).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), out);
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new(FIXTURES), &mut out);
    out.sort();
    out
}

fn fixture(rel: &str) -> LoadedPlugin {
    let dir = Path::new(FIXTURES).join(rel);
    load_folder(&dir).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn codes(diags: &[Diagnostic]) -> Vec<(&str, Severity, &str)> {
    diags.iter().map(|d| (d.code.as_str(), d.severity, d.file.as_str())).collect()
}

#[test]
fn every_corpus_folder_loads_or_fails_naming_the_file() {
    let folders = corpus_folders();
    // 3 atoms, 1 scenario, 3 skills, 1 community, 1 claude, 1 design system, 1 example, 2 failing.
    assert_eq!(folders.len(), 13, "fixture discovery changed");
    let mut failed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut digests = Vec::new();
    for dir in &folders {
        let rel = dir.strip_prefix(FIXTURES).unwrap().display().to_string();
        let report = doctor(dir);
        match load_folder(dir) {
            Ok(p) => {
                assert!(report.ok && p.diagnostics.iter().all(|d| d.severity == Severity::Warning), "{rel}");
                assert_eq!((report.id.as_deref(), report.version.as_deref()), (Some(&*p.id), Some(&*p.version)));
                assert_eq!(report.diagnostics, p.diagnostics, "{rel}");
                assert_eq!(p.manifest["name"], p.id.as_str());
                assert!(p.manifest["specVersion"].is_string());
                assert!(p.files.windows(2).all(|w| w[0] < w[1]), "{rel}: files sorted and unique");
                assert!(MANIFESTS.iter().filter(|m| dir.join(m).is_file()).all(|m| p.files.contains(&m.to_string())));
                assert!(p.source_digest.len() == 64 && p.source_digest.bytes().all(|b| b.is_ascii_hexdigit()));
                digests.push(p.source_digest);
            }
            Err(e) => {
                assert!(!report.ok && report.diagnostics == e.diagnostics, "{rel}");
                let errors: Vec<&Diagnostic> = e.diagnostics.iter().filter(|d| d.is_error()).collect();
                assert!(!errors.is_empty());
                for d in &e.diagnostics {
                    assert!(d.file == "." || dir.join(&d.file).exists(), "{rel}: {d:?} names a file that exists");
                    assert!(!d.message.is_empty());
                }
                let shown = e.to_string();
                assert!(errors.iter().all(|d| shown.contains(&d.file) && shown.contains(&d.code)), "{shown}");
                let mut c: Vec<String> = errors.iter().map(|d| format!("{}@{}", d.code, d.file)).collect();
                c.dedup();
                failed.insert(rel, c);
            }
        }
    }
    let expected: BTreeMap<String, Vec<String>> = [
        ("failing/path-escape", vec!["path-escape@open-design.json".to_string()]),
        ("failing/unknown-atom", vec!["atom.unknown@open-design.json".to_string()]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(failed, expected);
    let n = digests.len();
    assert_eq!(n, folders.len() - 2);
    digests.sort();
    digests.dedup();
    assert_eq!(digests.len(), n, "every folder has its own digest");
}

#[test]
fn atoms_load_as_atoms_of_the_catalog() {
    let mut ids: Vec<String> = Vec::new();
    for entry in fs::read_dir(Path::new(FIXTURES).join("atoms")).unwrap().flatten() {
        let p = load_folder(&entry.path()).unwrap();
        assert_eq!(p.manifest["od"]["kind"], "atom");
        assert_eq!(p.id, entry.file_name().to_str().unwrap());
        assert_eq!(p.files, ["SKILL.md", "open-design.json"]);
        assert_eq!(p.manifest["compat"]["agentSkills"], json!([{"path": "./SKILL.md"}]));
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        ids.push(p.id);
    }
    ids.sort();
    assert_eq!(ids, ["critique-theater", "handoff", "todo-write"]);
    let catalog: Vec<&str> = od::plugins::vocab::ATOMS
        .iter()
        .filter(|(_, s)| *s == od::plugins::vocab::AtomSource::BundledPlugin)
        .map(|(id, _)| *id)
        .collect();
    assert!(ids.iter().all(|id| catalog.contains(&id.as_str())));
}

#[test]
fn scenarios_keep_their_pipelines() {
    let d = fixture("scenarios/tea-launch");
    let stages = d.manifest["od"]["pipeline"]["stages"].as_array().unwrap();
    let ids: Vec<&str> = stages.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["discovery", "plan", "generate", "critique"]);
    assert_eq!(stages[1]["atoms"], json!(["direction-picker", "todo-write"]));
    assert_eq!(stages[3]["repeat"], true);
    assert_eq!(stages[3]["until"], "critique.score>=4 || iterations>=3");
    assert_eq!(d.manifest["od"]["hidden"], true, "unknown sidecar fields are kept");
    let warned: Vec<&str> = d.diagnostics.iter().filter_map(|w| w.pointer.as_deref()).collect();
    assert_eq!(warned, ["/od/capabilities/1", "/od/capabilities/3"], "media:* are not v1 caps");
}

#[test]
fn skill_md_only_folders_get_their_manifest_from_the_frontmatter() {
    let s = fixture("skills/note-taker");
    assert_eq!((s.id.as_str(), s.version.as_str()), ("note-taker", "0.0.0"));
    assert_eq!(s.manifest["title"], "Note Taker");
    assert_eq!(s.manifest["od"]["kind"], "skill");
    assert_eq!(s.manifest["od"]["taskKind"], "new-generation");
    assert_eq!(s.manifest["specVersion"], "1.0.0");
    assert!(s.manifest["description"].as_str().unwrap().starts_with("Turns a meeting transcript"));
    let g = fixture("skills/slide-story");
    assert_eq!(g.id, "launch-deck", "the frontmatter name wins over the folder name");
    assert_eq!(g.manifest["title"], "Tell a Launch Story in Ten Slides");
    assert_eq!(g.manifest["title"], g.manifest["title_i18n"]["en"]);
    assert_eq!(g.manifest["title_i18n"]["zh-CN"], "用十页讲一个发布故事");
    assert_eq!(g.manifest["od"]["capabilities"], json!(["fs:write"]), "legacy file_write maps to fs:write");
    assert_eq!(g.manifest["od"]["context"]["designSystem"]["sections"][0], "color");
    assert_eq!(g.manifest["od"]["outputs"], json!({"primary": "deck.html", "secondary": ["notes.md"]}));
    let c = fixture("skills/recipe-card");
    assert_eq!(c.manifest["od"]["preview"], json!({"type": "html", "entry": "card.html"}));
    assert_eq!(c.manifest["od"]["inputs"][2], json!({"name": "vegetarian", "type": "boolean", "default": true}));
    assert_eq!(c.manifest["od"]["outputs"], json!({"primary": "card.html"}));
    assert!(c.manifest["od"].get("context").is_none(), "design_system.requires: false binds nothing");
}

#[test]
fn sidecar_wins_and_adapters_fill_gaps() {
    let p = fixture("community/import-check");
    assert_eq!(p.manifest["title"], "Import Check");
    assert_eq!(p.version, "0.1.0", "the sidecar's version, not the Claude manifest's");
    assert!(p.manifest["description"].as_str().unwrap().contains("folder, archive and marketplace"));
    assert_eq!(p.manifest["compat"]["agentSkills"], json!([{"path": "./SKILL.md"}]));
    assert_eq!(p.manifest["compat"]["claudePlugins"], json!([{"path": "./.claude-plugin/plugin.json"}]));
    let claude = fixture("claude/tea-tools");
    assert_eq!((claude.id.as_str(), claude.version.as_str()), ("tea-tools", "1.2.0"));
    assert_eq!(claude.manifest["title"], "Tea Tools");
    assert_eq!(claude.files, [".claude-plugin/plugin.json"]);
    let ds = fixture("design-systems/harbor");
    assert_eq!(codes(&ds.diagnostics), [("metadata-only", Severity::Warning, "open-design.json")]);
    assert_eq!(ds.manifest["od"]["context"]["designSystem"], json!({"ref": "harbor", "primary": true}));
    let loose = fixture("examples/loose-frontmatter");
    assert_eq!(codes(&loose.diagnostics), [("frontmatter-invalid", Severity::Warning, "SKILL.md")]);
    assert!(loose.diagnostics[0].message.contains("line 6"), "{}", loose.diagnostics[0].message);
}

// ---- generated folders -------------------------------------------------------------------------

fn folder(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, bytes) in files {
        let path = dir.path().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }
    dir
}

fn sidecar(od: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"specVersion": "1.0.0", "name": "gen", "version": "1.0.0", "od": od})).unwrap()
}

const SKILL: &[u8] = b"---\nname: gen\ndescription: A generated skill.\n---\n# Gen\n";

/// An expected diagnostic: code, severity, file, pointer (`None`: any).
type Expected<'a> = (&'a str, Severity, &'a str, Option<&'a str>);

/// Asserts `expected` are all reported and whether the folder loads.
fn expect(dir: &Path, loads: bool, expected: &[Expected]) -> Vec<Diagnostic> {
    let report = doctor(dir);
    assert_eq!(load_folder(dir).is_ok(), loads, "{:#?}", report.diagnostics);
    assert_eq!(report.ok, loads);
    for (code, severity, file, pointer) in expected {
        let hit = report.diagnostics.iter().any(|d| {
            d.code == *code
                && d.severity == *severity
                && d.file == *file
                && (pointer.is_none() || d.pointer.as_deref() == *pointer)
        });
        assert!(hit, "missing {code} {severity:?} {file} {pointer:?} in {:#?}", report.diagnostics);
    }
    report.diagnostics
}

use Severity::{Error as E, Warning as W};

#[test]
fn generated_manifests_get_the_right_codes() {
    let repeat =
        sidecar(json!({"pipeline": {"stages": [{"id": "loop", "atoms": ["critique-theater"], "repeat": true}]}}));
    let bad_until = sidecar(
        json!({"pipeline": {"stages": [{"id": "s", "atoms": [], "repeat": true, "until": "critique.score >> 4"}]}}),
    );
    let atom = sidecar(
        json!({"pipeline": {"stages": [{"id": "s", "atoms": ["todo-write", "teleport"]}, {"id": "s", "atoms": []}]}}),
    );
    let surface = |oauth: Value| json!({"genui": {"surfaces": [{"id": "auth", "kind": "oauth-prompt", "persist": "project", "oauth": oauth}]}});
    let oauth = sidecar(surface(json!({"route": "connector", "connectorId": "figma"})));
    let mut declared = surface(json!({"route": "connector", "connectorId": "figma"}));
    declared["connectors"] = json!({"required": [{"id": "figma", "tools": []}]});
    let mcp = sidecar(surface(json!({"route": "mcp", "mcpServerId": "linear"})));
    let bare = sidecar(json!({"genui": {"surfaces": [{"id": "auth", "kind": "oauth-prompt", "persist": "project"}]}}));
    let misc = sidecar(json!({"capabilities": ["fs:read", "teleport"], "preview": {"entry": "../../etc/passwd"},
        "genui": {"surfaces": [{"id": "c", "kind": "form", "persist": "run", "component": {"path": "ui.tsx"}}]}}));
    let cases: Vec<(&str, Vec<u8>, bool, Vec<Expected>)> = vec![
        (
            "repeat",
            repeat,
            false,
            vec![("pipeline.until-missing", E, "open-design.json", Some("/od/pipeline/stages/0/repeat"))],
        ),
        (
            "until",
            bad_until,
            false,
            vec![("pipeline.until-invalid", E, "open-design.json", Some("/od/pipeline/stages/0/until"))],
        ),
        (
            "atom",
            atom,
            false,
            vec![
                ("atom.unknown", E, "open-design.json", Some("/od/pipeline/stages/0/atoms/1")),
                ("pipeline.duplicate-stage", E, "open-design.json", Some("/od/pipeline/stages/1/id")),
            ],
        ),
        (
            "oauth",
            oauth,
            false,
            vec![("genui.oauth-undeclared", E, "open-design.json", Some("/od/genui/surfaces/0/oauth/connectorId"))],
        ),
        ("declared", sidecar(declared), true, vec![]),
        (
            "mcp",
            mcp,
            false,
            vec![("genui.oauth-undeclared", E, "open-design.json", Some("/od/genui/surfaces/0/oauth/mcpServerId"))],
        ),
        ("bare", bare, false, vec![("genui.oauth-undeclared", E, "open-design.json", Some("/od/genui/surfaces/0"))]),
        (
            "misc",
            misc,
            false,
            vec![
                ("capability.unknown", W, "open-design.json", Some("/od/capabilities/1")),
                ("path-escape", E, "open-design.json", Some("/od/preview/entry")),
                ("genui.component-capability", E, "open-design.json", Some("/od/genui/surfaces/0/component")),
            ],
        ),
        ("json", b"{\"name\": ".to_vec(), false, vec![("manifest-invalid-json", E, "open-design.json", None)]),
        ("array", b"[1]".to_vec(), false, vec![("manifest-not-object", E, "open-design.json", None)]),
        ("deep", "[".repeat(100_000).into_bytes(), false, vec![("manifest-invalid-json", E, "open-design.json", None)]),
        (
            "schema",
            br#"{"name": "Bad Name", "version": 1}"#.to_vec(),
            false,
            vec![
                ("schema-violation", E, "open-design.json", Some("/name")),
                ("schema-violation", E, "open-design.json", Some("/version")),
            ],
        ),
    ];
    for (name, bytes, loads, expected) in cases {
        eprintln!("case {name}");
        let dir = folder(&[("SKILL.md", SKILL), ("open-design.json", &bytes)]);
        expect(dir.path(), loads, &expected);
    }
    let until = doctor(
        folder(&[(
            "open-design.json",
            &sidecar(json!({"pipeline": {"stages": [
        {"id": "s", "atoms": [], "until": "iterations >= 3 && foo"}]}})),
        )])
        .path(),
    );
    assert!(until.diagnostics.iter().any(|d| d.message.contains("column 20") && d.message.contains("unknown signal")));
}

#[test]
fn generated_skill_md_cases() {
    let bad_yaml = b"---\nname: gen\ndescription: broken: yaml\n---\nbody\n";
    let d = expect(folder(&[("SKILL.md", bad_yaml)]).path(), false, &[("frontmatter-invalid", E, "SKILL.md", None)]);
    assert!(d[0].message.contains("line 3"), "{}", d[0].message);
    let with_sidecar = folder(&[("SKILL.md", bad_yaml), ("open-design.json", &sidecar(json!({})))]);
    expect(with_sidecar.path(), true, &[("frontmatter-invalid", W, "SKILL.md", None)]);
    expect(folder(&[("SKILL.md", b"---\nname: x\n")]).path(), false, &[("frontmatter-invalid", E, "SKILL.md", None)]);
    expect(folder(&[("SKILL.md", b"\xff\xfe---\n")]).path(), false, &[("invalid-utf8", E, "SKILL.md", None)]);
    expect(folder(&[("SKILL.md", b"# Just a title\n")]).path(), true, &[("frontmatter-missing", W, "SKILL.md", None)]);
    let upper = b"---\nname: Bad Name\n---\n";
    expect(folder(&[("SKILL.md", upper)]).path(), false, &[("schema-violation", E, "SKILL.md", Some("/name"))]);
    let inputs = b"---\nname: gen\nod:\n  inputs:\n    - name: c\n      type: colour\n  parameters: [{name: p}]\n---\n";
    expect(
        folder(&[("SKILL.md", inputs)]).path(),
        true,
        &[
            ("input-type-unmapped", W, "SKILL.md", Some("od.inputs[0].type")),
            ("parameters-unmapped", W, "SKILL.md", Some("od.parameters")),
        ],
    );
    // CRLF and a BOM give the manifest the LF file gives.
    let lf = "---\nname: gen\nen_name: Gen\ndescription: |\n  Line one.\n  Line two.\nod:\n  mode: deck\n  craft:\n    requires: [color]\n---\n# Gen\n";
    let crlf = format!("\u{feff}{}", lf.replace('\n', "\r\n"));
    let a = load_folder(folder(&[("SKILL.md", lf.as_bytes())]).path()).unwrap();
    let b = load_folder(folder(&[("SKILL.md", crlf.as_bytes())]).path()).unwrap();
    assert_eq!(a.manifest, b.manifest);
    assert_eq!(a.manifest["description"], "Line one.\nLine two.");
    assert_eq!(a.manifest["od"]["context"]["craft"], json!(["color"]));
    assert_ne!(a.source_digest, b.source_digest, "the digest is over the bytes");
}

#[test]
fn generated_folder_shapes() {
    let empty = tempfile::tempdir().unwrap();
    expect(empty.path(), false, &[("no-manifest", E, ".", None)]);
    expect(&empty.path().join("missing"), false, &[("folder-unreadable", E, ".", None)]);
    let only = folder(&[("open-design.json", &sidecar(json!({})))]);
    expect(only.path(), true, &[("metadata-only", W, "open-design.json", None)]);
    let claude = folder(&[(".claude-plugin/plugin.json", b"{ not json")]);
    let d = expect(claude.path(), true, &[("manifest-invalid-json", W, ".claude-plugin/plugin.json", None)]);
    assert_eq!(d.len(), 1);
    let named = folder(&[(".claude-plugin/plugin.json", br#"{"name": "My Plugin", "commands": ["a"]}"#)]);
    let p = load_folder(named.path()).unwrap();
    assert_eq!(p.id, "my-plugin");
    assert_eq!(
        codes(&p.diagnostics).iter().map(|c| c.0).collect::<Vec<_>>(),
        ["name-sanitized", "claude-commands-unmapped"]
    );
    let big_manifest = vec![b' '; 2 * 1024 * 1024];
    expect(
        folder(&[("open-design.json", &big_manifest)]).path(),
        false,
        &[("file-too-large", E, "open-design.json", None)],
    );
    // Nested files, sorted '/'-separated paths, a digest over content.
    let nested = folder(&[("SKILL.md", SKILL), ("assets/b.txt", b"b"), ("assets/a/deep.txt", b"a"), ("a.txt", b"x")]);
    let first = load_folder(nested.path()).unwrap();
    assert_eq!(first.files, ["SKILL.md", "a.txt", "assets/a/deep.txt", "assets/b.txt"]);
    assert_eq!(load_folder(nested.path()).unwrap().source_digest, first.source_digest);
    fs::write(nested.path().join("assets/b.txt"), b"c").unwrap();
    assert_ne!(load_folder(nested.path()).unwrap().source_digest, first.source_digest);
}

#[test]
fn limits_and_links() {
    use std::os::unix::fs::symlink;
    let huge = folder(&[("SKILL.md", SKILL)]);
    fs::File::create(huge.path().join("big.bin")).unwrap().set_len(MAX_FOLDER_BYTES + 1).unwrap();
    expect(huge.path(), false, &[("folder-too-large", E, "big.bin", None)]);
    let many = folder(&[("SKILL.md", SKILL)]);
    for i in 0..MAX_FOLDER_ENTRIES {
        fs::write(many.path().join(format!("f{i}")), b"").unwrap();
    }
    expect(many.path(), false, &[("too-many-files", E, ".", None)]);
    let outside = folder(&[("secret.txt", b"secret")]);
    let linked = folder(&[("SKILL.md", SKILL), ("docs/guide.md", b"guide")]);
    symlink(outside.path().join("secret.txt"), linked.path().join("leak.txt")).unwrap();
    symlink(outside.path(), linked.path().join("leakdir")).unwrap();
    symlink("docs/guide.md", linked.path().join("alias.md")).unwrap();
    symlink("docs", linked.path().join("docs-link")).unwrap();
    symlink("nowhere", linked.path().join("dangling")).unwrap();
    let fifo = std::ffi::CString::new(linked.path().join("pipe").into_os_string().into_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let d = expect(
        linked.path(),
        true,
        &[
            ("symlink-escape", W, "leak.txt", None),
            ("symlink-escape", W, "leakdir", None),
            ("symlink-skipped", W, "docs-link", None),
            ("symlink-broken", W, "dangling", None),
            ("special-file-skipped", W, "pipe", None),
        ],
    );
    assert_eq!(d.len(), 5);
    assert_eq!(load_folder(linked.path()).unwrap().files, ["SKILL.md", "alias.md", "docs/guide.md"]);
    let odd = folder(&[("SKILL.md", SKILL)]);
    use std::os::unix::ffi::OsStrExt;
    fs::write(odd.path().join(std::ffi::OsStr::from_bytes(b"bad\xffname")), b"").unwrap();
    expect(odd.path(), false, &[("invalid-path", E, ".", None)]);
}

#[test]
fn doctor_report_wire_shape() {
    let dir = folder(&[(
        "open-design.json",
        &sidecar(json!({"pipeline": {"stages": [{"id": "s", "atoms": [], "repeat": true}]}})),
    )]);
    let report = serde_json::to_value(doctor(dir.path())).unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!((report["id"].as_str(), report["version"].as_str()), (Some("gen"), Some("1.0.0")));
    let diags = report["diagnostics"].as_array().unwrap();
    assert_eq!(
        diags[0],
        json!({"code": "metadata-only", "severity": "warning", "file": "open-design.json",
        "message": diags[0]["message"]}),
        "no pointer key when there is none"
    );
    assert_eq!(diags[1]["pointer"], "/od/pipeline/stages/0/repeat");
    assert_eq!(diags[1]["severity"], "error");
}
