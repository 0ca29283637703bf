//! The agent catalog (issue 31): which coding-agent CLIs od can drive, found how, started how.
//! [`catalog`] is the data (built in, extended by `<data-dir>/agents/*.json`), [`template`] turns an
//! entry and a run's options into a command line, [`detect`] finds and probes the binaries (bounded,
//! cached), [`options`] reads and checks a run's agent options below the engine and the runner
//! (their refusals are an [`AgentConfigError`]), and this module checks a run's catalog agent
//! options ([`configure`]) and describes agents as `GET /api/agents` shows them ([`info`]). Starting
//! an agent is the runner's (`runner/launch.rs`, `runner/trial.rs`).

pub mod catalog;
pub mod detect;
pub mod error;
pub mod options;
pub mod template;

use serde_json::{json, Map, Value};
use std::path::Path;

use crate::clock::Clock;
use catalog::{AgentDef, Catalog, DEFAULT_PERMISSION_MODE, PERMISSION_MODES};
use detect::{Detected, Detector, ProbeEnv};
pub use error::AgentConfigError;

/// The recorded key of a run's permission mode (upstream's request name).
pub const PERMISSION_KEY: &str = "permissionMode";

/// Whether this build can read the stream `protocol` names (the ACP runner is dispatched apart).
pub fn protocol_supported(protocol: &str) -> bool {
    options::Protocol::parse(protocol).is_some()
}

/// One agent as `GET /api/agents` shows it: upstream's `AgentInfo` names (`id`, `name`, `bin`,
/// `available`, `authStatus`, `authMessage`, `path`, `version`, `diagnostics`, `models`,
/// `modelsSource`, `reasoningOptions`, `installUrl`, `docsUrl`) and od's (`default`, `command`,
/// `protocols`, `reason`, `permissionModes`, `defaultPermissionMode`, `source`).
pub fn info(def: &AgentDef, d: &Detected, default: &str) -> Value {
    let mut diagnostics = serde_json::to_value(&d.diagnostics).unwrap_or(json!([]));
    let mut available = d.available;
    if def.command_from_request {
        available = true;
    }
    if available && !protocol_supported(&def.protocol) && def.protocol != "acp" {
        available = false;
        if let Some(a) = diagnostics.as_array_mut() {
            a.push(json!({
                "reason": "protocol-unsupported", "severity": "error",
                "message": format!("{} speaks {}, which this od cannot read yet", def.name, def.protocol),
                "fix": "use a build of od with this stream parser, or run the CLI through exec with a wrapper",
            }));
        }
    }
    let reason = diagnostics
        .as_array()
        .and_then(|a| a.iter().find(|g| g["severity"] == "error"))
        .map(|g| g["message"].clone())
        .unwrap_or(Value::Null);
    let mut modes: Vec<&str> =
        PERMISSION_MODES.iter().copied().filter(|m| def.permission_modes.contains_key(*m)).collect();
    if !def.asks_headless {
        modes.retain(|m| *m != "ask");
    }
    json!({
        "id": def.id, "name": def.name, "bin": def.bin.clone().unwrap_or_default(), "available": available,
        "authStatus": d.auth_status, "authMessage": d.auth_message,
        "path": d.path.as_ref().map(|p| p.display().to_string()), "version": d.version,
        "diagnostics": diagnostics, "models": d.models, "modelsSource": d.models_source,
        "reasoningOptions": def.reasoning_options,
        "installUrl": non_empty(&def.install_url), "docsUrl": non_empty(&def.docs_url),
        "default": def.id == default, "command": Value::Null, "protocols": [def.protocol], "reason": reason,
        "permissionModes": modes, "defaultPermissionMode": DEFAULT_PERMISSION_MODE, "source": def.source,
    })
}

fn non_empty(s: &str) -> Value {
    if s.is_empty() {
        Value::Null
    } else {
        json!(s)
    }
}

/// Every catalog agent, detected (through the shared cache).
pub fn list(data_dir: &Path, env: &ProbeEnv, clock: &dyn Clock, default: &str) -> Result<Vec<Value>, AgentConfigError> {
    let cat = Catalog::load(data_dir).map_err(catalog_error)?;
    Ok(cat.agents.iter().map(|def| info(def, &detect_one(def, env, clock), default)).collect())
}

/// Detects one entry (an entry taking its command from the request has nothing to find).
pub fn detect_one(def: &AgentDef, env: &ProbeEnv, clock: &dyn Clock) -> Detected {
    if def.command_from_request {
        return Detected {
            available: true,
            path: None,
            version: None,
            auth_status: "unknown",
            auth_message: None,
            models: def.models.clone(),
            models_source: "fallback",
            caps: Default::default(),
            diagnostics: Vec::new(),
        };
    }
    Detector::global().detect(def, env, clock)
}

