//! Conformance (reads ../shared: OpenDesign's plugins, skills and templates; Anthropic's skills).
//! Every plugin or skill folder of the real-world corpus loads or fails with diagnostics naming the
//! file; the thirteen atoms, scenarios' pipelines, SKILL.md-only folders and the adapters on the real
//! folders. The same properties on the project's own small corpus are in `plugin_load.rs`. Run with
//! `cargo test --test conformance` (`.ci/run` does); a missing ../shared fails, never skips.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use od::plugins::{doctor, load_folder, Diagnostic, LoadedPlugin, Severity};
use serde_json::json;

static FIXTURES: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| crate::shared_fixture(""));
const MANIFESTS: [&str; 3] = ["SKILL.md", "open-design.json", ".claude-plugin/plugin.json"];

/// The corpus root; a clone without ../shared fails here, loudly.
fn fixtures() -> &'static Path {
    let root = Path::new(&*FIXTURES);
    assert!(
        root.join("plugins-open-design").is_dir() && root.join("skills-anthropic").is_dir(),
        "the conformance corpus is missing: {}/{{plugins-open-design,skills-anthropic}} \
         (the conformance suite needs ../shared/fixtures beside the checkout; `cargo test --workspace` does not)",
        *FIXTURES
    );
    root
}

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
    for tree in ["plugins-open-design", "skills-anthropic"] {
        walk(&fixtures().join(tree), &mut out);
    }
    out.sort();
    out
}

