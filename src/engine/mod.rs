//! Commands: validate the request, then append events. One file per area; reads come from the
//! projections the engine keeps live.

pub mod apply;
pub mod archive;
pub mod bundled;
pub mod fetch;
pub mod marketplaces;
pub mod plugins;

use od_projections::{InstalledPlugin, Marketplaces, PluginRegistry};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::projector::Projector;
use crate::store::Store;

/// The engine: the log plus the read models commands consult.
pub struct Engine {
    pub store: Store,
    pub data_dir: PathBuf,
    pub registry: Arc<Projector<PluginRegistry>>,
    pub markets: Arc<Projector<Marketplaces>>,
    /// Plugins shipped in the binary (trust `bundled`), by id.
    pub bundled: BTreeMap<String, InstalledPlugin>,
}

impl Engine {
    /// Loads the projections the engine needs.
    pub fn new(store: Store, data_dir: PathBuf) -> Result<Self, crate::store::StoreError> {
        let registry = Arc::new(Projector::<PluginRegistry>::load(&store)?);
        let bundled = bundled::load_bundled(&data_dir);
        let markets = Arc::new(Projector::<Marketplaces>::load(&store)?);
        Ok(Self { store, data_dir, registry, markets, bundled })
    }
}
