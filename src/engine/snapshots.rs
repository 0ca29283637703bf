//! Snapshots: freezing an apply into an immutable `AppliedPluginSnapshot` event, reading it back,
//! marking snapshots of changed plugins stale (never rewriting them), expiring unreferenced ones
//! after `OD_SNAPSHOT_UNREFERENCED_TTL_DAYS`, and the replay bundle. A snapshot's body (all of it
//! but its id and `appliedAt`) is stored once per distinct content, in `snapshot-body:<blake3>`;
//! each `snapshot_recorded` references it by digest (older ones carry it inline).

use od_events::snapshots::{
    SnapshotBody, SnapshotBodyRecorded, SnapshotExpired, SnapshotMarkedStale, SnapshotRecorded,
};
use od_events::{Event, StreamId};
use od_projections::workspace_read as wr;
use od_projections::{InstalledPlugin, SnapshotInfo};
use serde_json::{json, Map, Value};

use super::apply::ApplyRequest;
use super::errors::WorkError;
use super::Engine;
use crate::engine::prompt::{BASE_PROMPT, BASE_PROMPT_VERSION};
use crate::limits::{MAX_BODY_STREAM_SCAN, MAX_INLINE_SNAPSHOT_REFS};
use crate::page::{page_keyed, Page, PageReq};
use crate::plugins::bundled;
use crate::plugins::frontmatter;
use crate::plugins::vocab::ATOMS;
use crate::store::{decode_frame, Append, AppendResult, Expected, StoreError};

/// Prefix of the streams holding snapshot bodies by digest.
pub const BODY_STREAM_PREFIX: &str = "snapshot-body";

/// Whether a snapshot unreferenced since `since` (ms) is past a TTL of `ttl_days` (0: never) at
/// `now`; saturating, so a huge `OD_SNAPSHOT_UNREFERENCED_TTL_DAYS` means "never", not a wrap.
fn ttl_passed(since: i64, ttl_days: i64, now: i64) -> bool {
    let ttl_ms = ttl_days.saturating_mul(86_400_000);
    ttl_ms > 0 && since.saturating_add(ttl_ms) <= now
}

fn body_of(markdown: &str) -> String {
    frontmatter::split(markdown).map(|s| s.body.to_string()).unwrap_or_else(|_| markdown.to_string())
}

/// The prompt body of an atom: a bundled atom plugin's SKILL.md body, else the built-in's purpose.
fn atom_body(id: &str) -> String {
    if let Some(b) = bundled::find(id) {
        if let Some((_, text)) = b.files.iter().find(|(p, _)| *p == "SKILL.md") {
            return body_of(text).trim().to_string();
        }
    }
    match ATOMS.iter().find(|(a, _)| *a == id) {
        Some(_) => format!("Use od's built-in `{id}` capability for this step."),
        None => String::new(),
    }
}

fn stream(id: &str) -> Result<StreamId, WorkError> {
    StreamId::typed("snapshot", id).map_err(|e| WorkError::invalid("snapshotId", e.to_string()))
}

fn body_stream(digest: &str) -> Result<StreamId, WorkError> {
    StreamId::typed(BODY_STREAM_PREFIX, digest).map_err(|e| WorkError::invalid("digest", e.to_string()))
}

/// The whole snapshot: its id and `appliedAt`, then its body's fields.
fn whole(snapshot_id: &str, applied_at: i64, body: Value) -> Value {
    let mut m = Map::new();
    m.insert("snapshotId".into(), json!(snapshot_id));
    m.insert("appliedAt".into(), json!(applied_at));
    if let Value::Object(b) = body {
        for (k, v) in b {
            m.entry(k).or_insert(v);
        }
    }
    Value::Object(m)
}

impl Engine {
    /// The SKILL.md body of an installed or bundled plugin (empty when it has none).
    fn skill_body(&self, p: &InstalledPlugin) -> String {
        std::fs::read_to_string(self.data_dir.join(&p.fs_path).join("SKILL.md"))
            .map(|t| body_of(&t).trim().to_string())
            .unwrap_or_default()
    }

    /// Applies `plugin_id` and records the result as an immutable snapshot for a project and/or run.
    /// Returns the snapshot id.
    pub fn record_snapshot(
        &self,
        plugin_id: &str,
        req: &ApplyRequest,
        project_id: &str,
        run_id: &str,
    ) -> Result<String, WorkError> {
        let (id, appends) = self.snapshot_append(plugin_id, req, project_id, run_id)?;
        self.append_sharing_bodies(appends)?;
        Ok(id)
    }

