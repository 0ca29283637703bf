//! Plugin commands: install from a local folder, uninstall, list, show, doctor.
//!
//! Installing loads and validates the folder (`crate::plugins`), copies its files into the data dir
//! under `plugins/<id>/<digest>/` (content-addressed, so an installed version is immutable and a
//! reinstall of the same content changes nothing), then records `PluginInstalled` with the merged
//! manifest. Grants persisted by `od plugin trust` survive a reinstall or upgrade of the same id.

use od_events::plugins::{CapabilitiesGranted, CapabilitiesRevoked, PluginInstalled, PluginUninstalled};
use od_events::vocab::{SourceKind, Trust};
use od_events::{Event, StreamId};
use od_projections::InstalledPlugin;
use std::path::{Path, PathBuf};

use super::Engine;
use crate::net::OutboundError;
use crate::plugins::{load_folder, Diagnostic};
use crate::store::{Append, StoreError};

/// Why a plugin command failed.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// No installed plugin has this id.
    #[error("plugin {0} is not installed")]
    NotFound(String),
    /// The folder failed validation; nothing was installed.
    #[error("the plugin at {path} is invalid: {summary}")]
    Invalid { path: String, summary: String, diagnostics: Vec<Diagnostic> },
    /// Bundled plugins ship with od and cannot be replaced or removed.
    #[error("plugin {0} is bundled with od and cannot be changed or uninstalled")]
    Bundled(String),
    /// A capability outside the vocabulary (or a wildcard such as `all`) was asked for.
    #[error("{0:?} is not a grantable capability (the vocabulary: prompt:inject fs:read fs:write mcp subprocess bash network connector, connector:<id>, mcp:<name>, genui:<kind>, pipeline:<stage>, pipeline:*; no other wildcards)")]
    InvalidCapability(String),
    /// No marketplace has this id.
    #[error("marketplace {0} is not configured")]
    MarketplaceNotFound(String),
    /// A marketplace index or request was malformed.
    #[error("{0}")]
    BadMarketplace(String),
    /// Downloading a remote source failed.
    #[error("fetching the plugin failed: {0}")]
    Fetch(String),
    /// An outbound failure every caller names alike ([`OutboundError::code`]: a refused
    /// certificate, a downgrade, no TLS client, a bad proxy setting); nothing was written.
    #[error("{message}")]
    Net { code: &'static str, message: String, data: Box<serde_json::Value> },
    /// An archive failed the safety checks; nothing was installed.
    #[error("the archive was rejected: {0}")]
    BadArchive(String),
    /// The source names no existing folder or archive file, and no marketplace entry.
    #[error("plugin source not found: {0} (no such folder or archive file, and no marketplace entry of that name)")]
    SourceNotFound(String),
    /// The source is not something this build can install from.
    #[error("cannot install from {0:?}: give a local plugin folder or a .tgz/.tar.gz/.tar/.zip archive file")]
    UnsupportedSource(String),
    /// A URL the plugin, its source or a marketplace names broke the outbound URL rule or the
    /// address policy (`net/url_rule.rs`, `net/policy.rs`); nothing was fetched or written.
    #[error(transparent)]
    UrlRefused(#[from] crate::net::UrlRefused),
    /// A bundle member changes only with its bundle.
    #[error("plugin {id} is part of bundle {bundle}; upgrade or uninstall the bundle instead")]
    BundleMember { id: String, bundle: String },
    /// Copying the files failed.
    #[error("copying the plugin failed: {0}")]
    Io(String),
    /// The log refused the write.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl PluginError {
    /// Stable code for the error envelope.
    pub fn code(&self) -> &'static str {
        match self {
            PluginError::NotFound(_) => "plugin-not-found",
            PluginError::Invalid { .. } => "plugin-invalid",
            PluginError::Bundled(_) => "bundled-plugin",
            PluginError::BundleMember { .. } => "bundle-member",
            PluginError::SourceNotFound(_) => "source-not-found",
            PluginError::UnsupportedSource(_) => "unsupported-source",
            PluginError::UrlRefused(_) => crate::net::UrlRefused::CODE,
            PluginError::InvalidCapability(_) => "invalid-capability",
            PluginError::BadArchive(_) => "bad-archive",
            PluginError::Fetch(_) => "fetch-failed",
            PluginError::Net { code, .. } => code,
            PluginError::MarketplaceNotFound(_) => "marketplace-not-found",
            PluginError::BadMarketplace(_) => "invalid-marketplace",
            PluginError::Io(_) => "plugin-io",
            PluginError::Store(e) => e.code(),
        }
    }
}

