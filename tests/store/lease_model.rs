//! A model of the lease protocol (issue 37), checked by property tests: three daemons, each run's
//! lease held by at most one (daemon, epoch), heartbeats against a database clock, and — as
//! injected events — time passing, daemons stalling and waking, the database going down and
//! coming back, daemons crashing and restarting, lease scans, executors appending and ending.
//! The protocol's rules are the model's (take only from a holder whose heartbeat is older than
//! the TTL; after a failed or late heartbeat, a quiet period of one TTL before stealing; a stale
//! or failing daemon steals nothing; a heartbeat back after a gap drops the executors whose lease
//! moved); the fence itself is the real one: epochs come from the embedded log's
//! [`LocalFences`], and every executor's append goes through the real writer, fenced.
//!
//! Invariants, checked on the real log after every sequence: in each run's stream, appends from
//! executors never interleave (the epochs of the executors' events never go back: once a newer
//! take appended, an older executor never does again), there is at most one `run_ended`, and it is
//! the stream's last event; and a lease never moves away from a daemon that neither stalled nor
//! crashed (a database outage is not a daemon's death).

use od::store::{Append, Fence, LocalFences, SledLog, StoreConfig, StoreError};
use od_events::runs::RunEnded;
use od_events::system::NoteRecorded;
use od_events::{Event, StreamId};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

const TTL: i64 = 1_000;
const DAEMONS: usize = 3;
const RUNS: usize = 2;

#[derive(Debug, Clone)]
enum Op {
    /// Time passes; every daemon that runs beats (if the database answers).
    Tick(i64),
    Stall(usize),
    Wake(usize),
    Outage,
    Recover,
    Crash(usize),
    Restart(usize),
    /// Daemon `d` scans for runs it may take; `resume` decides whether a taken run resumes here
    /// (an executor) or is ended (`daemon-lost`).
    Scan {
        d: usize,
        resume: bool,
    },
    /// Daemon `d`'s executor of run `r` appends (if it has one).
    Work {
        d: usize,
        r: usize,
    },
    /// Daemon `d`'s executor of run `r` records the run's end and releases its lease.
    End {
        d: usize,
        r: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let d = 0..DAEMONS;
    let r = 0..RUNS;
    prop_oneof![
        4 => (50i64..600).prop_map(Op::Tick),
        1 => d.clone().prop_map(Op::Stall),
        1 => d.clone().prop_map(Op::Wake),
        2 => Just(Op::Outage),
        2 => Just(Op::Recover),
        1 => d.clone().prop_map(Op::Crash),
        1 => d.clone().prop_map(Op::Restart),
        3 => (d.clone(), any::<bool>()).prop_map(|(d, resume)| Op::Scan { d, resume }),
        5 => (d.clone(), r.clone()).prop_map(|(d, r)| Op::Work { d, r }),
        1 => (d, r).prop_map(|(d, r)| Op::End { d, r }),
    ]
}

#[derive(Default, Clone)]
struct Daemon {
    stalled: bool,
    crashed: bool,
    /// Ever stalled or crashed (only then may its leases move).
    disturbed: bool,
    /// Its last heartbeat, on the database's clock.
    beat_at: i64,
    /// Its own view: the last good heartbeat, and whether the last one tried failed.
    last_ok: i64,
    failing: bool,
    quiet_until: i64,
    /// Its executors: run → epoch.
    executors: HashMap<usize, u64>,
}

impl Daemon {
    fn runs(&self) -> bool {
        !self.stalled && !self.crashed
    }

    fn may_steal(&self, now: i64) -> bool {
        now >= self.quiet_until && !self.failing && now - self.last_ok < TTL
    }
}

struct World {
    now: i64,
    db_up: bool,
    daemons: Vec<Daemon>,
    /// The lease table: run → (daemon, epoch); epochs from the log's own fences.
    leases: HashMap<usize, (usize, u64)>,
    fences: Arc<LocalFences>,
    store: od::store::Store,
}

fn stream(r: usize) -> StreamId {
    StreamId::new(format!("run:r{r}")).unwrap()
}

fn fence(r: usize, d: usize, epoch: u64) -> Option<Fence> {
    Some(Fence { run_id: format!("r{r}"), daemon_id: format!("d{d}"), epoch })
}

impl World {
    fn new(store: od::store::Store) -> World {
        let fences = store.local_fences().unwrap();
        World { now: 0, db_up: true, daemons: vec![Daemon::default(); DAEMONS], leases: HashMap::new(), fences, store }
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Tick(ms) => {
                self.now += ms;
                for d in 0..DAEMONS {
                    self.beat(d);
                }
            }
            Op::Stall(d) => {
                self.daemons[d].stalled = true;
                self.daemons[d].disturbed = true;
            }
            Op::Wake(d) => self.daemons[d].stalled = false,
            Op::Outage => self.db_up = false,
            Op::Recover => self.db_up = true,
            Op::Crash(d) => {
                let x = &mut self.daemons[d];
                (x.crashed, x.disturbed) = (true, true);
                x.executors.clear();
            }
            Op::Restart(d) if self.daemons[d].crashed => {
                let x = &mut self.daemons[d];
                // A new process steals nothing for a TTL (others may be just back from an outage).
                (x.crashed, x.stalled, x.failing, x.last_ok, x.quiet_until) =
                    (false, false, false, self.now, self.now + TTL);
                if self.db_up {
                    x.beat_at = self.now;
                }
            }
            Op::Restart(_) => {}
            Op::Scan { d, resume } => self.scan(d, resume),
            Op::Work { d, r } => self.work(d, r, false),
            Op::End { d, r } => self.work(d, r, true),
        }
    }

