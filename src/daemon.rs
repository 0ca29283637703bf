//! Starting and stopping the engine: open the log, load projections, bind, serve the router until
//! asked to stop (signal, `POST /api/daemon/stop`, or the embedding CLI), then shut down gracefully
//! — streams end, the stop is recorded, projections are checkpointed, the log is closed. The
//! periodic background work it starts lives in `daemon_background.rs`.
//!
//! The same function serves the standalone daemon and the CLI's embedded mode, so the CLI always
//! speaks HTTP to one router.

use od_events::system::{DaemonStarted, DaemonStopped};
use od_events::{Event, StreamId};
use od_projections::LogStats;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::clock::{SharedClock, SystemClock};
use crate::engine::EngineConfig;
use crate::http::config::HttpConfig;
use crate::http::guard::Access;
use crate::http::{router, AppState, HttpShared};
use crate::limits::DEFAULT_SEGMENT_BYTES;
use crate::projector::Projector;
use crate::store::{Append, StoreConfig, StoreError};

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// A non-loopback bind needs `OD_API_TOKEN`.
    #[error("refusing to listen on non-loopback host {host} without OD_API_TOKEN; set OD_API_TOKEN (clients then send `Authorization: Bearer <token>`) or bind 127.0.0.1")]
    TokenRequired { host: String },
    /// A non-loopback bind with a token serves plain HTTP only when a TLS-terminating proxy is
    /// declared in front: otherwise the token and the login cookie would cross the network in
    /// clear text.
    #[error("refusing to serve plain HTTP on non-loopback host {host}: the token and the login cookie would cross the network in clear text; serve TLS with --tls-cert FILE --tls-key FILE (OD_TLS_CERT / OD_TLS_KEY), or, when a proxy in front terminates TLS, say so with --tls-terminated-by-proxy (OD_TLS_TERMINATED_BY_PROXY=1)")]
    TlsRequired { host: String },
    /// `--tls-cert` / `--tls-key` could not be loaded (names the setting and the file).
    #[error(transparent)]
    Tls(#[from] crate::http::tls::TlsServeError),
    /// The host is not an IP address or `localhost`.
    #[error("host {0:?} is not an IP address or `localhost`")]
    BadHost(String),
    /// The log could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Binding the listener failed.
    #[error("cannot listen on {addr}: {message}")]
    Bind { addr: String, message: String },
    /// `OD_OUTBOUND_ALLOW` or `OD_OUTBOUND_DENY` holds a malformed entry.
    #[error(transparent)]
    OutboundList(#[from] crate::net::policy::ListError),
}

/// How to run the engine.
#[derive(Clone)]
pub struct DaemonConfig {
    pub host: String,
    pub port: u16,
    pub data_dir: PathBuf,
    pub token: Option<String>,
    /// Inside a CLI process: no daemon.json, no start/stop events, no signal handling.
    pub embedded: bool,
    pub clock: SharedClock,
    /// Where new run/project/snapshot ids come from.
    pub ids: crate::ids::SharedIds,
    /// Resume runs left queued or waiting for an answer. A CLI command that only reads or answers
    /// (embedded) sets this false: it would stop again before the run got anywhere.
    pub resume_runs: bool,
    pub segment_bytes: u64,
    /// Timeouts, connection cap, accepted Host names, the exec opt-in (`OD_*` variables by default).
    pub http: HttpConfig,
    /// Where the log's own writes go (tests inject faults here); the real file system by default.
    pub files: crate::store::SharedFiles,
    /// Stop by itself after this long with no run in flight and no open connection, or once the
    /// data dir is gone (a daemon the CLI started on demand: `cli/autostart.rs`). `None`: stay.
    pub idle_exit_ms: Option<u64>,
    /// Which backend holds the log (the embedded one by default).
    pub store: crate::store::StoreSpec,
    /// Where plugins and projects live: the data dir by default; on a shared log, a folder every
    /// daemon mounts (`--shared-dir` / `OD_SHARED_DIR`).
    pub shared_dir: Option<PathBuf>,
    /// A shared log only: how long a daemon may miss heartbeats before its runs are taken over
    /// (`OD_LEASE_TTL_MS`, else [`LEASE_TTL_MS`](crate::limits::LEASE_TTL_MS)).
    pub lease_ttl_ms: u64,
    /// A shared log only: when this data dir's daemon id is held by another live daemon (a copied
    /// data dir), mint a new id instead of refusing to start (`--new-daemon-id`, `OD_NEW_DAEMON_ID`).
    pub new_daemon_id: bool,
    /// `OD_WEB_PORT`: a second listener on the same host serving the web UI (and the API it
    /// calls, as its own origin), when the UI is served and the port differs from `port`
    /// (0: any free port).
    pub web_port: Option<u16>,
    /// `--tls-cert` / `--tls-key`: serve TLS on every listener with this chain and key. The
    /// TLS-terminating-proxy opt-in is [`HttpConfig::tls_terminated_by_proxy`].
    pub tls: Option<crate::http::tls::TlsFiles>,
    /// The environment agent binaries are found and probed in (`*_BIN` overrides, `PATH`):
    /// `None` reads the process's own at each use ([`EngineConfig::agent_probe`]).
    pub agent_probe: Option<crate::agents::detect::ProbeEnv>,
    /// The engine's settings (`OD_*` variables, read when this config is made).
    pub engine: EngineConfig,
}

impl DaemonConfig {
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 0,
            data_dir,
            token: None,
            embedded: false,
            clock: Arc::new(SystemClock),
            ids: Arc::new(crate::ids::RandomIds),
            resume_runs: true,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            http: HttpConfig::from_env(),
            files: Arc::new(crate::store::RealFiles),
            idle_exit_ms: None,
            store: crate::store::StoreSpec::Embedded,
            shared_dir: None,
            lease_ttl_ms: std::env::var("OD_LEASE_TTL_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|v| *v > 0)
                .unwrap_or(crate::limits::LEASE_TTL_MS),
            web_port: None,
            tls: None,
            agent_probe: None,
            engine: EngineConfig::from_env(),
            new_daemon_id: std::env::var("OD_NEW_DAEMON_ID").is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes")),
        }
    }
}

