//! A run's files as they were (issue 16): what the run recorded for a path, read back from the blob
//! store by the digest its `artifact_recorded` named — at the run's end, or at any of its events —
//! whatever later runs did to the project folder — and `od files diff` of such a file against
//! another run's or the project's current one.

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

/// One side of `od files diff`: a run's recorded file (`<runId>[@<eventId>]`) or, without a side,
/// the project's current file.
fn side_bytes(engine: &Engine, side: Option<&str>, project: &str, path: &str) -> Result<(String, Vec<u8>), WorkError> {
    match side.filter(|s| !s.is_empty()) {
        None => Ok((format!("project {project}"), engine.read_file(project, path)?)),
        Some(s) => {
            let (run, at) = match s.split_once('@') {
                Some((r, a)) => (
                    r,
                    Some(a.parse::<u64>().map_err(|_| WorkError::invalid("at", format!("{a:?} is not an event id")))?),
                ),
                None => (s, None),
            };
            Ok((s.to_string(), engine.run_file_at(run, path, at)?))
        }
    }
}

impl Engine {
    /// `path` as run `from` recorded it (`<runId>[@<eventId>]`) against `to` (another such side,
    /// or the project's current file): digests, sizes, and a unified diff for UTF-8 text up to
    /// [`MAX_DIFF_TEXT_BYTES`](crate::limits::MAX_DIFF_TEXT_BYTES).
    pub fn diff_file(&self, path: &str, from: &str, to: Option<&str>) -> Result<serde_json::Value, WorkError> {
        let run = from.split_once('@').map_or(from, |(r, _)| r);
        let project = self.run_info(run)?.project_id;
        let (a_name, a) = side_bytes(self, Some(from), &project, path)?;
        let (b_name, b) = side_bytes(self, to, &project, path)?;
        let digest = |x: &[u8]| blake3::hash(x).to_hex().to_string();
        let text = |x: &[u8]| {
            (x.len() as u64 <= crate::limits::MAX_DIFF_TEXT_BYTES)
                .then(|| std::str::from_utf8(x).ok())
                .flatten()
                .map(str::to_string)
        };
        let (diff, too_costly) = match (text(&a), text(&b)) {
            (Some(x), Some(y)) => {
                match unified_diff(&x, &y, &format!("{a_name}/{path}"), &format!("{b_name}/{path}")) {
                    Some(d) => (serde_json::json!(d), false),
                    None => (serde_json::Value::Null, true),
                }
            }
            _ => (serde_json::Value::Null, false),
        };
        let mut v = serde_json::json!({
            "path": path, "projectId": project, "same": a == b,
            "from": { "ref": a_name, "digest": digest(&a), "bytes": a.len() },
            "to": { "ref": b_name, "digest": digest(&b), "bytes": b.len() },
            "diff": diff,
        });
        if too_costly {
            let ms = crate::limits::DIFF_DEADLINE_MS;
            v["diffOmitted"] = serde_json::json!(format!(
                "finding the diff took longer than {ms} ms (DIFF_DEADLINE_MS): compared by digest only"
            ));
        }
        Ok(v)
    }
}

/// A unified diff of two texts (3 lines of context), or `None` when finding it took longer than
/// [`DIFF_DEADLINE_MS`](crate::limits::DIFF_DEADLINE_MS): the diff algorithm gives up at the deadline
/// (its approximation — the rest reported as replaced — is not formatted), so one diff costs at most
/// that much CPU, also once its client has left. Such files are compared by digest only, like
/// binary ones.
pub fn unified_diff(a: &str, b: &str, a_name: &str, b_name: &str) -> Option<String> {
    let limit = std::time::Duration::from_millis(crate::limits::DIFF_DEADLINE_MS);
    let started = std::time::Instant::now();
    let diff = similar::TextDiff::configure().timeout(limit).diff_lines(a, b);
    if started.elapsed() >= limit {
        return None;
    }
    Some(diff.unified_diff().context_radius(3).header(a_name, b_name).to_string())
}
