//! `od daemon start|status|stop|sessions`.

use clap::Subcommand;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

use super::autostart;
use super::backend::{daemon_error, tls_error};
use super::conn::path_segment;
use super::discover::{agent, call_error, find_daemon, probe, token_for};
use super::{CliError, CliResult, Ctx};
use crate::daemon::{start, DaemonConfig};

#[derive(Subcommand, Debug)]
pub enum DaemonCmd {
    /// Start the daemon (in the background unless --foreground).
    Start {
        /// Port to listen on (0 = any free port; default OD_PORT, else 7456).
        #[arg(long, env = "OD_PORT")]
        port: Option<u16>,
        /// The JSON API only: no web UI pages (for servers and CI; `OD_HEADLESS=1`).
        #[arg(long, env = "OD_HEADLESS", conflicts_with = "serve_web")]
        headless: bool,
        /// Serve the web UI beside the API (the default); with OD_WEB_PORT also on that port, as
        /// its own listener.
        #[arg(long)]
        serve_web: bool,
        /// Host to bind; a non-loopback host requires OD_API_TOKEN, and TLS (--tls-cert/--tls-key)
        /// or --tls-terminated-by-proxy.
        #[arg(long, env = "OD_BIND_HOST", default_value = "127.0.0.1")]
        host: String,
        /// Run in this process instead of detaching.
        #[arg(long)]
        foreground: bool,
        /// Let any request that passes the browser checks supply an agent command (agentCommand,
        /// agentEnv), not only one carrying the daemon's token (default: OD_ALLOW_HTTP_EXEC).
        #[arg(long)]
        allow_http_exec: bool,
        /// Stop by itself after this many ms with no run in flight and no open connection, or once
        /// the data dir is removed (what a daemon started on demand by `od run start` does).
        #[arg(long, value_name = "MS")]
        idle_exit_ms: Option<u64>,
        /// With --foreground: write the log (and stdout/stderr) to this file, rotated at 8 MiB to
        /// `<file>.1`, instead of the terminal (the background daemon uses `<data-dir>/daemon.log`).
        #[arg(long, value_name = "PATH")]
        log_file: Option<std::path::PathBuf>,
        /// On a shared log: when this data dir's daemon id is held by another live daemon (a copied
        /// data dir), mint a new id instead of refusing to start (exit 83, `daemon-id-in-use`).
        #[arg(long, env = "OD_NEW_DAEMON_ID")]
        new_daemon_id: bool,
        #[command(flatten)]
        tls: TlsArgs,
    },
    /// Print the end of the daemon's log (`<data-dir>/daemon.log`); `--follow` keeps printing.
    Logs {
        /// How many lines from the end.
        #[arg(long, short = 'n', default_value_t = crate::limits::DAEMON_LOG_TAIL_LINES)]
        lines: usize,
        /// Keep printing lines as they are written (across a rotation) until interrupted.
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Show whether a daemon serves this data dir.
    Status,
    /// Stop the daemon serving this data dir, gracefully.
    Stop,
    /// The browser login sessions of the daemon serving this data dir: list or revoke them.
    Sessions {
        #[command(subcommand)]
        cmd: SessionsCmd,
    },
}

/// Who speaks TLS to clients: the daemon itself, or a proxy in front of it.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TlsArgs {
    /// Serve HTTPS (every listener) with this PEM certificate chain, leaf first; needs --tls-key.
    #[arg(long, env = "OD_TLS_CERT", value_name = "FILE")]
    tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key (PKCS#8, RSA or EC) of --tls-cert.
    #[arg(long, env = "OD_TLS_KEY", value_name = "FILE")]
    tls_key: Option<std::path::PathBuf>,
    /// A proxy in front terminates TLS (`OD_TLS_TERMINATED_BY_PROXY=1`): serve plain HTTP on a
    /// non-loopback host with a token anyway; the login cookie is Secure and /api/health says so.
    #[arg(long)]
    tls_terminated_by_proxy: bool,
}

impl TlsArgs {
    /// The files as absolute paths (a background daemon resolves them from the same place), or
    /// none; one without the other is a usage error naming the missing one.
    fn files(&self) -> CliResult<Option<crate::http::tls::TlsFiles>> {
        let abs =
            |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()));
        crate::http::tls::TlsFiles::pair(abs(&self.tls_cert), abs(&self.tls_key)).map_err(tls_error)
    }
}

