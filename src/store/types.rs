//! Append requests and results, and the raw frames readers and live subscribers get back — the
//! byte types every backend speaks (frames are `bytes::Bytes`: a pack read from a segment is
//! copied once and its frames share it, a row from PostgreSQL is taken over without a copy).

use bytes::Bytes;
use od_events::{Event, FrameRef, Stored, StreamId};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

use super::StoreError;

/// What the appender believes about the stream before its append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type", content = "version")]
pub enum Expected {
    /// Append whatever the stream's state.
    Any,
    /// The stream must have no events yet.
    NoStream,
    /// The stream's last event must have exactly this version.
    Exactly(u64),
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expected::Any => f.write_str("any version"),
            Expected::NoStream => f.write_str("no stream"),
            Expected::Exactly(v) => write!(f, "version {v}"),
        }
    }
}

impl Expected {
    /// Whether a stream whose last version is `actual` satisfies this expectation.
    pub fn admits(self, actual: Option<u64>) -> bool {
        match self {
            Expected::Any => true,
            Expected::NoStream => actual.is_none(),
            Expected::Exactly(v) => actual == Some(v),
        }
    }
}

/// One append: events for one stream, written atomically or not at all. Several appends to different
/// streams can also be written as one atomic group (`SledLog::append_all`, `EventLog::submit_all`).
#[derive(Debug, Clone)]
pub struct Append {
    pub stream: StreamId,
    pub expected: Expected,
    pub events: Vec<Event>,
    /// Client-supplied idempotency key: a retry with the same key returns the first result.
    pub op_id: Option<String>,
    /// An executor's fencing token: written only while it still holds the run's lease
    /// (`store/fence.rs`). `None` for appends that are not an executor's.
    pub fence: Option<super::lease::Fence>,
}

impl Append {
    /// An append with `Expected::Any`, no op id and no fence.
    pub fn new(stream: StreamId, events: Vec<Event>) -> Self {
        Self { stream, expected: Expected::Any, events, op_id: None, fence: None }
    }
    /// Fences the append with an executor's lease (see [`super::lease::Fence`]).
    pub fn fenced(mut self, fence: Option<super::lease::Fence>) -> Self {
        self.fence = fence;
        self
    }
    /// Sets the expected version.
    pub fn expect(mut self, e: Expected) -> Self {
        self.expected = e;
        self
    }
    /// Sets the op id.
    pub fn op_id(mut self, op: impl Into<String>) -> Self {
        self.op_id = Some(op.into());
        self
    }
}

/// What a durable append wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppendResult {
    pub stream: String,
    pub first_seq: u64,
    pub last_seq: u64,
    pub first_version: u64,
    pub last_version: u64,
    /// True when this is the stored result of an earlier append with the same op id.
    pub deduplicated: bool,
}

impl AppendResult {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(32 + self.stream.len());
        for v in [self.first_seq, self.last_seq, self.first_version, self.last_version] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(self.stream.as_bytes());
        b
    }

    /// The op index's value for the results of one append (one result: [`Self::encode`], as before
    /// multi-stream appends existed) or of one atomic multi-stream append (several: a `u64::MAX`
    /// marker, which no seq can be, then each result as `[u32 len][encoded]`).
    pub(crate) fn encode_all(rs: &[AppendResult]) -> Vec<u8> {
        if let [one] = rs {
            return one.encode();
        }
        let mut b = u64::MAX.to_le_bytes().to_vec();
        for r in rs {
            let e = r.encode();
            b.extend_from_slice(&(e.len() as u32).to_le_bytes());
            b.extend_from_slice(&e);
        }
        b
    }

    /// Decodes [`Self::encode_all`] (every result marked `deduplicated`).
    pub(crate) fn decode_all(b: &[u8]) -> Option<Vec<Self>> {
        if b.get(..8) != Some(&u64::MAX.to_le_bytes()[..]) {
            return Some(vec![Self::decode(b)?]);
        }
        let mut out = Vec::new();
        let mut at = 8;
        while at < b.len() {
            let len = u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize;
            out.push(Self::decode(b.get(at + 4..at + 4 + len)?)?);
            at += 4 + len;
        }
        (!out.is_empty()).then_some(out)
    }

    pub(crate) fn decode(b: &[u8]) -> Option<Self> {
        let n = |i: usize| b.get(i * 8..i * 8 + 8).map(|s| u64::from_le_bytes(s.try_into().unwrap()));
        Some(Self {
            first_seq: n(0)?,
            last_seq: n(1)?,
            first_version: n(2)?,
            last_version: n(3)?,
            stream: String::from_utf8(b.get(32..)?.to_vec()).ok()?,
            deduplicated: true,
        })
    }
}

/// One stored frame's bytes (hash verified by open/verify, not on every read).
#[derive(Clone)]
pub struct RawFrame(pub(crate) Bytes);

/// Frames published after they became durable, in seq order (an empty batch is a wake-up: read
/// the log, see `PUBLISH_INLINE_BYTES`).
pub type Published = Arc<Vec<Bytes>>;

impl RawFrame {
    /// Frame bytes from elsewhere (another log, to [`super::EventLog::import`]): their lengths are
    /// checked here, their hash and place in the chain by the import.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, StoreError> {
        FrameRef::parse(&bytes).map_err(|e| StoreError::Invalid { field: "frame", reason: e.to_string() })?;
        Ok(Self(Bytes::from(bytes)))
    }
    /// A parsed view of the frame.
    pub fn view(&self) -> FrameRef<'_> {
        FrameRef::parse(&self.0).expect("frames are validated before they are stored")
    }
    /// The global sequence number.
    pub fn seq(&self) -> u64 {
        self.view().seq()
    }
    /// The raw bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
    /// Decodes envelope and event, upcasting old schemas.
    pub fn decode(&self) -> Result<Stored, StoreError> {
        decode_frame(self.view())
    }
}

impl fmt::Debug for RawFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawFrame(seq {}, {} bytes)", self.seq(), self.0.len())
    }
}

/// Decodes a frame into envelope + current-shape event.
pub fn decode_frame(f: FrameRef<'_>) -> Result<Stored, StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt { seq: f.seq(), reason };
    let h = f.header().map_err(|e| corrupt(e.to_string()))?;
    let event = od_migrations::decode_any(h.kind, h.schema, f.payload()).map_err(|e| corrupt(e.to_string()))?;
    Ok(Stored {
        envelope: od_events::Envelope {
            seq: h.seq,
            stream: h.stream.to_string(),
            version: h.version,
            recorded_at: h.recorded_at,
            op_id: h.op_id.map(str::to_string),
            stored_schema: h.schema,
        },
        event,
    })
}
