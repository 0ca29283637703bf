//! The agent catalog as data: the built-in entries (`catalog.json`, compiled in) and the data dir's
//! `agents/*.json` files, each one entry or an array of entries; an entry whose `id` is built in
//! replaces it. Every entry is checked when loaded (unknown fields, slots, permission modes,
//! protocol names): a bad file is refused naming the file and the field, and nothing of it is used.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::template::{self, ArgPart};

/// The built-in catalog.
const BUILT_IN: &str = include_str!("catalog.json");

/// The stream protocols an entry may name (the parsers live in `runner/dialects/` and
/// `runner/acp/`; a name this build cannot read yet is listed, and refused when a run names it).
pub const PROTOCOLS: [&str; 8] = [
    "od",
    "claude-stream-json",
    "codex-json",
    "gemini-stream-json",
    "opencode-json",
    "copilot-json",
    "cursor-stream-json",
    "acp",
];

/// The permission modes a run may ask for; the default is [`DEFAULT_PERMISSION_MODE`].
pub const PERMISSION_MODES: [&str; 3] = ["bypass", "accept-edits", "ask"];
/// What a run that names no permission mode gets.
pub const DEFAULT_PERMISSION_MODE: &str = "accept-edits";

/// One model (or reasoning effort) an agent offers: upstream's `AgentModelOption`.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelOption {
    pub id: String,
    pub label: String,
}

/// How the agent's login is checked: any of `env` set is enough; else `args` run (exit 0: signed
/// in); `login` is the fix shown when it is missing.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AuthProbe {
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub login: String,
}

/// How the prompt reaches the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptVia {
    Stdin,
    File,
    Argv,
}

/// Prompt delivery: `via`, the words that carry it (`argvArgs` with `{prompt}`, `fileArgs` with
/// `{promptFile}`, `stdinArgs` such as `-`), and for `argv` the way taken past the argv budget.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PromptDelivery {
    pub via: PromptVia,
    #[serde(default)]
    pub argv_args: Vec<String>,
    #[serde(default)]
    pub file_args: Vec<String>,
    #[serde(default)]
    pub stdin_args: Vec<String>,
    pub fallback: Option<PromptVia>,
}

/// One catalog entry (field names follow upstream's `RuntimeAgentDef` where they exist).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentDef {
    pub id: String,
    pub name: String,
    /// The binary's name on PATH (absent: the command comes from the request, as for `acp`).
    pub bin: Option<String>,
    #[serde(default)]
    pub fallback_bins: Vec<String>,
    /// The environment variable naming the binary's path (`CLAUDE_BIN`, …).
    pub bin_env: Option<String>,
    #[serde(default)]
    pub version_args: Vec<String>,
    #[serde(default)]
    pub help_args: Vec<String>,
    /// A flag found in the `helpArgs` output → the capability (`cap:<name>` in `args`) it turns on.
    #[serde(default)]
    pub capability_flags: BTreeMap<String, String>,
    pub auth: Option<AuthProbe>,
    /// Models known without asking the CLI (upstream's fallback list).
    #[serde(default)]
    pub models: Vec<ModelOption>,
    /// The command listing the CLI's models, one id first on each line.
    #[serde(default)]
    pub models_args: Vec<String>,
    #[serde(default)]
    pub reasoning_options: Vec<ModelOption>,
    /// The argument template (see `template.rs`).
    pub args: Vec<ArgPart>,
    pub prompt: PromptDelivery,
    pub protocol: String,
    /// A permission mode → the CLI's own flags for it (a mode absent is refused).
    pub permission_modes: BTreeMap<String, Vec<String>>,
    /// Whether the agent can put a question to the user while it runs headless; when false a run
    /// asking for `ask` is refused (od does not silently widen what the agent may do).
    #[serde(default)]
    pub asks_headless: bool,
    /// The run supplies the command line (`agentCommand`, needing the exec right).
    #[serde(default)]
    pub command_from_request: bool,
    #[serde(default)]
    pub install: String,
    #[serde(default)]
    pub install_url: String,
    #[serde(default)]
    pub docs_url: String,
    /// Where the entry came from: `built-in` or its file (set when loaded).
    #[serde(skip)]
    pub source: String,
}