    /// A heartbeat of daemon `d`: back after a failure or a gap, a quiet period, and the
    /// executors whose lease moved are dropped.
    fn beat(&mut self, d: usize) {
        if !self.daemons[d].runs() {
            return;
        }
        if !self.db_up {
            self.daemons[d].failing = true;
            return;
        }
        let now = self.now;
        let leases = self.leases.clone();
        let x = &mut self.daemons[d];
        if x.failing || now - x.last_ok > TTL {
            x.quiet_until = now + TTL;
            x.executors.retain(|r, e| leases.get(r) == Some(&(d, *e)));
        }
        (x.beat_at, x.last_ok, x.failing) = (now, now, false);
    }

    fn scan(&mut self, d: usize, resume: bool) {
        if !self.daemons[d].runs() || !self.db_up {
            return;
        }
        for r in 0..RUNS {
            if self.ended(r) || self.daemons[d].executors.contains_key(&r) {
                continue;
            }
            let free = match self.leases.get(&r) {
                None => true,
                Some((h, _)) if *h == d => true,
                Some((h, _)) => self.now - self.daemons[*h].beat_at > TTL && self.daemons[d].may_steal(self.now),
            };
            if !free {
                continue;
            }
            if let Some((h, _)) = self.leases.get(&r) {
                assert!(
                    *h == d || self.daemons[*h].disturbed,
                    "run r{r}'s lease moved from live daemon d{h} to d{d} at {}",
                    self.now
                );
            }
            let epoch = self.fences.take(&format!("r{r}"));
            self.leases.insert(r, (d, epoch));
            if resume {
                self.daemons[d].executors.insert(r, epoch);
            } else {
                self.daemons[d].executors.insert(r, epoch);
                self.work(d, r, true);
            }
        }
    }

    fn ended(&self, r: usize) -> bool {
        let mut ended = false;
        self.store
            .fold_stream(stream(r).as_str(), &mut |b| {
                ended |= od_events::FrameRef::parse(b).unwrap().kind() == od_events::EventKind::RunEnded.code();
            })
            .unwrap();
        ended
    }

    /// Daemon `d`'s executor of `r` appends (`end`: its end, then it releases the lease).
    fn work(&mut self, d: usize, r: usize, end: bool) {
        if !self.daemons[d].runs() || !self.db_up {
            return;
        }
        let Some(&epoch) = self.daemons[d].executors.get(&r) else { return };
        let event = match end {
            false => Event::NoteRecorded(NoteRecorded { text: format!("d{d}:{epoch}"), tags: vec![] }),
            true => Event::RunEnded(RunEnded {
                run_id: format!("r{r}"),
                status: "succeeded".into(),
                code: 0,
                reason: format!("d{d}:{epoch}"),
                failure_category: od_events::vocab::FailureCategory::None,
                artifact_count: 0,
                ended_at: self.now,
            }),
        };
        match self.store.append(Append::new(stream(r), vec![event]).fenced(fence(r, d, epoch))) {
            Ok(_) if end => {
                self.daemons[d].executors.remove(&r);
                self.leases.remove(&r);
                self.fences.release(&format!("r{r}"));
            }
            Ok(_) => {}
            Err(StoreError::LeaseLost { .. } | StoreError::RunEnded { .. }) => {
                // Lease lost (or the run is over): the executor stops, recording nothing.
                self.daemons[d].executors.remove(&r);
            }
            Err(e) => panic!("unexpected refusal: {e}"),
        }
    }

