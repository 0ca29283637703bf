//! Run leases on PostgreSQL (see `store/lease.rs`): `od_daemons` holds each daemon's heartbeat
//! (the database's clock, so daemons' clocks need not agree) with the nonce of the process beating
//! it and its listen address; `od_leases` which daemon holds which run, at which epoch. Taking a
//! lease is one statement: insert it, or move it to this daemon when this daemon already holds it
//! or its holder's heartbeat is older than the TTL — concurrent takers serialise on the lease row,
//! so at most one wins — with a new epoch from `od_lease_epochs` (a sequence: epochs only grow,
//! across releases and ends). A heartbeat every TTL/5 keeps this daemon's leases; a graceful stop
//! deletes its heartbeat so its leases are free at once.
//!
//! What a daemon does after a gap: a heartbeat that succeeds after a failed one, or more than a TTL
//! after the last good one (a stall, a database outage), reads the leases this daemon believes it
//! holds and reports those that moved (`RunLeases::on_lost`), and starts a quiet period of one TTL
//! during which this daemon takes no lease another daemon holds: the others need that long to beat
//! again after an outage of the database, which is not their death.
//!
//! Identity: a process registers its id with a nonce of its own. An id whose heartbeat is fresh
//! under another nonce is watched for up to a TTL: if that heartbeat moves, a live daemon holds
//! the id (a copied data dir) and this one refuses to start ([`StoreError::DaemonIdInUse`]);
//! if it stops, the holder was this data dir's previous process, and the id is taken over.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::{conn, pg_error, PgLog};
use crate::store::lease::{LostHook, RunLeases};
use crate::store::StoreError;

/// A daemon's leases on the shared database.
pub struct PgLeases {
    log: Arc<PgLog>,
    conn: Arc<conn::Shared>,
    id: String,
    nonce: String,
    ttl: Duration,
    listen: Mutex<String>,
    /// The leases this process took and has not released: run → epoch.
    held: Mutex<HashMap<String, u64>>,
    /// Until when this daemon takes no lease another daemon holds (after a reconnect or a stall).
    quiet_until: Mutex<Option<Instant>>,
    /// When the last heartbeat succeeded, and whether the last one tried failed: while beats fail,
    /// or the last good one is older than the TTL (a stall not yet noticed), no lease is stolen.
    beats: Mutex<(Instant, bool)>,
    /// Set once another process took over this daemon's id: it takes nothing any more.
    usurped: std::sync::atomic::AtomicBool,
    lost_hook: Mutex<Option<LostHook>>,
}

impl PgLeases {
    /// Registers daemon `id` for this process (`nonce`: this start's own) — refusing when a live
    /// daemon holds the id — and keeps it beating.
    pub fn start(
        log: &Arc<PgLog>,
        id: String,
        nonce: String,
        listen: String,
        ttl: Duration,
    ) -> Result<Arc<Self>, StoreError> {
        let target = log.target.clone();
        let client = log.call(async move { conn::connect(&target, "connecting to PostgreSQL (leases)").await })?;
        let me = Arc::new(Self {
            log: log.clone(),
            conn: Arc::new(conn::Shared::new(log.target.clone(), client)),
            id,
            nonce,
            ttl: ttl.max(Duration::from_millis(1)),
            listen: Mutex::new(listen),
            held: Mutex::default(),
            // A daemon just started steals nothing for a TTL: the heartbeats it finds stale may be
            // those of live daemons just back from a database outage.
            quiet_until: Mutex::new(Some(Instant::now() + ttl)),
            beats: Mutex::new((Instant::now(), false)),
            usurped: Default::default(),
            lost_hook: Mutex::default(),
        });
        me.claim_id()?;
        let weak: Weak<Self> = Arc::downgrade(&me);
        let every = (ttl / 5).max(Duration::from_millis(10));
        log.rt.spawn(async move {
            let (mut last_ok, mut failed) = (Instant::now(), false);
            loop {
                tokio::time::sleep(every).await;
                let Some(me) = weak.upgrade() else { return };
                match me.beat().await {
                    Ok(true) => {
                        let gap = last_ok.elapsed();
                        last_ok = Instant::now();
                        if failed || gap > me.ttl {
                            me.after_gap(gap, failed).await;
                        }
                        failed = false;
                        *me.beats.lock().expect("beats") = (last_ok, false);
                    }
                    Ok(false) => me.usurp(),
                    Err(e) => {
                        failed = true;
                        me.beats.lock().expect("beats").1 = true;
                        tracing::warn!("lease heartbeat failed (retrying): {e}");
                    }
                }
            }
        });
        Ok(me)
    }

    fn ttl_ms(&self) -> i64 {
        self.ttl.as_millis().clamp(1, i64::MAX as u128) as i64
    }

    /// The address this daemon serves on (recorded with its next heartbeat).
    pub fn set_listen(&self, listen: String) {
        *self.listen.lock().expect("listen") = listen;
    }