/// A catalog file od refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct CatalogError {
    /// The file (`built-in` for the compiled-in catalog).
    pub file: String,
    /// The field at fault (`agents[2].permissionModes.yolo`, …).
    pub field: String,
    pub message: String,
}

/// The catalog: entries in order (built-in first, then the data dir's new ids by file name).
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub agents: Vec<AgentDef>,
}

impl Catalog {
    /// The built-in catalog only (parsed once per process: every run start reads it).
    pub fn built_in() -> Catalog {
        static PARSED: std::sync::LazyLock<Vec<AgentDef>> =
            std::sync::LazyLock::new(|| parse_file("built-in", BUILT_IN).expect("the built-in agent catalog is valid"));
        Catalog { agents: PARSED.clone() }
    }

    /// The built-in catalog with `<data_dir>/agents/*.json` applied; the first bad file is the error.
    pub fn load(data_dir: &Path) -> Result<Catalog, CatalogError> {
        let mut cat = Catalog::built_in();
        for file in extension_files(data_dir) {
            let name = file.display().to_string();
            let text = std::fs::read_to_string(&file).map_err(|e| CatalogError {
                file: name.clone(),
                field: "(file)".into(),
                message: e.to_string(),
            })?;
            for def in parse_file(&name, &text)? {
                match cat.agents.iter_mut().find(|a| a.id == def.id) {
                    Some(slot) => *slot = def,
                    None => cat.agents.push(def),
                }
            }
        }
        Ok(cat)
    }

    pub fn get(&self, id: &str) -> Option<&AgentDef> {
        self.agents.iter().find(|a| a.id == id)
    }
}

/// The extension files, sorted by name (bounded: [`crate::limits::MAX_AGENT_CATALOG_FILES`]).
fn extension_files(data_dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(data_dir.join("agents")) else { return Vec::new() };
    let mut files: Vec<PathBuf> =
        rd.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    files.truncate(crate::limits::MAX_AGENT_CATALOG_FILES);
    files
}

/// Parses one file (an entry or an array of entries) and checks every entry.
pub fn parse_file(file: &str, text: &str) -> Result<Vec<AgentDef>, CatalogError> {
    let err = |field: String, message: String| CatalogError { file: file.into(), field, message };
    if text.len() > crate::limits::MAX_AGENT_CATALOG_FILE_BYTES {
        return Err(err("(file)".into(), format!("larger than {} bytes", crate::limits::MAX_AGENT_CATALOG_FILE_BYTES)));
    }
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| err("(json)".into(), e.to_string()))?;
    let (items, array) = match value {
        serde_json::Value::Array(items) => (items, true),
        other => (vec![other], false),
    };
    let mut out = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let at = if array { format!("[{i}]") } else { String::new() };
        let mut def: AgentDef = serde_json::from_value(item).map_err(|e| {
            let msg = e.to_string();
            // serde names an unknown or missing field in its message: lift it into `field`.
            let field = msg.split('`').nth(1).unwrap_or("(entry)").to_string();
            err(format!("{at}{}{field}", if at.is_empty() { "" } else { "." }), msg)
        })?;
        check(&def)
            .map_err(|(field, message)| err(format!("{at}{}{field}", if at.is_empty() { "" } else { "." }), message))?;
        def.source = file.to_string();
        out.push(def);
    }
    Ok(out)
}

