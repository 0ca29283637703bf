//! Run leases on PostgreSQL (see `store/lease.rs`): `od_daemons` holds each daemon's heartbeat
//! (the database's clock, so daemons' clocks need not agree), `od_leases` which daemon holds which
//! run. Taking a lease is one statement: insert it, or move it to this daemon when this daemon
//! already holds it or its holder's heartbeat is older than the TTL — concurrent takers serialise
//! on the lease row, so at most one wins. A heartbeat every TTL/5 keeps this daemon's leases; a
//! graceful stop deletes its heartbeat so its leases are free at once.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{conn, pg_error, PgLog};
use crate::store::lease::RunLeases;
use crate::store::StoreError;

/// A daemon's leases on the shared database.
pub struct PgLeases {
    log: Arc<PgLog>,
    conn: Arc<conn::Shared>,
    id: String,
    ttl_ms: i64,
    listen: String,
}

impl PgLeases {
    /// Registers daemon `id` (its first heartbeat, synchronously) and keeps it beating.
    pub fn start(log: &Arc<PgLog>, id: String, listen: String, ttl: Duration) -> Result<Arc<Self>, StoreError> {
        let url = log.url.clone();
        let client = log.call(async move { conn::connect(&url, "connecting to PostgreSQL (leases)").await })?;
        let me = Arc::new(Self {
            log: log.clone(),
            conn: Arc::new(conn::Shared::new(log.url.clone(), client)),
            id,
            ttl_ms: ttl.as_millis().clamp(1, i64::MAX as u128) as i64,
            listen,
        });
        me.beat()?;
        let weak: Weak<Self> = Arc::downgrade(&me);
        let every = (ttl / 5).max(Duration::from_millis(10));
        log.rt.spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(me) = weak.upgrade() else { return };
                if let Err(e) = me.beat_async().await {
                    tracing::warn!("lease heartbeat failed (retrying): {e}");
                }
            }
        });
        Ok(me)
    }

    async fn beat_async(&self) -> Result<(), StoreError> {
        let c = self.conn.get().await?;
        c.execute(
            "INSERT INTO od_daemons (id, heartbeat, listen) VALUES ($1, now(), $2)
             ON CONFLICT (id) DO UPDATE SET heartbeat = now(), listen = EXCLUDED.listen",
            &[&self.id, &self.listen],
        )
        .await
        .map_err(pg_error("recording the heartbeat"))?;
        Ok(())
    }

    fn beat(&self) -> Result<(), StoreError> {
        let (c, id, listen) = (self.conn.clone(), self.id.clone(), self.listen.clone());
        self.log.call(async move {
            let c = c.get().await?;
            c.execute(
                "INSERT INTO od_daemons (id, heartbeat, listen) VALUES ($1, now(), $2)
                 ON CONFLICT (id) DO UPDATE SET heartbeat = now(), listen = EXCLUDED.listen",
                &[&id, &listen],
            )
            .await
            .map_err(pg_error("recording the heartbeat"))
        })?;
        Ok(())
    }
}

impl RunLeases for PgLeases {
    fn shared(&self) -> bool {
        true
    }

    fn daemon_id(&self) -> &str {
        &self.id
    }

    fn take(&self, run_id: &str) -> Result<bool, StoreError> {
        let (c, id, run, ttl) = (self.conn.clone(), self.id.clone(), run_id.to_string(), self.ttl_ms);
        let rows = self.log.call(async move {
            let c = c.get().await?;
            c.query(
                "INSERT INTO od_leases (run_id, daemon_id) VALUES ($1, $2)
                 ON CONFLICT (run_id) DO UPDATE SET daemon_id = EXCLUDED.daemon_id, taken_at = now()
                 WHERE od_leases.daemon_id = EXCLUDED.daemon_id
                    OR NOT EXISTS (SELECT 1 FROM od_daemons d WHERE d.id = od_leases.daemon_id
                                   AND d.heartbeat > now() - $3::bigint * interval '1 millisecond')
                 RETURNING daemon_id",
                &[&run, &id, &ttl],
            )
            .await
            .map_err(pg_error("taking a run lease"))
        })?;
        Ok(!rows.is_empty())
    }

    fn free(&self, runs: &[String]) -> Result<Vec<String>, StoreError> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let (c, id, runs, ttl) = (self.conn.clone(), self.id.clone(), runs.to_vec(), self.ttl_ms);
        let rows = self.log.call(async move {
            let c = c.get().await?;
            c.query(
                "SELECT r FROM unnest($1::text[]) AS r WHERE NOT EXISTS (
                   SELECT 1 FROM od_leases l JOIN od_daemons d ON d.id = l.daemon_id
                   WHERE l.run_id = r AND l.daemon_id <> $2
                     AND d.heartbeat > now() - $3::bigint * interval '1 millisecond')",
                &[&runs, &id, &ttl],
            )
            .await
            .map_err(pg_error("reading run leases"))
        })?;
        Ok(rows.into_iter().map(|r| r.get::<_, String>(0)).collect())
    }

    fn release(&self, run_id: &str) {
        let (c, id, run) = (self.conn.clone(), self.id.clone(), run_id.to_string());
        let r = self.log.call(async move {
            let c = c.get().await?;
            c.execute("DELETE FROM od_leases WHERE run_id = $1 AND daemon_id = $2", &[&run, &id])
                .await
                .map_err(pg_error("releasing a run lease"))
        });
        if let Err(e) = r {
            tracing::warn!("could not release the lease of run {run_id} (it lapses with this daemon): {e}");
        }
    }

    fn retire(&self) {
        let (c, id) = (self.conn.clone(), self.id.clone());
        let r = self.log.call(async move {
            let c = c.get().await?;
            c.execute("DELETE FROM od_daemons WHERE id = $1", &[&id]).await.map_err(pg_error("retiring the daemon"))
        });
        if let Err(e) = r {
            tracing::warn!("could not retire this daemon's heartbeat (its leases lapse after the TTL): {e}");
        }
    }
}
