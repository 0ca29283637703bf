//! Crash safety: a child process appends under load from several threads and is killed with
//! SIGKILL at a random point, over and over, on the same data dir. Every line `ack …` the child
//! printed after a durable ack is the oracle: each acknowledged event must be in the log exactly
//! once, at the acknowledged seqs, in order, with the right stream, version and text; the log must
//! stay gapless and its hash chain must verify. Appends that were not acknowledged may be present
//! or not, but only whole.
//!
//! The child is this test binary re-executed with `--exact crash::child_appender --ignored`; the data dir
//! reaches it through [`DIR_ENV`]. Set `OD_CRASH_SEED` to replay a particular run.

use crate::common;
mod damage;
use common::*;
use od::store::{verify_dir, Append, Expected, SledLog, Store, StoreConfig, StoreError};
use od_events::Event;
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const DIR_ENV: &str = "OD_CRASH_CHILD_DIR";
const CYCLE_ENV: &str = "OD_CRASH_CHILD_CYCLE";
const SEED_ENV: &str = "OD_CRASH_CHILD_SEED";
/// Kill cycles per run.
const CYCLES: u64 = 40;
/// Appending threads in the child.
const THREADS: u64 = 4;
/// Streams the child appends to.
const STREAMS: u64 = 6;
/// Longest filler in one note's text (frames are ~130–450 bytes). A child lives too briefly to
/// fill a 16 MiB segment, so kills during a segment roll-over are not exercised here (roll-over
/// itself is covered by `store_basics`).
const MAX_PAD: u64 = 300;
/// A child that is never killed (the parent died) stops on its own after this long.
const CHILD_LIFETIME: Duration = Duration::from_secs(30);
/// How long the parent waits for a child's first ack before failing.
const FIRST_ACK_TIMEOUT: Duration = Duration::from_secs(30);

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        r.next();
        r
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn stream_name(i: u64) -> String {
    format!("note:crash-{i}")
}

/// `<op>#<index>/<count>/<pad>:` followed by `pad` filler bytes derived from op and index.
fn note_text(op: &str, index: usize, count: usize, pad: usize) -> String {
    let fill = (b'a' + (index % 26) as u8) as char;
    let mut t = format!("{op}#{index}/{count}/{pad}:");
    t.extend(std::iter::repeat_n(fill, pad));
    t
}

/// Parses [`note_text`] back, checking the filler: `(op, index, count)`.
fn parse_text(t: &str) -> Result<(String, usize, usize), String> {
    let (head, fill) = t.split_once(':').ok_or("no ':'")?;
    let (op, rest) = head.split_once('#').ok_or("no '#'")?;
    let mut parts = rest.split('/').map(|p| p.parse::<usize>());
    let (Some(Ok(index)), Some(Ok(count)), Some(Ok(pad)), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("bad index/count/pad".into());
    };
    if note_text(op, index, count, pad) != t {
        return Err(format!("text of {op}#{index} is damaged ({} filler bytes)", fill.len()));
    }
    Ok((op.to_string(), index, count))
}

// ---------------------------------------------------------------------------------------------
// The child.
// ---------------------------------------------------------------------------------------------

/// Not a test on its own: the process `crash_cycles` starts and kills. Returns at once unless
/// [`DIR_ENV`] is set.
#[test]
#[ignore = "child process of crash_cycles"]
fn child_appender() {
    let Some(dir) = std::env::var_os(DIR_ENV) else {
        return;
    };
    let env_u64 = |k: &str| -> u64 {
        std::env::var(k)
            .unwrap_or_else(|_| panic!("{k} is not set"))
            .parse()
            .unwrap_or_else(|_| panic!("{k} is not a number"))
    };
    let (cycle, seed) = (env_u64(CYCLE_ENV), env_u64(SEED_ENV));
    let store = open_store(Path::new(&dir)).unwrap_or_else(|e| panic!("child: open failed: {e}"));
    let deadline = Instant::now() + CHILD_LIFETIME;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let store = &store;
            s.spawn(move || child_thread(store, cycle, t, seed, deadline));
        }
    });
}