    /// Appends `parts` atomically (see `SledLog::append_all`). A snapshot body part (`NoStream`:
    /// written only by the first snapshot with that content) that another command stored since it
    /// was planned conflicts; the same bytes are there, so the part is dropped and the rest retried.
    pub(crate) fn append_sharing_bodies(&self, mut parts: Vec<Append>) -> Result<Vec<AppendResult>, StoreError> {
        loop {
            match self.store.append_all(parts.clone()) {
                Err(StoreError::Conflict { stream, .. })
                    if parts.len() > 1 && stream.starts_with(&format!("{BODY_STREAM_PREFIX}:")) =>
                {
                    let Some(i) = parts.iter().position(|p| p.stream.as_str() == stream) else {
                        return Err(StoreError::Conflict { stream, expected: "no stream".into(), actual: None });
                    };
                    // The group's op id is its first part's: it moves to the new first part.
                    let op_id = parts.remove(i).op_id;
                    if i == 0 {
                        parts[0].op_id = op_id;
                    }
                }
                r => return r,
            }
        }
    }

    /// Applies `plugin_id` and builds the `snapshot_recorded` of the result — preceded by its body
    /// when no snapshot stored that body yet — without writing them (a command that records more
    /// appends them with its other events, all or nothing, through
    /// [`Engine::append_sharing_bodies`]).
    pub(crate) fn snapshot_append(
        &self,
        plugin_id: &str,
        req: &ApplyRequest,
        project_id: &str,
        run_id: &str,
    ) -> Result<(String, Vec<Append>), WorkError> {
        let applied = self.apply(plugin_id, req)?;
        self.snapshot_append_applied(plugin_id, req, applied, project_id, run_id)
    }

    /// [`Engine::snapshot_append`] with the plugin already applied (`applied` is what
    /// [`Engine::apply`] returned for `plugin_id` and `req`): a caller that applied it to check the
    /// request first does not apply it twice.
    pub(crate) fn snapshot_append_applied(
        &self,
        plugin_id: &str,
        req: &ApplyRequest,
        applied: Value,
        project_id: &str,
        run_id: &str,
    ) -> Result<(String, Vec<Append>), WorkError> {
        let p = self.plugin(plugin_id)?;
        let id = self.ids.new_id();
        let now = self.clock.now_ms();
        let body_json = self.applied_body(&p, &applied, req).to_string();
        let digest = blake3::hash(body_json.as_bytes()).to_hex().to_string();
        let event = SnapshotRecorded {
            snapshot_id: id.clone(),
            plugin_id: p.id.clone(),
            plugin_version: p.version.clone(),
            manifest_source_digest: applied["manifestSourceDigest"].as_str().unwrap_or("").to_string(),
            plugin_source_digest: p.source_digest.clone(),
            project_id: project_id.to_string(),
            run_id: run_id.to_string(),
            body: SnapshotBody::Stored { digest: digest.clone() },
            applied_at: now,
        };
        let mut appends: Vec<Append> = self.body_append(digest, body_json)?.into_iter().collect();
        appends.push(Append::new(stream(&id)?, vec![Event::SnapshotRecorded(event)]).expect(Expected::NoStream));
        Ok((id, appends))
    }

