//! Plugin folders: loading a plugin from its `SKILL.md`, `open-design.json` and
//! `.claude-plugin/plugin.json`, merging them into one manifest in `open-design.json` shape,
//! validating it, and `doctor`. This file owns the public API and the loader's limits.
//!
//! One file per concern: `folder` reads the folder (limits, symlinks, digest), `frontmatter`
//! parses SKILL.md YAML, `skill`, `claude` and `sidecar` turn each file into a manifest layer,
//! `merge` merges the layers, `schema` checks the published JSON Schema, `validator` checks values
//! against arbitrary JSON Schemas (and that a surface's schema compiles), `rules` the semantic
//! rules, `until` the `until` grammar, `vocab` the closed vocabularies. The only I/O is reading
//! the plugin folder; nothing is written.

pub mod bundled;
pub mod canonical;
mod claude;
mod folder;
pub mod frontmatter;
mod merge;
mod rules;
pub use rules::is_semver;
pub mod schema;
mod sidecar;
mod skill;
pub mod tree;
pub mod until;
pub mod validator;
pub mod vocab;

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

pub use schema::is_plugin_id;

/// Most entries (files, folders and links, at any depth) one plugin folder may hold. The largest
/// bundled plugin has 44 files; a folder with thousands is a `node_modules` or a repository root
/// by mistake, and walking it would make every load slow.
pub const MAX_FOLDER_ENTRIES: usize = 2_000;
/// Most bytes read from one plugin folder (all files together). Matches the reference daemon's
/// 50 MiB install cap; the whole bundled catalog (72 MB over 482 plugins) averages 150 KB each.
pub const MAX_FOLDER_BYTES: u64 = 50 * 1024 * 1024;
/// Largest `SKILL.md`, `open-design.json` or `.claude-plugin/plugin.json` parsed. The largest in
/// the corpus is under 40 KiB; a 1 MiB prompt already overflows any agent's context.
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;
/// Deepest folder nesting walked; deeper trees are refused rather than recursed into.
pub const MAX_FOLDER_DEPTH: usize = 32;
/// Largest SKILL.md frontmatter block parsed as YAML. The largest in the corpus is 4.2 KiB; the
/// rest of SKILL.md is prompt text and is not parsed.
pub const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;
/// Deepest `[`/`{` nesting handed to the YAML parser. Its scanner does work proportional to the
/// open flow collections for every token (64 KiB of `[` takes 1 s in release, 30 s in a debug
/// build), and its deserializer refuses more than 128 levels anyway; real frontmatter nests 2–3.
pub const MAX_FRONTMATTER_DEPTH: usize = 64;
/// Longest `until` expression accepted, in bytes: real ones are under 60
/// (`(build.passing && tests.passing) || iterations>=8`); the bound keeps doctor cheap.
pub const MAX_UNTIL_LEN: usize = 1024;
/// Deepest parenthesis nesting in an `until` expression; the parser recurses once per level.
pub const MAX_UNTIL_DEPTH: usize = 32;

/// The manifest spec version a manifest without `specVersion` is read as.
pub const SPEC_VERSION: &str = "1.0.0";
/// The portable agent-skill file.
pub const SKILL_MD: &str = "SKILL.md";
/// The OpenDesign sidecar manifest.
pub const SIDECAR: &str = "open-design.json";
/// The Claude Code plugin manifest.
pub const CLAUDE_PLUGIN: &str = ".claude-plugin/plugin.json";
/// The `file` of diagnostics about the folder as a whole.
pub const FOLDER: &str = ".";

/// A plugin folder that loaded: no error diagnostics.
#[derive(Debug, Clone)]
pub struct LoadedPlugin {
    /// The plugin id (the manifest `name`).
    pub id: String,
    /// The plugin version (the manifest `version`).
    pub version: String,
    /// The merged manifest in `open-design.json` shape, `specVersion` defaulted to "1.0.0".
    pub manifest: Value,
    /// Warnings only.
    pub diagnostics: Vec<Diagnostic>,
    /// Relative paths of every file read, '/'-separated, sorted.
    pub files: Vec<String>,
    /// blake3 hex over the sorted `(path, len, bytes)` of all files (see `folder`).
    pub source_digest: String,
}

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The folder does not load.
    Error,
    /// The folder loads; the author should look.
    Warning,
}