/// This process's leases on the shared log, under the data dir's daemon id — or, when a live
/// daemon holds that id and `new_id` says so, under a new id written to the data dir (no run of
/// the other daemon is touched either way: the refusal comes before any lease is taken).
fn start_leases(
    pg: &Arc<crate::store::PgLog>,
    data_dir: &Path,
    id: String,
    ids: &crate::ids::SharedIds,
    ttl_ms: u64,
    new_id: bool,
) -> Result<Arc<crate::store::PgLeases>, StoreError> {
    let ttl = std::time::Duration::from_millis(ttl_ms);
    let start = |id: String| crate::store::PgLeases::start(pg, id, ids.new_id(), String::new(), ttl);
    match start(id) {
        Err(StoreError::DaemonIdInUse { id, listen }) if new_id => {
            let _ = std::fs::remove_file(data_dir.join("daemon-id"));
            let fresh = crate::store::lease::daemon_id(data_dir, || ids.new_id())?;
            tracing::warn!("daemon id {id} is held by a live daemon ({listen}); this data dir now has the id {fresh}");
            start(fresh)
        }
        r => r,
    }
}

/// The parts of an engine over `store` (`engine/mod.rs`): artifacts and plugin archives under
/// `shared_dir` (where plugins and projects live), connector credentials under the daemon's own
/// `data_dir` (never on a shared dir), local leases and the settings of the process's environment.
/// The daemon replaces the leases on a shared log; embedders and benches take them as they are.
pub fn engine_parts(
    store: crate::store::Store,
    shared_dir: PathBuf,
    data_dir: &Path,
    clock: SharedClock,
    ids: crate::ids::SharedIds,
) -> crate::engine::Parts {
    crate::engine::Parts {
        leases: Arc::new(crate::store::LocalLeases::new("local", store.local_fences())),
        blobs: crate::blobs::Blobs::new(shared_dir.join("blobs")),
        archives: crate::blobs::Blobs::new(shared_dir.join("plugins").join("_archives")),
        connectors: crate::connectors::Connectors::new(data_dir),
        config: EngineConfig::from_env(),
        store,
        data_dir: shared_dir,
        clock,
        ids,
    }
}