    /// The invariants, on what the log holds.
    fn check(&self) {
        for r in 0..RUNS {
            let mut epochs: Vec<u64> = Vec::new();
            let mut kinds = Vec::new();
            self.store
                .fold_stream(stream(r).as_str(), &mut |b| {
                    let f = od_events::FrameRef::parse(b).unwrap();
                    kinds.push(f.kind());
                    let text = match od_migrations::decode_any(f.kind(), f.schema(), f.payload()).unwrap() {
                        Event::NoteRecorded(n) => n.text,
                        Event::RunEnded(e) => e.reason,
                        other => panic!("unexpected {other:?}"),
                    };
                    epochs.push(text.split(':').nth(1).unwrap().parse().unwrap());
                })
                .unwrap();
            assert!(epochs.windows(2).all(|w| w[0] <= w[1]), "r{r}: executors interleaved: epochs {epochs:?}");
            let end = od_events::EventKind::RunEnded.code();
            let ends = kinds.iter().filter(|k| **k == end).count();
            assert!(ends <= 1, "r{r}: {ends} ends");
            if ends == 1 {
                assert_eq!(kinds.last(), Some(&end), "r{r}: events after its end");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn at_most_one_executor_appends_to_a_run_and_each_run_ends_once(ops in prop::collection::vec(op(), 1..90)) {
        let dir = tempfile::tempdir().unwrap();
        let store: od::store::Store = SledLog::open(StoreConfig::new(dir.path())).unwrap();
        let mut w = World::new(store);
        for op in &ops {
            w.apply(op);
        }
        w.check();
    }
}

/// The scenario as one fixed sequence: d0 executes r0 and stalls; d1 takes it over after
/// the TTL and ends it; d0 wakes and tries to go on — refused, nothing lands after the end.
#[test]
fn a_stalled_executor_cannot_append_after_the_run_was_taken_over_and_ended() {
    let dir = tempfile::tempdir().unwrap();
    let store: od::store::Store = SledLog::open(StoreConfig::new(dir.path())).unwrap();
    let mut w = World::new(store);
    let ops = [
        Op::Tick(100),
        Op::Scan { d: 0, resume: true },
        Op::Work { d: 0, r: 0 },
        Op::Stall(0),
        Op::Tick(600),
        Op::Tick(600),
        Op::Scan { d: 1, resume: false },
        Op::Wake(0),
        Op::Work { d: 0, r: 0 },
        Op::End { d: 0, r: 0 },
    ];
    for op in &ops {
        w.apply(op);
    }
    w.check();
    assert!(w.ended(0));
    assert!(!w.daemons[0].executors.contains_key(&0), "the stalled executor stopped");
    let mut n = 0;
    w.store.fold_stream("run:r0", &mut |_| n += 1).unwrap();
    assert_eq!(n, 2, "d0's note and d1's end, nothing of d0 after");
}

/// A database outage longer than the TTL: every daemon's heartbeat is stale when it comes back,
/// yet none takes another's lease (each is quiet for a TTL after its first good heartbeat, and
/// steals nothing while its own heartbeats fail).
#[test]
fn a_database_outage_moves_no_lease_between_live_daemons() {
    let dir = tempfile::tempdir().unwrap();
    let store: od::store::Store = SledLog::open(StoreConfig::new(dir.path())).unwrap();
    let mut w = World::new(store);
    let ops = [
        Op::Tick(100),
        Op::Scan { d: 0, resume: true },
        Op::Outage,
        Op::Tick(600),
        Op::Tick(600),
        Op::Tick(600),
        Op::Recover,
        Op::Scan { d: 1, resume: false },
        Op::Tick(100),
        Op::Scan { d: 2, resume: false },
        Op::Tick(600),
        Op::Scan { d: 1, resume: false },
        Op::Work { d: 0, r: 0 },
        Op::End { d: 0, r: 0 },
    ];
    for op in &ops {
        w.apply(op);
    }
    w.check();
    let mut n = 0;
    w.store.fold_stream("run:r0", &mut |_| n += 1).unwrap();
    assert_eq!(n, 2, "d0 kept its run through the outage: its note and its end");
}

/// The take-over resumes the run: the new executor appends, then the stalled one wakes and tries
/// to append before its first heartbeat — the fence refuses it, so the two never interleave.
#[test]
fn a_woken_executor_cannot_interleave_with_the_one_that_resumed_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let store: od::store::Store = SledLog::open(StoreConfig::new(dir.path())).unwrap();
    let mut w = World::new(store);
    let ops = [
        Op::Tick(100),
        Op::Scan { d: 0, resume: true },
        Op::Work { d: 0, r: 0 },
        Op::Stall(0),
        Op::Tick(600),
        Op::Tick(600),
        Op::Scan { d: 1, resume: true },
        Op::Work { d: 1, r: 0 },
        Op::Wake(0),
        Op::Work { d: 0, r: 0 },
        Op::Work { d: 1, r: 0 },
        Op::End { d: 1, r: 0 },
    ];
    for op in &ops {
        w.apply(op);
    }
    w.check();
    let mut n = 0;
    w.store.fold_stream("run:r0", &mut |_| n += 1).unwrap();
    assert_eq!(n, 4, "d0's note, then only d1's: two notes and the end");
}
