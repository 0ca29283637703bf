//! The lifecycle rules of `store/fence.rs` on PostgreSQL, read inside the append transaction
//! (after it locked the head row): which run streams of the batch have ended (`od_ended`, kept by
//! `sql::write`), and which fenced (daemon, epoch) pairs hold their run's lease — the
//! lease rows read `FOR SHARE`, so a concurrent take waits for this commit and then sees it (the
//! taker's next read of the run includes what this batch wrote).

use super::sql::Keys;
use crate::store::fence::{is_run_stream, Lifecycle};
use crate::store::group::{Ack, Group};

/// `od_ended` and `od_leases`, migration 3 (`schema.rs`).
pub(super) const MIGRATION: &str = "CREATE SEQUENCE od_lease_epochs;
     ALTER TABLE od_leases ADD COLUMN epoch bigint NOT NULL DEFAULT 0;
     ALTER TABLE od_daemons ADD COLUMN nonce text NOT NULL DEFAULT '';
     CREATE TABLE od_ended (stream text PRIMARY KEY);
     INSERT INTO od_ended SELECT DISTINCT stream FROM od_frames
       WHERE stream LIKE 'run:%' AND substring(frame from 5 for 2) = '\\x3e00'::bytea;";

/// The read of a batch's run streams (`$1`) and fenced runs (`$2`): their ends, and their fences'
/// leases `FOR SHARE`. Prepared with the commit's other statements (`sql.rs`).
pub(super) const READ: &str =
    "WITH l AS (SELECT run_id, daemon_id, epoch FROM od_leases WHERE run_id = ANY($2) FOR SHARE)
     SELECT true, stream, '', 0::bigint FROM od_ended WHERE stream = ANY($1)
     UNION ALL SELECT false, run_id, daemon_id, epoch FROM l";

/// The batch's run streams and the runs whose fences it carries, into `keys` (sorted, distinct).
/// A batch that touches no run stream names none, and its commit skips [`READ`].
pub(super) fn keys(batch: &[(Group, Ack)], keys: &mut Keys) {
    let parts = || batch.iter().flat_map(|(g, _)| g.parts.iter());
    keys.runs = parts().map(|p| p.stream.as_str()).filter(|s| is_run_stream(s)).map(str::to_string).collect();
    if keys.runs.is_empty() {
        return;
    }
    keys.runs.sort();
    keys.runs.dedup();
    keys.fenced = parts().filter_map(|p| p.fence.as_ref().map(|f| f.run_id.clone())).collect();
    keys.fenced.sort();
    keys.fenced.dedup();
}

/// What [`READ`] returned, into the batch's lifecycle.
pub(super) fn apply(rows: Vec<tokio_postgres::Row>, life: &mut Lifecycle) {
    for r in rows {
        if r.get::<_, bool>(0) {
            life.ended.insert(r.get(1));
        } else {
            life.holding.insert((r.get(1), r.get(2), r.get::<_, i64>(3) as u64));
        }
    }
}

/// The run streams `frames` end (for `od_ended`).
pub(super) fn ended_streams(streams: &[String], frames: &[Vec<u8>]) -> Vec<String> {
    let code = od_events::EventKind::RunEnded.code();
    let mut out: Vec<String> = streams
        .iter()
        .zip(frames)
        .filter(|(s, f)| is_run_stream(s) && od_events::FrameRef::parse(f).is_ok_and(|f| f.kind() == code))
        .map(|(s, _)| s.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_migration_names_run_ended_by_its_code() {
        let le = od_events::EventKind::RunEnded.code().to_le_bytes();
        assert!(super::MIGRATION.contains(&format!("\\x{:02x}{:02x}", le[0], le[1])));
    }
}
