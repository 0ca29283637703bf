//! How the CLI reaches the engine: a running daemon when there is one, otherwise the engine started
//! in-process on the data dir (embedded mode) and spoken to over loopback HTTP — one code path.
//!
//! `https://` daemons are spoken to with od's one TLS client config (`net/tls.rs`); a certificate
//! the CLI refuses is its own error naming the URL (exit 84), never "unreachable".
//!
//! Resolution: an explicit `--daemon-url`/`OD_DAEMON_URL` must answer (else exit 3); otherwise the
//! data dir's `daemon.json`, then the default `http://127.0.0.1:7456` if it serves this data dir;
//! otherwise embedded.
//!
//! Token: the local token of the engine's discovery file (`daemon.json` / `engine.json`, readable
//! by the user only) when that file names the URL being spoken to — it lets the CLI supply agent
//! commands — else `OD_API_TOKEN`. A file's token is never sent to a URL the file does not name.

use serde_json::{json, Value};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::error::{CliError, CliResult};
use crate::daemon::{discovery_file, engine_file, start, DaemonConfig, DaemonError, Running};

/// Default daemon URL.
pub const DEFAULT_URL: &str = "http://127.0.0.1:7456";

/// A connection to the engine's HTTP API.
pub struct Conn {
    pub base: String,
    token: Option<String>,
    agent: ureq::Agent,
    embedded: Option<(tokio::runtime::Runtime, Running)>,
}

/// The CLI's HTTP client to a daemon: for an `https://` daemon it trusts what od trusts
/// (`net/tls.rs`: the platform's store, `SSL_CERT_FILE`, `OD_CA_FILE`) and nothing else — when
/// that store cannot be set up, nothing ([`tls_setup`] names why before a request is made).
pub fn agent(timeout: Option<Duration>) -> ureq::Agent {
    let tls = crate::net::tls::client_config()
        .unwrap_or_else(|_| Arc::new(crate::net::tls::build(&rustls::RootCertStore::empty())));
    let mut b = ureq::AgentBuilder::new().timeout_connect(Duration::from_millis(500)).tls_config(tls);
    if let Some(t) = timeout {
        b = b.timeout_read(t);
    }
    b.build()
}

/// For an `https://` URL: od's TLS client can be set up (`tls-setup`, exit 84, naming the
/// setting at fault, otherwise).
pub fn tls_setup(url: &str) -> CliResult {
    if !url.starts_with("https://") {
        return Ok(());
    }
    crate::net::tls::client_config()
        .map(|_| ())
        .map_err(|e| CliError::new("tls-setup", format!("cannot reach {url}: {e}")).with_data(json!({ "url": url })))
}

/// A request to the daemon at `url` that got no HTTP answer: a refused certificate is named
/// (`tls-untrusted`, `tls-wrong-host`, `tls-expired`, `tls-certificate`: exit 84, naming the URL)
/// — the daemon may well be running — anything else is `daemon-unreachable`.
pub fn transport_error(url: &str, t: &ureq::Transport) -> CliError {
    match crate::net::outbound::tls_problem(t) {
        Some(p) => CliError::new(p.code(), format!("{url}: {p}")).with_data(json!({ "url": url })),
        None => CliError::new("daemon-unreachable", format!("{url}: {t}")),
    }
}

/// A failed call to the daemon at `url`: its error envelope, or [`transport_error`].
pub fn call_error(url: &str, e: ureq::Error) -> CliError {
    match e {
        ureq::Error::Status(code, r) => CliError::from_body(code, &r.into_string().unwrap_or_default()),
        ureq::Error::Transport(t) => transport_error(url, &t),
    }
}

/// Whether a daemon answers `/api/health` at `base`, and which data dir it serves.
pub fn probe(base: &str, token: Option<&str>) -> Option<Value> {
    let mut req = agent(Some(Duration::from_secs(2))).get(&format!("{base}/api/daemon/status"));
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    req.call().ok()?.into_json().ok()
}

/// The error an od daemon at `base` refused the status probe with (a wrong token, too many
/// wrong tokens), when one answered with od's error envelope; or the certificate the CLI refused.
fn refusal(base: &str, token: Option<&str>) -> Option<CliError> {
    let mut req = agent(Some(Duration::from_secs(2))).get(&format!("{base}/api/daemon/status"));
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    match req.call() {
        Err(ureq::Error::Status(code, r)) => {
            let body = r.into_string().ok()?;
            let v: Value = serde_json::from_str(&body).ok()?;
            v["error"]["code"].is_string().then(|| CliError::from_body(code, &body))
        }
        // A certificate refused is not an absent daemon: say which and why.
        Err(ureq::Error::Transport(t)) => {
            crate::net::outbound::tls_problem(&t).is_some().then(|| transport_error(base, &t))
        }
        _ => None,
    }
}

/// A daemon's 429: the CLI says it is throttled, not absent, and for how long.
fn throttled(mut e: CliError, url: &str) -> CliError {
    e.message = format!(
        "the od daemon at {url} throttles this address after too many wrong tokens (it is running; this is not a \
         missing daemon): {}",
        e.message
    );
    e
}