fn fixture(rel: &str) -> LoadedPlugin {
    let dir = fixtures().join(rel);
    load_folder(&dir).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn codes(diags: &[Diagnostic]) -> Vec<(&str, Severity, &str)> {
    diags.iter().map(|d| (d.code.as_str(), d.severity, d.file.as_str())).collect()
}

#[test]
fn every_corpus_folder_loads_or_fails_naming_the_file() {
    let folders = corpus_folders();
    assert_eq!(folders.len(), 93, "fixture discovery changed");
    let mut failed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut digests = Vec::new();
    for dir in &folders {
        let rel = dir.strip_prefix(&*FIXTURES).unwrap().display().to_string();
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
    eprintln!("corpus: {} folders, {} load, {} fail", folders.len(), folders.len() - failed.len(), failed.len());
    for (rel, c) in &failed {
        eprintln!("  fails: {rel}: {c:?}");
    }
    let atom = vec!["atom.unknown@open-design.json".to_string()];
    let expected: BTreeMap<String, Vec<String>> = [
        ("plugins-open-design/plugins/_official/image-templates/anime-martial-arts-battle-illustration", atom.clone()),
        (
            "plugins-open-design/plugins/_official/image-templates/profile-avatar-anime-girl-to-cinematic-photo",
            atom.clone(),
        ),
        (
            "plugins-open-design/plugins/_official/image-templates/profile-avatar-snowy-rabbit-spirit-portrait",
            atom.clone(),
        ),
        ("plugins-open-design/plugins/_official/video-templates/viral-k-pop-dance-choreography", atom),
        ("plugins-open-design/plugins/spec/examples/extend-plugin-author", vec!["path-escape@open-design.json".into()]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(failed, expected);
    let n = digests.len();
    digests.sort();
    digests.dedup();
    assert_eq!(digests.len(), n, "every folder has its own digest");
}

#[test]
fn the_thirteen_atoms_load_as_atoms() {
    let atoms = fs::read_dir(fixtures().join("plugins-open-design/plugins/_official/atoms")).unwrap();
    let mut ids: Vec<String> = Vec::new();
    for entry in atoms.flatten() {
        let p = load_folder(&entry.path()).unwrap();
        assert_eq!(p.manifest["od"]["kind"], "atom");
        assert_eq!(p.id, entry.file_name().to_str().unwrap());
        assert_eq!(p.files, ["SKILL.md", "open-design.json"]);
        assert_eq!(p.manifest["compat"]["agentSkills"], json!([{"path": "./SKILL.md"}]));
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        ids.push(p.id);
    }
    ids.sort();
    let catalog: Vec<&str> = od::plugins::vocab::ATOMS
        .iter()
        .filter(|(_, s)| *s == od::plugins::vocab::AtomSource::BundledPlugin)
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(ids.len(), 13);
    assert!(ids.iter().all(|id| catalog.contains(&id.as_str())));
}

#[test]
fn scenarios_keep_their_pipelines() {
    let p = fixture("plugins-open-design/plugins/_official/scenarios/od-code-migration");
    let stages = p.manifest["od"]["pipeline"]["stages"].as_array().unwrap();
    let ids: Vec<&str> = stages.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["import", "tokens", "plan", "verify", "review", "handoff"]);
    assert_eq!(stages[1]["atoms"], json!(["design-extract", "token-map"]));
    assert_eq!(stages[3]["repeat"], true);
    assert_eq!(stages[3]["until"], "(build.passing && tests.passing) || iterations>=8");
    let d = fixture("plugins-open-design/plugins/_official/scenarios/od-default");
    let stages = d.manifest["od"]["pipeline"]["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 4);
    assert_eq!(stages[3]["until"], "critique.score>=4 || iterations>=3");
    assert_eq!(d.manifest["od"]["hidden"], true, "unknown sidecar fields are kept");
    let warned: Vec<&str> = d.diagnostics.iter().filter_map(|w| w.pointer.as_deref()).collect();
    assert_eq!(warned, ["/od/capabilities/2", "/od/capabilities/3", "/od/capabilities/4"], "media:* are not v1 caps");
}

#[test]
fn skill_md_only_folders_get_their_manifest_from_the_frontmatter() {
    let s = fixture("skills-anthropic/skill-creator");
    assert_eq!((s.id.as_str(), s.version.as_str()), ("skill-creator", "0.0.0"));
    assert_eq!(s.manifest["title"], "Skill Creator");
    assert_eq!(s.manifest["od"]["kind"], "skill");
    assert_eq!(s.manifest["od"]["taskKind"], "new-generation");
    assert_eq!(s.manifest["specVersion"], "1.0.0");
    assert!(s.manifest["description"].as_str().unwrap().starts_with("Create new skills"));
    let g = fixture("plugins-open-design/design-templates/guizang-ppt");
    assert_eq!(g.id, "magazine-web-ppt", "the frontmatter name wins over the folder name");
    assert_eq!(g.manifest["title"], g.manifest["title_i18n"]["en"]);
    assert!(g.manifest["title_i18n"]["zh-CN"].is_string());
    let c = fixture("plugins-open-design/design-templates/contact-widget");
    assert_eq!(c.manifest["od"]["preview"], json!({"type": "html", "entry": "example.html"}));
    assert_eq!(c.manifest["od"]["inputs"][3], json!({"name": "is_available", "type": "boolean", "default": true}));
    assert_eq!(c.manifest["od"]["outputs"], json!({"primary": "example.html"}));
    assert!(c.manifest["od"].get("context").is_none(), "design_system.requires: false binds nothing");
    let sw = fixture("plugins-open-design/skills/swiss-user-research-video-template");
    assert_eq!(sw.manifest["od"]["capabilities"], json!(["fs:write"]));
    assert_eq!(sw.manifest["od"]["context"]["designSystem"]["sections"][0], "color");
    assert_eq!(sw.manifest["od"]["outputs"]["secondary"], json!(["template.html", "example.html"]));
}

#[test]
fn sidecar_wins_and_adapters_fill_gaps() {
    let p = fixture("plugins-open-design/plugins/community/import-smoke-test");
    assert_eq!(p.manifest["title"], "Community Import Smoke Test");
    assert!(p.manifest["description"].as_str().unwrap().contains("zip, GitHub subpath"));
    assert_eq!(p.manifest["compat"]["agentSkills"], json!([{"path": "./SKILL.md"}]));
    assert_eq!(p.manifest["compat"]["claudePlugins"], json!([{"path": "./.claude-plugin/plugin.json"}]));
    let claude = fixture("plugins-open-design/plugins/open-design");
    assert_eq!((claude.id.as_str(), claude.version.as_str()), ("open-design", "1.0.0"));
    assert_eq!(claude.manifest["title"], "OpenDesign");
    assert_eq!(claude.files, [".claude-plugin/plugin.json"]);
    let ds = fixture("plugins-open-design/plugins/_official/design-systems/airbnb");
    assert_eq!(codes(&ds.diagnostics), [("metadata-only", Severity::Warning, "open-design.json")]);
    assert_eq!(ds.manifest["od"]["context"]["designSystem"], json!({"ref": "airbnb", "primary": true}));
    let landing = fixture("plugins-open-design/plugins/_official/examples/open-design-landing");
    assert_eq!(codes(&landing.diagnostics), [("frontmatter-invalid", Severity::Warning, "SKILL.md")]);
    assert!(landing.diagnostics[0].message.contains("line 95"), "{}", landing.diagnostics[0].message);
}
