//! The engine's settings, read once when the engine is made (`daemon.rs` reads the environment at
//! start; tests and embedders may build one by hand): the `OD_*` variables commands consult, typed
//! and checked here, so no command reads the environment while it runs.

use std::path::PathBuf;

use super::agents::AgentEnv;
use crate::limits::{DEFAULT_MAX_DEVLOOP_ITERATIONS, LEASE_TTL_MS, MAX_DEVLOOP_ITERATIONS_CAP};

/// Default days an unreferenced snapshot is kept.
pub const DEFAULT_UNREFERENCED_TTL_DAYS: i64 = 30;

/// Where `github:` plugin sources are downloaded from by default.
pub const GITHUB_TARBALL_BASE: &str = "https://codeload.github.com";

/// The engine's settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// A shared log only: how long a daemon may miss heartbeats before its runs are taken over
    /// (the daemon's `OD_LEASE_TTL_MS`, [`DaemonConfig::lease_ttl_ms`](crate::daemon::DaemonConfig)).
    pub lease_ttl_ms: u64,
    /// The environment agent binaries are found and probed in (`*_BIN` overrides, `PATH`):
    /// `None` reads the process's own at each use (the agents' own environment changes with it).
    pub agent_probe: Option<crate::agents::detect::ProbeEnv>,
    /// `OD_AGENT`, `OD_AGENT_CMD`: the default agent, and the daemon's own command (which needs no
    /// exec right).
    pub agent: AgentEnv,
    /// `OD_SNAPSHOT_UNREFERENCED_TTL_DAYS` (0 keeps them forever; default
    /// [`DEFAULT_UNREFERENCED_TTL_DAYS`]).
    pub snapshot_unreferenced_ttl_days: i64,
    /// `OD_SNAPSHOT_RETENTION_DAYS` (unset or 0: off): the opt-in window after which a snapshot
    /// still referenced — but only by runs that have ended — is retired too (spec §16 PB2).
    pub snapshot_retention_days: Option<i64>,
    /// `OD_GENUI_PROJECT_TTL_DAYS`: project-remembered GenUI answers expire after this many days.
    pub genui_project_ttl_days: Option<i64>,
    /// `HOME`: a project may not adopt the home folder itself.
    pub home: Option<PathBuf>,
    /// `OD_GITHUB_TARBALL_BASE`: where `github:` sources are downloaded from.
    pub github_tarball_base: String,
    /// `OD_TRUST_DEFAULT=restricted`: sources that would be trusted (a local folder or archive, a
    /// trusted marketplace's entry) are installed restricted too (upstream's hosted default).
    pub trust_default_restricted: bool,
    /// `OD_TRUSTED_PLUGINS=a,b`: plugin ids installed trusted whatever their source (an operator's
    /// decision, e.g. a hosted deployment trusting one plugin of an untrusted marketplace).
    pub trusted_plugins: Vec<String>,
    /// `OD_MAX_DEVLOOP_ITERATIONS` (default 10, at least 1, at most the hard cap).
    pub max_devloop_iterations: u32,
}

impl Default for EngineConfig {
    /// The settings with no variable set.
    fn default() -> Self {
        Self::from_vars(|_| None)
    }
}

impl EngineConfig {
    /// The settings the process's environment gives.
    pub fn from_env() -> Self {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// The settings `var` gives (a variable's value by name); malformed values are ignored, as
    /// unset.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let int = |k: &str| var(k).and_then(|v| v.trim().parse::<i64>().ok());
        let nonblank = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        Self {
            lease_ttl_ms: LEASE_TTL_MS,
            agent_probe: None,
            agent: AgentEnv {
                od_agent: nonblank("OD_AGENT").map(|v| v.trim().to_string()),
                od_agent_cmd: nonblank("OD_AGENT_CMD"),
            },
            snapshot_unreferenced_ttl_days: int("OD_SNAPSHOT_UNREFERENCED_TTL_DAYS")
                .filter(|d| *d >= 0)
                .unwrap_or(DEFAULT_UNREFERENCED_TTL_DAYS),
            snapshot_retention_days: int("OD_SNAPSHOT_RETENTION_DAYS").filter(|d| *d > 0),
            genui_project_ttl_days: int("OD_GENUI_PROJECT_TTL_DAYS").filter(|d| *d > 0),
            home: var("HOME").map(PathBuf::from),
            github_tarball_base: var("OD_GITHUB_TARBALL_BASE").unwrap_or_else(|| GITHUB_TARBALL_BASE.into()),
            trust_default_restricted: var("OD_TRUST_DEFAULT")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("restricted")),
            trusted_plugins: var("OD_TRUSTED_PLUGINS")
                .map(|v| v.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect())
                .unwrap_or_default(),
            max_devloop_iterations: var("OD_MAX_DEVLOOP_ITERATIONS")
                .and_then(|v| v.trim().parse::<u32>().ok())
                .unwrap_or(DEFAULT_MAX_DEVLOOP_ITERATIONS)
                .clamp(1, MAX_DEVLOOP_ITERATIONS_CAP),
        }
    }

    /// Whether plugin `id` is installed trusted whatever its source (`OD_TRUSTED_PLUGINS`).
    pub fn operator_trusted(&self, id: &str) -> bool {
        self.trusted_plugins.iter().any(|x| x == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(pairs: &[(&str, &str)]) -> EngineConfig {
        let m: std::collections::HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        EngineConfig::from_vars(|k| m.get(k).cloned())
    }

    #[test]
    fn malformed_or_out_of_range_values_count_as_unset() {
        let c = of(&[
            ("OD_SNAPSHOT_UNREFERENCED_TTL_DAYS", "-1"),
            ("OD_SNAPSHOT_RETENTION_DAYS", "0"),
            ("OD_GENUI_PROJECT_TTL_DAYS", "soon"),
            ("OD_MAX_DEVLOOP_ITERATIONS", "0"),
            ("OD_AGENT", "  "),
        ]);
        assert_eq!(c.snapshot_unreferenced_ttl_days, DEFAULT_UNREFERENCED_TTL_DAYS);
        assert_eq!(c.snapshot_retention_days, None);
        assert_eq!(c.genui_project_ttl_days, None);
        assert_eq!(c.max_devloop_iterations, 1);
        assert_eq!(c.agent.od_agent, None);
    }

    #[test]
    fn set_values_are_read_once_into_the_struct() {
        let c = of(&[
            ("OD_SNAPSHOT_UNREFERENCED_TTL_DAYS", "0"),
            ("OD_SNAPSHOT_RETENTION_DAYS", "7"),
            ("OD_TRUST_DEFAULT", " Restricted "),
            ("OD_TRUSTED_PLUGINS", "a, b ,"),
            ("OD_MAX_DEVLOOP_ITERATIONS", "1000000"),
            ("OD_AGENT", " exec "),
        ]);
        assert_eq!(c.snapshot_unreferenced_ttl_days, 0);
        assert_eq!(c.snapshot_retention_days, Some(7));
        assert!(c.trust_default_restricted);
        assert!(c.operator_trusted("b") && !c.operator_trusted(""));
        assert_eq!(c.max_devloop_iterations, MAX_DEVLOOP_ITERATIONS_CAP);
        assert_eq!(c.agent.od_agent.as_deref(), Some("exec"));
    }
}
