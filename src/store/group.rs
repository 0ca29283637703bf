//! The group-commit machinery every backend shares: an append checked and encoded before the
//! writer sees it ([`Prepared`]), the all-or-nothing unit the writer commits ([`Group`]: one
//! append, or an atomic multi-stream append), what the batch decided for it ([`Outcome`]) and
//! where its answer goes ([`Ack`]). The embedded writer (`sled/writer.rs`) and PostgreSQL's
//! (`pg/writer.rs`) take groups in batches and answer them with [`ack_all`] after their commit.

use od_events::StreamId;
use tokio::sync::oneshot;

use super::lease::Fence;
use super::{AppendResult, Expected, StoreError};

/// An append whose payloads were encoded and checked against limits by the caller
/// (`prepare.rs`).
pub(crate) struct Prepared {
    pub stream: StreamId,
    pub expected: Expected,
    pub op_id: Option<String>,
    /// Each event's `(kind code, schema, payload)`.
    pub payloads: Vec<(u16, u16, Vec<u8>)>,
    pub bytes: usize,
    /// The executor's fencing token, if any (checked by `fence.rs` inside the commit).
    pub fence: Option<Fence>,
}

/// Appends written all or nothing: one part (an [`super::Append`]) or several, to distinct streams
/// (`append_all`). Every part carries the group's op id (its first part's), so every frame does.
pub(crate) struct Group {
    pub parts: Vec<Prepared>,
    pub bytes: usize,
}

impl Group {
    /// The group's op id (its first part's).
    pub(crate) fn op_id(&self) -> Option<&str> {
        self.parts[0].op_id.as_deref()
    }
}

/// Where a group's outcome goes: a single append gets one result, a multi-stream append all.
pub(crate) enum Ack {
    One(oneshot::Sender<Result<AppendResult, StoreError>>),
    All(oneshot::Sender<Result<Vec<AppendResult>, StoreError>>),
}

impl Ack {
    /// Sends `r`; a single append whose op id named a multi-stream append gets that append's part
    /// on its own stream (else its first part).
    pub(crate) fn send(self, g: &Group, r: Result<Vec<AppendResult>, StoreError>) {
        match self {
            Ack::All(tx) => {
                let _ = tx.send(r);
            }
            Ack::One(tx) => {
                let stream = g.parts[0].stream.as_str();
                let _ = tx.send(r.map(|mut rs| {
                    let i = rs.iter().position(|x| x.stream == stream).unwrap_or(0);
                    rs.swap_remove(i)
                }));
            }
        }
    }
}

/// What the batch decided for one group before the commit.
pub(crate) enum Outcome {
    /// Answered without writing: a deduplicated op id, or a refusal (conflict, fence, end).
    Done(Result<Vec<AppendResult>, StoreError>),
    /// Staged: these results hold once the batch commits.
    Written(Vec<AppendResult>),
}

/// The results of a group deduplicated against what an earlier group of the same batch wrote.
pub(crate) fn deduplicated(rs: &[AppendResult]) -> Outcome {
    Outcome::Done(Ok(rs.iter().map(|r| AppendResult { deduplicated: true, ..r.clone() }).collect()))
}

/// Answers every group of a committed batch with its outcome.
pub(crate) fn ack_all(batch: Vec<(Group, Ack)>, outcomes: Vec<Outcome>) {
    for ((g, ack), o) in batch.into_iter().zip(outcomes) {
        ack.send(
            &g,
            match o {
                Outcome::Done(r) => r,
                Outcome::Written(r) => Ok(r),
            },
        );
    }
}

/// Answers every group of a failed batch with the same error.
pub(crate) fn fail_all(batch: Vec<(Group, Ack)>, e: &StoreError) {
    for (g, ack) in batch {
        ack.send(&g, Err(e.clone()));
    }
}