    /// A snapshot's body (all of it but its id and `appliedAt`): what `applied` resolved of plugin
    /// `p` for `req`, with its manifest, its SKILL.md and atom bodies, and od's base prompt.
    fn applied_body(&self, p: &InstalledPlugin, applied: &Value, req: &ApplyRequest) -> Value {
        // Without the context chips the person removed (the apply checked them).
        let manifest = super::apply::applied_manifest(p, &req.exclude_context).unwrap_or(Value::Null);
        let mut atom_bodies = Map::new();
        for st in applied["pipeline"]["stages"].as_array().into_iter().flatten() {
            for a in st["atoms"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                atom_bodies.entry(a.to_string()).or_insert_with(|| json!(atom_body(a)));
            }
        }
        let od = &manifest["od"];
        let mut body = json!({
            "pluginId": p.id,
            "pluginSpecVersion": manifest["specVersion"].as_str().unwrap_or("1.0.0"),
            "pluginVersion": p.version,
            "manifestSourceDigest": applied["manifestSourceDigest"],
            "pluginSourceDigest": p.source_digest,
            "sourceKind": p.source_kind,
            "resolvedSource": p.source,
            "trust": applied["trust"],
            "inputs": applied["inputs"],
            "resolvedContext": { "refs": applied["resolvedContextRefs"] },
            "craftRequires": od["context"]["craft"].as_array().cloned().unwrap_or_default(),
            "capabilitiesGranted": applied["capabilitiesGranted"],
            "capabilitiesRequired": applied["capabilitiesRequired"],
            "assetsStaged": [],
            "taskKind": od["taskKind"].as_str().unwrap_or("new-generation"),
            "connectorsRequired": od["connectors"]["required"].as_array().cloned().unwrap_or_default(),
            "connectorsResolved": applied["connectorsResolved"],
            "mcpServers": applied["mcpServers"],
            "pipeline": applied["pipeline"],
            "pipelineSource": applied["pipelineSource"],
            "genuiSurfaces": applied["genuiSurfaces"],
            "pluginTitle": applied["appliedPlugin"]["pluginTitle"],
            "pluginDescription": applied["pluginDescription"].as_str().unwrap_or_default(),
            "locale": req.locale,
            "query": applied["appliedPlugin"]["query"],
            "templatedQuery": applied["query"],
            "manifest": manifest,
            "skillBody": self.skill_body(p),
            "atomBodies": atom_bodies,
            "basePrompt": BASE_PROMPT,
            "basePromptVersion": BASE_PROMPT_VERSION,
        });
        if !req.exclude_context.is_empty() {
            body["excludedContext"] = json!(req.exclude_context);
        }
        body
    }

    /// The append storing a body under `digest`, unless a snapshot stored it already: on a new
    /// stream, or after whatever squats it (from an older log).
    fn body_append(&self, digest: String, body_json: String) -> Result<Option<Append>, WorkError> {
        let bs = body_stream(&digest)?;
        let e = |digest, body_json| vec![Event::SnapshotBodyRecorded(SnapshotBodyRecorded { digest, body_json })];
        Ok(match self.store.stream_version(bs.as_str())? {
            None => Some(Append::new(bs, e(digest, body_json)).expect(Expected::NoStream)),
            Some(v) if self.stored_body(&digest)?.is_none() => {
                Some(Append::new(bs, e(digest, body_json)).expect(Expected::Exactly(v)))
            }
            Some(_) => None,
        })
    }

    /// The body stored under `digest`: the first `snapshot_body_recorded` of its stream that hashes
    /// to it (a note squatting the stream ahead of it, from a log older than the notes rule, is
    /// skipped). None: no such body is stored.
    fn stored_body(&self, digest: &str) -> Result<Option<SnapshotBodyRecorded>, WorkError> {
        let frames = self.store.read_stream(body_stream(digest)?.as_str(), 0, MAX_BODY_STREAM_SCAN)?;
        for f in &frames {
            if f.view().kind() != od_events::EventKind::SnapshotBodyRecorded.code() {
                continue;
            }
            if let Event::SnapshotBodyRecorded(b) = decode_frame(f.view())?.event {
                if blake3::hash(b.body_json.as_bytes()).to_hex().as_str() == digest {
                    return Ok(Some(b));
                }
            }
        }
        Ok(None)
    }

    /// The body stored under `digest`, checked against it.
    fn snapshot_body(&self, digest: &str) -> Result<Value, WorkError> {
        let b = self.stored_body(digest)?.ok_or_else(|| WorkError::SnapshotNotFound(format!("body {digest}")))?;
        Ok(serde_json::from_str(&b.body_json).unwrap_or(Value::Null))
    }

    /// A snapshot as recorded: the body it references (or carries inline) with its id and time.
    fn recorded_snapshot(&self, e: SnapshotRecorded) -> Result<Value, WorkError> {
        match e.body {
            SnapshotBody::Inline { json } => Ok(serde_json::from_str(&json).unwrap_or(Value::Null)),
            SnapshotBody::Stored { digest } => Ok(whole(&e.snapshot_id, e.applied_at, self.snapshot_body(&digest)?)),
        }
    }

