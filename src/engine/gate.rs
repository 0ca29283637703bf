//! The one gate (DESIGN.md §5): every way od starts a program or touches the file system outside a
//! project passes [`pass`] — an agent command or environment a request supplies (or a fork
//! inherits), a worker command (`metadata.buildCommand` / `testCommand`, run by the `build-test`
//! atom), an MCP server's stdio `command`, a folder adopted by `POST /api/import/folder`. It checks
//! the caller's exec right ([`ExecRight`]: a token — the od CLI sends the local user's — or a
//! daemon run with `OD_ALLOW_HTTP_EXEC=1`) and, when a plugin is behind the reach, the plugin's
//! capability. `tests/api/gate.rs` enumerates every route and field that reaches it.
//!
//! A run remembers its creator's right in its agent options (`mayExec`, written by the engine only,
//! never taken from a request or a bundle), so the worker commands it runs later — after a restart
//! too — are judged by the right of whoever started it.

use std::collections::BTreeSet;

use super::apply::ApplyError;
use super::errors::WorkError;

/// The key of a run's agent options that records its creator's exec right.
pub const MAY_EXEC_KEY: &str = "mayExec";

/// Whether the caller may make od run a program or reach outside a project.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExecRight {
    /// No token (a web page, a script on the host without the local token): nothing runs.
    #[default]
    Denied,
    /// A token holder, the od CLI as the local user, or a daemon with `OD_ALLOW_HTTP_EXEC=1`.
    Granted,
}

impl ExecRight {
    pub fn from_bool(may: bool) -> Self {
        if may {
            ExecRight::Granted
        } else {
            ExecRight::Denied
        }
    }

    pub fn granted(self) -> bool {
        self == ExecRight::Granted
    }

    /// The right a run's agent options recorded (absent: denied).
    pub fn of_run(config: &serde_json::Value) -> Self {
        Self::from_bool(config[MAY_EXEC_KEY] == true)
    }
}

/// Whether agent options run a command (or an environment) someone supplied: anything but the
/// daemon's own `OD_AGENT_CMD`, which needs no right.
pub fn supplied_command(config: &serde_json::Value) -> bool {
    use serde_json::Value;
    let own = std::env::var("OD_AGENT_CMD").ok();
    let command = match &config["command"] {
        Value::Null => false,
        Value::String(c) => own.as_deref() != Some(c.as_str()),
        _ => true,
    };
    command || !config["env"].is_null()
}

/// What is about to cross the boundary; `field` names the request field (or recorded key) that
/// asked for it, so a refusal names it.
#[derive(Clone, Copy, Debug)]
pub enum Reach<'a> {
    /// An agent command or environment supplied by the request (`agentCommand`, `agentEnv`).
    AgentCommand { field: &'a str },
    /// A run's recorded agent command that a fork would run again (`agentCommand` of the parent).
    InheritedAgentCommand,
    /// A project's build or test command (`metadata.buildCommand`, `metadata.testCommand`).
    WorkerCommand { field: &'a str },
    /// An MCP server's stdio `command` (`od.context.mcp[].command` of a plugin).
    McpStdio { plugin_id: &'a str, server: &'a str },
    /// A folder outside the data dir adopted as a project (`path` of `POST /api/import/folder`).
    AdoptFolder,
    /// A catalog agent run in `bypass` permission mode (`permissionMode`): it may run anything.
    BypassPermissions,
}

impl Reach<'_> {
    fn field(&self) -> String {
        match self {
            Reach::AgentCommand { field } | Reach::WorkerCommand { field } => field.to_string(),
            Reach::InheritedAgentCommand => "agentCommand".into(),
            Reach::McpStdio { server, .. } => format!("od.context.mcp[{server}].command"),
            Reach::AdoptFolder => "path".into(),
            Reach::BypassPermissions => "permissionMode".into(),
        }
    }

    fn what(&self) -> String {
        match self {
            Reach::AgentCommand { .. } => "supply an agent command".into(),
            Reach::InheritedAgentCommand => "run the parent run's agent command again (a fork)".into(),
            Reach::WorkerCommand { .. } => "have a project's build or test command run".into(),
            Reach::McpStdio { plugin_id, server } => format!("start plugin {plugin_id}'s MCP server {server}"),
            Reach::AdoptFolder => "adopt a folder outside the data dir as a project".into(),
            Reach::BypassPermissions => "run an agent in bypass permission mode (it may run any command)".into(),
        }
    }
}