/// Ends what a previous process left mid-agent and resolves its waiting browser actions; returns
/// the queued and waiting runs to resume. On a shared log a one-command (embedded) engine leaves
/// that to the daemons.
fn recover_at_start(engine: &crate::engine::Engine, tools: &crate::tools::Tools, embedded: bool) -> Vec<String> {
    let recover = !(embedded && engine.leases().shared());
    if !recover {
        return Vec::new();
    }
    // Agent process groups a killed process left running are ended first (`runner/orphans.rs`).
    let orphans = crate::runner::orphans::end_recorded(engine.store().dir());
    let resume = engine.recover_interrupted_runs(&orphans).unwrap_or_else(|e| {
        tracing::error!("could not recover interrupted runs: {e}");
        Vec::new()
    });
    if let Err(e) = tools.resolve_browser_orphans() {
        tracing::error!("could not resolve browser actions left waiting: {e}");
    }
    resume
}

/// A running engine.
pub struct Running {
    pub addr: SocketAddr,
    /// The token this engine minted (also in its discovery file): it authenticates like
    /// `OD_API_TOKEN` and lets a request supply an agent command.
    pub local_token: String,
    /// The web UI's own listener (`OD_WEB_PORT`), when there is one.
    pub web_addr: Option<SocketAddr>,
    /// `https` when the engine serves TLS, else `http`.
    pub scheme: &'static str,
    stop: Arc<watch::Sender<bool>>,
    done: tokio::task::JoinHandle<()>,
}

impl Running {
    /// The base URL of the API.
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }
    /// The base URL of the web UI's own listener, when there is one.
    pub fn web_url(&self) -> Option<String> {
        self.web_addr.map(|a| format!("{}://{a}", self.scheme))
    }
    /// Asks for a graceful stop and waits for it to finish.
    pub async fn stop(self) {
        self.stop.send_replace(true);
        let _ = self.done.await;
    }
    /// Waits until the engine stops by itself (signal or API).
    pub async fn wait(self) {
        let _ = self.done.await;
    }
}

fn parse_host(host: &str) -> Result<IpAddr, DaemonError> {
    if host == "localhost" {
        return Ok(IpAddr::from([127, 0, 0, 1]));
    }
    host.parse().map_err(|_| DaemonError::BadHost(host.to_string()))
}

/// Who may listen where: a non-loopback bind needs a token (`OD_API_TOKEN`), and then TLS — its
/// own (`tls`) or a proxy's in front (`proxy`, `--tls-terminated-by-proxy`) — so the token and the
/// login cookie never cross the network in clear text. Loopback binds need neither.
pub fn check_exposure(host: &str, ip: IpAddr, token: bool, tls: bool, proxy: bool) -> Result<(), DaemonError> {
    if ip.is_loopback() {
        return Ok(());
    }
    if !token {
        return Err(DaemonError::TokenRequired { host: host.to_string() });
    }
    if !tls && !proxy {
        return Err(DaemonError::TlsRequired { host: host.to_string() });
    }
    Ok(())
}

/// The `daemon.json` discovery file of a data dir.
pub fn discovery_file(data_dir: &Path) -> PathBuf {
    data_dir.join("daemon.json")
}