impl PluginError {
    /// A failed download or index fetch: a named outbound failure as itself ([`PluginError::Net`]),
    /// a URL the rule or the address policy refused as `url-refused`, anything else `fetch-failed`.
    pub(crate) fn from_outbound(e: OutboundError) -> PluginError {
        if let Some(code) = e.code() {
            return PluginError::Net { code, message: e.to_string(), data: Box::new(e.data()) };
        }
        match e {
            OutboundError::Refused(r) => PluginError::UrlRefused(r),
            other => PluginError::Fetch(other.to_string()),
        }
    }
}

/// What an install did.
pub struct Installed {
    pub plugin: InstalledPlugin,
    pub warnings: Vec<Diagnostic>,
    /// True when the same content was already installed (nothing written).
    pub unchanged: bool,
    /// A bundle's members as installed (`<bundle>/<member>` ids); empty for other plugins.
    pub members: Vec<String>,
}

pub(crate) fn stream(id: &str) -> Result<StreamId, PluginError> {
    // A bundle member's `/` becomes `:` (plugin names never hold one, so streams stay distinct).
    StreamId::typed("plugin", &id.replace('/', ":")).map_err(|e| PluginError::Invalid {
        path: id.to_string(),
        summary: format!("plugin id is not usable: {e}"),
        diagnostics: vec![],
    })
}

/// Writes `files` (relative path, bytes) as the folder `dst`, durably: into a fresh sibling
/// folder (each file fsynced, its folders' fsyncs batched), then renamed into place (replacing a
/// damaged copy) and the parent fsynced — whole or not at all, and durable when it returns.
pub(crate) fn write_tree<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>, dst: &Path) -> std::io::Result<()> {
    write_tree_from(files.into_iter().map(Ok), dst)
}

/// [`write_tree`] from files produced one at a time (each may fail; then nothing is in place).
pub(crate) fn write_tree_from<R: AsRef<str>, B: AsRef<[u8]>>(
    files: impl IntoIterator<Item = std::io::Result<(R, B)>>,
    dst: &Path,
) -> std::io::Result<()> {
    let tmp = dst.with_extension("tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    let mut syncs = crate::durable::Syncs::new();
    crate::durable::open_dir(&tmp, &mut syncs)?;
    for f in files {
        let (rel, bytes) = f?;
        crate::durable::write_file_in(&tmp.join(rel.as_ref()), bytes.as_ref(), &mut syncs)?;
    }
    let (Some(parent), Some(tmp_name), Some(dst_name)) =
        (dst.parent(), tmp.file_name().and_then(|n| n.to_str()), dst.file_name().and_then(|n| n.to_str()))
    else {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "a plugin folder has no parent"));
    };
    if dst.exists() {
        std::fs::remove_dir_all(dst)?;
    }
    crate::durable::rename_in(parent, tmp_name, dst_name, &mut syncs)?;
    syncs.commit()
}

/// The plugin folder `src`'s `files` packed in the source digest's framing (`plugins::tree`);
/// refused when they no longer hash to `digest` (the folder changed while it was installed).
fn pack_folder(src: &Path, files: &[String], digest: &str) -> Result<Vec<u8>, PluginError> {
    let mut read = Vec::with_capacity(files.len());
    for rel in files {
        read.push(std::fs::read(src.join(rel)).map_err(|e| PluginError::Io(format!("{rel}: {e}")))?);
    }
    let packed = crate::plugins::tree::pack(files.iter().map(String::as_str).zip(read.iter().map(Vec::as_slice)));
    if blake3::hash(&packed).to_hex().as_str() != digest {
        return Err(PluginError::Io(format!("{} changed while it was being installed; try again", src.display())));
    }
    Ok(packed)
}

/// Whether the installed copy at `dst` loads and hashes to `digest`.
fn copy_matches(dst: &Path, digest: &str) -> bool {
    load_folder(dst).is_ok_and(|l| l.source_digest == digest)
}

impl Engine {
    /// All plugins: bundled ones, then installed ones, by id.
    pub fn plugins(&self) -> Result<Vec<InstalledPlugin>, PluginError> {
        let installed = self.registry.get()?.0.plugins;
        Ok(self
            .bundled
            .values()
            .cloned()
            .chain(installed.into_values().filter(|p| !self.bundled.contains_key(&p.id)))
            .collect())
    }