/// A catalog file od refuses, as a request error naming the file and field.
pub fn catalog_error(e: catalog::CatalogError) -> AgentConfigError {
    AgentConfigError::invalid("agents", e.to_string())
}

/// Checks and completes a run's options for the catalog agent `def`: `permissionMode` (default
/// `accept-edits`; one the CLI cannot honour headless is refused), `model` (in the CLI's own list
/// when it gave one), `reasoning` (one the entry offers), and the agent available now. A refusal is
/// a 422 naming the field; nothing is written.
pub fn configure(def: &AgentDef, a: &mut Map<String, Value>, d: &Detected) -> Result<(), AgentConfigError> {
    let refuse = AgentConfigError::refused;
    let mode = permission_mode(def, a)?;
    if def.command_from_request && a.get("command").is_none_or(Value::is_null) {
        return Err(AgentConfigError::invalid(
            "agentCommand",
            format!("agent {} needs its command line (agentCommand)", def.id),
        ));
    }
    if !def.command_from_request && !d.available {
        let why = d.diagnostics.first().map(|g| format!("{} ({})", g.message, g.fix)).unwrap_or_default();
        return Err(refuse("agentId", format!("agent {} is not available here: {why}", def.id)));
    }
    if !protocol_supported(&def.protocol) && def.protocol != "acp" {
        return Err(refuse(
            "agentId",
            format!("agent {} speaks {}, which this od cannot read yet", def.id, def.protocol),
        ));
    }
    let model = option_text(a, "model")?;
    if let (Some(m), "live") = (&model, d.models_source) {
        if !d.models.iter().any(|o| &o.id == m) {
            let some: Vec<&str> = d.models.iter().take(10).map(|o| o.id.as_str()).collect();
            return Err(refuse("model", format!("{m:?} is not one of {}'s models ({}…)", def.id, some.join(", "))));
        }
    }
    let reasoning = option_text(a, "reasoning")?;
    if let Some(r) = &reasoning {
        if !def.reasoning_options.iter().any(|o| &o.id == r) {
            let offered: Vec<&str> = def.reasoning_options.iter().map(|o| o.id.as_str()).collect();
            let offered = if offered.is_empty() { "none".to_string() } else { offered.join(", ") };
            return Err(refuse("reasoning", format!("{r:?} is not a reasoning effort {} takes ({offered})", def.id)));
        }
    }
    a.insert(PERMISSION_KEY.into(), json!(mode));
    for (k, v) in [("model", model), ("reasoning", reasoning)] {
        match v {
            Some(v) => a.insert(k.into(), json!(v)),
            None => a.remove(k),
        };
    }
    if let Some(p) = &d.path {
        a.insert("agentBin".into(), json!(p.display().to_string()));
    }
    Ok(())
}

/// A string option, trimmed; blank or absent is None, another type refused naming `k`.
fn option_text(a: &Map<String, Value>, k: &str) -> Result<Option<String>, AgentConfigError> {
    match a.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(other) => Err(AgentConfigError::invalid(k, format!("must be a string, not {other}"))),
    }
}

/// The run's `permissionMode` (default `accept-edits`): one of the modes, one this CLI has, and
/// `ask` only for a CLI that can ask while it runs headless.
fn permission_mode(def: &AgentDef, a: &Map<String, Value>) -> Result<String, AgentConfigError> {
    let mode = option_text(a, PERMISSION_KEY)?.unwrap_or_else(|| DEFAULT_PERMISSION_MODE.to_string());
    if !PERMISSION_MODES.contains(&mode.as_str()) {
        return Err(AgentConfigError::invalid(
            PERMISSION_KEY,
            format!("{mode:?} is not one of {}", PERMISSION_MODES.join(", ")),
        ));
    }
    if mode == "ask" && !def.asks_headless {
        return Err(AgentConfigError::refused(
            PERMISSION_KEY,
            format!(
                "{} cannot ask the user while it runs headless, and od does not widen ask to accept-edits silently; \
                 choose accept-edits or bypass, or run it over ACP (agent acp)",
                def.name
            ),
        ));
    }
    if !def.permission_modes.contains_key(&mode) {
        return Err(AgentConfigError::refused(PERMISSION_KEY, format!("{} has no {mode} mode", def.name)));
    }
    Ok(mode)
}
