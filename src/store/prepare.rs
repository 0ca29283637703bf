//! Checking appends before they reach the writer: payloads encoded, every limit of `limits.rs`
//! applied (events, bytes, op id), the op id held to the identifier rule of `ident.rs` (the same
//! on every backend), and a multi-stream group's parts checked together. Nothing that fails here
//! is written.

use super::group::{Group, Prepared};
use super::ident::{check_ident, IdentError};
use super::{Append, StoreError};
use crate::limits::*;

/// Encodes payloads and checks every limit before anything reaches the writer.
pub(crate) fn prepare(a: Append) -> Result<Prepared, StoreError> {
    if a.events.is_empty() {
        return Err(StoreError::Invalid { field: "events", reason: "an append needs at least one event".into() });
    }
    if a.events.len() > MAX_EVENTS_PER_APPEND {
        return Err(limit("events per append", a.events.len(), MAX_EVENTS_PER_APPEND));
    }
    if let Some(op) = &a.op_id {
        match check_ident(op, MAX_OP_ID_BYTES) {
            Ok(()) => {}
            Err(IdentError::TooLong { len, max }) => return Err(limit("op_id bytes", len, max)),
            Err(e) => return Err(StoreError::Invalid { field: "op_id", reason: e.to_string() }),
        }
    }
    let mut bytes = 0;
    let mut payloads = Vec::with_capacity(a.events.len());
    for e in &a.events {
        let p = e.encode_payload();
        if p.len() > MAX_EVENT_BYTES {
            return Err(limit("event bytes", p.len(), MAX_EVENT_BYTES));
        }
        bytes += od_events::Frame::encoded_len(a.stream.as_str(), a.op_id.as_deref(), p.len()) + 12;
        let k = e.kind();
        payloads.push((k.code(), k.current_schema(), p));
    }
    if bytes > MAX_APPEND_BYTES {
        return Err(limit("append bytes", bytes, MAX_APPEND_BYTES));
    }
    super::fence::check_request(&a)?;
    Ok(Prepared { stream: a.stream, expected: a.expected, op_id: a.op_id, payloads, bytes, fence: a.fence })
}

/// Checks a multi-stream group: distinct streams, one op id (the first part's), every part's limits,
/// and the group's bytes (it is written as one batch, which never spans two segments).
pub(crate) fn prepare_all(parts: Vec<Append>) -> Result<Group, StoreError> {
    if parts.is_empty() {
        return Err(StoreError::Invalid { field: "parts", reason: "an atomic append needs at least one part".into() });
    }
    if parts.len() > MAX_APPEND_PARTS {
        return Err(limit("parts per atomic append", parts.len(), MAX_APPEND_PARTS));
    }
    let op_id = parts[0].op_id.clone();
    let mut seen = std::collections::HashMap::new();
    let mut prepared = Vec::with_capacity(parts.len());
    let mut bytes = 0;
    for (i, mut a) in parts.into_iter().enumerate() {
        if let Some(j) = seen.insert(a.stream.as_str().to_string(), i) {
            let reason = format!("{} is the stream of parts {j} and {i}; give each stream one part", a.stream.as_str());
            return Err(StoreError::Invalid { field: "stream", reason });
        }
        match (&a.op_id, &op_id) {
            (Some(mine), Some(group)) if mine != group => {
                let reason = format!("part {i} has {mine:?}, but the group's op id (its first part's) is {group:?}");
                return Err(StoreError::Invalid { field: "op_id", reason });
            }
            (Some(mine), None) => {
                let reason =
                    format!("part {i} has {mine:?}, but the group's op id is its first part's, which has none");
                return Err(StoreError::Invalid { field: "op_id", reason });
            }
            _ => a.op_id = op_id.clone(),
        }
        let p = prepare(a)?;
        bytes += p.bytes;
        prepared.push(p);
    }
    if bytes > MAX_APPEND_BYTES {
        return Err(limit("append bytes", bytes, MAX_APPEND_BYTES));
    }
    Ok(Group { parts: prepared, bytes })
}

fn limit(what: &'static str, value: usize, max: usize) -> StoreError {
    StoreError::LimitExceeded { limit: what, value: value as u64, max: max as u64 }
}