/// One problem found in a plugin folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    /// Stable code, e.g. "manifest-invalid-json", "schema-violation", "repeat-without-until".
    pub code: String,
    /// Error or warning.
    pub severity: Severity,
    /// Relative path of the file the problem is in ("." for the folder itself).
    pub file: String,
    /// What is wrong, for a person.
    pub message: String,
    /// JSON pointer (manifests) or YAML key path (SKILL.md frontmatter) of the problem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    /// Earlier names of `code` (od's first, hyphenated codes of the rules upstream names in its
    /// dotted form), so a script matching them keeps working.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

/// Upstream's dotted doctor codes for od's earlier names (which stay as `aliases`).
pub const DOTTED_CODES: &[(&str, &str)] = &[
    ("unknown-atom", "atom.unknown"),
    ("repeat-without-until", "pipeline.until-missing"),
    ("until-invalid", "pipeline.until-invalid"),
    ("until-signal-undeclared", "pipeline.until-signal-undeclared"),
    ("duplicate-stage-id", "pipeline.duplicate-stage"),
    ("oauth-surface-undeclared", "genui.oauth-undeclared"),
    ("genui-schema-invalid", "genui.schema-invalid"),
    ("genui-component-capability", "genui.component-capability"),
    ("unknown-capability", "capability.unknown"),
];

impl Diagnostic {
    /// An error diagnostic (an earlier code is recorded in its dotted form, with the alias).
    pub fn error(code: &str, file: &str, message: impl Into<String>) -> Self {
        let (code, aliases) = match DOTTED_CODES.iter().find(|(old, _)| *old == code) {
            Some((old, dotted)) => (dotted.to_string(), vec![old.to_string()]),
            None => (code.to_string(), Vec::new()),
        };
        Self { code, severity: Severity::Error, file: file.into(), message: message.into(), pointer: None, aliases }
    }

    /// Whether this diagnostic's code, or one of its aliases, is `code`.
    pub fn is(&self, code: &str) -> bool {
        self.code == code || self.aliases.iter().any(|a| a == code)
    }

    /// A warning diagnostic.
    pub fn warning(code: &str, file: &str, message: impl Into<String>) -> Self {
        Self { severity: Severity::Warning, ..Self::error(code, file, message) }
    }

    /// The same diagnostic located at `pointer`.
    pub fn at(mut self, pointer: impl Into<String>) -> Self {
        self.pointer = Some(pointer.into());
        self
    }

    /// Whether this is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// A plugin folder that did not load: its diagnostics, at least one of them an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", summarize(.diagnostics))]
pub struct LoadError {
    /// Every diagnostic found, errors and warnings, in the order found.
    pub diagnostics: Vec<Diagnostic>,
}

fn summarize(diagnostics: &[Diagnostic]) -> String {
    let errors: Vec<&Diagnostic> = diagnostics.iter().filter(|d| d.is_error()).collect();
    let mut out = format!("plugin folder did not load ({} error(s))", errors.len());
    for d in errors {
        let _ = write!(out, "; {} [{}", d.file, d.code);
        if let Some(p) = &d.pointer {
            let _ = write!(out, " at {p}");
        }
        let _ = write!(out, "]: {}", d.message);
    }
    out
}

/// What `od plugin doctor` reports for a folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DoctorReport {
    /// True when there is no error diagnostic (the folder loads).
    pub ok: bool,
    /// The plugin id, when the manifest names one.
    pub id: Option<String>,
    /// The plugin version, when the manifest has one.
    pub version: Option<String>,
    /// Every diagnostic, errors and warnings.
    pub diagnostics: Vec<Diagnostic>,
}

