//! Plugins: loading, archives, lifecycle, bundles, marketplaces, locales, previews, snapshots, GenUI, tools.
//! One test binary for the area (each file of it is a module), so od is linked once for all of them.

#[path = "../common/mod.rs"]
mod common;

mod apply_partial;
mod atom_workers;
mod bundled_plugins;
mod bundles;
mod docs_links;
mod genui;
mod genui_options;
mod genui_schema;
mod install_https;
mod locales;
mod marketplaces;
mod parity;
mod plugin_archives;
mod plugin_lifecycle;
mod plugin_load;
mod plugin_load_props;
mod plugins_cli;
mod preview;
mod snapshot_retention;
mod snapshots;
mod tools;
mod tools_browser;
