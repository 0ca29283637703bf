//! A run's agent options as the run's request records them, read and checked below the engine
//! and the runner: the stream protocol an exec agent speaks ([`Protocol`]), an ACP agent's
//! permission options ([`AcpOptions`]), the output bounds ([`OutputLimits`]) and a dry run's
//! script ([`check_script`]). The engine checks them when a run is created; the runner reads them
//! again when it starts the agent. Pure: no I/O.

use serde_json::Value;

use super::error::AgentConfigError;
use crate::limits::{
    AGENT_OUTPUT_MAX_BYTES, AGENT_OUTPUT_MAX_BYTES_CAP, AGENT_OUTPUT_MAX_EVENTS, AGENT_OUTPUT_MAX_EVENTS_CAP,
};

/// Which dialect an agent speaks on stdout (the parsers are `runner/dialects/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Decide from the first JSON object line.
    Auto,
    /// od's own ND-JSON protocol.
    Od,
    /// Claude Code's `--output-format stream-json`.
    ClaudeStreamJson,
    /// Codex `exec --json`.
    CodexJson,
    /// Gemini CLI `--output-format stream-json`.
    GeminiStreamJson,
    /// OpenCode `run --format json`.
    OpencodeJson,
    /// GitHub Copilot CLI `--output-format json`.
    CopilotJson,
    /// Cursor Agent `--output-format stream-json`.
    CursorStreamJson,
}

/// Every protocol name [`Protocol::parse`] accepts (aliases aside), for error messages.
pub const PROTOCOL_NAMES: &str =
    "auto, od, claude-stream-json, codex-json, gemini-stream-json, opencode-json, copilot-json or cursor-stream-json";

impl Protocol {
    /// `auto`, `od`, `claude-stream-json` (or `stream-json`), `codex-json`, `gemini-stream-json`,
    /// `opencode-json`, `copilot-json`, `cursor-stream-json`.
    pub fn parse(s: &str) -> Option<Protocol> {
        match s.trim() {
            "auto" => Some(Protocol::Auto),
            "od" => Some(Protocol::Od),
            "claude-stream-json" | "stream-json" => Some(Protocol::ClaudeStreamJson),
            "codex-json" => Some(Protocol::CodexJson),
            "gemini-stream-json" => Some(Protocol::GeminiStreamJson),
            "opencode-json" => Some(Protocol::OpencodeJson),
            "copilot-json" => Some(Protocol::CopilotJson),
            "cursor-stream-json" => Some(Protocol::CursorStreamJson),
            _ => None,
        }
    }

    /// The canonical name (what [`Protocol::parse`] reads back).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Auto => "auto",
            Protocol::Od => "od",
            Protocol::ClaudeStreamJson => "claude-stream-json",
            Protocol::CodexJson => "codex-json",
            Protocol::GeminiStreamJson => "gemini-stream-json",
            Protocol::OpencodeJson => "opencode-json",
            Protocol::CopilotJson => "copilot-json",
            Protocol::CursorStreamJson => "cursor-stream-json",
        }
    }
}

/// The run's `permissionMode` (as an ACP agent's permission requests are answered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionMode {
    Bypass,
    AcceptEdits,
    Ask,
}

impl PermissionMode {
    pub const VALUES: [&'static str; 3] = ["bypass", "accept-edits", "ask"];

    pub fn parse(s: &str) -> Option<PermissionMode> {
        match s {
            "bypass" => Some(PermissionMode::Bypass),
            "accept-edits" => Some(PermissionMode::AcceptEdits),
            "ask" => Some(PermissionMode::Ask),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PermissionMode::Bypass => "bypass",
            PermissionMode::AcceptEdits => "accept-edits",
            PermissionMode::Ask => "ask",
        }
    }
}

/// The tiers a permission answer may be remembered at (`permissionTier`).
pub const TIERS: [&str; 3] = ["run", "conversation", "project"];

/// The ACP options of a run's agent options (checked when the run is created, and again when
/// the agent starts).
#[derive(Debug, Clone, PartialEq)]
pub struct AcpOptions {
    pub mode: PermissionMode,
    pub tier: String,
    pub auth_method: Option<String>,
}

impl AcpOptions {
    /// Reads `permissionMode`, `permissionTier`, `authMethod`; a bad one is refused naming it.
    pub fn from_config(config: &Value) -> Result<AcpOptions, AgentConfigError> {
        let bad = AgentConfigError::invalid;
        let mode = match config.get("permissionMode") {
            None | Some(Value::Null) => PermissionMode::AcceptEdits,
            Some(v) => v.as_str().and_then(PermissionMode::parse).ok_or_else(|| {
                bad("permissionMode", format!("{v} is not one of {}", PermissionMode::VALUES.join(", ")))
            })?,
        };
        let tier = match config.get("permissionTier") {
            None | Some(Value::Null) => "run".to_string(),
            Some(v) => v
                .as_str()
                .filter(|t| TIERS.contains(t))
                .map(str::to_string)
                .ok_or_else(|| bad("permissionTier", format!("{v} is not one of {}", TIERS.join(", "))))?,
        };
        let auth_method = match config.get("authMethod") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.is_empty() && s.len() <= 128 => Some(s.clone()),
            Some(v) => return Err(bad("authMethod", format!("{v} is not an auth method id"))),
        };
        Ok(AcpOptions { mode, tier, auth_method })
    }
}

