//! `tools`: the agent tool catalog — every registered tool (latest definition, its source); a
//! small, bounded read model kept in memory (browser sessions and invocations, which grow with
//! runs, are the `browser` records). Keyword search goes through a [`ToolIndex`] kept in step with
//! the catalog by the same fold (rebuilt when a checkpoint is loaded, never stored).

use od_events::tools::ToolRegistered;
use od_events::vocab::ToolSurface;
use od_events::{Envelope, Event, EventKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::tool_index::{Ranked, SurfaceFilter, ToolIndex};
use crate::Projection;

/// One catalog entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEntry {
    pub name: String,
    /// `api` or `browser`.
    pub surface: ToolSurface,
    pub description: String,
    pub descriptor_json: String,
    pub keywords: String,
    pub digest: String,
    pub source: String,
    pub registered_at: i64,
    /// Seq of the registration.
    pub seq: u64,
}

/// The catalog as it is checkpointed (the index is derived from `tools`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogData {
    pub tools: BTreeMap<String, ToolEntry>,
}

/// Tools, browser sessions and invocations, with the search index.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(from = "CatalogData", into = "CatalogData")]
pub struct ToolCatalog {
    pub data: CatalogData,
    index: ToolIndex,
}

impl PartialEq for ToolCatalog {
    fn eq(&self, other: &Self) -> bool {
        self.data == other.data
    }
}

impl From<CatalogData> for ToolCatalog {
    fn from(data: CatalogData) -> Self {
        let mut index = ToolIndex::default();
        for t in data.tools.values() {
            index.upsert(&t.name, t.surface == ToolSurface::Api, &t.description, &t.keywords);
        }
        Self { data, index }
    }
}

impl From<ToolCatalog> for CatalogData {
    fn from(c: ToolCatalog) -> Self {
        c.data
    }
}

impl ToolCatalog {
    /// Keyword search (see [`ToolIndex::search`]).
    pub fn search(&self, query: &str, filter: SurfaceFilter, offset: usize, limit: usize) -> Ranked<'_> {
        self.index.search(query, filter, offset, limit)
    }

    /// Registered tools of the surfaces `filter` admits.
    pub fn count(&self, filter: SurfaceFilter) -> usize {
        self.index.count(filter)
    }

    fn remove_tool(&mut self, name: &str) {
        self.data.tools.remove(name);
        self.index.remove(name);
    }
}

impl ToolCatalog {
    fn register_tool(&mut self, env: &Envelope, e: &ToolRegistered) {
        self.index.upsert(&e.name, e.surface == ToolSurface::Api, &e.description, &e.keywords);
        let t = ToolEntry {
            name: e.name.clone(),
            surface: e.surface.clone(),
            description: e.description.clone(),
            descriptor_json: e.descriptor_json.clone(),
            keywords: e.keywords.clone(),
            digest: e.digest.clone(),
            source: e.source.clone(),
            registered_at: e.registered_at,
            seq: env.seq,
        };
        self.data.tools.insert(e.name.clone(), t);
    }

    /// An uninstalled plugin's MCP tools (`source` `plugin:<id>/<server>`) leave with it.
    fn remove_plugin_tools(&mut self, plugin_id: &str) {
        let prefix = format!("plugin:{plugin_id}/");
        let gone: Vec<String> =
            self.data.tools.values().filter(|t| t.source.starts_with(&prefix)).map(|t| t.name.clone()).collect();
        for name in gone {
            self.remove_tool(&name);
        }
    }
}

impl Projection for ToolCatalog {
    const NAME: &'static str = "tools";
    const VERSION: u32 = 2;
    const KINDS: Option<&'static [EventKind]> =
        Some(&[EventKind::ToolRegistered, EventKind::ToolRemoved, EventKind::PluginUninstalled]);

    fn apply(&mut self, env: &Envelope, event: &Event) {
        match event {
            Event::ToolRegistered(e) => self.register_tool(env, e),
            Event::ToolRemoved(e) => self.remove_tool(&e.name),
            Event::PluginUninstalled(e) => self.remove_plugin_tools(&e.id),
            Event::DaemonStarted(_)
            | Event::DaemonStopped(_)
            | Event::LogVerified(_)
            | Event::NoteRecorded(_)
            | Event::PluginInstalled(_)
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
            | Event::ConnectorConnected(_)
            | Event::PluginReloaded(_)
            | Event::ConnectorDisconnected(_)
            | Event::McpServerAuthorized(_)
            | Event::McpServerDeauthorized(_)
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
            | Event::ToolsAdvertised(_)
            | Event::BrowserActionRequested(_)
            | Event::BrowserActionResulted(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use od_events::tools::{ToolRegistered, ToolRemoved};

    fn env(seq: u64) -> Envelope {
        Envelope { seq, stream: "tools".into(), version: seq - 1, recorded_at: 0, op_id: None, stored_schema: 1 }
    }

    fn reg(name: &str, desc: &str, source: &str) -> Event {
        Event::ToolRegistered(ToolRegistered {
            name: name.into(),
            surface: "api".into(),
            description: desc.into(),
            descriptor_json: "{}".into(),
            keywords: String::new(),
            digest: format!("d-{desc}"),
            replaces_digest: String::new(),
            source: source.into(),
            registered_at: 0,
        })
    }

    #[test]
    fn registrations_removals_and_uninstalls_reach_the_index_and_survive_a_checkpoint() {
        let mut c = ToolCatalog::default();
        c.apply(&env(1), &reg("a.one", "paint the fence", "builtin"));
        c.apply(&env(2), &reg("p.two", "paint the wall", "plugin:p/srv"));
        c.apply(&env(3), &reg("a.one", "sand the floor", "builtin"));
        assert_eq!(c.search("paint", SurfaceFilter::Api, 0, 10).total, 1);
        let json = serde_json::to_string(&c).unwrap();
        let back: ToolCatalog = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.search("sand", SurfaceFilter::Api, 0, 10).hits[0].0, "a.one");
        c.apply(
            &env(4),
            &Event::PluginUninstalled(od_events::plugins::PluginUninstalled { id: "p".into(), version: "1".into() }),
        );
        assert_eq!(c.search("paint", SurfaceFilter::Api, 0, 10).total, 0);
        c.apply(
            &env(5),
            &Event::ToolRemoved(ToolRemoved {
                name: "a.one".into(),
                source: "builtin".into(),
                reason: "removed".into(),
                removed_at: 0,
            }),
        );
        assert!(c.data.tools.is_empty());
        assert_eq!(c.count(SurfaceFilter::All), 0);
    }
}
