//! od-events: the event contract of od.
//!
//! Owns the stream ids, the envelope every stored event carries, the event kinds (one module per
//! area), and the frame format: how one event is laid out on disk and chained into the blake3 hash
//! chain. Pure data: no I/O, no clock, no async.

// Functions of at most 70 lines (clippy.toml); tests are exempt.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod connectors;
pub mod event;
pub mod frame;
pub mod genui;
pub mod ids;
pub mod marketplaces;
pub mod plugins;
pub mod projects;
pub mod runs;
pub mod snapshots;
pub mod system;
pub mod tools;
pub mod vocab;

pub use event::{DecodeError, Envelope, Event, EventKind, Stored};
pub use frame::{Frame, FrameError, FrameHeader, FrameRef, Hash, GENESIS_HASH};
pub use ids::{StreamId, StreamIdError};
