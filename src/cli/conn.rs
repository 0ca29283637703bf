//! How the CLI reaches the engine: a running daemon when there is one (`discover.rs`), otherwise
//! the engine started in-process on the data dir (embedded mode) and spoken to over loopback HTTP —
//! one code path; or, for a command whose work outlives it, a daemon started in the background
//! (`autostart.rs`).

use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use super::autostart;
use super::backend::{daemon_error, Backend};
use super::discover::{agent, call_error, find_daemon, token_for};
use super::error::{CliError, CliResult};
use crate::daemon::{start, DaemonConfig, DaemonError, Running};

/// A connection to the engine's HTTP API.
pub struct Conn {
    pub base: String,
    token: Option<String>,
    agent: ureq::Agent,
    embedded: Option<(tokio::runtime::Runtime, Running)>,
}

impl Conn {
    /// Connects to a daemon for `data_dir`, or starts the engine embedded for this one command
    /// (it resumes no run: a command that outlives itself uses [`Conn::open_daemon`]). When another
    /// process holds the data dir, waits for a daemon as `open_daemon` does.
    pub fn open(
        data_dir: &Path,
        explicit_url: Option<&str>,
        token: Option<String>,
        backend: &Backend,
    ) -> CliResult<Self> {
        if let Some(base) = find_daemon(data_dir, explicit_url, token.as_deref())? {
            let token = token_for(data_dir, &base, token.as_deref());
            return Ok(Self { base, token, agent: agent(None), embedded: None });
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| CliError::new("error", format!("starting the runtime: {e}")))?;
        let mut cfg = DaemonConfig::new(PathBuf::from(data_dir));
        backend.configure(&mut cfg)?;
        cfg.embedded = true;
        cfg.resume_runs = false;
        match rt.block_on(start(cfg)) {
            Ok(running) => {
                let base = running.url();
                let token = Some(running.local_token.clone());
                Ok(Self { base, token, agent: agent(None), embedded: Some((rt, running)) })
            }
            // Another od holds the data dir (a daemon starting, or a command like this one): wait
            // for a daemon to serve it rather than fail.
            Err(DaemonError::Store(crate::store::StoreError::Locked(_))) => {
                drop(rt);
                Self::open_daemon(data_dir, None, token, backend)
            }
            Err(e) => Err(daemon_error(e)),
        }
    }

