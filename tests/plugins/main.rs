//! Plugins: loading, archives, lifecycle, bundles, marketplaces, locales, previews, snapshots, GenUI, tools.
//! One test binary for the area (each file of it is a module), so od is linked once for all of them.

#[path = "../common/mod.rs"]
mod common;

#[path = "../atom_workers.rs"]
mod atom_workers;
#[path = "../bundled_plugins.rs"]
mod bundled_plugins;
#[path = "../bundles.rs"]
mod bundles;
#[path = "../genui.rs"]
mod genui;
#[path = "../genui_schema.rs"]
mod genui_schema;
#[path = "../locales.rs"]
mod locales;
#[path = "../marketplaces.rs"]
mod marketplaces;
#[path = "../parity.rs"]
mod parity;
#[path = "../plugin_archives.rs"]
mod plugin_archives;
#[path = "../plugin_lifecycle.rs"]
mod plugin_lifecycle;
#[path = "../plugin_load.rs"]
mod plugin_load;
#[path = "../plugin_load_props.rs"]
mod plugin_load_props;
#[path = "../plugins_cli.rs"]
mod plugins_cli;
#[path = "../preview.rs"]
mod preview;
#[path = "../snapshot_retention.rs"]
mod snapshot_retention;
#[path = "../snapshots.rs"]
mod snapshots;
#[path = "../tools.rs"]
mod tools;
#[path = "../tools_browser.rs"]
mod tools_browser;