    /// Registers this process under its id (see the module doc).
    fn claim_id(&self) -> Result<(), StoreError> {
        let deadline = Instant::now() + self.ttl + self.ttl / 5;
        let mut seen: Option<String> = None;
        loop {
            let (c, id, ttl) = (self.conn.clone(), self.id.clone(), self.ttl_ms());
            let row = self.log.call(async move {
                let c = c.get().await?;
                c.query_opt(
                    "SELECT nonce, listen, heartbeat::text,
                            heartbeat > now() - $2::bigint * interval '1 millisecond'
                     FROM od_daemons WHERE id = $1",
                    &[&id, &ttl],
                )
                .await
                .map_err(pg_error("reading this daemon's registration"))
            })?;
            let held = row.filter(|r| r.get::<_, bool>(3) && r.get::<_, String>(0) != self.nonce);
            let Some(r) = held else { break };
            let (listen, beat): (String, String) = (r.get(1), r.get(2));
            match &seen {
                Some(first) if *first != beat => return Err(StoreError::DaemonIdInUse { id: self.id.clone(), listen }),
                None => seen = Some(beat),
                _ => {}
            }
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(self.ttl / 5);
        }
        let (c, id, nonce, listen) = (self.conn.clone(), self.id.clone(), self.nonce.clone(), self.listen());
        self.log.call(async move {
            let c = c.get().await?;
            c.execute(
                "INSERT INTO od_daemons (id, heartbeat, listen, nonce) VALUES ($1, now(), $2, $3)
                 ON CONFLICT (id) DO UPDATE SET heartbeat = now(), listen = EXCLUDED.listen, nonce = EXCLUDED.nonce",
                &[&id, &listen, &nonce],
            )
            .await
            .map_err(pg_error("registering this daemon"))
        })?;
        Ok(())
    }

    fn listen(&self) -> String {
        self.listen.lock().expect("listen").clone()
    }

    /// One heartbeat: false when the id's row carries another nonce (another process took it).
    async fn beat(&self) -> Result<bool, StoreError> {
        let c = self.conn.get().await?;
        let n = c
            .execute(
                "UPDATE od_daemons SET heartbeat = now(), listen = $3 WHERE id = $1 AND nonce = $2",
                &[&self.id, &self.nonce, &self.listen()],
            )
            .await
            .map_err(pg_error("recording the heartbeat"))?;
        Ok(n == 1)
    }

    /// After a gap: a quiet period, and the leases that moved meanwhile are reported lost.
    async fn after_gap(&self, gap: Duration, failed: bool) {
        *self.quiet_until.lock().expect("quiet") = Some(Instant::now() + self.ttl);
        tracing::warn!(
            "lease heartbeat back after {} ms{}: taking no other daemon's lease for {} ms",
            gap.as_millis(),
            if failed { " (the database could not be reached)" } else { "" },
            self.ttl.as_millis()
        );
        let held: Vec<(String, u64)> = self.held.lock().expect("held").iter().map(|(k, v)| (k.clone(), *v)).collect();
        if held.is_empty() {
            return;
        }
        let runs: Vec<String> = held.iter().map(|(r, _)| r.clone()).collect();
        let rows = match self.conn.get().await {
            Ok(c) => c
                .query("SELECT run_id, daemon_id, epoch FROM od_leases WHERE run_id = ANY($1)", &[&runs])
                .await
                .map_err(pg_error("reading run leases")),
            Err(e) => Err(e),
        };
        let rows = match rows {
            Ok(r) => r,
            Err(e) => return tracing::warn!("could not check this daemon's leases after a gap: {e}"),
        };
        let now: HashMap<String, (String, u64)> = rows
            .into_iter()
            .map(|r| (r.get::<_, String>(0), (r.get::<_, String>(1), r.get::<_, i64>(2) as u64)))
            .collect();
        let mut lost = Vec::new();
        for (run, epoch) in held {
            let holder = now.get(&run);
            if holder == Some(&(self.id.clone(), epoch)) {
                continue;
            }
            let by = holder.map_or("nobody".to_string(), |(d, e)| format!("daemon {d} at epoch {e}"));
            tracing::error!(
                "lease lost: run {run} (this daemon held epoch {epoch}; now held by {by}) — stopping its executor, recording nothing more"
            );
            lost.push((run, epoch));
        }
        self.report_lost(lost);
    }

    fn report_lost(&self, lost: Vec<(String, u64)>) {
        if lost.is_empty() {
            return;
        }
        {
            let mut held = self.held.lock().expect("held");
            for (run, epoch) in &lost {
                if held.get(run) == Some(epoch) {
                    held.remove(run);
                }
            }
        }
        if let Some(hook) = self.lost_hook.lock().expect("hook").as_ref() {
            hook(lost);
        }
    }

