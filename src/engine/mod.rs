//! Commands: validate the request, then append events. One file per area; reads come from the
//! projections the engine keeps live.

pub mod agents;
pub mod apply;
pub mod archive;
pub mod blob_gc;
pub mod bundled;
pub mod bundles;
pub mod choice_options;
pub mod config;
pub mod connectors;
mod context_chips;
pub mod context_refs;
pub mod conversations;
pub mod errors;
pub mod fetch;
pub mod files;
pub mod fork_scan;
pub mod forks;
pub mod gate;
pub mod genui;
mod genui_memory;
pub mod heal;
pub mod locale;
pub mod marketplaces;
pub mod mcp_oauth;
pub mod mcp_servers;
pub mod plugin_reload;
pub mod plugin_urls;
pub mod plugins;
pub mod projects;
pub mod prompt;
pub mod prompt_context;
pub mod resolve;
pub mod resume;
pub mod run_bundle;
pub mod run_create;
pub mod run_diff;
pub mod run_ends;
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
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::blobs::Blobs;
use crate::clock::SharedClock;
use crate::connectors::Connectors;
use crate::ids::SharedIds;
use crate::projector::{Managed, Projector, RecordProjector};
use crate::store::{RunLeases, Store};

pub use config::EngineConfig;
pub use errors::WorkError;

/// What an engine is made of, built by its owner (`daemon.rs`, or an embedder): the log, where
/// plugins and projects live, the handles it records through, and its configuration.
pub struct Parts {
    pub store: Store,
    /// Where plugins and projects live (on a shared log, the folder every daemon mounts).
    pub data_dir: PathBuf,
    pub clock: SharedClock,
    pub ids: SharedIds,
    /// Which daemon executes which run (every run is this process's unless the log is shared).
    pub leases: Arc<dyn RunLeases>,
    /// Every artifact's bytes by digest (`<shared dir>/blobs`).
    pub blobs: Blobs,
    /// Installed plugins' packed trees by source digest (`plugins/_archives`): what a damaged
    /// installed copy is rebuilt from (`heal.rs`).
    pub archives: Blobs,
    /// Connector catalog, credentials, pending authorizations and tool tokens (the daemon's own
    /// data dir: credentials are never on a shared dir).
    pub connectors: Connectors,
    pub config: EngineConfig,
}

/// The engine: the log plus the read models commands consult.
pub struct Engine {
    store: Store,
    data_dir: PathBuf,
    registry: Arc<Projector<PluginRegistry>>,
    markets: Arc<Projector<Marketplaces>>,
    /// Projects, conversations, snapshots and runs.
    workspace: Arc<RecordProjector<Workspace>>,
    /// Plugins shipped in the binary (trust `bundled`), by id.
    bundled: BTreeMap<String, InstalledPlugin>,
    clock: SharedClock,
    ids: SharedIds,
    /// Woken whenever a GenUI answer, revoke or prefill is recorded (runs waiting re-check).
    genui_changed: tokio::sync::Notify,
    leases: Arc<dyn RunLeases>,
    blobs: Blobs,
    connectors: Connectors,
    archives: Blobs,
    /// Derived copies rebuilt since start (`od doctor` reports them).
    repairs: heal::Repairs,
    config: EngineConfig,
    shutting_down: AtomicBool,
}

impl Engine {
    /// Loads the projections the engine needs and heals the derived copies found damaged.
    pub fn new(parts: Parts) -> Result<Self, crate::store::StoreError> {
        let Parts { store, data_dir, clock, ids, leases, blobs, archives, connectors, config } = parts;
        let registry = Arc::new(Projector::<PluginRegistry>::load(&store)?);
        let (bundled, repairs) = bundled::load_bundled(&data_dir, clock.now_ms());
        let markets = Arc::new(Projector::<Marketplaces>::load(&store)?);
        let workspace = Arc::new(RecordProjector::<Workspace>::load(&store)?);
        let engine = Self {
            store,
            data_dir,
            blobs,
            connectors,
            registry,
            markets,
            workspace,
            bundled,
            clock,
            ids,
            genui_changed: tokio::sync::Notify::new(),
            leases,
            shutting_down: AtomicBool::new(false),
            archives,
            repairs: heal::Repairs::default(),
            config,
        };
        engine.repairs.extend(repairs);
        engine.heal_at_start();
        Ok(engine)
    }

    /// Every projection the engine keeps (what `od projections` lists and rebuilds, with the
    /// tools' own).
    pub fn projections(&self) -> Vec<Arc<dyn Managed>> {
        vec![self.registry.clone(), self.markets.clone(), self.workspace.clone()]
    }

    /// The log the engine records into.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Where plugins and projects live (the shared dir on a shared log).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The engine's clock.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Where new ids come from.
    pub fn ids(&self) -> &SharedIds {
        &self.ids
    }

    /// Which daemon executes which run.
    pub fn leases(&self) -> &Arc<dyn RunLeases> {
        &self.leases
    }

    /// Every artifact's bytes by digest.
    pub fn blobs(&self) -> &Blobs {
        &self.blobs
    }

    /// Connector catalog, credentials, pending authorizations and tool tokens.
    pub fn connectors(&self) -> &Connectors {
        &self.connectors
    }

    /// Plugins shipped in the binary (trust `bundled`), by id.
    pub fn bundled(&self) -> &BTreeMap<String, InstalledPlugin> {
        &self.bundled
    }

    /// Projects, conversations, snapshots and runs.
    pub fn workspace(&self) -> &RecordProjector<Workspace> {
        &self.workspace
    }

    /// Woken whenever a GenUI answer, revoke or prefill is recorded (runs waiting re-check).
    pub fn genui_changed(&self) -> &tokio::sync::Notify {
        &self.genui_changed
    }

    /// The settings read once when the engine was made.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The environment agent binaries are found and probed in ([`EngineConfig::agent_probe`]).
    pub fn probe_env(&self) -> crate::agents::detect::ProbeEnv {
        self.config.agent_probe.clone().unwrap_or_else(crate::agents::detect::ProbeEnv::from_process)
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
