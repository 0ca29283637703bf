//! The run side of the `workspace` fold: a run's record and the indexes that list it (by project,
//! conversation, status, activity, idempotency key), its forks, and the blob references its
//! artifacts and staged files hold. Split from `workspace.rs`, which dispatches the events here.

use od_events::vocab::{FailureCategory, RunStatus};
use od_events::Envelope;

use crate::records::{Key, Records, RecordsExt, RecordsWrite};
use crate::workspace::tables::*;
use crate::workspace::{id_key, reference, ForkLink, Project, RunInfo};

/// Writes a run record and moves its status index entries.
fn save_run(rec: &mut dyn Records, old: Option<&RunInfo>, new: &RunInfo) {
    let old_status = old.map(|o| o.status.as_str());
    if old_status != Some(new.status.as_str()) {
        if let Some(s) = old_status {
            rec.delete(&Key::new(RUNS_BY_STATUS).s(s).n(new.seq));
        }
        rec.put(&Key::new(RUNS_BY_STATUS).s(new.status.as_str()).n(new.seq), &new.run_id);
        let active = Key::new(RUNS_ACTIVE).n(new.seq);
        match new.is_terminal() {
            true => rec.delete(&active),
            false => rec.put(&active, &new.run_id),
        }
    }
    rec.put(&Key::new(RUN).s(&new.run_id), new);
}

/// Changes a run's record — until it has ended: a run's lifecycle is monotonic, so the FIRST
/// `run_ended` stands and nothing after it (a second end, a surface asked again, in a log written
/// before the writer refused such appends) changes the record. `od log verify` reports such runs.
pub(crate) fn update_run(rec: &mut dyn Records, id: &str, f: impl FnOnce(&mut RunInfo)) {
    let Some(old) = rec.get::<RunInfo>(&Key::new(RUN).s(id)) else { return };
    if old.ended_at.is_some() {
        return;
    }
    let mut new = old.clone();
    f(&mut new);
    if new != old {
        save_run(rec, Some(&old), &new);
    }
}

pub(crate) fn run_created(rec: &mut dyn Records, env: &Envelope, e: &od_events::runs::RunCreated) {
    let r = RunInfo {
        run_id: e.run_id.clone(),
        project_id: e.project_id.clone(),
        conversation_id: e.conversation_id.clone(),
        client_request_id: e.client_request_id.clone(),
        snapshot_id: e.snapshot_id.clone(),
        plugin_id: e.plugin_id.clone(),
        agent: e.agent.clone(),
        status: RunStatus::Queued,
        created_at: e.created_at,
        started_at: None,
        ended_at: None,
        stage_id: String::new(),
        iteration: 0,
        reason: String::new(),
        failure_category: FailureCategory::None,
        artifact_count: 0,
        last_version: env.version,
        seq: env.seq,
        parent_run_id: String::new(),
        fork_event_id: 0,
    };
    let mut r = r;
    if let Some(link) = rec.get::<ForkLink>(&Key::new(FORK_OF).s(&e.run_id)) {
        // A fork resumes inside its parent's stage: it shows that stage until it records its own.
        r.parent_run_id = link.parent_run_id;
        r.fork_event_id = link.parent_event_id;
        r.stage_id = link.stage_id;
        r.iteration = link.iteration;
    }
    save_run(rec, None, &r);
    rec.put(&Key::new(RUNS).n(env.seq), &r.run_id);
    rec.put(&id_key("run", &r.run_id), &r.run_id);
    rec.put(&Key::new(RUNS_BY_PROJECT).s(&r.project_id).n(env.seq), &r.run_id);
    rec.put(&Key::new(RUNS_BY_CONVERSATION).s(&r.conversation_id).n(env.seq), &r.run_id);
    if !e.client_request_id.is_empty() {
        rec.put(&Key::new(CLIENT_REQUEST).s(&e.client_request_id), &r.run_id);
    }
    let pk = Key::new(PROJECT).s(&e.project_id);
    if let Some(mut p) = rec.get::<Project>(&pk) {
        p.run_count += 1;
        rec.put(&pk, &p);
    }
    if !e.snapshot_id.is_empty() {
        reference(rec, &e.snapshot_id, format!("run:{}", e.run_id), &e.project_id);
    }
}

