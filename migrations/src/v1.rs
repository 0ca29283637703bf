//! Frozen schema-1 shapes. Never edit these: stored bytes depend on them.

/// `note_recorded` at schema 1: text only.
#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct NoteRecordedV1 {
    pub text: String,
}
