//! Self-healing derived copies (issue 38): what od can rebuild from the binary, the log or a digest
//! is verified when loaded and rebuilt when it does not match — not only when it is missing.
//!
//! - bundled plugin copies, from the binary (`bundled.rs`, at every start);
//! - installed plugin trees, from their archive: the packed tree (`plugins::tree`) kept as a blob
//!   under `plugins/_archives/`, named by the very source digest `plugin_installed` records;
//! - a project's copy of an artifact, from its blob — only when the copy carries a power cut's
//!   mark (empty, or all zero bytes) while the artifact was not: a copy the user changed is theirs,
//!   and a missing one may have been deleted on purpose. At start only the projects of runs a stop
//!   interrupted are checked (a run makes its copies durable before its end); `od doctor` checks
//!   every project.
//!
//! Each rebuild is a [`Repair`]: a line in the daemon log, and an entry `od doctor` reports (those
//! made at start, and those its own pass made).

use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Mutex;

use super::{Engine, WorkError};

/// One derived copy found damaged (and, when `rebuilt`, rebuilt).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Repair {
    /// `bundled-plugin`, `installed-plugin` or `project-file`.
    pub kind: String,
    /// The plugin id, or `<projectId>:<path>`.
    pub id: String,
    /// The copy's path (relative to the data dir, or to the project folder).
    pub path: String,
    /// What did not match.
    pub reason: String,
    /// Whether it was rebuilt (false: found, not repairable, e.g. an install older than archives).
    pub rebuilt: bool,
    /// When (the daemon clock, unix ms).
    pub at: i64,
}

impl Repair {
    pub fn new(kind: &str, id: &str, path: &str, reason: String, rebuilt: bool, at: i64) -> Self {
        Self { kind: kind.into(), id: id.into(), path: path.into(), reason, rebuilt, at }
    }

    /// The daemon log's line for it.
    pub fn log(&self) {
        let done = if self.rebuilt { "rebuilt" } else { "could not rebuild" };
        tracing::warn!("{done} {} {} ({}): {}", self.kind, self.id, self.path, self.reason);
    }
}

/// The repairs made since the daemon started (bounded: the oldest are dropped).
#[derive(Default)]
pub struct Repairs(Mutex<Vec<Repair>>);

impl Repairs {
    pub fn extend(&self, r: impl IntoIterator<Item = Repair>) {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        v.extend(r);
        let over = v.len().saturating_sub(crate::limits::MAX_REPAIRS_KEPT);
        v.drain(..over);
    }

    pub fn list(&self) -> Vec<Repair> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Whether bytes look like what a power cut leaves of a file (nothing, or zeros).
fn cut_shaped(bytes: &[u8]) -> bool {
    bytes.iter().all(|b| *b == 0)
}

impl Engine {
    /// Verifies every installed plugin's tree against its recorded digest; with `repair`, rebuilds
    /// the ones that do not match from their archive.
    pub fn heal_installed(&self, repair: bool) -> Result<Vec<Repair>, WorkError> {
        let plugins = self.registry.get()?.0.plugins;
        let now = self.clock.now_ms();
        let mut out = Vec::new();
        for p in plugins.values().filter(|p| p.trust != od_events::vocab::Trust::Bundled && !p.fs_path.is_empty()) {
            let dir = self.data_dir.join(&p.fs_path);
            let reason = match crate::plugins::load_folder(&dir) {
                Ok(l) if l.source_digest == p.source_digest => continue,
                Ok(l) => format!(
                    "digest mismatch: the copy hashes to {}…, {} was installed",
                    short(&l.source_digest),
                    short(&p.source_digest)
                ),
                Err(e) => format!("the copy does not load: {e}"),
            };
            let rebuilt =
                repair && self.rebuild_tree(&p.source_digest, &dir).map_err(|e| tracing::warn!("{e}")).is_ok();
            let r = Repair::new("installed-plugin", &p.id, &p.fs_path, reason, rebuilt, now);
            if repair {
                r.log();
            }
            out.push(r);
        }
        Ok(out)
    }

    /// Writes the tree archived under `digest` to `dir` (replacing what is there), durably.
    pub(crate) fn rebuild_tree(&self, digest: &str, dir: &std::path::Path) -> Result<(), String> {
        let packed = self.archives.read(digest).map_err(|e| format!("no archive of {}…: {e}", short(digest)))?;
        if blake3::hash(&packed).to_hex().as_str() != digest {
            return Err(format!("the archive of {}… is damaged too", short(digest)));
        }
        let files = crate::plugins::tree::unpack(&packed).map_err(|e| e.to_string())?;
        super::plugins::write_tree(files.iter().map(|(r, b)| (r.as_str(), *b)), dir).map_err(|e| e.to_string())
    }

