//! `note_recorded` schema 1 → 2: notes gained `tags`; old notes have none.

use crate::v1::NoteRecordedV1;
use od_events::system::NoteRecorded;
use rkyv::rancor;

pub(crate) fn hop(payload: &[u8]) -> Result<Vec<u8>, String> {
    let old = rkyv::from_bytes::<NoteRecordedV1, rancor::Error>(payload).map_err(|e| e.to_string())?;
    let new = NoteRecorded { text: old.text, tags: Vec::new() };
    Ok(rkyv::to_bytes::<rancor::Error>(&new).map_err(|e| e.to_string())?.into_vec())
}
