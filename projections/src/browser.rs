//! `browser`: what each live browser session advertises (and to which run) and every
//! browser-action invocation (pending until its one result) — one record per session and per
//! invocation, with indexes by run and of what is pending. (The tool definitions themselves are the
//! small in-memory `tools` catalog.)

use od_events::{Envelope, Event};
use serde::{Deserialize, Serialize};

use crate::records::{Key, RecordFold, Records, RecordsExt, RecordsRead, RecordsWrite};
use crate::workspace_read::Keyed;

/// `<session id>` → [`BrowserSession`].
pub const SESSION: &str = "session";
/// `<run id><seq>` → session id: the sessions attached to a run, oldest advertisement first.
pub const SESSIONS_BY_RUN: &str = "sessions_r";
/// `<invocation id>` → [`Invocation`].
pub const INVOCATION: &str = "invocation";
/// `<run id><seq>` → invocation id: a run's invocations, oldest first.
pub const INVOCATIONS_BY_RUN: &str = "invocations_r";
/// `<seq>` → invocation id: invocations waiting for their result.
pub const PENDING: &str = "invocations_w";

/// What one browser session has mounted now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrowserSession {
    pub session_id: String,
    /// "" when the session is attached to no run.
    pub run_id: String,
    pub tool_names: Vec<String>,
    pub tools_json: String,
    pub advertised_at: i64,
    pub seq: u64,
}

/// One browser-action invocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Invocation {
    pub invocation_id: String,
    pub run_id: String,
    pub session_id: String,
    pub tool: String,
    pub view: String,
    pub input_json: String,
    pub requested_at: i64,
    pub timeout_at: i64,
    /// `pending`, `ok` or `error`.
    pub status: String,
    pub error_code: String,
    pub resolved_by: String,
    pub resulted_at: Option<i64>,
    /// Seq of the request.
    pub seq: u64,
}

/// The `browser` fold (its state is the records).
#[derive(Debug, Clone, Copy, Default)]
pub struct Browser;

fn advertised(rec: &mut dyn Records, env: &Envelope, e: &od_events::tools::ToolsAdvertised) {
    let k = Key::new(SESSION).s(&e.session_id);
    if let Some(old) = rec.get::<BrowserSession>(&k) {
        rec.delete(&Key::new(SESSIONS_BY_RUN).s(&old.run_id).n(old.seq));
    }
    if e.run_id.is_empty() && e.tool_names.is_empty() {
        rec.delete(&k);
        return;
    }
    let s = BrowserSession {
        session_id: e.session_id.clone(),
        run_id: e.run_id.clone(),
        tool_names: e.tool_names.clone(),
        tools_json: e.tools_json.clone(),
        advertised_at: e.advertised_at,
        seq: env.seq,
    };
    rec.put(&Key::new(SESSIONS_BY_RUN).s(&s.run_id).n(env.seq), &s.session_id);
    rec.put(&k, &s);
}

fn requested(rec: &mut dyn Records, env: &Envelope, e: &od_events::tools::BrowserActionRequested) {
    let k = Key::new(INVOCATION).s(&e.invocation_id);
    if let Some(old) = rec.get::<Invocation>(&k) {
        rec.delete(&Key::new(INVOCATIONS_BY_RUN).s(&old.run_id).n(old.seq));
        rec.delete(&Key::new(PENDING).n(old.seq));
    }
    let i = Invocation {
        invocation_id: e.invocation_id.clone(),
        run_id: e.run_id.clone(),
        session_id: e.session_id.clone(),
        tool: e.tool.clone(),
        view: e.view.clone(),
        input_json: e.input_json.clone(),
        requested_at: e.requested_at,
        timeout_at: e.timeout_at,
        status: "pending".into(),
        error_code: String::new(),
        resolved_by: String::new(),
        resulted_at: None,
        seq: env.seq,
    };
    rec.put(&Key::new(INVOCATIONS_BY_RUN).s(&i.run_id).n(env.seq), &i.invocation_id);
    rec.put(&Key::new(PENDING).n(env.seq), &i.invocation_id);
    rec.put(&k, &i);
}

fn resulted(rec: &mut dyn Records, e: &od_events::tools::BrowserActionResulted) {
    let k = Key::new(INVOCATION).s(&e.invocation_id);
    let Some(mut i) = rec.get::<Invocation>(&k) else { return };
    rec.delete(&Key::new(PENDING).n(i.seq));
    i.status = if e.ok { "ok".into() } else { "error".into() };
    i.error_code = e.error_code.clone();
    i.resolved_by = e.resolved_by.to_string();
    i.resulted_at = Some(e.resulted_at);
    rec.put(&k, &i);
}

/// A run's end resolves what it left waiting: nothing may be appended to a run after its end, so
/// no result can follow (the invocation is an error, `resolvedBy: run-ended`).
fn run_ended(rec: &mut dyn Records, e: &od_events::runs::RunEnded) {
    let prefix = Key::new(INVOCATIONS_BY_RUN).s(&e.run_id);
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = rec.ids(&prefix, after.as_deref(), false, RUN_END_PAGE);
        let Some((last, _)) = page.last() else { break };
        after = Some(last.clone());
        for (_, id) in &page {
            let k = Key::new(INVOCATION).s(id);
            let Some(mut i) = rec.get::<Invocation>(&k) else { continue };
            if i.status != "pending" {
                continue;
            }
            rec.delete(&Key::new(PENDING).n(i.seq));
            i.status = "error".into();
            i.error_code = "EXECUTION_FAILED".into();
            i.resolved_by = "run-ended".into();
            i.resulted_at = Some(e.ended_at);
            rec.put(&k, &i);
        }
        if page.len() < RUN_END_PAGE {
            break;
        }
    }
}

