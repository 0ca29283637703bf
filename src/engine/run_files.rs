//! A run's files as they were (issue 16): what the run recorded for a path, read back from the blob
//! store by the digest its `artifact_recorded` named — at the run's end, or at any of its events —
//! whatever later runs did to the project folder.

use od_events::Event;

use super::files::clean_relative;
use super::{Engine, WorkError};

impl Engine {
    /// The bytes of `path` as run `run_id` last recorded it at or before its event `at` (a stream
    /// version; `None`: its last event). `file-not-found` when the run had recorded no such file by
    /// then.
    pub fn run_file_at(&self, run_id: &str, path: &str, at: Option<u64>) -> Result<Vec<u8>, WorkError> {
        self.run_info(run_id)?;
        let rel = clean_relative(path)?;
        let mut digest = None;
        // A fork's inherited files come first (its history holds its ancestors' events).
        let own = format!("run:{run_id}");
        for s in self.run_history(run_id)? {
            if at.is_some_and(|a| s.envelope.stream == own && s.envelope.version > a) {
                break;
            }
            if let Event::ArtifactRecorded(e) = &s.event {
                if e.path == rel {
                    digest = Some(e.digest.clone());
                }
            }
        }
        let when = at.map_or_else(|| "by its end".to_string(), |a| format!("by its event {a}"));
        let digest =
            digest.ok_or_else(|| WorkError::FileNotFound(format!("{rel} (run {run_id} recorded none {when})")))?;
        self.blobs.read(&digest).map_err(|e| WorkError::io("reading an artifact blob", e))
    }
}
