//! Artifact blob garbage collection (issue 16), by the same rule as snapshots: a blob no artifact
//! of an existing project names is unreferenced from the first pass that finds it so (or from its
//! project's deletion) — recorded as `blob_unreferenced` — and a pass after the unreferenced TTL
//! (`OD_SNAPSHOT_UNREFERENCED_TTL_DAYS`) records `blob_expired` and removes it. An artifact naming it
//! again before then keeps it. Blobs stored since the previous pass are left alone: the artifact
//! naming one may still be on its way to the log.

use od_events::runs::{BlobExpired, BlobUnreferenced};
use od_events::{Event, StreamId};
use serde_json::{json, Value};

use super::{Engine, WorkError};
use crate::store::Append;

fn stream(digest: &str) -> Result<StreamId, WorkError> {
    StreamId::typed("blob", digest).map_err(|e| WorkError::invalid("digest", e.to_string()))
}

impl Engine {
    /// One collection pass: `{unreferenced: [...], expired: [...], kept, ttlDays}`. With `before`
    /// (unix ms), every blob unreferenced since before then expires now (a forced cleanup).
    pub fn gc_blobs(&self, before: Option<i64>) -> Result<Value, WorkError> {
        let _one_pass = self.blobs.gc_lock.lock().unwrap_or_else(|e| e.into_inner());
        let recent = self.blobs.take_touched();
        let now = self.clock.now_ms();
        let ttl_ms = self.config.snapshot_unreferenced_ttl_days.saturating_mul(86_400_000);
        let (mut marked, mut expired, mut kept) = (Vec::new(), Vec::new(), 0u64);
        let all = self.blobs.list().map_err(|e| WorkError::io("listing blobs", e))?;
        for (digest, bytes) in all {
            if recent.contains(&digest) {
                kept += 1;
                continue;
            }
            let (referenced, since) =
                self.workspace.read(|w| od_projections::workspace_read::blob_references(w, &digest))?;
            if referenced {
                kept += 1;
                continue;
            }
            let Some(since) = since else {
                let e = BlobUnreferenced { digest: digest.clone(), bytes, since: now };
                self.store.append(Append::new(stream(&digest)?, vec![Event::BlobUnreferenced(e)]))?;
                marked.push(json!({ "digest": digest, "bytes": bytes }));
                continue;
            };
            let due = match before {
                Some(b) => since < b,
                None => ttl_ms > 0 && since.saturating_add(ttl_ms) <= now,
            };
            // Stored again while this pass ran: an artifact may be naming it right now.
            if !due || self.blobs.touched(&digest) {
                kept += 1;
                continue;
            }
            let reason = if before.is_some() { "prune" } else { "ttl" };
            let e = BlobExpired { digest: digest.clone(), bytes, unreferenced_since: since, reason: reason.into() };
            self.store.append(Append::new(stream(&digest)?, vec![Event::BlobExpired(e)]))?;
            self.blobs.remove(&digest).map_err(|e| WorkError::io("removing a blob", e))?;
            expired.push(json!({ "digest": digest, "bytes": bytes, "unreferencedSince": since }));
        }
        Ok(json!({ "ok": true, "unreferenced": marked, "expired": expired, "kept": kept,
            "ttlDays": self.config.snapshot_unreferenced_ttl_days }))
    }
}