/// Loads the plugin folder at `dir`.
pub fn load_folder(dir: &Path) -> Result<LoadedPlugin, LoadError> {
    let analysis = analyze(dir);
    let mut diagnostics = analysis.diagnostics;
    if diagnostics.iter().any(Diagnostic::is_error) {
        return Err(LoadError { diagnostics });
    }
    let (Some(manifest), Some(source_digest)) = (analysis.manifest, analysis.digest) else {
        diagnostics.push(Diagnostic::error("internal", FOLDER, "no manifest or digest was produced"));
        return Err(LoadError { diagnostics });
    };
    let (Some(id), Some(version)) = (str_at(&manifest, "/name"), str_at(&manifest, "/version")) else {
        diagnostics.push(Diagnostic::error("internal", FOLDER, "the validated manifest lacks name or version"));
        return Err(LoadError { diagnostics });
    };
    Ok(LoadedPlugin { id, version, manifest, diagnostics, files: analysis.files, source_digest })
}

/// Checks the plugin folder at `dir` and reports every problem; never fails.
pub fn doctor(dir: &Path) -> DoctorReport {
    doctor_with(dir, |_| Vec::new())
}

/// [`doctor`], with `extra` checks of the merged manifest that need more than the folder (the
/// connector catalog).
pub fn doctor_with(dir: &Path, extra: impl FnOnce(&Value) -> Vec<Diagnostic>) -> DoctorReport {
    let mut analysis = analyze(dir);
    if let Some(m) = &analysis.manifest {
        analysis.diagnostics.extend(extra(m));
    }
    let ok = !analysis.diagnostics.iter().any(Diagnostic::is_error);
    let manifest = analysis.manifest.as_ref();
    DoctorReport {
        ok,
        id: manifest.and_then(|m| str_at(m, "/name")),
        version: manifest.and_then(|m| str_at(m, "/version")),
        diagnostics: analysis.diagnostics,
    }
}

fn str_at(value: &Value, pointer: &str) -> Option<String> {
    value.pointer(pointer).and_then(Value::as_str).map(str::to_string)
}

struct Analysis {
    manifest: Option<Value>,
    files: Vec<String>,
    digest: Option<String>,
    diagnostics: Vec<Diagnostic>,
}

fn analyze(dir: &Path) -> Analysis {
    let mut diags = Vec::new();
    let folder = folder::read(dir, &mut diags);
    let has_sidecar = folder.sidecar.is_some();
    let mut layers = Vec::new();
    if let Some(bytes) = &folder.sidecar {
        if let Some(value) = sidecar::parse(bytes, &mut diags) {
            layers.push(merge::Layer { file: SIDECAR, value });
        }
    }
    if let Some(bytes) = &folder.skill {
        if let Some(value) = skill::adapt(bytes, &folder.folder_id, has_sidecar, &mut diags) {
            layers.push(merge::Layer { file: SKILL_MD, value });
        }
    }
    if let Some(bytes) = &folder.claude {
        layers.push(merge::Layer { file: CLAUDE_PLUGIN, value: claude::adapt(bytes, &folder.folder_id, &mut diags) });
    }
    if folder.walked && !folder.has_manifest_file {
        let msg = format!("none of {SKILL_MD}, {SIDECAR} or {CLAUDE_PLUGIN} is in the folder");
        diags.push(Diagnostic::error("no-manifest", FOLDER, msg));
    }
    if has_sidecar && folder.skill.is_none() && folder.claude.is_none() {
        let msg = format!(
            "metadata-only preset: {SIDECAR} alone cannot run an agent; add {SKILL_MD} or {CLAUDE_PLUGIN} \
             before publishing it as a runnable plugin"
        );
        diags.push(Diagnostic::warning("metadata-only", SIDECAR, msg));
    }
    let manifest = (!layers.is_empty()).then(|| merge::merge(&layers));
    if let Some(manifest) = &manifest {
        for violation in schema::validate(manifest) {
            let file = merge::origin(&layers, &violation.pointer);
            diags.push(Diagnostic::error("schema-violation", file, violation.message).at(violation.pointer));
        }
        rules::check(manifest, &layers, &mut diags);
    }
    Analysis { manifest, files: folder.files, digest: folder.digest, diagnostics: diags }
}
