//! od: OpenDesign's plugin and run engine — the crate that does I/O.
//!
//! `store` is the durable event log, `projector` keeps projections live and checkpointed,
//! `http` serves the API and the web app beside it (`http/ui`), `cli` is the canonical interface, `limits` holds every bound.

// Functions of at most 70 lines (clippy.toml); tests are exempt.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod agents;
pub mod blobs;
pub mod cli;
pub mod clock;
pub mod connectors;
pub mod daemon;
pub mod daemon_background;
pub mod daemon_log;
pub mod durable;
pub mod engine;
pub mod http;
pub mod ids;
pub mod limits;
pub mod mcp;
pub mod mime;
pub mod net;
pub mod page;
pub mod plugins;
pub mod projector;
pub mod reclaim;
pub mod runner;
pub mod store;
pub mod tools;
