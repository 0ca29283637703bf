//! Exactly one `BrowserActionResulted` per invocation across every daemon on the log. A result (a
//! posted one, a `TIMEOUT`, a `SUPERSEDED`, an orphan's) is appended only at the run stream's
//! version it read after checking, in the stream's frames from the request's version onward, that
//! no result for the invocation is recorded yet; an append that finds the stream moved re-checks
//! and retries. What was already recorded is returned instead, so its caller can hand it on.

use od_events::tools::BrowserActionResulted;
use od_events::{Event, EventKind, StreamId};
use std::collections::HashMap;

use crate::limits::{MAX_RESULT_APPEND_TRIES, RESULT_SCAN_PAGE};
use crate::store::{Append, AppendResult, Expected, Store, StoreError};

/// What [`append_once`] did.
pub(crate) struct Once {
    /// The append, when there was something left to record.
    pub appended: Option<AppendResult>,
    /// Results already in the log for the checked invocations, by invocation id.
    pub existing: HashMap<String, BrowserActionResulted>,
}

/// The version of the frame at `seq` (a request's version from its seq), or 0 when it cannot be read
/// (then the whole stream is checked).
pub(crate) fn version_at(store: &Store, seq: u64) -> u64 {
    match store.read_from(seq, 1) {
        Ok(f) => f.first().filter(|f| f.seq() == seq).map(|f| f.view().version()).unwrap_or(0),
        Err(_) => 0,
    }
}

/// Results recorded in `stream` up to `head` for the invocations in `checks` (id, request version).
fn recorded(
    store: &Store,
    stream: &StreamId,
    checks: &[(&str, u64)],
    head: Option<u64>,
) -> Result<HashMap<String, BrowserActionResulted>, StoreError> {
    let mut found = HashMap::new();
    let (Some(head), Some(mut from)) = (head, checks.iter().map(|(_, v)| *v).min()) else {
        return Ok(found);
    };
    let kind = EventKind::BrowserActionResulted.code();
    while from <= head {
        let frames = store.read_stream(stream.as_str(), from, RESULT_SCAN_PAGE)?;
        let Some(last) = frames.last() else { break };
        from = last.view().version() + 1;
        for f in frames.iter().filter(|f| f.view().kind() == kind && f.view().version() <= head) {
            if let Event::BrowserActionResulted(e) = f.decode()?.event {
                if checks.iter().any(|(id, v)| *id == e.invocation_id && f.view().version() >= *v) {
                    found.entry(e.invocation_id.clone()).or_insert(e);
                }
            }
        }
    }
    Ok(found)
}

/// Appends `events(existing)` to `stream` at the version at which `existing` (the results already
/// recorded for `checks`) was read; nothing when `events` returns none. Blocking.
pub(crate) fn append_once(
    store: &Store,
    stream: &StreamId,
    checks: &[(&str, u64)],
    mut events: impl FnMut(&HashMap<String, BrowserActionResulted>) -> Vec<Event>,
) -> Result<Once, StoreError> {
    let mut tries = 0;
    loop {
        let head = store.stream_version(stream.as_str())?;
        let existing = recorded(store, stream, checks, head)?;
        let evs = events(&existing);
        if evs.is_empty() {
            return Ok(Once { appended: None, existing });
        }
        let expected = head.map_or(Expected::NoStream, Expected::Exactly);
        match store.append(Append::new(stream.clone(), evs).expect(expected)) {
            Ok(r) => return Ok(Once { appended: Some(r), existing }),
            Err(StoreError::Conflict { .. }) if tries + 1 < MAX_RESULT_APPEND_TRIES => tries += 1,
            Err(e) => return Err(e),
        }
    }
}
