//! Commands: validate the request, then append events. One file per area; reads come from the
//! projections the engine keeps live.

pub mod agents;
pub mod apply;
pub mod archive;
pub mod blob_gc;
pub mod bundled;
pub mod bundles;
pub mod connectors;
pub mod context_refs;
pub mod conversations;
pub mod errors;
pub mod fetch;
pub mod files;
pub mod fork_scan;
pub mod forks;
pub mod gate;
pub mod genui;
pub mod heal;
pub mod locale;
pub mod marketplaces;
pub mod mcp_oauth;
pub mod mcp_servers;
pub mod plugin_reload;
pub mod plugin_urls;
pub mod plugins;
pub mod projects;
pub mod prompt_context;
pub mod resolve;
pub mod run_bundle;
pub mod run_diff;
pub mod run_files;
pub mod run_import;
pub mod runs;
pub mod safe_fs;
pub mod snapshot_export;
pub mod snapshots;
pub mod substrate;
pub mod tool_gating;

use od_projections::{InstalledPlugin, Marketplaces, PluginRegistry, Workspace};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::clock::SharedClock;
use crate::ids::SharedIds;
use crate::projector::{Managed, Projector, RecordProjector};
use crate::store::Store;

pub use errors::WorkError;

/// The engine: the log plus the read models commands consult.
pub struct Engine {
    pub store: Store,
    pub data_dir: PathBuf,
    pub registry: Arc<Projector<PluginRegistry>>,
    pub markets: Arc<Projector<Marketplaces>>,
    /// Projects, conversations, snapshots and runs.
    pub workspace: Arc<RecordProjector<Workspace>>,
    /// The agent tool catalog and the browser actions waiting in this process.
    pub tools: crate::tools::Tools,
    /// Plugins shipped in the binary (trust `bundled`), by id.
    pub bundled: BTreeMap<String, InstalledPlugin>,
    pub clock: SharedClock,
    pub ids: SharedIds,
    /// Woken whenever a GenUI answer, revoke or prefill is recorded (runs waiting re-check).
    pub genui_changed: tokio::sync::Notify,
    /// Which daemon executes which run (every run is this process's unless the log is shared).
    pub leases: Arc<dyn crate::store::RunLeases>,
    /// Every artifact's bytes by digest (`<shared dir>/blobs`).
    pub blobs: crate::blobs::Blobs,
    /// How long a daemon may miss its heartbeat before its runs are taken over (shared log).
    pub lease_ttl_ms: u64,
    /// Connector catalog, credentials, pending authorizations and tool tokens (`<data dir>`).
    pub connectors: crate::connectors::Connectors,
    /// Installed plugins' packed trees by source digest (`plugins/_archives`): what a damaged
    /// installed copy is rebuilt from (`heal.rs`).
    pub archives: crate::blobs::Blobs,
    /// Derived copies rebuilt since start (`od doctor` reports them).
    pub repairs: heal::Repairs,
    /// The environment agent binaries are found and probed in (`*_BIN`, `PATH`, `HOME`): the
    /// process's own, read at each use, unless the daemon was given one (tests, embedders).
    pub agent_probe: Option<crate::agents::detect::ProbeEnv>,
    shutting_down: AtomicBool,
}

impl Engine {
    /// Loads the projections the engine needs.
    pub fn new(
        store: Store,
        data_dir: PathBuf,
        clock: SharedClock,
        ids: SharedIds,
    ) -> Result<Self, crate::store::StoreError> {
        let registry = Arc::new(Projector::<PluginRegistry>::load(&store)?);
        let (bundled, repairs) = bundled::load_bundled(&data_dir, clock.now_ms());
        let markets = Arc::new(Projector::<Marketplaces>::load(&store)?);
        let workspace = Arc::new(RecordProjector::<Workspace>::load(&store)?);
        let tools = crate::tools::Tools::start(&store, &clock)?;
        let blobs = crate::blobs::Blobs::new(data_dir.join("blobs"));
        let connectors = crate::connectors::Connectors::new(&data_dir);
        let archives = crate::blobs::Blobs::new(data_dir.join("plugins").join("_archives"));
        let fences = store.local_fences();
        let engine = Self {
            store,
            data_dir,
            blobs,
            connectors,
            registry,
            markets,
            workspace,
            tools,
            bundled,
            clock,
            ids,
            genui_changed: tokio::sync::Notify::new(),
            leases: Arc::new(crate::store::LocalLeases::new("local", fences)),
            lease_ttl_ms: crate::limits::LEASE_TTL_MS,
            shutting_down: AtomicBool::new(false),
            archives,
            repairs: heal::Repairs::default(),
            agent_probe: None,
        };
        engine.repairs.extend(repairs);
        engine.heal_at_start();
        Ok(engine)
    }

    /// Every projection the engine keeps (what `od projections` lists and rebuilds).
    pub fn projections(&self) -> Vec<Arc<dyn Managed>> {
        vec![
            self.registry.clone(),
            self.markets.clone(),
            self.workspace.clone(),
            self.tools.catalog.clone(),
            self.tools.browser.clone(),
        ]
    }

    /// The environment agent binaries are found and probed in ([`Engine::agent_probe`]).
    pub fn probe_env(&self) -> crate::agents::detect::ProbeEnv {
        self.agent_probe.clone().unwrap_or_else(crate::agents::detect::ProbeEnv::from_process)
    }

    /// Marks the engine as stopping: runs canceled from now on end as failed (daemon shutdown).
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    /// Whether the engine is stopping.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
}