/// Opens the log and starts serving.
pub async fn start(mut cfg: DaemonConfig) -> Result<Running, DaemonError> {
    let ip = parse_host(&cfg.host)?;
    let proxy = cfg.http.tls_terminated_by_proxy;
    check_exposure(&cfg.host, ip, cfg.token.is_some(), cfg.tls.is_some(), proxy)?;
    // Read and checked before anything is opened or bound: a bad file starts nothing.
    cfg.http.tls = cfg.tls.as_ref().map(crate::http::tls::server_config).transpose()?;
    let scheme = cfg.http.scheme();
    // The outbound allow/deny lists: a malformed entry stops the start, before anything opens.
    // A bind beyond loopback makes the address policy's default the hosted one, before any run
    // resumes or request arrives.
    crate::net::policy::install(crate::net::policy::Lists::from_env()?);
    crate::net::policy::note_listener(ip);
    if !ip.is_loopback() {
        tracing::info!("outbound requests to loopback and private addresses are refused (a daemon listening beyond loopback); OD_OUTBOUND_ALLOW lets named ones through");
    }
    let opened = open(&cfg).await?;
    let (listener, addr, web_listener) = bind(&cfg, ip).await?;
    if let Some(l) = &opened.pg_leases {
        l.set_listen(addr.to_string());
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let stop = Arc::new(stop_tx);
    let listen = Arc::new(std::sync::OnceLock::from(addr.to_string()));
    let runner = crate::runner::Runner::new(opened.engine.clone(), listen.clone(), scheme);
    let http = http_shared(&cfg, ip, addr, scheme);
    let local_token = http.access.local_token.clone();
    for id in opened.resume.into_iter().filter(|_| cfg.resume_runs) {
        runner.start(id);
    }
    let stop_reason = Arc::new(std::sync::Mutex::new("requested"));
    let Opened { store, sled, stats, engine, tools, .. } = opened;
    if !cfg.embedded {
        if let Some(idle) = cfg.idle_exit_ms {
            let watched = Idle { runner: runner.clone(), gauges: http.gauges.clone(), data_dir: cfg.data_dir.clone() };
            spawn_idle_exit(watched, idle, cfg.clock.clone(), stop.clone(), stop_reason.clone());
        }
        spawn_background(&cfg, &runner, &tools, sled, &stop_rx);
    }
    let stats = Arc::new(stats);
    let mut followed = engine.projections();
    followed.extend(tools.projections());
    followed.push(stats.clone());
    tokio::spawn(crate::projector::follow::follow(store.clone(), followed, stop_rx.clone()));
    let state = AppState {
        store,
        runner,
        engine,
        tools,
        stats,
        clock: cfg.clock.clone(),
        data_dir: cfg.data_dir.clone(),
        listen,
        started_at: cfg.clock.now_ms(),
        shutdown: stop_rx.clone(),
        stop: stop.clone(),
        embedded: cfg.embedded,
        http: http.clone(),
    };
    announce(&cfg, &state, &format!("{scheme}://{addr}"), &local_token)?;
    if !cfg.embedded {
        spawn_signal_handler(stop.clone());
    }
    let web_addr = web_listener.map(|(web, bound)| serve_web(&cfg, &state, web, bound));
    let app = router(state.clone());
    let done = tokio::spawn(async move {
        crate::http::serve::serve(listener, app, cfg.http.clone(), http.gauges.clone(), stop_rx).await;
        crate::net::url_rule::unregister_own(addr);
        web_addr.into_iter().for_each(crate::net::url_rule::unregister_own);
        let reason = stop_reason.lock().map(|r| r.to_string()).unwrap_or_else(|_| "requested".into());
        finish(state, cfg.embedded, reason).await;
    });
    Ok(Running { addr, local_token, web_addr, scheme, stop, done })
}

/// What opening the log made: the engine and the tools over it, the runs to resume, and the
/// handles the start needs (the embedded log for the background pass, a shared log's leases).
struct Opened {
    store: crate::store::Store,
    sled: Option<Arc<crate::store::SledLog>>,
    stats: Projector<LogStats>,
    engine: Arc<crate::engine::Engine>,
    tools: Arc<crate::tools::Tools>,
    resume: Vec<String>,
    pg_leases: Option<Arc<crate::store::PgLeases>>,
}

/// Opens the log (off the runtime: recovery reads files), takes this daemon's leases, builds the
/// engine and the tools, and ends or resolves what a previous process left in flight.
async fn open(cfg: &DaemonConfig) -> Result<Opened, DaemonError> {
    let mut scfg = StoreConfig::new(&cfg.data_dir);
    scfg.segment_bytes = cfg.segment_bytes;
    scfg.clock = cfg.clock.clone();
    scfg.files = cfg.files.clone();
    // Opening costs the tail, not the history: the daemon's background pass and `od log verify`
    // walk the rest.
    scfg.verify_on_open = crate::store::VerifyOnOpen::FromCheckpoint;
    let data_dir = cfg.data_dir.clone();
    let (clock, ids) = (cfg.clock.clone(), cfg.ids.clone());
    let spec = cfg.store.clone();
    let shared_dir = cfg.shared_dir.clone().unwrap_or_else(|| data_dir.clone());
    let (embedded, lease_ttl_ms, new_daemon_id) = (cfg.embedded, cfg.lease_ttl_ms, cfg.new_daemon_id);
    let mut config = cfg.engine.clone();
    config.lease_ttl_ms = lease_ttl_ms;
    config.agent_probe = cfg.agent_probe.clone();
    let opened = tokio::task::spawn_blocking(move || {
        let opened = spec.open(scfg)?;
        let store = opened.store;
        let daemon_id = crate::store::lease::daemon_id(&data_dir, || ids.new_id())?;
        let mut pg_leases = None;
        let leases: Arc<dyn crate::store::RunLeases> = match &opened.pg {
            Some(pg) => {
                let l = start_leases(pg, &data_dir, daemon_id, &ids, lease_ttl_ms, new_daemon_id)?;
                pg_leases = Some(l.clone());
                l
            }
            None => Arc::new(crate::store::LocalLeases::new(daemon_id, store.local_fences())),
        };
        let stats = Projector::<LogStats>::load(&store)?;
        let mut parts = engine_parts(store.clone(), shared_dir, &data_dir, clock, ids);
        parts.leases = leases;
        parts.config = config;
        let engine = Arc::new(crate::engine::Engine::new(parts)?);
        let tools = Arc::new(crate::tools::Tools::start(engine.clone())?);
        let resume = recover_at_start(&engine, &tools, embedded);
        Ok::<_, StoreError>(Opened { store, sled: opened.sled, stats, engine, tools, resume, pg_leases })
    })
    .await
    .expect("open task")?;
    Ok(opened)
}

/// Binds the API's listener and, when asked, the web UI's own (`OD_WEB_PORT`) — before the start
/// is recorded, so a taken port fails the start cleanly. Outbound requests (plugins' URLs, OAuth
/// metadata, marketplaces) never reach either.
async fn bind(
    cfg: &DaemonConfig,
    ip: IpAddr,
) -> Result<(TcpListener, SocketAddr, Option<(TcpListener, SocketAddr)>), DaemonError> {
    let addr = SocketAddr::new(ip, cfg.port);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| DaemonError::Bind { addr: addr.to_string(), message: e.to_string() })?;
    let addr =
        listener.local_addr().map_err(|e| DaemonError::Bind { addr: addr.to_string(), message: e.to_string() })?;
    crate::net::url_rule::register_own(addr);
    let mut web_listener = None;
    if let Some(wp) = cfg.web_port.filter(|p| !cfg.http.headless && *p != addr.port()) {
        let want = SocketAddr::new(ip, wp);
        let bind_err = |e: std::io::Error| DaemonError::Bind { addr: want.to_string(), message: e.to_string() };
        let web = TcpListener::bind(want).await.map_err(bind_err)?;
        let bound = web.local_addr().map_err(bind_err)?;
        crate::net::url_rule::register_own(bound);
        web_listener = Some((web, bound));
    }
    Ok((listener, addr, web_listener))
}