/// The capability a plugin must hold for a reach: every one of `required` in `granted`.
#[derive(Clone, Debug, Default)]
pub struct Capability {
    pub plugin_id: String,
    pub plugin_version: String,
    pub required: BTreeSet<String>,
    pub granted: BTreeSet<String>,
}

/// Passes when the caller holds the exec right and the plugin (if any) its capability; else the
/// refusal: [`WorkError::ExecForbidden`] (403 `exec-forbidden`), or the plugin's missing
/// capabilities (`capabilities-required`).
pub fn pass(right: ExecRight, reach: Reach<'_>, capability: Option<&Capability>) -> Result<(), WorkError> {
    if !right.granted() {
        return Err(WorkError::ExecForbidden { field: reach.field(), what: reach.what() });
    }
    let Some(c) = capability else { return Ok(()) };
    let missing: Vec<String> = c.required.difference(&c.granted).cloned().collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(WorkError::Apply(ApplyError::CapabilitiesRequired {
        plugin_id: c.plugin_id.clone(),
        plugin_version: c.plugin_version.clone(),
        required: c.required.iter().cloned().collect(),
        granted: c.granted.iter().cloned().collect(),
        missing,
    }))
}

/// Top-level folders of the system a project may not be, or be inside of.
const SYSTEM_FOLDERS: [&str; 14] = [
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys", "/usr",
    "/var",
];

/// Whether `folder` (absolute, links resolved) may be a project's folder: not `/`, not the data dir,
/// inside it or holding it (its token, credentials and log), not the home folder itself, and not a
/// system folder or inside one. `/tmp` and `/var/tmp` are the user's.
pub fn adoptable(
    folder: &std::path::Path,
    data_dir: &std::path::Path,
    home: Option<&std::path::Path>,
) -> Result<(), WorkError> {
    let data = data_dir.canonicalize().unwrap_or_else(|_| data_dir.to_path_buf());
    let refuse = |why: &str| Err(WorkError::invalid("path", format!("{} {why}", folder.display())));
    if folder.parent().is_none() {
        return refuse("is the file system's root");
    }
    if folder.starts_with(&data) || data.starts_with(folder) {
        return refuse("is od's data dir, inside it or holds it (its token, credentials and log)");
    }
    if home == Some(folder) {
        return refuse("is the home folder itself (pick a folder inside it)");
    }
    let user_tmp = folder.starts_with("/var/tmp");
    if !user_tmp && SYSTEM_FOLDERS.iter().any(|s| folder.starts_with(s)) {
        return refuse("is a system folder or inside one");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_is_exec_forbidden_and_a_missing_capability_is_named() {
        let e = pass(ExecRight::Denied, Reach::WorkerCommand { field: "metadata.buildCommand" }, None).unwrap_err();
        assert_eq!(e.code(), "exec-forbidden");
        assert!(e.to_string().contains("metadata.buildCommand"), "{e}");
        let cap = Capability {
            plugin_id: "p".into(),
            required: ["subprocess".to_string()].into(),
            granted: ["fs:read".to_string()].into(),
            ..Default::default()
        };
        let e = pass(ExecRight::Granted, Reach::McpStdio { plugin_id: "p", server: "s" }, Some(&cap)).unwrap_err();
        assert!(
            matches!(e, WorkError::Apply(ApplyError::CapabilitiesRequired { ref missing, .. }) if missing == &["subprocess"])
        );
        assert!(pass(ExecRight::Granted, Reach::AdoptFolder, None).is_ok());
        assert_eq!(ExecRight::of_run(&serde_json::json!({ "mayExec": true })), ExecRight::Granted);
        assert_eq!(ExecRight::of_run(&serde_json::json!({ "mayExec": "true" })), ExecRight::Denied);
    }

    #[test]
    fn the_data_dir_root_and_system_folders_are_not_adoptable() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir_all(data.join("credentials")).unwrap();
        let data = data.canonicalize().unwrap();
        for bad in [std::path::Path::new("/"), &data, &data.join("credentials"), data.parent().unwrap()] {
            assert!(adoptable(bad, &data, None).is_err(), "{}", bad.display());
        }
        for bad in ["/etc", "/usr/lib", "/var/lib/x", "/proc/self"] {
            assert!(adoptable(std::path::Path::new(bad), &data, None).is_err(), "{bad}");
        }
        let other = tmp.path().canonicalize().unwrap().join("work");
        assert!(adoptable(&other, &data, None).is_ok());
        assert!(adoptable(&other, &data, Some(&other)).is_err(), "the home folder itself");
        assert!(adoptable(std::path::Path::new("/var/tmp/x"), &data, None).is_ok());
    }
}
