//! Plugin-area events: what was installed (with its merged manifest and provenance), removed,
//! and which capabilities the user granted or revoked. Stream: `plugin:<id>`.

use crate::vocab::{SourceKind, Trust};
use serde::{Deserialize, Serialize};

/// A plugin version was installed (or reinstalled/upgraded: the latest one wins).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginInstalled {
    pub id: String,
    pub version: String,
    pub title: String,
    /// bundled | user | project | marketplace | github | url | local
    pub source_kind: SourceKind,
    /// Where it came from (path, URL, `github:…`, marketplace entry).
    pub source: String,
    /// bundled | trusted | restricted
    pub trust: Trust,
    /// The merged manifest (open-design.json shape) as compact JSON.
    pub manifest_json: String,
    /// blake3 hex over the plugin's files.
    pub source_digest: String,
    /// The installed copy, relative to the data dir.
    pub fs_path: String,
    /// Capabilities granted at install time.
    pub capabilities_granted: Vec<String>,
    /// Loader warnings, as JSON diagnostics.
    pub warnings_json: String,
}

/// A plugin was uninstalled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginUninstalled {
    pub id: String,
    pub version: String,
}

/// Capabilities were granted to an installed plugin (`od plugin trust`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilitiesGranted {
    pub id: String,
    pub capabilities: Vec<String>,
}

/// Capabilities were revoked (`od plugin trust --revoke`); `prompt:inject` is never revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilitiesRevoked {
    pub id: String,
    pub capabilities: Vec<String>,
}

/// A linked plugin's folder changed and od loaded it again (`od plugin install --link`, stream
/// `plugin:<id>`): `ok` with the new digest and version (a `plugin_installed` precedes it), or not
/// ok with the doctor's diagnostics (the installed version stays). Runs keep their snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginReloaded {
    pub id: String,
    /// The linked folder.
    pub path: String,
    pub ok: bool,
    pub from_digest: String,
    pub to_digest: String,
    pub version: String,
    /// The doctor's diagnostics, as JSON (errors when not ok).
    pub diagnostics_json: String,
    pub reloaded_at: i64,
}
