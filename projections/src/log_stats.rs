//! `log_stats`: what the log holds — counts by kind and by stream category, streams, time span.
//! Backs `od log stats`.

use od_events::{Envelope, Event};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::Projection;

/// Counts over the whole log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogStats {
    /// Events folded.
    pub events: u64,
    /// Seq of the last event folded.
    pub last_seq: u64,
    /// Distinct streams (counted at their first event).
    pub streams: u64,
    /// Events per kind name.
    pub by_kind: BTreeMap<String, u64>,
    /// Events per stream category (`run`, `project`, `plugins`, …).
    pub by_category: BTreeMap<String, u64>,
    /// Times a daemon started on this log.
    pub daemon_starts: u64,
    /// Graceful daemon stops.
    pub daemon_stops: u64,
    /// Unix ms of the first and last event.
    pub first_recorded_at: Option<i64>,
    pub last_recorded_at: Option<i64>,
}

impl Projection for LogStats {
    const NAME: &'static str = "log_stats";
    const VERSION: u32 = 1;

    fn apply(&mut self, env: &Envelope, event: &Event) {
        self.events += 1;
        self.last_seq = env.seq;
        if env.version == 0 {
            self.streams += 1;
        }
        *self.by_kind.entry(event.kind().name().to_string()).or_default() += 1;
        let category = env.stream.split_once(':').map_or(env.stream.as_str(), |(c, _)| c);
        *self.by_category.entry(category.to_string()).or_default() += 1;
        self.first_recorded_at.get_or_insert(env.recorded_at);
        self.last_recorded_at = Some(env.recorded_at);
        match event {
            Event::DaemonStarted(_) => self.daemon_starts += 1,
            Event::DaemonStopped(_) => self.daemon_stops += 1,
            Event::NoteRecorded(_)
            | Event::LogVerified(_)
            | Event::PluginInstalled(_)
            | Event::PluginUninstalled(_)
            | Event::CapabilitiesGranted(_)
            | Event::CapabilitiesRevoked(_)
            | Event::MarketplaceAdded(_)
            | Event::MarketplaceRefreshed(_)
            | Event::MarketplaceTrusted(_)
            | Event::MarketplaceRemoved(_)
            | Event::SnapshotRecorded(_)
            | Event::SnapshotMarkedStale(_)
            | Event::SnapshotExpired(_)
            | Event::SnapshotBodyRecorded(_)
            | Event::ProjectCreated(_)
            | Event::ProjectDeleted(_)
            | Event::ConversationCreated(_)
            | Event::RunCreated(_)
            | Event::RunForked(_)
            | Event::BlobExpired(_)
            | Event::BlobUnreferenced(_)
            | Event::SubstrateStaged(_)
            | Event::ConversationMessage(_)
            | Event::FollowUpPlanned(_)
            | Event::AgentStarted(_)
            | Event::AgentOutput(_)
            | Event::PromptComposed(_)
            | Event::SignalRecorded(_)
            | Event::StageStarted(_)
            | Event::StageCompleted(_)
            | Event::StageFailed(_)
            | Event::DevloopIteration(_)
            | Event::LoopBroken(_)
            | Event::RunResponded(_)
            | Event::ArtifactRecorded(_)
            | Event::RunEnded(_)
            | Event::SurfaceRequested(_)
            | Event::SurfaceResponded(_)
            | Event::SurfaceTimedOut(_)
            | Event::SurfaceRefused(_)
            | Event::SurfaceInvalidated(_)
            | Event::SurfaceRevoked(_)
            | Event::SurfacePrefilled(_)
            | Event::ToolRegistered(_)
            | Event::ConnectorConnected(_)
            | Event::PluginReloaded(_)
            | Event::ConnectorDisconnected(_)
            | Event::McpServerAuthorized(_)
            | Event::McpServerDeauthorized(_)
            | Event::ToolRemoved(_)
            | Event::ToolsAdvertised(_)
            | Event::BrowserActionRequested(_)
            | Event::BrowserActionResulted(_) => {}
        }
    }
}
