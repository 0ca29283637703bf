//! Ids by unique prefix, like git: a run, project, conversation or snapshot named by an exact id,
//! or by the start of exactly one id. The workspace keeps its ids sorted by their text (the `ids`
//! index), so a prefix is one bounded range read, never a scan of every record.

use od_projections::workspace_read as wr;

use super::errors::WorkError;
use super::Engine;
use crate::limits::MAX_ID_CANDIDATES;

impl Engine {
    /// The one id of `kind` (`run`, `project`, `conversation`, `snapshot`) that is `prefix` or
    /// starts with it: an exact id wins over longer ids it is a prefix of; several others are
    /// [`WorkError::AmbiguousId`] (naming up to [`MAX_ID_CANDIDATES`]); none, the kind's not-found.
    pub fn resolve_id(&self, kind: &str, prefix: &str) -> Result<String, WorkError> {
        if !wr::ID_KINDS.contains(&kind) {
            return Err(WorkError::invalid("kind", format!("{kind:?} is not one of {}", wr::ID_KINDS.join(", "))));
        }
        if prefix.is_empty() {
            return Err(WorkError::invalid("prefix", "an id or the start of one is required"));
        }
        let found = self.workspace.read(|w| {
            let exact = match kind {
                "run" => wr::run(w, prefix).is_some(),
                "project" => wr::project(w, prefix, 0).is_some(),
                "conversation" => wr::conversation(w, prefix).is_some(),
                _ => wr::snapshot(w, prefix, 0).is_some(),
            };
            match exact {
                true => vec![prefix.to_string()],
                false => wr::ids_with_prefix(w, kind, prefix, MAX_ID_CANDIDATES + 1),
            }
        })?;
        match found.len() {
            0 => Err(match kind {
                "run" => WorkError::RunNotFound(prefix.into()),
                "project" => WorkError::ProjectNotFound(prefix.into()),
                "conversation" => WorkError::ConversationNotFound(prefix.into()),
                _ => WorkError::SnapshotNotFound(prefix.into()),
            }),
            1 => Ok(found.into_iter().next().expect("one id")),
            n => Err(WorkError::AmbiguousId {
                kind: kind.into(),
                prefix: prefix.into(),
                more: n > MAX_ID_CANDIDATES,
                candidates: found.into_iter().take(MAX_ID_CANDIDATES).collect(),
            }),
        }
    }
}