/// Checks an entry; the error is `(field, why)`.
fn check(def: &AgentDef) -> Result<(), (String, String)> {
    let id_ok = !def.id.is_empty()
        && def.id.len() <= 64
        && def.id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !id_ok {
        return Err(("id".into(), format!("{:?} must be 1-64 of a-z, 0-9, - and _", def.id)));
    }
    if ["exec", "dry-run"].contains(&def.id.as_str()) {
        return Err(("id".into(), format!("{:?} is od's own agent and cannot be replaced", def.id)));
    }
    if def.name.trim().is_empty() {
        return Err(("name".into(), "must not be empty".into()));
    }
    if !PROTOCOLS.contains(&def.protocol.as_str()) {
        return Err(("protocol".into(), format!("{:?} is not one of {}", def.protocol, PROTOCOLS.join(", "))));
    }
    match (&def.bin, def.command_from_request) {
        (None, false) => return Err(("bin".into(), "required (or commandFromRequest: true)".into())),
        (Some(b), _) if b.is_empty() || b.contains('/') => {
            return Err(("bin".into(), format!("{b:?} must be a file name (a path goes in binEnv's variable)")))
        }
        _ => {}
    }
    if let Some(var) = &def.bin_env {
        if var.is_empty() || !var.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') {
            return Err(("binEnv".into(), format!("{var:?} must be an environment variable name (A-Z, 0-9, _)")));
        }
    }
    for mode in def.permission_modes.keys() {
        if !PERMISSION_MODES.contains(&mode.as_str()) {
            return Err((
                format!("permissionModes.{mode}"),
                format!("{mode:?} is not one of {}", PERMISSION_MODES.join(", ")),
            ));
        }
    }
    if !def.permission_modes.contains_key(DEFAULT_PERMISSION_MODE) {
        return Err(("permissionModes".into(), format!("must map {DEFAULT_PERMISSION_MODE} (the default)")));
    }
    let caps: Vec<&str> = def.capability_flags.values().map(String::as_str).collect();
    template::check(&def.args, &caps).map_err(|(at, why)| (format!("args{at}"), why))?;
    template::check_prompt(&def.prompt).map_err(|(at, why)| (format!("prompt.{at}"), why))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_catalog_has_the_agents_the_issue_names() {
        let cat = Catalog::built_in();
        for id in ["claude", "codex", "gemini", "opencode", "copilot", "cursor-agent", "qwen", "amp", "acp"] {
            assert!(cat.get(id).is_some(), "{id}");
        }
        assert_eq!(cat.get("claude").unwrap().bin_env.as_deref(), Some("CLAUDE_BIN"));
    }

    #[test]
    fn data_dir_files_extend_and_replace_the_built_in_entries() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("agents")).unwrap();
        std::fs::write(
            tmp.path().join("agents/a.json"),
            r#"[{"id":"claude","name":"My Claude","bin":"claude","args":[],"prompt":{"via":"stdin"},
                "protocol":"claude-stream-json","permissionModes":{"accept-edits":[]}},
               {"id":"mine","name":"Mine","bin":"mine","args":[],"prompt":{"via":"stdin"},
                "protocol":"od","permissionModes":{"accept-edits":[]}}]"#,
        )
        .unwrap();
        std::fs::write(tmp.path().join("agents/notes.txt"), "not a catalog file").unwrap();
        let cat = Catalog::load(tmp.path()).unwrap();
        assert_eq!(cat.get("claude").unwrap().name, "My Claude");
        assert!(cat.get("mine").unwrap().source.ends_with("a.json"));
        assert_eq!(cat.agents.len(), Catalog::built_in().agents.len() + 1);
    }

    #[test]
    fn a_bad_entry_is_named_by_file_and_field() {
        let e = parse_file(
            "x.json",
            r#"{"id":"x","name":"X","bin":"x","args":[],"prompt":{"via":"stdin"},
            "protocol":"od","permissionModes":{"accept-edits":[],"yolo":[]}}"#,
        )
        .unwrap_err();
        assert_eq!((e.file.as_str(), e.field.as_str()), ("x.json", "permissionModes.yolo"), "{e}");
        let e = parse_file(
            "y.json",
            r#"[{"id":"y","name":"Y","bin":"y","args":[],"prompt":{"via":"stdin"},
            "protocol":"nope","permissionModes":{"accept-edits":[]}}]"#,
        )
        .unwrap_err();
        assert_eq!(e.field, "[0].protocol", "{e}");
        let e = parse_file(
            "z.json",
            r#"{"id":"z","name":"Z","bin":"z","bogus":1,"args":[],"prompt":{"via":"stdin"},
            "protocol":"od","permissionModes":{"accept-edits":[]}}"#,
        )
        .unwrap_err();
        assert_eq!(e.field, "bogus", "{e}");
    }
}