fn child_thread(store: &Store, cycle: u64, t: u64, seed: u64, deadline: Instant) {
    let mut rng = Rng::new(seed ^ (t + 1).wrapping_mul(0xA076_1D64_78BD_642F));
    let say = |line: String| {
        let mut out = std::io::stdout().lock();
        out.write_all(line.as_bytes()).expect("stdout");
        out.flush().expect("stdout");
    };
    let mut i = 0u64;
    while Instant::now() < deadline {
        let op = format!("c{cycle}t{t}n{i}");
        i += 1;
        let stream = stream_name(rng.below(STREAMS));
        let n = 1 + rng.below(8) as usize;
        let events: Vec<Event> = (0..n).map(|k| note(&note_text(&op, k, n, rng.below(MAX_PAD + 1) as usize))).collect();
        let mut append = Append::new(sid(&stream), events).op_id(op.clone());
        let mut want_first_version = None;
        if rng.below(4) == 0 {
            let v = store.stream_version(&stream).expect("stream_version");
            append = append.expect(v.map_or(Expected::NoStream, Expected::Exactly));
            want_first_version = Some(v.map_or(0, |v| v + 1));
        }
        match store.append(append) {
            Ok(r) => {
                assert!(!r.deduplicated, "{op}: fresh op id reported as duplicate");
                assert_eq!(r.last_seq - r.first_seq + 1, n as u64, "{op}: {r:?}");
                assert_eq!(r.last_version - r.first_version + 1, n as u64, "{op}: {r:?}");
                if let Some(v) = want_first_version {
                    assert_eq!(r.first_version, v, "{op}: expected-version append landed elsewhere");
                }
                say(format!("ack {op} {stream} {} {} {}\n", r.first_seq, r.last_seq, r.first_version));
            }
            Err(StoreError::Conflict { .. }) if want_first_version.is_some() => {
                say(format!("conflict {op}\n"));
            }
            Err(e) => panic!("child: append {op} failed: {e}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The parent.
// ---------------------------------------------------------------------------------------------

fn open_store(dir: &Path) -> Result<Store, StoreError> {
    let mut cfg = StoreConfig::new(dir);
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    SledLog::open(cfg).map(|s| s as Store)
}

/// One acknowledged append, as the child printed it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ack {
    stream: String,
    first_seq: u64,
    last_seq: u64,
    first_version: u64,
}

/// Everything the children acknowledged (or refused) so far.
#[derive(Default)]
struct Oracle {
    acks: HashMap<String, Ack>,
    conflicts: HashSet<String>,
    max_acked_seq: u64,
}

impl Oracle {
    fn take_line(&mut self, line: &str) {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts.as_slice() {
            ["ack", op, stream, first, last, version] => {
                let num = |s: &str| s.parse::<u64>().unwrap_or_else(|_| panic!("bad line {line:?}"));
                let ack = Ack {
                    stream: stream.to_string(),
                    first_seq: num(first),
                    last_seq: num(last),
                    first_version: num(version),
                };
                self.max_acked_seq = self.max_acked_seq.max(ack.last_seq);
                let prev = self.acks.insert(op.to_string(), ack);
                assert!(prev.is_none(), "op {op} acknowledged twice");
            }
            ["conflict", op] => {
                self.conflicts.insert(op.to_string());
            }
            _ => {} // libtest's own output
        }
    }
}

/// Kills the child if the parent panics, so no orphan keeps appending to the data dir.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What one frame in the log says.
struct Seen {
    seq: u64,
    stream: String,
    version: u64,
    index: usize,
    count: usize,
}

/// Where a whole append (all frames sharing an op id) sits in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Landed {
    stream: String,
    first_seq: u64,
    last_seq: u64,
    first_version: u64,
}

/// What the checks so far established about the log.
#[derive(Debug, Default)]
struct Model {
    /// Frames `1..=upto` were decoded and checked.
    upto: u64,
    /// The hash of frame `upto`. It pins the whole checked prefix: every frame's hash covers the
    /// previous frame's hash, so if `verify` passes and frame `upto` still has this hash, frames
    /// `1..=upto` are byte for byte the ones checked before.
    head: Option<od_events::Hash>,
    /// Every append in the log, by op id.
    landed: HashMap<String, Landed>,
    /// Per stream, the version the next event must have.
    next_version: HashMap<String, u64>,
}

impl Model {
    /// Decodes and checks frames `upto+1..=last`: gapless seqs and stream versions, op ids that
    /// match the texts, and appends that are whole, contiguous and present exactly once.
    fn extend(&mut self, store: &Store, last: u64, cycle: u64) {
        let frames = store.read_from(self.upto + 1, usize::MAX).expect("read_from");
        assert_eq!(
            frames.len() as u64,
            last - self.upto,
            "cycle {cycle}: frames after {} vs last_seq {last}",
            self.upto
        );
        let mut groups: Vec<(String, Vec<Seen>)> = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            let stored = f.decode().unwrap_or_else(|e| panic!("cycle {cycle}: decode: {e}"));
            let env = stored.envelope;
            assert_eq!(env.seq, self.upto + 1 + i as u64, "cycle {cycle}: global order has a gap");
            let v = self.next_version.entry(env.stream.clone()).or_insert(0);
            assert_eq!(env.version, *v, "cycle {cycle}: seq {}: stream {} has a version gap", env.seq, env.stream);
            *v += 1;
            let Event::NoteRecorded(note) = stored.event else {
                panic!("cycle {cycle}: seq {}: unexpected event", env.seq)
            };
            let (op, index, count) =
                parse_text(&note.text).unwrap_or_else(|e| panic!("cycle {cycle}: seq {}: {e}", env.seq));
            assert_eq!(env.op_id.as_deref(), Some(op.as_str()), "cycle {cycle}: seq {}: op id", env.seq);
            let seen = Seen { seq: env.seq, stream: env.stream, version: env.version, index, count };
            match groups.last_mut() {
                Some((o, g)) if *o == op => g.push(seen),
                _ => groups.push((op, vec![seen])),
            }
        }
        for (op, seen) in groups {
            let (first, count) = (&seen[0], seen[0].count);
            assert_eq!(
                seen.len(),
                count,
                "cycle {cycle}: append {op} at seq {} is not whole: {} of its {count} events",
                first.seq,
                seen.len()
            );
            for (k, s) in seen.iter().enumerate() {
                assert_eq!(
                    (s.index, s.seq, s.version, s.stream.as_str()),
                    (k, first.seq + k as u64, first.version + k as u64, first.stream.as_str()),
                    "cycle {cycle}: append {op} is not one contiguous, ordered run"
                );
            }
            let l = Landed {
                stream: first.stream.clone(),
                first_seq: first.seq,
                last_seq: first.seq + count as u64 - 1,
                first_version: first.version,
            };
            if let Some(before) = self.landed.insert(op.clone(), l) {
                panic!("cycle {cycle}: append {op} is in the log twice (also at {before:?})");
            }
        }
        self.upto = last;
        self.head = frames.last().map(|f| *f.view().hash()).or(self.head);
    }
}

/// `od log verify` on a dir (the store closed): must find nothing wrong. Returns frames verified.
fn verify_closed(data: &Path, cycle: u64, when: &str) -> u64 {
    let r = verify_dir(data).unwrap_or_else(|e| panic!("cycle {cycle}: verify_dir {when}: {e}"));
    assert!(r.ok(), "cycle {cycle}: verify_dir {when}: {r:?}");
    r.verified
}

/// Reopens the crashed dir (recovery) and checks it against the oracle and the model.
fn check(data: &Path, oracle: &Oracle, model: &mut Model, rng: &mut Rng, cycle: u64) {
    let store = open_store(data).unwrap_or_else(|e| panic!("cycle {cycle}: reopen failed: {e}"));
    let last = store.last_seq();
    assert!(
        last >= oracle.max_acked_seq,
        "cycle {cycle}: log ends at {last} but seq {} was acknowledged",
        oracle.max_acked_seq
    );
    assert!(last >= model.upto, "cycle {cycle}: log shrank from {} to {last}", model.upto);

    // The whole chain verifies, and the prefix checked in earlier cycles is unchanged.
    let report = store.verify().expect("verify");
    assert!(report.ok(), "cycle {cycle}: verify: {report:?}");
    assert_eq!(report.verified, last, "cycle {cycle}: verify walked {} of {last}", report.verified);
    if let Some(head) = model.head {
        let f = store.read_from(model.upto, 1).expect("read_from");
        assert_eq!(
            (f[0].seq(), f[0].view().hash()),
            (model.upto, &head),
            "cycle {cycle}: frame {} changed since it was checked",
            model.upto
        );
    }
    model.extend(&(store.clone() as od::store::Store), last, cycle);

    // Reading by stream agrees with the global walk.
    for s in 0..STREAMS {
        let name = stream_name(s);
        let versions: Vec<u64> =
            store.read_stream(&name, 0, usize::MAX).expect("read_stream").iter().map(|f| f.view().version()).collect();
        let n = model.next_version.get(&name).copied().unwrap_or(0);
        assert_eq!(versions, (0..n).collect::<Vec<_>>(), "cycle {cycle}: stream {name}");
        let head = store.stream_version(&name).expect("stream_version");
        assert_eq!(head, n.checked_sub(1), "cycle {cycle}: head of {name}");
    }

    // Every acknowledged append is there, exactly where its ack said; refused ones are not.
    for (op, ack) in &oracle.acks {
        let got = model
            .landed
            .get(op)
            .unwrap_or_else(|| panic!("cycle {cycle}: acknowledged append {op} {ack:?} is missing"));
        assert_eq!(
            (got.stream.as_str(), got.first_seq, got.last_seq, got.first_version),
            (ack.stream.as_str(), ack.first_seq, ack.last_seq, ack.first_version),
            "cycle {cycle}: acknowledged append {op} is elsewhere"
        );
    }
    for op in &oracle.conflicts {
        assert!(!model.landed.contains_key(op), "cycle {cycle}: refused append {op} was written");
    }

    // Idempotency survives the crash: re-sending an acknowledged op id (and, when there is one,
    // the op id of an append that landed but whose ack the client never saw) returns the original
    // result and writes nothing.
    let pick = |rng: &mut Rng, mut ops: Vec<&String>| {
        ops.sort();
        (!ops.is_empty()).then(|| ops[rng.below(ops.len() as u64) as usize].clone())
    };
    let acked = pick(rng, oracle.acks.keys().collect());
    let unacked = pick(rng, model.landed.keys().filter(|op| !oracle.acks.contains_key(*op)).collect());
    for op in acked.into_iter().chain(unacked) {
        let l = &model.landed[&op];
        let r = store
            .append(Append::new(sid(&l.stream), vec![note("retry after crash")]).op_id(op.clone()))
            .unwrap_or_else(|e| panic!("cycle {cycle}: re-sending {op}: {e}"));
        assert!(r.deduplicated, "cycle {cycle}: re-sent {op} was written again: {r:?}");
        assert_eq!(
            (r.stream.as_str(), r.first_seq, r.last_seq, r.first_version),
            (l.stream.as_str(), l.first_seq, l.last_seq, l.first_version),
            "cycle {cycle}: re-sent {op} returned another result"
        );
    }
    assert_eq!(store.last_seq(), last, "cycle {cycle}: a re-sent op id wrote something");

    drop(store);
    assert_eq!(verify_closed(data, cycle, "after a clean close"), last);
}

#[test]
fn crash_cycles() {
    let seed = std::env::var("OD_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x0D_C4A5_u64);
    eprintln!("crash test: seed {seed} (set OD_CRASH_SEED to replay)");
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let child_err = tmp.path().join("child.stderr");
    let exe = std::env::current_exe().unwrap();
    let mut rng = Rng::new(seed);
    let mut oracle = Oracle::default();
    let mut model = Model::default();
    let (mut checked, mut early_kills, mut skipped_before) = (0, 0, false);
    for cycle in 0..CYCLES {
        let child = Command::new(&exe)
            .args(["--exact", "crash::child_appender", "--nocapture", "--ignored", "--test-threads=1"])
            .env(DIR_ENV, &data)
            .env(CYCLE_ENV, cycle.to_string())
            .env(SEED_ENV, rng.next().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&child_err).unwrap())
            .spawn()
            .expect("spawn child");
        let mut child = KillOnDrop(child);
        let stdout = child.0.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut line = String::new();
            // Only whole lines count: a line cut by the kill is not an ack a client saw.
            while matches!(r.read_line(&mut line), Ok(n) if n > 0) {
                if line.ends_with('\n') && tx.send(line.trim_end().to_string()).is_err() {
                    break;
                }
                line.clear();
            }
        });
        let stderr = || std::fs::read_to_string(&child_err).unwrap_or_default();

        let mut lines = Vec::new();
        if rng.below(8) == 0 {
            // Kill early: while the child starts, opens and recovers, or has barely begun.
            early_kills += 1;
            std::thread::sleep(Duration::from_millis(rng.below(400)));
        } else {
            loop {
                match rx.recv_timeout(FIRST_ACK_TIMEOUT) {
                    Ok(l) => {
                        let ack = l.starts_with("ack ");
                        lines.push(l);
                        if ack {
                            break;
                        }
                    }
                    Err(e) => panic!("cycle {cycle}: no ack from the child ({e}); its stderr:\n{}", stderr()),
                }
            }
            std::thread::sleep(Duration::from_millis(rng.below(200)));
        }
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("cycle {cycle}: the child exited by itself ({status}); its stderr:\n{}", stderr());
        }
        child.0.kill().expect("SIGKILL the child");
        let status = child.0.wait().expect("wait for the child");
        assert_eq!(status.signal(), Some(libc::SIGKILL), "cycle {cycle}: child status {status}");
        reader.join().unwrap();
        lines.extend(rx.try_iter());
        for l in &lines {
            oracle.take_line(l);
        }

        // Now and then leave the crash unrecovered, so that the next child recovers on top of it
        // (the records since its checkpoint then span several killed processes). `od log verify` must still find a
        // crashed, unrecovered dir sound.
        let skip = !skipped_before && cycle + 1 < CYCLES && rng.below(4) == 0;
        skipped_before = skip;
        if skip {
            verify_closed(&data, cycle, "on the crashed, unrecovered dir");
        } else {
            check(&data, &oracle, &mut model, &mut rng, cycle);
            checked += 1;
        }
    }

    // Finally, check the whole log again from scratch, not incrementally.
    let store = open_store(&data).unwrap();
    let mut fresh = Model::default();
    fresh.extend(&(store.clone() as od::store::Store), store.last_seq(), CYCLES);
    assert_eq!(fresh.landed, model.landed);
    assert_eq!(fresh.next_version, model.next_version);
    assert_eq!(fresh.head, model.head);
    eprintln!(
        "crash test: {CYCLES} kills ({early_kills} early), {checked} checked recoveries, \
         {} acknowledged appends, {} refused, {} appends and {} events in the log, {:.1?}",
        oracle.acks.len(),
        oracle.conflicts.len(),
        model.landed.len(),
        model.upto,
        started.elapsed()
    );
    assert!(oracle.acks.len() > 100, "too little load to mean anything");
}
