//! od-projections: pure folds from events to read models.
//!
//! A projection has a NAME, a VERSION (bump it when the fold changes; the daemon then rebuilds it
//! from the log) and a pure `apply`. Folds match every event kind explicitly — no `_ =>` arm — so a
//! new kind forces every projection to decide what it means for it. Small, bounded read models
//! ([`Projection`]) are one value in memory; read models that grow with history ([`RecordFold`])
//! are records in a [`Records`] store, one per entity, with the indexes their lists need.

// Functions of at most 70 lines (clippy.toml); tests are exempt.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod browser;
pub mod genui;
pub mod log_stats;
pub mod marketplaces;
pub mod plugin_registry;
pub mod records;
pub mod tool_index;
pub mod tools;
pub mod workspace;
pub mod workspace_read;
mod workspace_runs;

pub use browser::{Browser, BrowserSession, Invocation};
pub use genui::SurfaceRow;
pub use log_stats::LogStats;
pub use marketplaces::{Marketplace, Marketplaces};
pub use plugin_registry::{InstalledPlugin, PluginRegistry};
pub use records::{Key, MemRecords, RecordFold, Records, RecordsExt, RecordsRead, RecordsWrite};
pub use tool_index::{SurfaceFilter, ToolIndex};
pub use tools::{ToolCatalog, ToolEntry};
pub use workspace::{ArtifactInfo, Conversation, ConversationRecord, Project, RunInfo, SnapshotInfo, Workspace};

use od_events::{Envelope, Event, EventKind};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A pure fold from the log to a read model.
pub trait Projection:
    Default + Clone + PartialEq + std::fmt::Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// Stable name, the key of its checkpoint.
    const NAME: &'static str;
    /// Version of the fold; a change discards checkpoints and rebuilds from the log.
    const VERSION: u32;
    /// The kinds [`Projection::apply`] acts on (`None`, the default: every kind). Events of other
    /// kinds must leave the projection as it is: a projector does not even decode their frames
    /// for it (most frames are a run's, which these registries never read).
    const KINDS: Option<&'static [EventKind]> = None;
    /// Folds one event in.
    fn apply(&mut self, env: &Envelope, event: &Event);
}

/// Whether projection `P` acts on events of kind `code` ([`Projection::KINDS`]).
pub fn wants<P: Projection>(code: u16) -> bool {
    P::KINDS.is_none_or(|kinds| kinds.iter().any(|k| k.code() == code))
}