/// How many of a run's invocations one read of the index takes when its end resolves them.
const RUN_END_PAGE: usize = 256;

impl RecordFold for Browser {
    const NAME: &'static str = "browser";
    /// 2: a run's end resolves its pending invocations.
    const VERSION: u32 = 2;

    fn apply(rec: &mut dyn Records, env: &Envelope, event: &Event) {
        match event {
            Event::ToolsAdvertised(e) => advertised(rec, env, e),
            Event::BrowserActionRequested(e) => requested(rec, env, e),
            Event::BrowserActionResulted(e) => resulted(rec, e),
            Event::RunEnded(e) => run_ended(rec, e),
            Event::DaemonStarted(_)
            | Event::DaemonStopped(_)
            | Event::NoteRecorded(_)
            | Event::LogVerified(_)
            | Event::SnapshotBodyRecorded(_)
            | Event::PluginInstalled(_)
            | Event::PluginUninstalled(_)
            | Event::CapabilitiesGranted(_)
            | Event::CapabilitiesRevoked(_)
            | Event::MarketplaceAdded(_)
            | Event::MarketplaceRefreshed(_)
            | Event::MarketplaceTrusted(_)
            | Event::MarketplaceRemoved(_)
            | Event::ToolRegistered(_)
            | Event::ConnectorConnected(_)
            | Event::PluginReloaded(_)
            | Event::ConnectorDisconnected(_)
            | Event::McpServerAuthorized(_)
            | Event::McpServerDeauthorized(_)
            | Event::ToolRemoved(_)
            | Event::SnapshotRecorded(_)
            | Event::SnapshotMarkedStale(_)
            | Event::SnapshotExpired(_)
            | Event::ProjectCreated(_)
            | Event::ProjectDeleted(_)
            | Event::ConversationCreated(_)
            | Event::RunCreated(_)
            | Event::RunForked(_)
            | Event::BlobExpired(_)
            | Event::BlobUnreferenced(_)
            | Event::SubstrateStaged(_)
            | Event::ConversationMessage(_)
            | Event::FollowUpPlanned(_)
            | Event::AgentStarted(_)
            | Event::AgentOutput(_)
            | Event::PromptComposed(_)
            | Event::SignalRecorded(_)
            | Event::StageStarted(_)
            | Event::StageCompleted(_)
            | Event::StageFailed(_)
            | Event::DevloopIteration(_)
            | Event::LoopBroken(_)
            | Event::RunResponded(_)
            | Event::ArtifactRecorded(_)
            | Event::SurfaceRequested(_)
            | Event::SurfaceResponded(_)
            | Event::SurfaceTimedOut(_)
            | Event::SurfaceRefused(_)
            | Event::SurfaceInvalidated(_)
            | Event::SurfaceRevoked(_)
            | Event::SurfacePrefilled(_) => {}
        }
    }
}

/// One browser session.
pub fn session<R: RecordsRead + ?Sized>(rec: &R, id: &str) -> Option<BrowserSession> {
    rec.get(&Key::new(SESSION).s(id))
}

/// The live sessions attached to `run_id`, most recently advertised last (at most `limit`).
pub fn run_sessions<R: RecordsRead + ?Sized>(rec: &R, run_id: &str, limit: usize) -> Vec<BrowserSession> {
    rec.ids(&Key::new(SESSIONS_BY_RUN).s(run_id), None, false, limit)
        .into_iter()
        .filter_map(|(_, id)| session(rec, &id))
        .collect()
}

/// One invocation.
pub fn invocation<R: RecordsRead + ?Sized>(rec: &R, id: &str) -> Option<Invocation> {
    rec.get(&Key::new(INVOCATION).s(id))
}

/// Invocations waiting for their result, oldest first (at most `limit`).
pub fn pending<R: RecordsRead + ?Sized>(rec: &R, limit: usize) -> Vec<Invocation> {
    rec.ids(&Key::new(PENDING), None, false, limit).into_iter().filter_map(|(_, id)| invocation(rec, &id)).collect()
}

/// A run's invocations, oldest first (by request seq; the cursor key is that seq).
pub fn run_invocations<R: RecordsRead + ?Sized>(
    rec: &R,
    run_id: &str,
    after: Option<&[u8]>,
    limit: usize,
) -> Keyed<Invocation> {
    let prefix = Key::new(INVOCATIONS_BY_RUN).s(run_id);
    let after = after.map(|a| [prefix.0.as_slice(), a].concat());
    rec.ids(&prefix, after.as_deref(), false, limit)
        .into_iter()
        .filter_map(|(k, id)| Some((Key::suffix(&k, &prefix).to_vec(), invocation(rec, &id)?)))
        .collect()
}
