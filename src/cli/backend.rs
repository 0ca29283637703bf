//! Where the engine keeps its log and its plugins and projects (`--store`, `--shared-dir`), and how
//! a failure to open or start it reads on the command line: the store's setting at fault, the data
//! dir's lock with who holds it, a TLS setting that could not be used.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

use super::error::CliError;
use crate::daemon::{DaemonConfig, DaemonError};

/// Where the engine keeps its log and its plugins and projects: `--store` and `--shared-dir` as
/// given (the environment fills in the rest when the engine starts).
#[derive(Debug, Clone, Default)]
pub struct Backend {
    pub store: Option<String>,
    pub shared_dir: Option<PathBuf>,
}

impl Backend {
    /// Sets the engine's store and shared dir (from the flags, else the environment).
    pub fn configure(&self, cfg: &mut DaemonConfig) -> Result<(), CliError> {
        cfg.store = crate::store::StoreSpec::from_env(self.store.as_deref()).map_err(store_error)?;
        cfg.shared_dir = self.shared_dir.clone();
        Ok(())
    }
}

/// A store error as the CLI reports it: the setting that chose the backend, when one did.
pub fn store_error(s: crate::store::StoreError) -> CliError {
    let data = match &s {
        crate::store::StoreError::Config { setting, .. } | crate::store::StoreError::Unreachable { setting, .. } => {
            serde_json::json!({ "setting": setting })
        }
        _ => Value::Null,
    };
    CliError { code: s.code().into(), message: s.to_string(), data }
}

/// Maps a failure to start the engine to a CLI error.
pub fn daemon_error(e: DaemonError) -> CliError {
    match e {
        DaemonError::Store(crate::store::StoreError::Locked(dir)) => locked_error(Path::new(&dir), None),
        DaemonError::Store(s) => store_error(s),
        DaemonError::TokenRequired { .. } => CliError::new("token-required", e.to_string()),
        DaemonError::TlsRequired { .. } => CliError::new("tls-required", e.to_string()),
        DaemonError::Tls(e) => tls_error(e),
        DaemonError::BadHost(_) => CliError::new("usage", e.to_string()),
        DaemonError::OutboundList(l) => CliError::new("invalid-input", l.to_string())
            .with_data(serde_json::json!({ "field": l.var, "entry": l.entry })),
        DaemonError::Bind { .. } => CliError::new("bind-failed", e.to_string()),
    }
}

/// A TLS setting that could not be used: exit 2, naming the setting (and the file, in the message).
pub fn tls_error(e: crate::http::tls::TlsServeError) -> CliError {
    CliError::new("tls-config", e.to_string()).with_data(json!({ "setting": e.setting() }))
}

/// `data-dir-locked` (exit 80) with what to do: which process holds the data dir when known.
pub fn locked_error(data_dir: &Path, waited_secs: Option<f64>) -> CliError {
    let holder = holder(data_dir);
    let who = match &holder {
        Some((pid, cmd)) => format!("another od process (pid {pid}: {cmd})"),
        None => "another od process".to_string(),
    };
    let waited = waited_secs.map(|s| format!(" for {s:.1} s")).unwrap_or_default();
    let mut e = CliError::new(
        "data-dir-locked",
        format!(
            "{who} holds the data dir {} and has not let go{waited}. Wait for it to finish and retry, or stop it; \
             a daemon (`od daemon start`) lets every command share the data dir. A different data dir: --data-dir or OD_DATA_DIR",
            data_dir.display()
        ),
    );
    e.data = json!({
        "dataDir": data_dir,
        "holderPid": holder.as_ref().map(|h| h.0),
        "holderCommand": holder.map(|h| h.1),
        "remediation": ["retry when the other od command ends", "od daemon start", "--data-dir <another dir>"],
    });
    e
}

/// The process holding the data dir, from the discovery files an engine writes: `(pid, command)`.
fn holder(data_dir: &Path) -> Option<(u64, String)> {
    [crate::daemon::discovery_file(data_dir), crate::daemon::engine_file(data_dir)].iter().find_map(|f| {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(f).ok()?).ok()?;
        let pid = v["pid"].as_u64()?;
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmd = cmd.split(|b| *b == 0).filter(|a| !a.is_empty()).map(String::from_utf8_lossy).collect::<Vec<_>>();
        Some((pid, cmd.join(" ")))
    })
}