/// What one invocation may record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// Payload bytes of output events (text, tool calls, stdout/stderr …).
    pub max_bytes: u64,
    /// Events of any kind (output pieces, signals, artifacts, surface requests).
    pub max_events: u64,
}

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits { max_bytes: AGENT_OUTPUT_MAX_BYTES, max_events: AGENT_OUTPUT_MAX_EVENTS }
    }
}

impl OutputLimits {
    /// `self` overridden by the agent options `outputMaxBytes` / `outputMaxEvents` (positive
    /// integers up to the caps); an error names the bad option and says why.
    pub fn with_config(self, config: &Value) -> Result<OutputLimits, AgentConfigError> {
        let read = |key: &'static str, current: u64, cap: u64| match config.get(key) {
            None | Some(Value::Null) => Ok(current),
            Some(v) => v.as_u64().filter(|n| (1..=cap).contains(n)).ok_or_else(|| {
                AgentConfigError::invalid(key, format!("{key} must be a positive integer of at most {cap}"))
            }),
        };
        Ok(OutputLimits {
            max_bytes: read("outputMaxBytes", self.max_bytes, AGENT_OUTPUT_MAX_BYTES_CAP)?,
            max_events: read("outputMaxEvents", self.max_events, AGENT_OUTPUT_MAX_EVENTS_CAP)?,
        })
    }
}

/// The fields a `dryRun` script may have.
pub const SCRIPT_FIELDS: [&str; 5] = ["critiqueScores", "fail", "crash", "signals", "waitForCancel"];

/// Checks a `dryRun` script's shape: an object of [`SCRIPT_FIELDS`] only, each of its type, so a
/// typo (`{"fial": 1}`) is refused instead of silently scripting nothing. The error names
/// `dryRun` and says which field is wrong.
pub fn check_script(script: &Value) -> Result<(), AgentConfigError> {
    let bad = |message: String| AgentConfigError::invalid("dryRun", message);
    let Some(map) = script.as_object() else { return Err(bad("must be a JSON object".into())) };
    for (k, v) in map {
        let ok = match k.as_str() {
            "critiqueScores" => v.as_array().is_some_and(|a| a.iter().all(Value::is_number)),
            "fail" => v.as_object().is_some_and(|m| m.values().all(Value::is_u64)),
            "crash" | "waitForCancel" => v.is_string(),
            "signals" => v.as_object().is_some_and(|m| m.values().all(Value::is_object)),
            _ => return Err(bad(format!("unknown field {k:?} (expected one of {})", SCRIPT_FIELDS.join(", ")))),
        };
        if !ok {
            let want = match k.as_str() {
                "critiqueScores" => "an array of numbers",
                "fail" => "an object of stage → attempts",
                "signals" => "an object of stage → {name: value}",
                _ => "a stage id",
            };
            return Err(bad(format!("{k} must be {want}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn limits_come_from_the_options_and_a_bad_one_is_named() {
        let l = OutputLimits::default().with_config(&json!({"outputMaxEvents": 5})).unwrap();
        assert_eq!(l, OutputLimits { max_bytes: AGENT_OUTPUT_MAX_BYTES, max_events: 5 });
        let e = OutputLimits::default().with_config(&json!({"outputMaxBytes": 0})).unwrap_err();
        assert_eq!(e.field(), "outputMaxBytes");
        assert!(e.message().contains("outputMaxBytes"));
        assert!(OutputLimits::default().with_config(&json!({"outputMaxEvents": u64::MAX})).is_err());
    }

    #[test]
    fn protocols_read_back_their_names_and_acp_options_name_the_bad_field() {
        for name in PROTOCOL_NAMES.replace(" or ", ", ").split(", ") {
            assert_eq!(Protocol::parse(name).map(Protocol::name), Some(name));
        }
        let e = AcpOptions::from_config(&json!({"permissionTier": "galaxy"})).unwrap_err();
        assert_eq!(e.to_string(), r#"permissionTier: "galaxy" is not one of run, conversation, project"#);
        assert_eq!(check_script(&json!({"fial": 1})).unwrap_err().field(), "dryRun");
    }
}
