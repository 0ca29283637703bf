//! Projections: `rebuild(log) == live state` after random appends, checkpoints, projector crashes
//! and store restarts (proptest); fold up to a chosen seq; rebuild when VERSION changes.

use crate::common;
use common::*;
use od::projector::{fold_until, Projector};
use od::store::Append;
use od_events::{Envelope, Event};
use od_projections::{LogStats, Projection};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone)]
enum Op {
    Append { stream: u8, n: u8 },
    Checkpoint,
    ProjectorCrash,
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..5, 1u8..6).prop_map(|(stream, n)| Op::Append { stream, n }),
        2 => Just(Op::Checkpoint),
        1 => Just(Op::ProjectorCrash),
        1 => Just(Op::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn rebuild_equals_live(ops in proptest::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        let mut live = Projector::<LogStats>::load(&store).unwrap();
        for op in ops {
            match op {
                Op::Append { stream, n } => {
                    let events = (0..n).map(|i| note(&format!("{stream}-{i}"))).collect();
                    store.append(Append::new(sid(&format!("note:{stream}")), events)).unwrap();
                }
                Op::Checkpoint => { live.checkpoint().unwrap(); }
                Op::ProjectorCrash => live = Projector::<LogStats>::load(&store).unwrap(),
                Op::Restart => {
                    drop(live);
                    drop(store);
                    store = open(dir.path());
                    live = Projector::<LogStats>::load(&store).unwrap();
                }
            }
            let (state, seq) = live.get().unwrap();
            prop_assert_eq!(seq, store.last_seq());
            prop_assert_eq!(&state, &fold_until::<LogStats>(&*store, u64::MAX).unwrap());
        }
    }
}

#[test]
fn fold_until_gives_state_as_of_a_seq() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for i in 0..10 {
        append_note(&store, &format!("note:{}", i % 3), "x");
    }
    let at4 = fold_until::<LogStats>(&*store, 4).unwrap();
    assert_eq!((at4.events, at4.last_seq, at4.streams), (4, 4, 3));
    let all = fold_until::<LogStats>(&*store, u64::MAX).unwrap();
    assert_eq!((all.events, all.streams), (10, 3));
    assert_eq!(all.by_category.get("note"), Some(&10));
}

/// Same NAME as `LogStats` but another VERSION and fold: its checkpoint must not be trusted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct StatsV2 {
    events: u64,
    doubled: u64,
}

impl Projection for StatsV2 {
    const NAME: &'static str = LogStats::NAME;
    const VERSION: u32 = LogStats::VERSION + 1;
    fn apply(&mut self, _env: &Envelope, event: &Event) {
        self.events += 1;
        match event {
            Event::NoteRecorded(_) => self.doubled += 2,
            Event::DaemonStarted(_)
            | Event::DaemonStopped(_)
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

#[test]
fn version_change_rebuilds_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for _ in 0..5 {
        append_note(&store, "note:a", "x");
    }
    Projector::<LogStats>::load(&store).unwrap().checkpoint().unwrap();
    let v2 = Projector::<StatsV2>::load(&store).unwrap();
    assert_eq!(v2.get().unwrap().0, StatsV2 { events: 5, doubled: 10 });
}