/// What the API's listener shares: its settings, who may reach it (with this start's local
/// token), the gauges, the wrong-token throttle and the login sessions.
fn http_shared(cfg: &DaemonConfig, ip: IpAddr, addr: SocketAddr, scheme: &str) -> Arc<HttpShared> {
    let proxy = cfg.http.tls_terminated_by_proxy;
    let access = Access {
        loopback: ip.is_loopback(),
        port: Some(addr.port()),
        api_token: cfg.token.clone(),
        local_token: crate::ids::mint_token(),
        allowed_hosts: cfg.http.allowed_hosts.clone(),
        allow_http_exec: cfg.http.allow_http_exec,
        https: cfg.http.tls.is_some() || proxy,
    };
    if proxy && !cfg.embedded {
        tracing::warn!(
            "serving {scheme} on {addr} behind a TLS-terminating proxy (--tls-terminated-by-proxy): the proxy must be \
             the only way in; the login cookie is Secure"
        );
    }
    let throttle = Arc::new(crate::http::throttle::Throttle::new(cfg.clock.clone()));
    let sessions = Arc::new(crate::http::sessions::Sessions::new(cfg.clock.clone()));
    Arc::new(HttpShared { config: cfg.http.clone(), access, gauges: Default::default(), throttle, sessions })
}