    /// Another process registered this daemon's id: every lease is lost, nothing is taken again.
    fn usurp(&self) {
        if self.usurped.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        tracing::error!(
            "daemon id {} was registered by another process: this daemon takes no lease any more and stops its executors",
            self.id
        );
        let held: Vec<(String, u64)> = self.held.lock().expect("held").drain().collect();
        for (run, epoch) in &held {
            tracing::error!("lease lost: run {run} (epoch {epoch}): this daemon's id was taken over");
        }
        if let Some(hook) = self.lost_hook.lock().expect("hook").as_ref() {
            hook(held);
        }
    }

    /// Whether this daemon may take a lease another daemon holds (with a stale heartbeat).
    fn may_steal(&self) -> bool {
        let quiet = self.quiet_until.lock().expect("quiet").is_some_and(|t| Instant::now() < t);
        let (last_ok, failing) = *self.beats.lock().expect("beats");
        !quiet && !failing && last_ok.elapsed() < self.ttl
    }

    fn gone(&self) -> bool {
        self.usurped.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl RunLeases for PgLeases {
    fn shared(&self) -> bool {
        true
    }

    fn daemon_id(&self) -> &str {
        &self.id
    }

    fn take(&self, run_id: &str) -> Result<Option<u64>, StoreError> {
        if self.gone() {
            return Ok(None);
        }
        let (c, id, run, ttl, steal) =
            (self.conn.clone(), self.id.clone(), run_id.to_string(), self.ttl_ms(), self.may_steal());
        let rows = self.log.call(async move {
            let c = c.get().await?;
            c.query(
                "INSERT INTO od_leases (run_id, daemon_id, epoch) VALUES ($1, $2, nextval('od_lease_epochs'))
                 ON CONFLICT (run_id) DO UPDATE SET daemon_id = EXCLUDED.daemon_id, epoch = EXCLUDED.epoch,
                                                    taken_at = now()
                 WHERE od_leases.daemon_id = EXCLUDED.daemon_id
                    OR NOT EXISTS (SELECT 1 FROM od_daemons d WHERE d.id = od_leases.daemon_id
                                   AND (NOT $4 OR d.heartbeat > now() - $3::bigint * interval '1 millisecond'))
                 RETURNING epoch",
                &[&run, &id, &ttl, &steal],
            )
            .await
            .map_err(pg_error("taking a run lease"))
        })?;
        let epoch = rows.first().map(|r| r.get::<_, i64>(0) as u64);
        if let Some(e) = epoch {
            self.held.lock().expect("held").insert(run_id.to_string(), e);
        }
        Ok(epoch)
    }

    fn free(&self, runs: &[String]) -> Result<Vec<String>, StoreError> {
        if runs.is_empty() || self.gone() {
            return Ok(Vec::new());
        }
        let (c, id, runs, ttl, steal) =
            (self.conn.clone(), self.id.clone(), runs.to_vec(), self.ttl_ms(), self.may_steal());
        let rows = self.log.call(async move {
            let c = c.get().await?;
            c.query(
                "SELECT r FROM unnest($1::text[]) AS r WHERE NOT EXISTS (
                   SELECT 1 FROM od_leases l JOIN od_daemons d ON d.id = l.daemon_id
                   WHERE l.run_id = r AND l.daemon_id <> $2
                     AND (NOT $4 OR d.heartbeat > now() - $3::bigint * interval '1 millisecond'))",
                &[&runs, &id, &ttl, &steal],
            )
            .await
            .map_err(pg_error("reading run leases"))
        })?;
        Ok(rows.into_iter().map(|r| r.get::<_, String>(0)).collect())
    }

    fn release(&self, run_id: &str) {
        let epoch = self.held.lock().expect("held").remove(run_id);
        let Some(epoch) = epoch else { return };
        let (c, id, run) = (self.conn.clone(), self.id.clone(), run_id.to_string());
        let r = self.log.call(async move {
            let c = c.get().await?;
            c.execute(
                "DELETE FROM od_leases WHERE run_id = $1 AND daemon_id = $2 AND epoch = $3",
                &[&run, &id, &(epoch as i64)],
            )
            .await
            .map_err(pg_error("releasing a run lease"))
        });
        if let Err(e) = r {
            tracing::warn!("could not release the lease of run {run_id} (it lapses with this daemon): {e}");
        }
    }

    fn retire(&self) {
        let (c, id, nonce) = (self.conn.clone(), self.id.clone(), self.nonce.clone());
        let r = self.log.call(async move {
            let c = c.get().await?;
            c.execute("DELETE FROM od_daemons WHERE id = $1 AND nonce = $2", &[&id, &nonce])
                .await
                .map_err(pg_error("retiring the daemon"))
        });
        if let Err(e) = r {
            tracing::warn!("could not retire this daemon's heartbeat (its leases lapse after the TTL): {e}");
        }
    }

    fn on_lost(&self, hook: LostHook) {
        *self.lost_hook.lock().expect("hook") = Some(hook);
    }
}