#[derive(Subcommand, Debug)]
pub enum SessionsCmd {
    /// List the live sessions (ids and times; never secrets).
    List,
    /// End one session by id, or every one with --all: those browsers must log in again.
    Revoke {
        /// The session's id (from `od daemon sessions list`).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<String>,
        /// Every session.
        #[arg(long)]
        all: bool,
    },
}

pub fn run(ctx: &Ctx, cmd: DaemonCmd) -> CliResult {
    match cmd {
        DaemonCmd::Start {
            port,
            headless,
            serve_web: _,
            host,
            foreground: true,
            allow_http_exec,
            idle_exit_ms,
            log_file,
            new_daemon_id,
            tls,
        } => {
            if new_daemon_id {
                // Read by the daemon's configuration (`DaemonConfig::new`).
                std::env::set_var("OD_NEW_DAEMON_ID", "true");
            }
            let port = port.unwrap_or(DEFAULT_PORT);
            match log_file {
                // Its folder is made first (a fresh data dir's `daemon.log`, say).
                Some(file) => file
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|_| crate::daemon_log::to_file(&file, tracing::Level::INFO))
                    .map_err(|e| CliError::new("usage", format!("--log-file {}: {e}", file.display())))?,
                None => crate::daemon_log::to_stderr(tracing::Level::INFO),
            }
            let opts = Foreground { port, host, allow_http_exec, idle_exit_ms, headless, tls };
            foreground(ctx, opts)
        }
        DaemonCmd::Start {
            port,
            headless,
            serve_web: _,
            host,
            foreground: false,
            allow_http_exec,
            idle_exit_ms,
            log_file: _,
            new_daemon_id,
            tls,
        } => {
            if new_daemon_id {
                // The daemon this starts inherits the environment.
                std::env::set_var("OD_NEW_DAEMON_ID", "true");
            }
            if headless {
                // The daemon this starts inherits the environment (and reads OD_HEADLESS).
                std::env::set_var("OD_HEADLESS", "true");
            }
            // The daemon this starts inherits the environment: the files (absolute) and the opt-in.
            if let Some(files) = tls.files()? {
                std::env::set_var("OD_TLS_CERT", &files.cert);
                std::env::set_var("OD_TLS_KEY", &files.key);
            }
            if tls.tls_terminated_by_proxy {
                std::env::set_var("OD_TLS_TERMINATED_BY_PROXY", "1");
            }
            background(ctx, port, host, allow_http_exec, idle_exit_ms)
        }
        DaemonCmd::Logs { lines, follow } => super::daemon_logs::run(ctx, lines, follow),
        DaemonCmd::Status => status(ctx),
        DaemonCmd::Stop => stop(ctx),
        DaemonCmd::Sessions { cmd } => sessions(ctx, cmd),
    }
}

/// A daemon already serves the data dir: a port the command asked for that is not the one it
/// listens on is refused (nothing started, nothing changed) rather than ignored.
fn refuse_other_port(url: &str, asked: Option<u16>) -> CliResult {
    let listening = url::Url::parse(url).ok().and_then(|u| u.port_or_known_default());
    match asked {
        Some(p) if p != 0 && listening != Some(p) => Err(CliError::new(
            "daemon-running",
            format!("a daemon already serves this data dir at {url}, not on port {p}; stop it first (od daemon stop)"),
        )
        .with_data(json!({ "url": url, "port": p }))),
        _ => Ok(()),
    }
}

/// `od daemon sessions list|revoke`: sessions live in the running daemon's memory only.
fn sessions(ctx: &Ctx, cmd: SessionsCmd) -> CliResult {
    let url =
        find_daemon(&ctx.data_dir, ctx.daemon_url.as_deref(), ctx.token.as_deref())?.ok_or_else(|| not_running(ctx))?;
    let token = token_for(&ctx.data_dir, &url, ctx.token.as_deref());
    let (method, path) = match &cmd {
        SessionsCmd::List => ("GET", "/api/auth/sessions".to_string()),
        SessionsCmd::Revoke { id: Some(id), .. } => ("DELETE", format!("/api/auth/sessions/{}", path_segment(id))),
        SessionsCmd::Revoke { id: None, .. } => ("DELETE", "/api/auth/sessions".to_string()),
    };
    let mut req = agent(None).request(method, &format!("{url}{path}"));
    if let Some(t) = &token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    let v: Value = match req.call() {
        Ok(r) => r.into_json().map_err(|e| CliError::new("daemon-error", e.to_string()))?,
        Err(e) => return Err(call_error(&url, e)),
    };
    match cmd {
        SessionsCmd::List => ctx.print(&v, |v| {
            let list = v["sessions"].as_array().cloned().unwrap_or_default();
            if list.is_empty() {
                return "no login sessions".to_string();
            }
            list.iter()
                .map(|s| {
                    format!(
                        "{}  created {}  expires {}",
                        s["id"].as_str().unwrap_or(""),
                        s["createdAt"],
                        s["expiresAt"]
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        }),
        SessionsCmd::Revoke { .. } => ctx.print(&v, |v| format!("revoked {} session(s)", v["revoked"])),
    }
    Ok(())
}

/// Bounds glibc's malloc arenas before the daemon's threads exist ([`crate::limits::MALLOC_ARENAS`]).
fn bound_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before any other thread starts.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, crate::limits::MALLOC_ARENAS);
    }
}