/// The daemon's periodic work (`daemon_background.rs`), the plugin folder watcher, and on a
/// shared log the takeover of lost daemons' runs and the signals other daemons record.
fn spawn_background(
    cfg: &DaemonConfig,
    runner: &Arc<crate::runner::Runner>,
    tools: &Arc<crate::tools::Tools>,
    sled: Option<Arc<crate::store::SledLog>>,
    stop_rx: &watch::Receiver<bool>,
) {
    let engine = runner.engine();
    crate::daemon_background::spawn_snapshot_gc(engine.clone(), stop_rx.clone());
    crate::engine::plugin_reload::spawn_watcher(engine.clone(), stop_rx.clone());
    if let Some(sled) = sled {
        crate::daemon_background::spawn_background_verify(sled, cfg.clock.clone(), stop_rx.clone());
    }
    if engine.leases().shared() && cfg.resume_runs {
        crate::runner::cluster::spawn_takeover(runner.clone(), cfg.clock.clone(), stop_rx.clone());
        crate::runner::cluster::spawn_signal_follower(runner.clone(), tools.clone(), stop_rx.clone());
    }
}

/// Records the start and writes the discovery file (`daemon.json`); an embedded engine writes
/// `engine.json` only, for other `od` processes on its data dir to reach it (it may host a run
/// for a while: `od run start`) instead of failing on the held lock.
fn announce(cfg: &DaemonConfig, state: &AppState, url: &str, local_token: &str) -> Result<(), DaemonError> {
    if cfg.embedded {
        write_discovery(&engine_file(&cfg.data_dir), url, true, local_token);
        return Ok(());
    }
    // Queued first (so it is the first event of this start), committed in the background: on
    // a fresh data dir the first commit waits for the first segment to be zero-filled, and
    // the API need not wait for that.
    let listen = state.listen.get().cloned().unwrap_or_default();
    let started = Event::DaemonStarted(DaemonStarted {
        version: env!("CARGO_PKG_VERSION").into(),
        pid: std::process::id(),
        listen,
    });
    let stream = StreamId::new("system").expect("valid stream id");
    let ack = crate::store::EventLog::submit(&*state.store, Append::new(stream, vec![started]))?;
    tokio::spawn(async move {
        if let Ok(Err(e)) = ack.await {
            tracing::error!("could not record the start: {e}");
        }
    });
    write_discovery(&discovery_file(&cfg.data_dir), url, false, local_token);
    Ok(())
}

/// Serves the web UI's own port: the same routes as their own origin (the Origin check takes this
/// listener's port), stopped with the daemon. Returns its address.
fn serve_web(cfg: &DaemonConfig, state: &AppState, web: TcpListener, bound: SocketAddr) -> SocketAddr {
    let http = &state.http;
    let mut access = http.access.clone();
    access.port = Some(bound.port());
    let shared = Arc::new(HttpShared {
        config: cfg.http.clone(),
        access,
        gauges: http.gauges.clone(),
        throttle: http.throttle.clone(),
        sessions: http.sessions.clone(),
    });
    let mut web_state = state.clone();
    web_state.http = shared.clone();
    let (app, config, stop) = (router(web_state), cfg.http.clone(), state.shutdown.clone());
    tokio::spawn(async move { crate::http::serve::serve(web, app, config, shared.gauges.clone(), stop).await });
    bound
}

async fn record(state: &AppState, event: Event) -> Result<(), StoreError> {
    let stream = StreamId::new("system").expect("valid stream id");
    state.store.append_async(Append::new(stream, vec![event])).await.map(|_| ())
}

