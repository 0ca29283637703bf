//! Linked plugins and hot reload (spec §18 open question, default "watch, with a 500 ms debounce"):
//! `od plugin install <folder> --link` installs a local folder as `linked`; the daemon then watches
//! it, and when its files change and stay unchanged for [`HOT_RELOAD_DEBOUNCE_MS`], loads it again
//! through the same doctor and install path as any install. A folder that now passes records
//! `plugin_installed` then `plugin_reloaded` (ok); one that does not records `plugin_reloaded` with
//! the doctor's diagnostics and keeps the installed version. Snapshots are immutable, so a run keeps
//! the snapshot it started with; the next apply uses the new version.

use od_events::plugins::PluginReloaded;
use od_events::vocab::{SourceKind, Trust};
use od_events::Event;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

use super::plugins::{Installed, PluginError};
use super::Engine;
use crate::limits::{HOT_RELOAD_DEBOUNCE_MS, HOT_RELOAD_MAX_FILES};
use crate::store::Append;

/// A cheap fingerprint of a folder's files: paths, sizes and modification times (not contents),
/// bounded by [`HOT_RELOAD_MAX_FILES`]. Hidden entries are included (a manifest edit is a change).
pub fn fingerprint(dir: &Path) -> Option<blake3::Hash> {
    let mut h = blake3::Hasher::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut n = 0usize;
    while let Some(d) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d).ok()?.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let meta = std::fs::symlink_metadata(e.path()).ok()?;
            n += 1;
            if n > HOT_RELOAD_MAX_FILES {
                return Some(h.finalize());
            }
            h.update(e.path().to_string_lossy().as_bytes());
            if meta.is_dir() {
                stack.push(e.path());
                continue;
            }
            let mtime =
                meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).unwrap_or_default();
            h.update(&meta.len().to_le_bytes());
            h.update(&mtime.as_nanos().to_le_bytes());
        }
    }
    Some(h.finalize())
}

impl Engine {
    /// Installs the local folder `folder` linked: watched and reloaded while the daemon runs.
    pub fn install_linked(
        &self,
        folder: &str,
        restricted: bool,
        progress: &mut dyn FnMut(&str, &str),
    ) -> Result<Installed, PluginError> {
        let given = Path::new(folder);
        if !given.is_dir() {
            return Err(PluginError::UnsupportedSource(format!("{folder} (--link takes a local plugin folder)")));
        }
        let canonical = std::fs::canonicalize(given).map_err(|_| PluginError::SourceNotFound(folder.into()))?;
        let restricted = restricted || self.config.trust_default_restricted;
        self.install_folder(&canonical, &canonical.display().to_string(), "linked", restricted, progress)
    }

    /// Loads linked plugin `id` from its folder again. Records `plugin_reloaded` when the folder's
    /// content changed (ok or not); returns it, or None when nothing changed.
    pub fn reload_linked(&self, id: &str) -> Result<Option<PluginReloaded>, PluginError> {
        let p = self.plugin(id)?;
        // A bundle's members are reloaded with the bundle.
        if p.source_kind != SourceKind::Linked || super::bundles::bundle_of(id).is_some() {
            return Ok(None);
        }
        let restricted = p.trust == Trust::Restricted;
        let now = self.clock.now_ms();
        let mut e = PluginReloaded {
            id: id.into(),
            path: p.source.clone(),
            ok: true,
            from_digest: p.source_digest.clone(),
            to_digest: p.source_digest.clone(),
            version: p.version.clone(),
            diagnostics_json: "[]".into(),
            reloaded_at: now,
        };
        match self.install_folder(Path::new(&p.source), &p.source, "linked", restricted, &mut |_, _| {}) {
            Ok(i) if i.unchanged => return Ok(None),
            Ok(i) => {
                e.to_digest = i.plugin.source_digest.clone();
                e.version = i.plugin.version.clone();
                e.diagnostics_json = serde_json::to_string(&i.warnings).unwrap_or_else(|_| "[]".into());
            }
            Err(PluginError::Invalid { diagnostics, .. }) => {
                e.ok = false;
                e.diagnostics_json = serde_json::to_string(&diagnostics).unwrap_or_else(|_| "[]".into());
            }
            Err(other) => return Err(other),
        }
        let stream = super::plugins::stream(id)?;
        self.store.append(Append::new(stream, vec![Event::PluginReloaded(e.clone())]))?;
        Ok(Some(e))
    }
}

/// The daemon's watcher: polls every linked plugin's folder each [`HOT_RELOAD_DEBOUNCE_MS`] and
/// reloads one whose fingerprint changed and then held still for one more period (the debounce).
pub fn spawn_watcher(engine: Arc<Engine>, mut stop: watch::Receiver<bool>) {
    tokio::spawn(async move {
        let period = Duration::from_millis(HOT_RELOAD_DEBOUNCE_MS);
        // id → (fingerprint last seen, when it last changed, whether that state was loaded)
        let mut seen: HashMap<String, (Option<blake3::Hash>, Instant, bool)> = HashMap::new();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = stop.changed() => return,
            }
            let e = engine.clone();
            let linked: Vec<(String, String)> = match e.registry.read(|r| {
                r.plugins
                    .values()
                    .filter(|p| p.source_kind == SourceKind::Linked)
                    .map(|p| (p.id.clone(), p.source.clone()))
                    .collect()
            }) {
                Ok(l) => l,
                Err(_) => continue,
            };
            seen.retain(|id, _| linked.iter().any(|(l, _)| l == id));
            for (id, path) in linked {
                let p2 = path.clone();
                let fp = tokio::task::spawn_blocking(move || fingerprint(Path::new(&p2))).await.ok().flatten();
                let entry = seen.entry(id.clone()).or_insert((None, Instant::now(), false));
                if entry.0 != fp {
                    *entry = (fp, Instant::now(), false);
                    continue;
                }
                if entry.2 || entry.1.elapsed() < period || fp.is_none() {
                    continue;
                }
                entry.2 = true;
                let e = engine.clone();
                match tokio::task::spawn_blocking(move || e.reload_linked(&id)).await {
                    Ok(Ok(Some(r))) => tracing::info!("reloaded linked plugin {} from {path} (ok: {})", r.id, r.ok),
                    Ok(Ok(None)) => {}
                    Ok(Err(err)) => tracing::warn!("reloading linked plugin from {path} failed: {err}"),
                    Err(err) => tracing::warn!("reloading linked plugin from {path} failed: {err}"),
                }
            }
        }
    });
}