/// `(url, token)` of a discovery file.
fn discovered(file: &Path) -> Option<(String, Option<String>)> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(file).ok()?).ok()?;
    let url = v["url"].as_str()?.trim_end_matches('/').to_string();
    Some((url, v["token"].as_str().filter(|t| !t.is_empty()).map(str::to_string)))
}

/// The token to send to `url`: the local token of this data dir's discovery file naming `url`,
/// else `fallback` (`OD_API_TOKEN`).
pub fn token_for(data_dir: &Path, url: &str, fallback: Option<&str>) -> Option<String> {
    let url = url.trim_end_matches('/');
    [discovery_file(data_dir), engine_file(data_dir)]
        .iter()
        .filter_map(|f| discovered(f))
        .find(|(u, t)| u == url && t.is_some())
        .and_then(|(_, t)| t)
        .or_else(|| fallback.map(str::to_string))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// The URL of a daemon serving `data_dir`, if one is running.
pub fn find_daemon(data_dir: &Path, explicit_url: Option<&str>, token: Option<&str>) -> CliResult<Option<String>> {
    if let Some(url) = explicit_url {
        tls_setup(url)?;
        let token = token_for(data_dir, url, token);
        return match probe(url, token.as_deref()) {
            Some(_) => Ok(Some(url.trim_end_matches('/').to_string())),
            None => Err(match refusal(url, token.as_deref()) {
                Some(e) if e.code == "too-many-attempts" => throttled(e, url),
                Some(e) => e,
                None => CliError::new("daemon-unreachable", format!("no od daemon answers at {url}")),
            }),
        };
    }
    for file in [discovery_file(data_dir), engine_file(data_dir)] {
        let Some((url, local)) = discovered(&file) else { continue };
        tls_setup(&url)?;
        // It must serve this data dir (a stale file may point at a port someone else took).
        let sent = local.as_deref().or(token);
        match probe(&url, sent) {
            Some(st) if st["dataDir"].as_str().is_none_or(|d| same_dir(Path::new(d), data_dir)) => {
                return Ok(Some(url))
            }
            Some(_) => {}
            // An od daemon that answers but throttles this address is there: say so, rather than
            // fall through to "another od process holds the data dir".
            None => {
                match refusal(&url, sent) {
                    Some(e) if e.code == "too-many-attempts" => return Err(throttled(e, &url)),
                    // The daemon's certificate is not trusted here: starting another engine
                    // would only find the data dir locked.
                    Some(e) if e.code.starts_with("tls-") => return Err(e),
                    _ => {}
                }
            }
        }
    }
    if let Some(st) = probe(DEFAULT_URL, token_for(data_dir, DEFAULT_URL, token).as_deref()) {
        if st["dataDir"].as_str().is_some_and(|d| same_dir(Path::new(d), data_dir)) {
            return Ok(Some(DEFAULT_URL.to_string()));
        }
    }
    Ok(None)
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
                let spawn = super::autostart::Spawn {
                    data_dir,
                    port: 0,
                    host: "127.0.0.1",
                    allow_http_exec: false,
                    idle_exit_ms: super::autostart::idle_exit_ms(),
                    backend,
                    wait: super::autostart::wait_budget(),
                };
                let started = super::autostart::ensure(&spawn, token.as_deref())?;
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

/// Maps a failure to start the engine to a CLI error.
pub fn daemon_error(e: DaemonError) -> CliError {
    match e {
        DaemonError::Store(crate::store::StoreError::Locked(dir)) => {
            super::autostart::locked_error(Path::new(&dir), None)
        }
        DaemonError::Store(s) => store_error(s),
        DaemonError::TokenRequired { .. } => CliError::new("token-required", e.to_string()),
        DaemonError::TlsRequired { .. } => CliError::new("tls-required", e.to_string()),
        DaemonError::Tls(e) => super::daemon_cmd::tls_error(e),
        DaemonError::BadHost(_) => CliError::new("usage", e.to_string()),
        DaemonError::OutboundList(l) => CliError::new("invalid-input", l.to_string())
            .with_data(serde_json::json!({ "field": l.var, "entry": l.entry })),
        DaemonError::Bind { .. } => CliError::new("bind-failed", e.to_string()),
    }
}

/// Percent-encodes one URL path segment (ids such as `community/registry-starter`).
pub fn path_segment(id: &str) -> String {
    id.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
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

/// Where the engine keeps its log and its plugins and projects: `--store` and `--shared-dir` as
/// given (the environment fills in the rest when the engine starts).
#[derive(Debug, Clone, Default)]
pub struct Backend {
    pub store: Option<String>,
    pub shared_dir: Option<PathBuf>,
}

impl Backend {
    /// Sets the engine's store and shared dir (from the flags, else the environment).
    pub fn configure(&self, cfg: &mut DaemonConfig) -> CliResult<()> {
        cfg.store = crate::store::StoreSpec::from_env(self.store.as_deref()).map_err(store_error)?;
        cfg.shared_dir = self.shared_dir.clone();
        Ok(())
    }
}