async fn finish(state: AppState, embedded: bool, reason: String) {
    if !embedded {
        if let Err(e) = record(&state, Event::DaemonStopped(DaemonStopped { reason })).await {
            tracing::error!("could not record the stop: {e}");
        }
        let _ = std::fs::remove_file(discovery_file(&state.data_dir));
    } else {
        let _ = std::fs::remove_file(engine_file(&state.data_dir));
    }
    state.engine.begin_shutdown();
    state.runner.cancel_all();
    // Runs record their end (failed: daemon-shutdown) as they notice; give them a moment. Any run
    // still in flight after that is ended by the next start (failed: daemon-restart).
    for _ in 0..100 {
        if state.runner.active_count() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let AppState { store, stats, engine, tools, runner, .. } = state;
    drop(runner);
    let _ = tokio::task::spawn_blocking(move || {
        let mut all = engine.projections();
        all.extend(tools.projections());
        all.push(stats.clone());
        for p in all {
            if let Err(e) = p.catch_up().and_then(|_| p.checkpoint_if_moved()) {
                tracing::warn!("projection {} checkpoint failed (it will be rebuilt): {e}", p.status().name);
            }
        }
        // The read models' WAL folded into the database and truncated: the next start reads no WAL.
        if let Err(e) = crate::projector::ReadModels::for_store(&store).and_then(|db| db.checkpoint_wal()) {
            tracing::warn!("the read models' WAL could not be checkpointed (the next start replays it): {e}");
        }
        // Leases lapse now rather than after the TTL: another daemon takes this one's runs at once.
        engine.leases().retire();
        drop((stats, tools, engine));
        store.close();
    })
    .await;
}

/// What the idle exit watches.
struct Idle {
    runner: Arc<crate::runner::Runner>,
    gauges: Arc<crate::http::serve::Gauges>,
    data_dir: PathBuf,
}

impl Idle {
    fn busy(&self) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        self.runner.active_count() > 0 || self.gauges.connections.load(Relaxed) > 0
    }
}

/// Stops the daemon once it has been idle (no run in flight, no open connection) for `idle_ms` on
/// the engine's clock, or as soon as its data dir is gone (a removed temporary dir). Checked
/// every [`IDLE_CHECK_MS`](crate::limits::IDLE_CHECK_MS); a run waiting for an answer does not
/// keep it: the next start resumes that run.
fn spawn_idle_exit(
    idle: Idle,
    idle_ms: u64,
    clock: SharedClock,
    stop: Arc<watch::Sender<bool>>,
    reason: Arc<std::sync::Mutex<&'static str>>,
) {
    let idle_ms = i64::try_from(idle_ms).unwrap_or(i64::MAX);
    tokio::spawn(async move {
        let mut stopped = stop.subscribe();
        let mut since = clock.now_ms();
        loop {
            let next = clock.sleep_until(clock.now_ms().saturating_add(crate::limits::IDLE_CHECK_MS));
            tokio::select! {
                _ = next => {}
                _ = stopped.wait_for(|v| *v) => return,
            }
            let why = if !idle.data_dir.exists() {
                "data-dir-removed"
            } else if idle.busy() {
                since = clock.now_ms();
                continue;
            } else if clock.now_ms().saturating_sub(since) >= idle_ms {
                "idle"
            } else {
                continue;
            };
            tracing::info!("stopping ({why})");
            if let Ok(mut r) = reason.lock() {
                *r = why;
            }
            stop.send_replace(true);
            return;
        }
    });
}

/// The `engine.json` discovery file an embedded engine (a CLI process) writes while it runs.
pub fn engine_file(data_dir: &Path) -> PathBuf {
    data_dir.join("engine.json")
}

/// Writes a discovery file: where the engine listens (its URL, `https://` under TLS) and its
/// local token. Only the user may read it (created 0600 under a temporary name, then renamed over
/// any older file).
fn write_discovery(file: &Path, url: &str, embedded: bool, token: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let body = serde_json::json!({
        "pid": std::process::id(), "url": url, "embedded": embedded, "token": token,
    });
    let tmp = file.with_extension("json.tmp");
    let _ = std::fs::remove_file(&tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(body.to_string().as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, file));
    if let Err(e) = written {
        tracing::error!("could not write {}: {e}", file.display());
    }
}

fn spawn_signal_handler(stop: Arc<watch::Sender<bool>>) {
    use tokio::signal::unix::{signal, SignalKind};
    // Register both handlers before returning, so a signal that arrives right after start is caught.
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::warn!("could not install signal handlers; stop the daemon with `od daemon stop`");
        return;
    };
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        stop.send_replace(true);
    });
}
