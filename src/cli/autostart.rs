//! Starting a daemon in the background on demand: what the CLI does for a command whose work
//! outlives it (a run: `od run start`, `run watch`, answers that resume a run; long-lived
//! commands: `od mcp`, `od log tail --follow`) when no daemon serves the data dir.
//!
//! The run then belongs to a daemon process of its own, so no command's exit ends another
//! command's run (issue 13 item 4). Several commands starting at once each spawn a candidate; one
//! takes the data dir's lock and the rest exit `data-dir-locked` while the commands wait for the
//! winner's `daemon.json` — all of them end up on the one daemon (item 5). A daemon started this
//! way listens on a free port and exits by itself once idle (no run in flight, no connection) for
//! [`AUTOSTART_IDLE_EXIT_MS`](crate::limits::AUTOSTART_IDLE_EXIT_MS), or when its data dir is
//! removed.

use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::backend::{locked_error, Backend};
use super::discover::find_daemon;
use super::{CliError, CliResult};
use crate::limits::{AUTOSTART_IDLE_EXIT_MS, AUTOSTART_WAIT_MS};

/// How a background daemon is started.
pub struct Spawn<'a> {
    pub data_dir: &'a Path,
    pub port: u16,
    pub host: &'a str,
    pub allow_http_exec: bool,
    /// Exit when idle this long (`--idle-exit-ms`); `None`: stay until stopped.
    pub idle_exit_ms: Option<u64>,
    /// How long to wait for a daemon to answer.
    pub wait: Duration,
    /// `--store` and `--shared-dir`, passed on (the environment is inherited).
    pub backend: &'a Backend,
}

/// A daemon that answers for the data dir: `(url, pid of the one this call started, if any)`.
pub struct Started {
    pub url: String,
    pub spawned_pid: Option<u32>,
}

/// The wait for a daemon to answer: `OD_DAEMON_START_TIMEOUT_MS`, else [`AUTOSTART_WAIT_MS`].
pub fn wait_budget() -> Duration {
    let ms = std::env::var("OD_DAEMON_START_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|v| *v > 0)
        .unwrap_or(AUTOSTART_WAIT_MS);
    Duration::from_millis(ms)
}

/// The idle exit of an on-demand daemon: `OD_DAEMON_IDLE_EXIT_MS` (0 = never), else the default.
pub fn idle_exit_ms() -> Option<u64> {
    match std::env::var("OD_DAEMON_IDLE_EXIT_MS").ok().and_then(|v| v.trim().parse::<u64>().ok()) {
        Some(0) => None,
        Some(ms) => Some(ms),
        None => Some(AUTOSTART_IDLE_EXIT_MS),
    }
}

/// Ensures a daemon serves `data_dir`, starting one in the background if none does. `token`:
/// `OD_API_TOKEN`, used when probing.
pub fn ensure(spawn: &Spawn, token: Option<&str>) -> CliResult<Started> {
    if let Some(url) = find_daemon(spawn.data_dir, None, token)? {
        return Ok(Started { url, spawned_pid: None });
    }
    std::fs::create_dir_all(spawn.data_dir)
        .map_err(|e| CliError::new("error", format!("creating the data dir {}: {e}", spawn.data_dir.display())))?;
    let deadline = Instant::now() + spawn.wait;
    let mut child = Some(launch(spawn)?);
    let mut locked = false;
    loop {
        if let Some(url) = find_daemon(spawn.data_dir, None, token)? {
            let spawned_pid = child.as_mut().and_then(|c| matches!(c.try_wait(), Ok(None)).then(|| c.id()));
            return Ok(Started { url, spawned_pid });
        }
        if let Some(c) = child.as_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                child = None;
                if status.code() != Some(LOCKED_EXIT) {
                    // Not a race with another starter: nothing will answer.
                    return Err(exit_error(spawn.data_dir, status));
                }
                // Someone else holds the data dir: a daemon starting (its daemon.json comes next)
                // or a short command in embedded mode (done soon). Try again once it lets go.
                locked = true;
            }
        }
        if Instant::now() >= deadline {
            if let Some(mut c) = child {
                let _ = c.kill();
                let _ = c.wait();
            }
            return Err(locked_or_timeout(spawn, locked));
        }
        std::thread::sleep(Duration::from_millis(25));
        if child.is_none() && find_daemon(spawn.data_dir, None, token)?.is_none() {
            child = Some(launch(spawn)?);
        }
    }
}

/// Spawns `od daemon start --foreground …` detached: its own process group, stdio to daemon.log.
fn launch(spawn: &Spawn) -> CliResult<Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(crate::daemon_log::log_file(spawn.data_dir))
        .map_err(|e| CliError::new("error", format!("opening daemon.log: {e}")))?;
    let exe = std::env::current_exe().map_err(|e| CliError::new("error", e.to_string()))?;
    let mut cmd = Command::new(exe);
    cmd.args(["daemon", "start", "--foreground", "--json", "--port", &spawn.port.to_string(), "--host", spawn.host])
        .args(spawn.allow_http_exec.then_some("--allow-http-exec"))
        .args(spawn.idle_exit_ms.map(|ms| format!("--idle-exit-ms={ms}")))
        .args(spawn.backend.store.as_ref().map(|s| format!("--store={s}")))
        .args(spawn.backend.shared_dir.as_ref().map(|d| format!("--shared-dir={}", d.display())))
        .arg("--log-file")
        .arg(crate::daemon_log::log_file(spawn.data_dir))
        .arg("--data-dir")
        .arg(spawn.data_dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| CliError::new("error", e.to_string()))?)
        .stderr(log);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.spawn().map_err(|e| CliError::new("daemon-failed", format!("spawning the daemon: {e}")))
}

/// The exit code of `data-dir-locked` ([`CliError::exit_code`]).
const LOCKED_EXIT: i32 = 80;

/// The error a spawned daemon exited with: its last daemon.log line when that is an error
/// envelope, else `daemon-failed` quoting it.
fn exit_error(data_dir: &Path, status: std::process::ExitStatus) -> CliError {
    let log = data_dir.join("daemon.log");
    let tail = std::fs::read_to_string(&log).unwrap_or_default();
    let last = tail.lines().rev().find(|l| !l.is_empty()).unwrap_or("").to_string();
    let mut e = serde_json::from_str::<Value>(&last)
        .ok()
        .filter(|v| v.get("error").is_some())
        .map(|v| CliError::from_body(0, &v.to_string()))
        .unwrap_or_else(|| CliError::new("daemon-failed", format!("the daemon exited ({status}): {last}")));
    if e.data.is_null() {
        e.data = json!({ "log": log });
    }
    e
}

/// The error when no daemon answered in time: the data dir stayed locked (with what to do), or
/// the daemon did not answer.
fn locked_or_timeout(spawn: &Spawn, locked: bool) -> CliError {
    let secs = spawn.wait.as_secs_f64();
    match locked {
        true => locked_error(spawn.data_dir, Some(secs)),
        false => {
            let mut e = CliError::new(
                "daemon-failed",
                format!(
                    "the daemon did not answer within {secs:.1} s; see {}",
                    spawn.data_dir.join("daemon.log").display()
                ),
            );
            e.data = json!({ "log": spawn.data_dir.join("daemon.log") });
            e
        }
    }
}