/// The API's port without `--port`/`OD_PORT`.
const DEFAULT_PORT: u16 = 7456;

/// `OD_WEB_PORT`: the web UI's own port (a second listener), when set.
fn web_port() -> Option<u16> {
    std::env::var("OD_WEB_PORT").ok().and_then(|p| p.trim().parse::<u16>().ok())
}

/// What `od daemon start --foreground` was told.
struct Foreground {
    port: u16,
    host: String,
    allow_http_exec: bool,
    idle_exit_ms: Option<u64>,
    headless: bool,
    tls: TlsArgs,
}

fn foreground(ctx: &Ctx, opts: Foreground) -> CliResult {
    let Foreground { port, host, allow_http_exec, idle_exit_ms, headless, tls } = opts;
    let tls_files = tls.files()?;
    bound_malloc_arenas();
    let rt = tokio::runtime::Runtime::new().map_err(|e| CliError::new("error", e.to_string()))?;
    let result = rt.block_on(async {
        let mut cfg = DaemonConfig::new(ctx.data_dir.clone());
        ctx.backend.configure(&mut cfg)?;
        cfg.port = port;
        cfg.host = host;
        cfg.token = ctx.token.clone();
        cfg.http.allow_http_exec |= allow_http_exec;
        cfg.http.headless = headless;
        cfg.idle_exit_ms = idle_exit_ms.filter(|ms| *ms > 0);
        cfg.web_port = web_port();
        cfg.tls = tls_files;
        cfg.http.tls_terminated_by_proxy |= tls.tls_terminated_by_proxy;
        let running = start(cfg).await.map_err(daemon_error)?;
        let web_url = running.web_url();
        let info = json!({ "pid": std::process::id(), "url": running.url(), "dataDir": ctx.data_dir,
                           "webUi": !headless, "webUrl": web_url });
        tracing::info!(
            "od {} listening on {} (data dir {})",
            env!("CARGO_PKG_VERSION"),
            running.url(),
            ctx.data_dir.display()
        );
        ctx.print(&info, |v| {
            let web = v["webUrl"].as_str().map(|w| format!(", web UI on {w}")).unwrap_or_default();
            format!(
                "od daemon listening on {}{web} (data dir {})",
                v["url"].as_str().unwrap_or(""),
                ctx.data_dir.display()
            )
        });
        running.wait().await;
        Ok(())
    });
    // The stop is recorded; a request still working on a blocking thread (a slow download up to
    // its deadline) must not hold the process after SIGTERM: dropping the runtime would wait for it.
    rt.shutdown_timeout(std::time::Duration::from_millis(crate::limits::SHUTDOWN_BLOCKING_GRACE_MS));
    result
}

/// `asked` is the port the command named (`--port`, `OD_PORT`); None: the default.
fn background(
    ctx: &Ctx,
    asked: Option<u16>,
    host: String,
    allow_http_exec: bool,
    idle_exit_ms: Option<u64>,
) -> CliResult {
    let port = asked.unwrap_or(DEFAULT_PORT);
    // A malformed outbound list is the caller's mistake (exit 2), not a daemon that failed to start.
    crate::net::policy::Lists::from_env().map_err(|e| daemon_error(e.into()))?;
    let spawn = autostart::Spawn {
        data_dir: &ctx.data_dir,
        port,
        host: &host,
        allow_http_exec,
        idle_exit_ms,
        wait: autostart::wait_budget(),
        backend: &ctx.backend,
    };
    // `ensure` finds a running daemon first and starts one only when none answers.
    let started = autostart::ensure(&spawn, ctx.token.as_deref())?;
    let url = started.url;
    if started.spawned_pid.is_none() {
        refuse_other_port(&url, asked)?;
    }
    let info = match started.spawned_pid {
        Some(pid) => json!({ "pid": pid, "url": url, "dataDir": ctx.data_dir, "alreadyRunning": false }),
        None => json!({ "url": url, "alreadyRunning": true, "dataDir": ctx.data_dir }),
    };
    ctx.print(&info, |_| match started.spawned_pid {
        Some(pid) => format!("od daemon started at {url} (pid {pid})"),
        None => format!("od daemon already running at {url}"),
    });
    Ok(())
}

