//! `marketplaces`: the configured marketplace indexes, their trust tier and latest contents.

use od_events::marketplaces::MarketplaceAdded;
use od_events::vocab::Trust;
use od_events::{Envelope, Event, EventKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::Projection;

/// One configured marketplace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Marketplace {
    pub id: String,
    pub url: String,
    pub trust: Trust,
    pub manifest_json: String,
    pub added_at: i64,
    pub refreshed_at: i64,
}

/// Marketplaces by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marketplaces {
    pub marketplaces: BTreeMap<String, Marketplace>,
}

impl Marketplaces {
    fn added(&mut self, env: &Envelope, e: &MarketplaceAdded) {
        let m = Marketplace {
            id: e.id.clone(),
            url: e.url.clone(),
            trust: e.trust.clone(),
            manifest_json: e.manifest_json.clone(),
            added_at: env.recorded_at,
            refreshed_at: env.recorded_at,
        };
        self.marketplaces.insert(e.id.clone(), m);
    }
}

impl Projection for Marketplaces {
    const NAME: &'static str = "marketplaces";
    const VERSION: u32 = 1;
    const KINDS: Option<&'static [EventKind]> = Some(&[
        EventKind::MarketplaceAdded,
        EventKind::MarketplaceRefreshed,
        EventKind::MarketplaceTrusted,
        EventKind::MarketplaceRemoved,
    ]);

    fn apply(&mut self, env: &Envelope, event: &Event) {
        match event {
            Event::MarketplaceAdded(e) => self.added(env, e),
            Event::MarketplaceRefreshed(e) => {
                if let Some(m) = self.marketplaces.get_mut(&e.id) {
                    m.manifest_json = e.manifest_json.clone();
                    m.refreshed_at = env.recorded_at;
                }
            }
            Event::MarketplaceTrusted(e) => {
                if let Some(m) = self.marketplaces.get_mut(&e.id) {
                    m.trust = e.trust.clone();
                }
            }
            Event::MarketplaceRemoved(e) => {
                self.marketplaces.remove(&e.id);
            }
            Event::DaemonStarted(_)
            | Event::DaemonStopped(_)
            | Event::LogVerified(_)
            | Event::NoteRecorded(_)
            | Event::PluginInstalled(_)
            | Event::PluginUninstalled(_)
            | Event::CapabilitiesGranted(_)
            | Event::CapabilitiesRevoked(_)
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
