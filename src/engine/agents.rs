//! Which agent a run uses. One rule for a run that names none, shared by HTTP, the CLI, MCP and the
//! web UI: `OD_AGENT` (`exec` or `dry-run`) — else `exec` when `OD_AGENT_CMD` is set — else
//! `dry-run`. The choice and its reason (`agentSource`) are recorded inside the run's agent options
//! (`RunCreated.agent_config_json`), so no event changes shape. Also upstream's `agentId` alias and
//! the agents this daemon can run now (`GET /api/agents`): od's own two, then the agent catalog's
//! (`src/agents/`).

use serde_json::{json, Map, Value};

use super::errors::WorkError;

/// A run asking for `bypass` needs the exec right (`gate.rs`), as a command does.
pub fn check_bypass(config: &Value, right: super::gate::ExecRight) -> Result<(), WorkError> {
    if config[crate::agents::PERMISSION_KEY] == "bypass" {
        super::gate::pass(right, super::gate::Reach::BypassPermissions, None)?;
    }
    Ok(())
}

/// od's own agents (the values `agent` and `agentId` may take besides the catalog's ids).
pub const RUNNABLE: [&str; 2] = ["exec", "dry-run"];

/// The recorded key saying why the run has its agent.
pub const SOURCE_KEY: &str = "agentSource";

/// The daemon's agent settings, read from its environment when a run is created (tests start a
/// daemon process with their own environment).
#[derive(Debug, Clone, Default)]
pub struct AgentEnv {
    /// `OD_AGENT`, trimmed; empty counts as unset.
    pub od_agent: Option<String>,
    /// `OD_AGENT_CMD`; blank counts as unset.
    pub od_agent_cmd: Option<String>,
}

impl AgentEnv {
    /// The default agent and why: `(agent, agentSource)`. An `OD_AGENT` od does not run is an
    /// error naming the variable.
    pub fn default_agent(&self) -> Result<(&'static str, &'static str), WorkError> {
        match self.od_agent.as_deref() {
            Some("exec") => Ok(("exec", "OD_AGENT")),
            Some("dry-run") => Ok(("dry-run", "OD_AGENT")),
            Some(other) => Err(WorkError::invalid(
                "OD_AGENT",
                format!("the daemon's OD_AGENT is {other:?}; it may be {}", RUNNABLE.join(" or ")),
            )),
            None if self.od_agent_cmd.is_some() => Ok(("exec", "OD_AGENT_CMD")),
            None => Ok(("dry-run", "default")),
        }
    }
}

/// What a run's agent options say about how it was chosen (old runs: the request's).
pub fn source_of(config: &Value) -> &str {
    config[SOURCE_KEY].as_str().unwrap_or("request")
}

/// The line a run shows when dry-run was chosen only because nothing is configured.
pub const UNCONFIGURED_NOTE: &str =
    "dry-run agent: no agent configured (set OD_AGENT_CMD to a command speaking od's agent protocol, or OD_AGENT)";

/// Picks the agent of the options `a` (`agent`, or its alias `agentId`, or the default rule) and
/// records it with its source. `agentId` naming neither od's own agent nor one of `catalog` is
/// refused (422).
pub fn choose(a: &mut Map<String, Value>, env: &AgentEnv, catalog: &[String]) -> Result<(), WorkError> {
    let id = match a.remove("agentId") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => return Err(WorkError::invalid("agentId", format!("must be a string, not {other}"))),
    };
    if let Some(id) = &id {
        if !RUNNABLE.contains(&id.as_str()) && !catalog.contains(id) {
            return Err(WorkError::UnknownAgent {
                field: "agentId".into(),
                id: id.clone(),
                runnable: runnable(catalog),
            });
        }
        if let Some(named) = a.get("agent").and_then(Value::as_str).filter(|n| *n != id) {
            return Err(WorkError::invalid("agentId", format!("{id:?} contradicts agent {named:?}")));
        }
    }
    let (agent, source) = match (a.get("agent").and_then(Value::as_str), id) {
        (Some(named), _) => (named.to_string(), "request"),
        (None, Some(id)) => (id, "request"),
        // A dry-run script names its agent.
        (None, None) if a.contains_key("dryRun") => ("dry-run".to_string(), "request"),
        (None, None) => {
            let (agent, source) = env.default_agent()?;
            (agent.to_string(), source)
        }
    };
    a.insert("agent".into(), json!(agent));
    a.insert(SOURCE_KEY.into(), json!(source));
    Ok(())
}

/// od's own agents, then the catalog's.
pub fn runnable(catalog: &[String]) -> Vec<String> {
    RUNNABLE.iter().map(|s| s.to_string()).chain(catalog.iter().cloned()).collect()
}

/// A command line as `GET /api/agents` shows it: `NAME=value` words (an environment given inline)
/// keep their name only, so a key written into `OD_AGENT_CMD` is not shown.
pub fn redact(cmd: &str) -> String {
    let word = |w: &str| match w.split_once('=') {
        Some((name, _)) if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
            format!("{name}=…")
        }
        _ => w.to_string(),
    };
    cmd.split_whitespace().map(word).collect::<Vec<_>>().join(" ")
}

/// The agents this daemon can run, upstream's `AgentInfo` names where they fit (`id`, `name`,
/// `available`), plus `default` (the rule above) and, for `exec`, its configured command (the
/// command line only: never an environment). `exec` without `OD_AGENT_CMD` is listed unavailable.
/// Then the catalog's agents as detected (`crate::agents::info`).
pub fn list(
    env: &AgentEnv,
    data_dir: &std::path::Path,
    probe: &crate::agents::detect::ProbeEnv,
    clock: &dyn crate::clock::Clock,
) -> Result<Value, WorkError> {
    let (default, source) = env.default_agent()?;
    let exec_ready = env.od_agent_cmd.is_some();
    let mut agents = vec![
        json!({
            "id": "exec", "name": "Exec agent (OD_AGENT_CMD)", "available": exec_ready,
            "bin": "", "default": default == "exec", "command": env.od_agent_cmd.as_deref().map(redact),
            "protocols": ["auto", "od", "claude-stream-json"],
            "reason": if exec_ready { Value::Null } else { json!("OD_AGENT_CMD is not set (a request may name agentCommand with the exec right)") },
        }),
        json!({
            "id": "dry-run", "name": "Dry run (no model, deterministic)", "bin": "", "available": true,
            "default": default == "dry-run", "command": Value::Null, "protocols": [], "reason": Value::Null,
        }),
    ];
    agents.extend(crate::agents::list(data_dir, probe, clock, default)?);
    Ok(json!({
        "agents": agents, "default": default, "defaultSource": source,
        "note": if source == "default" { json!(UNCONFIGURED_NOTE) } else { Value::Null },
    }))
}