    /// One plugin (bundled or installed).
    pub fn plugin(&self, id: &str) -> Result<InstalledPlugin, PluginError> {
        if let Some(b) = self.bundled.get(id) {
            return Ok(b.clone());
        }
        self.registry.read(|r| r.plugins.get(id).cloned())?.ok_or_else(|| PluginError::NotFound(id.to_string()))
    }

    /// Installs from `source` — a local folder, a local archive file, `github:owner/repo[@ref][/path]`
    /// or an `http(s)` archive URL — reporting phases to `progress`. Local sources are `trusted`
    /// unless the caller asks for `restricted`; remote ones are always `restricted`.
    pub fn install(
        &self,
        source: &str,
        restricted: bool,
        progress: &mut dyn FnMut(&str, &str),
    ) -> Result<Installed, PluginError> {
        progress("resolving", &crate::net::redact(source));
        let restricted = restricted || self.config.trust_default_restricted;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let scratch = self.data_dir.join("tmp").join(format!("install-{}-{n}", std::process::id()));
        let result = self.install_via(source, restricted, false, None, &scratch, progress);
        let _ = std::fs::remove_dir_all(&scratch);
        result
    }

    /// `vouched`: a trusted marketplace listed this source, so a remote transport need not make it
    /// restricted.
    fn install_via(
        &self,
        source: &str,
        restricted: bool,
        vouched: bool,
        integrity: Option<&str>,
        scratch: &Path,
        progress: &mut dyn FnMut(&str, &str),
    ) -> Result<Installed, PluginError> {
        if let Some(remote) = super::fetch::resolve(source, &self.config.github_tarball_base)? {
            progress("downloading", &remote.url);
            let file = scratch.join(if remote.url.ends_with(".zip") { "download.zip" } else { "download.tgz" });
            super::fetch::download(&remote.url, &file)?;
            check_integrity(&file, integrity)?;
            progress("unpacking", source);
            let mut root = super::archive::unpack(&file, &scratch.join("unpacked"))?;
            if let Some(sub) = &remote.subpath {
                let rel = std::path::Path::new(sub);
                if rel.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
                    return Err(PluginError::UnsupportedSource(format!("{source} (bad path inside the repository)")));
                }
                root = root.join(rel);
                if !root.is_dir() {
                    return Err(PluginError::UnsupportedSource(format!("{source} (no folder {sub} in the archive)")));
                }
            }
            return self.install_folder(&root, source, remote.kind, restricted || !vouched, progress);
        }
        let given = PathBuf::from(source);
        if !given.exists() {
            if let Some((entry_source, trusted, integrity)) = self.resolve_entry(source)? {
                progress("resolving", &format!("marketplace entry {source} → {entry_source}"));
                // A trusted (or official) marketplace vouches for what it lists, whatever the transport.
                let integrity = integrity.as_deref();
                return self.install_via(&entry_source, restricted || !trusted, trusted, integrity, scratch, progress);
            }
        }
        if given.is_file() && super::archive::is_archive(source) {
            check_integrity(&given, integrity)?;
            progress("unpacking", source);
            let root = super::archive::unpack(&given, &scratch.join("unpacked"))?;
            return self.install_folder(&root, source, "local", restricted, progress);
        }
        if !given.exists() {
            return Err(PluginError::SourceNotFound(source.to_string()));
        }
        if !given.is_dir() {
            return Err(PluginError::UnsupportedSource(source.to_string()));
        }
        let canonical = std::fs::canonicalize(&given).unwrap_or_else(|_| given.clone());
        self.install_folder(&given, &canonical.display().to_string(), "local", restricted, progress)
    }

    /// Installs the plugin folder `path`, recording `source` as where it came from.
    pub(crate) fn install_folder(
        &self,
        path: &Path,
        source: &str,
        source_kind: &str,
        restricted: bool,
        progress: &mut dyn FnMut(&str, &str),
    ) -> Result<Installed, PluginError> {
        progress("parsing", "reading SKILL.md, open-design.json and .claude-plugin/plugin.json");
        let loaded = load_folder(path).map_err(|e| PluginError::Invalid {
            path: source.to_string(),
            summary: e.to_string(),
            diagnostics: e.diagnostics.clone(),
        })?;
        if self.bundled.contains_key(&loaded.id) {
            return Err(PluginError::Bundled(loaded.id));
        }
        // Every member is validated before anything is written.
        let bundle = super::bundles::is_bundle(&loaded.manifest);
        let members = if bundle { super::bundles::load_members(path, &loaded.id, source)? } else { Vec::new() };
        // A server URL the address policy refuses (a metadata address, a denied host) is refused
        // here, for the plugin and each member, before anything is written.
        super::plugin_urls::check_manifest(&loaded.manifest)?;
        for m in &members {
            super::plugin_urls::check_manifest(&m.loaded.manifest)?;
        }
        // The operator's list of plugins trusted wherever they come from.
        let restricted = restricted && !self.config.operator_trusted(&loaded.id);
        let bundle_id = loaded.id.clone();
        let mut installed = self.record_install(path, loaded, source, source_kind, restricted, progress)?;
        if bundle {
            let mut ids = Vec::new();
            for m in members {
                progress("fan-out", &format!("{} → {}", m.rel, m.loaded.id));
                let member_source = format!("{source}#{}", m.rel);
                let i =
                    self.record_install(&m.dir, m.loaded, &member_source, source_kind, restricted, &mut |_, _| {})?;
                installed.unchanged &= i.unchanged;
                ids.push(i.plugin.id);
            }
            let dropped = self.drop_members(&bundle_id, &ids)?;
            installed.unchanged &= dropped.is_empty();
            installed.members = ids;
        } else {
            // A plugin that was a bundle before and is not any more keeps no members.
            let dropped = self.drop_members(&bundle_id, &[])?;
            installed.unchanged &= dropped.is_empty();
        }
        Ok(installed)
    }

    /// Records one loaded plugin folder as installed (its files copied, `plugin_installed`
    /// appended), or nothing when the same content is already installed the same way.
    fn record_install(
        &self,
        path: &Path,
        loaded: crate::plugins::LoadedPlugin,
        source: &str,
        source_kind: &str,
        restricted: bool,
        progress: &mut dyn FnMut(&str, &str),
    ) -> Result<Installed, PluginError> {
        let existing = self.registry.read(|r| r.plugins.get(&loaded.id).cloned())?;
        if let Some(p) = &existing {
            if p.trust == Trust::Bundled {
                return Err(PluginError::Bundled(p.id.clone()));
            }
            let same_kind = p.source_kind.as_str() == source_kind
                || (source_kind == "local" && p.source_kind == SourceKind::Linked);
            if p.source_digest == loaded.source_digest && (p.trust == Trust::Restricted) == restricted && same_kind {
                // Nothing to record; a copy a power cut or a hand damaged is rebuilt all the same.
                let dst = self.data_dir.join(&p.fs_path);
                if !copy_matches(&dst, &p.source_digest) {
                    self.store_tree(path, &loaded, &dst)?;
                    tracing::warn!(
                        "rebuilt installed-plugin {} ({}): reinstalled over a damaged copy",
                        p.id,
                        p.fs_path
                    );
                }
                return Ok(Installed {
                    plugin: p.clone(),
                    warnings: loaded.diagnostics,
                    unchanged: true,
                    members: Vec::new(),
                });
            }
        }
        let digest_dir = &loaded.source_digest[..16.min(loaded.source_digest.len())];
        let rel = format!("plugins/{}/{}", loaded.id, digest_dir);
        progress("copying", &format!("{} files into {rel}", loaded.files.len()));
        let dst = self.data_dir.join(&rel);
        if !copy_matches(&dst, &loaded.source_digest) {
            self.store_tree(path, &loaded, &dst)?;
        }
        progress("persisting", "recording plugin_installed");
        let title = loaded.manifest["title"].as_str().unwrap_or(&loaded.id).to_string();
        let granted = existing.map(|p| p.capabilities_granted.into_iter().collect()).unwrap_or_default();
        let event = PluginInstalled {
            id: loaded.id.clone(),
            version: loaded.version.clone(),
            title,
            source_kind: source_kind.into(),
            source: source.to_string(),
            trust: if restricted { "restricted" } else { "trusted" }.into(),
            manifest_json: loaded.manifest.to_string(),
            source_digest: loaded.source_digest.clone(),
            fs_path: rel,
            capabilities_granted: granted,
            warnings_json: serde_json::to_string(&loaded.diagnostics).unwrap_or_else(|_| "[]".into()),
        };
        self.store.append(Append::new(stream(&loaded.id)?, vec![Event::PluginInstalled(event)]))?;
        Ok(Installed {
            plugin: self.plugin(&loaded.id)?,
            warnings: loaded.diagnostics,
            unchanged: false,
            members: Vec::new(),
        })
    }

    /// Archives the plugin folder `path` (its packed tree, a blob named by its source digest) and
    /// writes its installed copy at `dst` from that archive, both durably, before the event that
    /// acknowledges the install.
    fn store_tree(&self, path: &Path, loaded: &crate::plugins::LoadedPlugin, dst: &Path) -> Result<(), PluginError> {
        let packed = pack_folder(path, &loaded.files, &loaded.source_digest)?;
        self.archives.put(&packed[..]).map_err(|e| PluginError::Io(format!("archiving the plugin: {e}")))?;
        let files = crate::plugins::tree::unpack(&packed).map_err(|e| PluginError::Io(e.to_string()))?;
        write_tree(files.iter().map(|(r, b)| (r.as_str(), *b)), dst).map_err(|e| PluginError::Io(e.to_string()))
    }

    /// Grants (or, with `revoke`, revokes) capabilities to an installed plugin; persisted as an
    /// event, so the capability gate honours them from then on. `prompt:inject` is never revoked.
    pub fn trust(&self, id: &str, capabilities: &[String], revoke: bool) -> Result<InstalledPlugin, PluginError> {
        if capabilities.is_empty() {
            return Err(PluginError::InvalidCapability(String::new()));
        }
        if let Some(bad) =
            // `pipeline:*` is the one scoped capability apply itself requires of a plugin with a
            // pipeline, so it must be grantable; every other wildcard stays refused.
            capabilities.iter().find(|c| {
                (c.contains('*') && c.as_str() != "pipeline:*") || !crate::plugins::vocab::is_known_capability(c)
            })
        {
            return Err(PluginError::InvalidCapability(bad.clone()));
        }
        if self.plugin(id)?.trust == Trust::Bundled {
            return Err(PluginError::Bundled(id.to_string()));
        }
        let (id_s, caps) = (id.to_string(), capabilities.to_vec());
        let event = match revoke {
            false => Event::CapabilitiesGranted(CapabilitiesGranted { id: id_s, capabilities: caps }),
            true => Event::CapabilitiesRevoked(CapabilitiesRevoked { id: id_s, capabilities: caps }),
        };
        self.store.append(Append::new(stream(id)?, vec![event]))?;
        self.plugin(id)
    }

    /// Installs `id` again from the source it was installed from (a newer version if the source
    /// moved on; nothing written if it did not). Bundled plugins refuse.
    pub fn upgrade(&self, id: &str, progress: &mut dyn FnMut(&str, &str)) -> Result<Installed, PluginError> {
        let p = self.plugin(id)?;
        if p.trust == Trust::Bundled {
            return Err(PluginError::Bundled(id.to_string()));
        }
        self.refuse_member(id)?;
        let installed = self.install(&p.source, p.trust == Trust::Restricted, progress)?;
        if installed.plugin.id != id {
            return Err(PluginError::UnsupportedSource(format!(
                "{} now holds plugin {}, not {id}; install it under its own name",
                p.source, installed.plugin.id
            )));
        }
        Ok(installed)
    }

    /// Uninstalls `id` (its installed files are removed after the event is durable).
    pub fn uninstall(&self, id: &str) -> Result<InstalledPlugin, PluginError> {
        let p = self.plugin(id)?;
        if p.trust == Trust::Bundled {
            return Err(PluginError::Bundled(id.to_string()));
        }
        self.refuse_member(id)?;
        self.drop_members(id, &[])?;
        let e = PluginUninstalled { id: id.to_string(), version: p.version.clone() };
        self.store.append(Append::new(stream(id)?, vec![Event::PluginUninstalled(e)]))?;
        let _ = std::fs::remove_dir_all(self.data_dir.join("plugins").join(id));
        Ok(p)
    }
}

/// A marketplace entry's `integrity` (`sha256-<base64>`, SRI, as `od plugin publish` writes it)
/// checked against the archive before anything is unpacked; other algorithms are not checked.
fn check_integrity(file: &Path, integrity: Option<&str>) -> Result<(), PluginError> {
    use base64::Engine as _;
    use sha2::Digest;
    let Some(want) = integrity.and_then(|i| i.strip_prefix("sha256-")) else { return Ok(()) };
    let bytes = std::fs::read(file).map_err(|e| PluginError::BadArchive(e.to_string()))?;
    let got = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(&bytes));
    if got != want {
        return Err(PluginError::BadArchive(format!(
            "integrity mismatch: the marketplace entry says sha256-{want}, the archive is sha256-{got}"
        )));
    }
    Ok(())
}
