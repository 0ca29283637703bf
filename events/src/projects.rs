//! Project-area events: projects (each owns a directory for its files) and their conversations.
//! Stream: `project:<id>`.

use serde::{Deserialize, Serialize};

/// A project was created (or imported from an existing folder).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectCreated {
    pub project_id: String,
    pub name: String,
    /// The project's directory: relative to the data dir when od made it, absolute when imported.
    pub dir: String,
    /// The snapshot pinned at creation (empty when created without a plugin).
    pub snapshot_id: String,
    /// Free metadata (`buildCommand`, `testCommand`, `kind`, …) as compact JSON.
    pub metadata_json: String,
    /// The folder it was imported from (empty when created).
    pub imported_from: String,
}

/// A project was deleted (its events stay; its directory is removed when od made it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectDeleted {
    pub project_id: String,
}

/// A conversation was started in a project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationCreated {
    pub conversation_id: String,
    pub project_id: String,
    pub title: String,
    /// The snapshot the conversation is bound to (empty: the project's).
    pub snapshot_id: String,
}
