//! `plugin_registry`: the installed plugins — latest installed version of each, its provenance,
//! trust tier, and the capabilities granted to it (install-time grants plus persisted
//! `od plugin trust` grants, minus revocations). The capability gate reads this.

use od_events::plugins::{CapabilitiesGranted, CapabilitiesRevoked, PluginInstalled};
use od_events::vocab::{SourceKind, Trust};
use od_events::{Envelope, Event, EventKind};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

use crate::Projection;

/// Capability every plugin keeps: it may inject its prompt.
pub const PROMPT_INJECT: &str = "prompt:inject";

/// One installed plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstalledPlugin {
    pub id: String,
    pub version: String,
    pub title: String,
    pub source_kind: SourceKind,
    pub source: String,
    pub trust: Trust,
    pub manifest_json: String,
    pub source_digest: String,
    pub fs_path: String,
    pub capabilities_granted: BTreeSet<String>,
    pub warnings_json: String,
    pub installed_at: i64,
    pub updated_at: i64,
    /// Seq of the event that installed this version.
    pub installed_seq: u64,
}

/// Installed plugins by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginRegistry {
    pub plugins: BTreeMap<String, InstalledPlugin>,
}

impl PluginRegistry {
    fn installed(&mut self, env: &Envelope, e: &PluginInstalled) {
        let installed_at = self.plugins.get(&e.id).map_or(env.recorded_at, |p| p.installed_at);
        let mut caps: BTreeSet<String> = e.capabilities_granted.iter().cloned().collect();
        caps.insert(PROMPT_INJECT.to_string());
        let p = InstalledPlugin {
            id: e.id.clone(),
            version: e.version.clone(),
            title: e.title.clone(),
            source_kind: e.source_kind.clone(),
            source: e.source.clone(),
            trust: e.trust.clone(),
            manifest_json: e.manifest_json.clone(),
            source_digest: e.source_digest.clone(),
            fs_path: e.fs_path.clone(),
            capabilities_granted: caps,
            warnings_json: e.warnings_json.clone(),
            installed_at,
            updated_at: env.recorded_at,
            installed_seq: env.seq,
        };
        self.plugins.insert(e.id.clone(), p);
    }

    fn granted(&mut self, env: &Envelope, e: &CapabilitiesGranted) {
        if let Some(p) = self.plugins.get_mut(&e.id) {
            p.capabilities_granted.extend(e.capabilities.iter().cloned());
            p.updated_at = env.recorded_at;
        }
    }

    /// `prompt:inject` is never revoked: every plugin holds it.
    fn revoked(&mut self, env: &Envelope, e: &CapabilitiesRevoked) {
        if let Some(p) = self.plugins.get_mut(&e.id) {
            for c in e.capabilities.iter().filter(|c| c.as_str() != PROMPT_INJECT) {
                p.capabilities_granted.remove(c);
            }
            p.updated_at = env.recorded_at;
        }
    }
}

impl Projection for PluginRegistry {
    const NAME: &'static str = "plugin_registry";
    const VERSION: u32 = 1;
    const KINDS: Option<&'static [EventKind]> = Some(&[
        EventKind::PluginInstalled,
        EventKind::PluginUninstalled,
        EventKind::CapabilitiesGranted,
        EventKind::CapabilitiesRevoked,
    ]);

    fn apply(&mut self, env: &Envelope, event: &Event) {
        match event {
            Event::PluginInstalled(e) => self.installed(env, e),
            Event::PluginUninstalled(e) => {
                self.plugins.remove(&e.id);
            }
            Event::CapabilitiesGranted(e) => self.granted(env, e),
            Event::CapabilitiesRevoked(e) => self.revoked(env, e),
            Event::DaemonStarted(_)
            | Event::DaemonStopped(_)
            | Event::LogVerified(_)
            | Event::NoteRecorded(_)
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

#[cfg(test)]
mod tests {
    use super::*;
    use od_events::plugins::{CapabilitiesGranted, CapabilitiesRevoked, PluginInstalled, PluginUninstalled};

    fn env(seq: u64) -> Envelope {
        Envelope {
            seq,
            stream: "plugin:p".into(),
            version: seq - 1,
            recorded_at: seq as i64 * 10,
            op_id: None,
            stored_schema: 1,
        }
    }

    fn installed(version: &str) -> Event {
        Event::PluginInstalled(PluginInstalled {
            id: "p".into(),
            version: version.into(),
            title: "P".into(),
            source_kind: "local".into(),
            source: "/x".into(),
            trust: "restricted".into(),
            manifest_json: "{}".into(),
            source_digest: "d".into(),
            fs_path: "plugins/p/d".into(),
            capabilities_granted: vec![],
            warnings_json: "[]".into(),
        })
    }

    #[test]
    fn grants_persist_across_upgrades_until_revoked_and_uninstall_removes() {
        let mut r = PluginRegistry::default();
        r.apply(&env(1), &installed("1.0.0"));
        let caps = |r: &PluginRegistry| r.plugins["p"].capabilities_granted.iter().cloned().collect::<Vec<_>>();
        assert_eq!(caps(&r), ["prompt:inject"]);
        let grant = CapabilitiesGranted { id: "p".into(), capabilities: vec!["network".into(), "mcp:x".into()] };
        r.apply(&env(2), &Event::CapabilitiesGranted(grant));
        r.apply(&env(3), &installed("1.1.0"));
        assert_eq!(r.plugins["p"].version, "1.1.0");
        assert_eq!(r.plugins["p"].installed_at, 10, "an upgrade keeps the first install time");
        assert_eq!(caps(&r), ["prompt:inject"], "a reinstall records its own grants");
        let grant = CapabilitiesGranted { id: "p".into(), capabilities: vec!["network".into()] };
        r.apply(&env(4), &Event::CapabilitiesGranted(grant));
        let revoke =
            CapabilitiesRevoked { id: "p".into(), capabilities: vec!["network".into(), "prompt:inject".into()] };
        r.apply(&env(5), &Event::CapabilitiesRevoked(revoke));
        assert_eq!(caps(&r), ["prompt:inject"], "prompt:inject is never revoked");
        r.apply(&env(6), &Event::PluginUninstalled(PluginUninstalled { id: "p".into(), version: "1.1.0".into() }));
        assert!(r.plugins.is_empty());
    }
}