pub(crate) fn artifact_recorded(rec: &mut dyn Records, env: &Envelope, e: &od_events::runs::ArtifactRecorded) {
    update_run(rec, &e.run_id, |r| r.artifact_count += 1);
    rec.put(&Key::new(ARTIFACT).s(&e.artifact_id), &env.seq);
    rec.put(&Key::new(ARTIFACTS_BY_PROJECT).s(&e.project_id).n(env.seq), &e.artifact_id);
    rec.put(&Key::new(ARTIFACTS_BY_RUN).s(&e.run_id).n(env.seq), &e.artifact_id);
    if !e.digest.is_empty() && rec.has(&Key::new(PROJECT).s(&e.project_id)) {
        rec.put(&Key::new(BLOB_REFS).s(&e.digest).s(&e.artifact_id), &e.project_id);
        rec.put(&Key::new(ARTIFACT_BLOB).s(&e.artifact_id), &e.digest);
        rec.delete(&Key::new(BLOB_UNREFERENCED).s(&e.digest));
    }
}

/// The blobs of the files a run staged are referenced like its artifacts' while its project exists.
pub(crate) fn substrate_staged(rec: &mut dyn Records, env: &Envelope, e: &od_events::runs::SubstrateStaged) {
    if !rec.has(&Key::new(PROJECT).s(&e.project_id)) {
        return;
    }
    for (i, f) in e.files.iter().enumerate().filter(|(_, f)| !f.digest.is_empty()) {
        let ref_id = format!("staged:{}:{i}", env.seq);
        rec.put(&Key::new(STAGED_BY_PROJECT).s(&e.project_id).n(env.seq).n(i as u64), &ref_id);
        rec.put(&Key::new(BLOB_REFS).s(&f.digest).s(&ref_id), &e.project_id);
        rec.put(&Key::new(ARTIFACT_BLOB).s(&ref_id), &f.digest);
        rec.delete(&Key::new(BLOB_UNREFERENCED).s(&f.digest));
    }
}

pub(crate) fn run_forked(rec: &mut dyn Records, env: &Envelope, e: &od_events::runs::RunForked) {
    let link = ForkLink {
        parent_run_id: e.parent_run_id.clone(),
        parent_event_id: e.parent_event_id,
        stage_id: e.stage_id.clone(),
        iteration: e.iteration,
        seq: env.seq,
    };
    rec.put(&Key::new(FORK_OF).s(&e.run_id), &link);
    rec.put(&Key::new(FORKS_BY_PARENT).s(&e.parent_run_id).n(env.seq), &e.run_id);
}

/// Garbage collection found the blob unreferenced: it is, unless an artifact named it since.
pub(crate) fn blob_unreferenced(rec: &mut dyn Records, e: &od_events::runs::BlobUnreferenced) {
    if rec.ids(&Key::new(BLOB_REFS).s(&e.digest), None, false, 1).is_empty() {
        rec.put(&Key::new(BLOB_UNREFERENCED).s(&e.digest), &e.since);
    }
}

/// The first stage start moves a queued run to `running`; every one sets its position.
pub(crate) fn stage_started(r: &mut RunInfo, e: &od_events::runs::StageStarted) {
    if r.status == RunStatus::Queued {
        r.status = RunStatus::Running;
        r.started_at = Some(e.started_at);
    }
    r.stage_id = e.stage_id.clone();
    r.iteration = e.iteration;
}

pub(crate) fn run_ended(r: &mut RunInfo, e: &od_events::runs::RunEnded) {
    r.status = e.status.clone();
    r.ended_at = Some(e.ended_at);
    r.reason = e.reason.clone();
    r.failure_category = e.failure_category.clone();
}