fn status(ctx: &Ctx) -> CliResult {
    let url =
        find_daemon(&ctx.data_dir, ctx.daemon_url.as_deref(), ctx.token.as_deref())?.ok_or_else(|| not_running(ctx))?;
    let token = token_for(&ctx.data_dir, &url, ctx.token.as_deref());
    let st = probe(&url, token.as_deref()).ok_or_else(|| not_running(ctx))?;
    ctx.print(&st, |v| {
        format!(
            "running: pid {} at {} (data dir {}, last seq {})",
            v["pid"],
            url,
            v["dataDir"].as_str().unwrap_or(""),
            v["lastSeq"]
        )
    });
    Ok(())
}

/// A bare `od`: this data dir, whether a daemon serves it, and where to start — never a usage
/// error, and never starting a daemon.
pub fn overview(ctx: &Ctx) -> CliResult {
    let url = find_daemon(&ctx.data_dir, ctx.daemon_url.as_deref(), ctx.token.as_deref()).ok().flatten();
    let daemon = url.as_ref().and_then(|u| {
        let token = token_for(&ctx.data_dir, u, ctx.token.as_deref());
        probe(u, token.as_deref()).map(|st| json!({ "url": u, "pid": st["pid"], "lastSeq": st["lastSeq"] }))
    });
    let hints = [
        ("od run start --plugin od-new-generation --follow", "a run of the bundled scenario with the dry-run agent"),
        ("od plugin list", "the plugins you can run"),
        ("od run list", "runs so far"),
        ("od open", "the web UI"),
        ("od --help", "every command"),
    ];
    let v = json!({
        "version": env!("CARGO_PKG_VERSION"), "dataDir": ctx.data_dir, "daemon": daemon,
        "hints": hints.iter().map(|(c, w)| json!({ "command": c, "what": w })).collect::<Vec<_>>(),
    });
    ctx.print(&v, |v| {
        let mut out = vec![format!("od {} — data dir {}", env!("CARGO_PKG_VERSION"), ctx.data_dir.display())];
        out.push(match &v["daemon"] {
            Value::Null => "daemon: not running (commands that need one start it)".to_string(),
            d => format!(
                "daemon: running, pid {} at {} (last seq {})",
                d["pid"],
                d["url"].as_str().unwrap_or(""),
                d["lastSeq"]
            ),
        });
        out.push("try:".into());
        let width = hints.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
        out.extend(hints.iter().map(|(c, w)| format!("  {c:<width$}  {w}")));
        out.join("\n")
    });
    Ok(())
}

fn not_running(ctx: &Ctx) -> CliError {
    let mut e = CliError::new("daemon-not-running", "no od daemon is running for this data dir");
    e.data = json!({ "dataDir": ctx.data_dir });
    e
}

fn stop(ctx: &Ctx) -> CliResult {
    let url =
        find_daemon(&ctx.data_dir, ctx.daemon_url.as_deref(), ctx.token.as_deref())?.ok_or_else(|| not_running(ctx))?;
    let token = token_for(&ctx.data_dir, &url, ctx.token.as_deref());
    let mut req = agent(None).post(&format!("{url}/api/daemon/stop"));
    if let Some(t) = &token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    let resp: serde_json::Value = req
        .call()
        .map_err(|e| call_error(&url, e))?
        .into_json()
        .map_err(|e| CliError::new("daemon-error", e.to_string()))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let pid = resp["pid"].as_u64().unwrap_or(0);
    while probe(&url, token.as_deref()).is_some() || process_alive(pid) {
        if Instant::now() > deadline {
            return Err(CliError::new("daemon-failed", "the daemon did not stop within 20 s"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let info = json!({ "stopped": true, "pid": resp["pid"], "url": url });
    ctx.print(&info, |_| format!("od daemon at {url} stopped"));
    Ok(())
}

/// Whether `pid` is a live (not zombie) process on this machine; false when unknown.
fn process_alive(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}
