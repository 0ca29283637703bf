//! Agent tools: one registry of `AgentToolDescriptor`s (od's own `api` tools, imports, the tools of
//! plugin MCP servers) kept as a projection of the log with a keyword index; browser sessions'
//! PUSHed advertisements reconciled into their runs; browser-action round trips (dispatch on the
//! run's stream, wait for the result, timeout on the injected clock, supersede, refuse duplicates);
//! calling `api` tools through their declared routes; and progressive disclosure for agents (two
//! meta-tools instead of the whole catalog).
//!
//! Files: `descriptor` (validation, canonical form), `builtin` (od's tools), `catalog` (register,
//! import, search, manifest, advertise), `browser` (round trips), `exec` (route calls),
//! `disclosure` (meta-tools), `plugin_servers` + `mcp_client` (plugin MCP servers), `wire`.

pub mod browser;
mod browser_once;
pub mod builtin;
pub mod catalog;
pub mod descriptor;
pub mod disclosure;
mod error;
pub mod exec;
pub mod mcp_client;
pub mod mcp_http;
pub mod plugin_servers;
pub mod search_page;
pub mod wire;

use od_projections::{Browser, ToolCatalog};
use std::sync::{Arc, Mutex};

use crate::engine::Engine;
use crate::projector::{Managed, Projector, RecordProjector};
use crate::store::StoreError;
pub use error::ToolError;

/// `AGENT_ACTIONS_PROTOCOL_VERSION`: the manifest and browser-action messages carry it.
pub const PROTOCOL_VERSION: u32 = 1;

/// The tool catalog projection and the browser actions waiting in this process, over the engine
/// they read runs and plugins from (built beside the engine in `daemon.rs`; the engine does not
/// know them).
pub struct Tools {
    engine: Arc<Engine>,
    catalog: Arc<Projector<ToolCatalog>>,
    /// Browser sessions and invocations (records on disk).
    browser: Arc<RecordProjector<Browser>>,
    actions: browser::Actions,
    /// Whether od's own tools were checked against the catalog in this process.
    builtin_checked: Mutex<bool>,
}

impl Tools {
    /// Loads the catalog and resolves browser actions a previous process left waiting.
    pub fn start(engine: Arc<Engine>) -> Result<Self, StoreError> {
        let store = engine.store();
        let catalog = Arc::new(Projector::<ToolCatalog>::load(store)?);
        let records = Arc::new(RecordProjector::<Browser>::load(store)?);
        // On a shared log (PostgreSQL) other daemons' calls may be waiting: a daemon resolves
        // orphans once it knows who holds which run (`Tools::resolve_browser_orphans`).
        if store.backend() != "postgres" {
            browser::resolve_orphans(store, &records, engine.clock().now_ms(), |runs| Ok(runs.to_vec()))?;
        }
        let actions = browser::Actions::default();
        Ok(Self { engine, catalog, browser: records, actions, builtin_checked: Mutex::new(false) })
    }

    /// The engine the tools read runs and plugins from.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Browser sessions and invocations (records on disk).
    pub fn browser(&self) -> &RecordProjector<Browser> {
        &self.browser
    }

    /// The projections the tools keep (what `od projections` lists beside the engine's).
    pub fn projections(&self) -> Vec<Arc<dyn Managed>> {
        vec![self.catalog.clone(), self.browser.clone()]
    }

    /// Registers od's own tools whose definitions changed since the catalog last saw them, once
    /// per process, before the catalog is first consulted (a start that never touches tools
    /// appends nothing; an unchanged catalog never gets an event).
    fn ensure_builtin(&self) -> Result<(), ToolError> {
        let mut done = self.builtin_checked.lock().expect("builtin lock");
        if !*done {
            catalog::register_builtin(self.engine.store(), &self.catalog, self.engine.clock().now_ms())?;
            *done = true;
        }
        Ok(())
    }
}
