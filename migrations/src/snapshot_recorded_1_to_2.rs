//! `snapshot_recorded` schema 1 → 2: the body moved out of the event (stored once per digest in
//! `snapshot-body:<digest>`); an old event keeps its whole snapshot inline.

use crate::v1::SnapshotRecordedV1;
use od_events::snapshots::{SnapshotBody, SnapshotRecorded};
use rkyv::rancor;

pub(crate) fn hop(payload: &[u8]) -> Result<Vec<u8>, String> {
    let old = rkyv::from_bytes::<SnapshotRecordedV1, rancor::Error>(payload).map_err(|e| e.to_string())?;
    let new = SnapshotRecorded {
        snapshot_id: old.snapshot_id,
        plugin_id: old.plugin_id,
        plugin_version: old.plugin_version,
        manifest_source_digest: old.manifest_source_digest,
        plugin_source_digest: old.plugin_source_digest,
        project_id: old.project_id,
        run_id: old.run_id,
        body: SnapshotBody::Inline { json: old.snapshot_json },
        applied_at: old.applied_at,
    };
    Ok(rkyv::to_bytes::<rancor::Error>(&new).map_err(|e| e.to_string())?.into_vec())
}