    /// Verifies every project's copy of its artifacts (each path's latest); with `repair`,
    /// rewrites the ones a power cut emptied from their blob.
    pub fn heal_project_copies(&self, repair: bool) -> Result<Vec<Repair>, WorkError> {
        use od_projections::workspace_read as wr;
        let now = self.clock.now_ms();
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = self.workspace.read(|w| wr::projects(w, after.as_deref(), 100, 0))?;
            let Some((last, _)) = page.last() else { break };
            after = Some(last.clone());
            for (_, project) in &page {
                out.extend(self.heal_project(project, repair, now)?);
            }
        }
        Ok(out)
    }

    fn heal_project(
        &self,
        project: &od_projections::Project,
        repair: bool,
        now: i64,
    ) -> Result<Vec<Repair>, WorkError> {
        use od_projections::workspace_read as wr;
        let mut latest = std::collections::BTreeMap::<String, (u64, String, u64)>::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let seqs = self.workspace.read(|w| wr::project_artifacts(w, &project.id, after.as_deref(), 500))?;
            let Some((last, _)) = seqs.last() else { break };
            after = Some(last.clone());
            let seq_of: Vec<u64> = seqs.iter().map(|(_, s)| *s).collect();
            for ((_, a), seq) in self.artifacts_at(seqs)?.into_iter().zip(seq_of) {
                if latest.get(&a.path).is_none_or(|(s, _, _)| *s < seq) {
                    latest.insert(a.path.clone(), (seq, a.digest, a.bytes));
                }
            }
        }
        let dir = self.project_dir(project);
        let Ok(root) = super::safe_fs::Root::open(&dir) else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for (path, (_, digest, bytes)) in latest {
            let Ok(have) = root.read(&path) else { continue };
            if bytes == 0 || !cut_shaped(&have) || blake3::hash(&have).to_hex().as_str() == digest {
                continue;
            }
            let reason = format!(
                "{} byte(s) of zeros where the artifact recorded {bytes} (digest {}…)",
                have.len(),
                short(&digest)
            );
            let rebuilt = repair
                && self
                    .blobs
                    .read(&digest)
                    .map_err(|e| e.to_string())
                    .and_then(|b| root.write_atomic(&path, &b, &self.ids.new_id()).map_err(|e| e.to_string()))
                    .map_err(|e| tracing::warn!("could not rebuild {path} of project {}: {e}", project.id))
                    .is_ok();
            let r = Repair::new("project-file", &format!("{}:{path}", project.id), &path, reason, rebuilt, now);
            if repair {
                r.log();
            }
            out.push(r);
        }
        Ok(out)
    }

    /// Verifies (and repairs) the installed plugin trees at start; the repairs are kept for
    /// `od doctor`. Projects' copies are verified for the runs a stop interrupted
    /// ([`Engine::heal_copies_of`]): a run that ended made its copies durable first.
    pub fn heal_at_start(&self) {
        match self.heal_installed(true) {
            Ok(r) => self.repairs.extend(r),
            Err(e) => tracing::error!("could not verify installed plugins: {e}"),
        }
    }

    /// Verifies (and repairs) the artifact copies of these projects (those of interrupted runs).
    pub fn heal_copies_of(&self, projects: impl IntoIterator<Item = String>) {
        let now = self.clock.now_ms();
        for id in projects {
            let healed = self.project(&id).and_then(|p| self.heal_project(&p, true, now));
            match healed {
                Ok(r) => self.repairs.extend(r),
                Err(e) => tracing::error!("could not verify the files of project {id}: {e}"),
            }
        }
    }

    /// `od doctor`: the repairs made since start, and a fresh pass over every derived copy
    /// (bundled copies included), repairing what it finds when `repair`.
    pub fn doctor(&self, repair: bool) -> Result<Value, WorkError> {
        let now = self.clock.now_ms();
        let mut found = Vec::new();
        for b in crate::plugins::bundled::bundled() {
            if let (_, Some(r)) = super::bundled::load_verified(&self.data_dir, b, now) {
                found.push(r);
            }
        }
        found.extend(self.heal_installed(repair)?);
        found.extend(self.heal_project_copies(repair)?);
        self.repairs.extend(found.iter().filter(|r| r.rebuilt).cloned());
        let ok = found.iter().all(|r| r.rebuilt);
        Ok(json!({ "ok": ok, "found": found, "rebuiltSinceStart": self.repairs.list() }))
    }
}

fn short(d: &str) -> &str {
    &d[..12.min(d.len())]
}