    /// Connects to the daemon serving `data_dir`, starting one in the background when none does
    /// (`cli/autostart.rs`): for commands whose work outlives them (runs), so that no command's
    /// exit ends a run another command started.
    pub fn open_daemon(
        data_dir: &Path,
        explicit_url: Option<&str>,
        token: Option<String>,
        backend: &Backend,
    ) -> CliResult<Self> {
        let base = match find_daemon(data_dir, explicit_url, token.as_deref())? {
            Some(base) => base,
            None => {
                let spawn = autostart::Spawn {
                    data_dir,
                    port: 0,
                    host: "127.0.0.1",
                    allow_http_exec: false,
                    idle_exit_ms: autostart::idle_exit_ms(),
                    backend,
                    wait: autostart::wait_budget(),
                };
                let started = autostart::ensure(&spawn, token.as_deref())?;
                if let Some(pid) = started.spawned_pid {
                    // Said to a person only: a daemon now runs that they did not start by name.
                    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                        eprintln!(
                            "od: started a daemon for this data dir at {} (pid {pid}; it stops when idle, or `od daemon stop`)",
                            started.url
                        );
                    }
                }
                started.url
            }
        };
        let token = token_for(data_dir, &base, token.as_deref());
        Ok(Self { base, token, agent: agent(None), embedded: None })
    }

    /// The same connection presenting `token` instead (a run's tool token).
    pub fn with_bearer(mut self, token: String) -> Self {
        self.token = Some(token);
        self
    }

    fn req(&self, method: &str, path: &str) -> ureq::Request {
        let r = self.agent.request(method, &format!("{}{path}", self.base));
        match &self.token {
            Some(t) => r.set("Authorization", &format!("Bearer {t}")),
            None => r,
        }
    }

    fn finish(&self, res: Result<ureq::Response, ureq::Error>) -> CliResult<ureq::Response> {
        res.map_err(|e| call_error(&self.base, e))
    }

    /// GET returning JSON.
    pub fn get(&self, path: &str) -> CliResult<Value> {
        let r = self.finish(self.req("GET", path).call())?;
        r.into_json().map_err(|e| CliError::new("daemon-error", e.to_string()))
    }

    /// POST a JSON body, returning JSON.
    pub fn post(&self, path: &str, body: &Value) -> CliResult<Value> {
        let r = self.finish(self.req("POST", path).send_json(body))?;
        r.into_json().map_err(|e| CliError::new("daemon-error", e.to_string()))
    }

    /// GET an ND-JSON stream, calling `f` per line until the stream ends or `f` returns false.
    pub fn lines(&self, path: &str, mut f: impl FnMut(&str) -> CliResult<bool>) -> CliResult {
        let r = self.finish(self.req("GET", path).call())?;
        for line in std::io::BufReader::new(r.into_reader()).lines() {
            let line = line.map_err(|e| CliError::new("daemon-unreachable", e.to_string()))?;
            if !line.is_empty() && !f(&line)? {
                break;
            }
        }
        Ok(())
    }

    /// GET raw bytes.
    pub fn get_bytes(&self, path: &str) -> CliResult<Vec<u8>> {
        let r = self.finish(self.req("GET", path).call())?;
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut r.into_reader(), &mut out)
            .map_err(|e| CliError::new("daemon-unreachable", e.to_string()))?;
        Ok(out)
    }

    /// PUT raw bytes, returning JSON.
    pub fn put_bytes(&self, path: &str, bytes: &[u8]) -> CliResult<Value> {
        let r = self.finish(self.req("PUT", path).set("Content-Type", "application/octet-stream").send_bytes(bytes))?;
        r.into_json().map_err(|e| CliError::new("daemon-error", e.to_string()))
    }

    /// POST raw bytes of `content_type`, returning JSON.
    pub fn post_bytes(&self, path: &str, content_type: &str, bytes: &[u8]) -> CliResult<Value> {
        let r = self.finish(self.req("POST", path).set("Content-Type", content_type).send_bytes(bytes))?;
        r.into_json().map_err(|e| CliError::new("daemon-error", e.to_string()))
    }

    /// DELETE returning JSON.
    pub fn delete(&self, path: &str) -> CliResult<Value> {
        let r = self.finish(self.req("DELETE", path).call())?;
        r.into_json().map_err(|e| CliError::new("daemon-error", e.to_string()))
    }

    /// POST a JSON body and read an ND-JSON stream, calling `f` per line.
    pub fn lines_post(&self, path: &str, body: &Value, mut f: impl FnMut(&str) -> CliResult<bool>) -> CliResult {
        let r = self.finish(self.req("POST", path).send_json(body))?;
        for line in std::io::BufReader::new(r.into_reader()).lines() {
            let line = line.map_err(|e| CliError::new("daemon-unreachable", e.to_string()))?;
            if !line.is_empty() && !f(&line)? {
                break;
            }
        }
        Ok(())
    }

    /// Stops the embedded engine (if any) cleanly.
    pub fn close(mut self) {
        if let Some((rt, running)) = self.embedded.take() {
            rt.block_on(running.stop());
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some((rt, running)) = self.embedded.take() {
            rt.block_on(running.stop());
        }
    }
}

/// Percent-encodes one URL path segment (ids such as `community/registry-starter`).
pub fn path_segment(id: &str) -> String {
    crate::net::percent_encode(id)
}

/// The API path of run `id` followed by `rest` (`""`, `/cancel`, …).
pub fn run_path(id: &str, rest: &str) -> String {
    format!("/api/runs/{}{rest}", path_segment(id))
}