    /// A snapshot's bookkeeping.
    pub fn snapshot_info(&self, id: &str) -> Result<SnapshotInfo, WorkError> {
        self.workspace
            .read(|w| wr::snapshot(w, id, MAX_INLINE_SNAPSHOT_REFS))?
            .ok_or_else(|| WorkError::SnapshotNotFound(id.into()))
    }

    /// A snapshot's full body (as recorded) with its current `status` and references.
    pub fn snapshot(&self, id: &str) -> Result<Value, WorkError> {
        let info = self.snapshot_info(id)?;
        let frames = self.store.read_stream(stream(id)?.as_str(), 0, 1)?;
        let f = frames.first().ok_or_else(|| WorkError::SnapshotNotFound(id.into()))?;
        let Event::SnapshotRecorded(e) = decode_frame(f.view())?.event else {
            return Err(WorkError::SnapshotNotFound(id.into()));
        };
        let mut v = self.recorded_snapshot(e)?;
        v["status"] = json!(info.status);
        v["referencedBy"] = json!(info.referenced_by);
        v["refCount"] = json!(info.ref_count);
        v["unreferencedSince"] = json!(info.unreferenced_since);
        Ok(v)
    }

    /// One page of snapshot summaries, oldest first (by the seq that recorded each), optionally of
    /// one plugin.
    pub fn snapshots_page(&self, plugin_id: Option<&str>, req: &PageReq) -> Result<Page<SnapshotInfo>, WorkError> {
        let items = self
            .workspace
            .read(|w| wr::snapshots(w, plugin_id, req.after.as_deref(), req.limit + 1, MAX_INLINE_SNAPSHOT_REFS))?;
        Ok(page_keyed("snapshots", req, items, false))
    }

    /// One page of the snapshots a project or one of its runs references, oldest first (by the seq
    /// that recorded each).
    pub fn project_snapshots_page(&self, project_id: &str, req: &PageReq) -> Result<Page<SnapshotInfo>, WorkError> {
        self.project(project_id)?;
        let items = self.workspace.read(|w| {
            wr::project_snapshots(w, project_id, req.after.as_deref(), req.limit + 1, MAX_INLINE_SNAPSHOT_REFS)
        })?;
        Ok(page_keyed("project-snapshots", req, items, false))
    }

    /// Every snapshot of one plugin (a plugin's own history), page by page.
    fn plugin_snapshots(&self, plugin_id: &str) -> Result<Vec<SnapshotInfo>, WorkError> {
        let mut out = Vec::new();
        let mut req = PageReq { limit: crate::limits::MAX_PAGE_LIMIT, after: None };
        loop {
            let items =
                self.workspace.read(|w| wr::snapshots(w, Some(plugin_id), req.after.as_deref(), req.limit, 0))?;
            let Some((last, _)) = items.last() else { break };
            req.after = Some(last.clone());
            out.extend(items.into_iter().map(|(_, s)| s));
        }
        Ok(out)
    }

    /// Marks every fresh snapshot of `plugin_id` whose plugin changed since (version or source
    /// digest) as stale. Returns the ids marked. The snapshots themselves are never rewritten.
    pub fn mark_stale_snapshots(&self, plugin_id: &str) -> Result<Vec<String>, WorkError> {
        let p = self.plugin(plugin_id)?;
        let mut marked = Vec::new();
        for s in self.plugin_snapshots(plugin_id)? {
            if s.status != "fresh" || (s.plugin_source_digest == p.source_digest && s.plugin_version == p.version) {
                continue;
            }
            let e = SnapshotMarkedStale {
                snapshot_id: s.snapshot_id.clone(),
                plugin_id: plugin_id.to_string(),
                current_version: p.version.clone(),
                current_source_digest: p.source_digest.clone(),
            };
            self.store.append(Append::new(stream(&s.snapshot_id)?, vec![Event::SnapshotMarkedStale(e)]))?;
            marked.push(s.snapshot_id);
        }
        Ok(marked)
    }

