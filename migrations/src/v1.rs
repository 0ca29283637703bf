//! Frozen schema-1 shapes. Never edit these: stored bytes depend on them.

/// `note_recorded` at schema 1: text only.
#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct NoteRecordedV1 {
    pub text: String,
}

/// `snapshot_recorded` at schema 1: the whole snapshot inline, as JSON.
#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct SnapshotRecordedV1 {
    pub snapshot_id: String,
    pub plugin_id: String,
    pub plugin_version: String,
    pub manifest_source_digest: String,
    pub plugin_source_digest: String,
    pub project_id: String,
    pub run_id: String,
    pub snapshot_json: String,
    pub applied_at: i64,
}

/// `prompt_composed` at schema 1: the prompt's digest and size only.
#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct PromptComposedV1 {
    pub run_id: String,
    pub stage_id: String,
    pub iteration: u32,
    pub digest: String,
    pub bytes: u64,
}