    /// Expires unreferenced snapshots: those unreferenced for the TTL (`before` = None), or, as a
    /// forced cleanup, every unreferenced one applied before `before` (unix ms). Referenced
    /// snapshots are never expired. Returns the ids expired.
    pub fn prune_snapshots(&self, before: Option<i64>) -> Result<Vec<String>, WorkError> {
        let now = self.clock.now_ms();
        let ttl_days = self.config.snapshot_unreferenced_ttl_days;
        // The GC index holds exactly the unreferenced, unexpired snapshots, longest unreferenced
        // first: a TTL pass stops at the first one not yet due.
        let mut due: Vec<(String, &'static str)> = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        'pages: loop {
            let page = self
                .workspace
                .read(|w| wr::unreferenced_snapshots(w, after.as_deref(), crate::limits::MAX_PAGE_LIMIT))?;
            let Some((last, _)) = page.last() else { break };
            after = Some(last.clone());
            for (_, s) in page {
                let Some(since) = s.unreferenced_since else { continue };
                match before {
                    Some(b) if s.applied_at < b => due.push((s.snapshot_id.clone(), "prune")),
                    Some(_) => {}
                    None if ttl_passed(since, ttl_days, now) => due.push((s.snapshot_id.clone(), "ttl")),
                    None => break 'pages,
                }
            }
        }
        if before.is_none() {
            if let Some(days) = self.config.snapshot_retention_days {
                due.extend(self.retired_snapshots(days, now)?.into_iter().map(|id| (id, "retention")));
            }
        }
        let mut out = Vec::new();
        for (id, reason) in due {
            let e = SnapshotExpired { snapshot_id: id.clone(), reason: reason.into() };
            self.store.append(Append::new(stream(&id)?, vec![Event::SnapshotExpired(e)]))?;
            out.push(id);
        }
        Ok(out)
    }

    /// The referenced snapshots `OD_SNAPSHOT_RETENTION_DAYS` retires: applied more than `days`
    /// ago and referenced only by runs that have ended (a project or conversation that still
    /// exists keeps its snapshot; deleting it unreferences it, and the TTL takes over). A snapshot
    /// with more referrers than a read lists is kept. This pass reads every snapshot, so it runs
    /// only when the operator opts in.
    fn retired_snapshots(&self, days: i64, now: i64) -> Result<Vec<String>, WorkError> {
        let cutoff = now.saturating_sub(days.saturating_mul(86_400_000));
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = self.workspace.read(|w| {
                wr::snapshots(w, None, after.as_deref(), crate::limits::MAX_PAGE_LIMIT, MAX_INLINE_SNAPSHOT_REFS)
            })?;
            let Some((last, _)) = page.last() else { break };
            after = Some(last.clone());
            for (_, s) in page {
                let listed = s.referenced_by.len() as u64 == s.ref_count;
                if s.status == "expired" || s.ref_count == 0 || !listed || s.applied_at > cutoff {
                    continue;
                }
                let ended = s
                    .referenced_by
                    .iter()
                    .all(|r| r.strip_prefix("run:").is_some_and(|id| self.run_info(id).is_ok_and(|i| i.is_terminal())));
                if ended {
                    out.push(s.snapshot_id);
                }
            }
        }
        Ok(out)
    }

    /// The replay bundle of `run_id` for `snapshot_id`: the identical recorded snapshot and what a
    /// caller needs to re-apply and rerun it. Read-only; starts nothing.
    pub fn replay_bundle(&self, run_id: &str, snapshot_id: &str) -> Result<Value, WorkError> {
        let run = self.run_info(run_id)?;
        if run.snapshot_id != snapshot_id {
            return Err(WorkError::invalid(
                "snapshotId",
                format!("run {run_id} ran with snapshot {}, not {snapshot_id}", run.snapshot_id),
            ));
        }
        let snap = self.snapshot(snapshot_id)?;
        Ok(json!({
            "ok": true, "runId": run_id, "snapshotId": snapshot_id, "snapshot": snap,
            "rerun": {
                "pluginId": snap["pluginId"], "pluginSpecVersion": snap["pluginSpecVersion"],
                "pluginVersion": snap["pluginVersion"], "inputs": snap["inputs"],
                "manifestSourceDigest": snap["manifestSourceDigest"],
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::ttl_passed;

    #[test]
    fn the_ttl_saturates_instead_of_wrapping() {
        let day = 86_400_000;
        assert!(ttl_passed(0, 1, day));
        assert!(!ttl_passed(0, 1, day - 1));
        assert!(!ttl_passed(0, 0, i64::MAX), "0 keeps snapshots forever");
        // A TTL of i64::MAX days wrapped to a negative span and expired everything at once.
        assert!(!ttl_passed(1_800_000_000_000, i64::MAX, 1_800_000_000_001));
        assert!(!ttl_passed(i64::MAX - 1, 2, i64::MAX - 1));
    }
}
