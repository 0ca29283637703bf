//! The fuzz harness: a counting global allocator, a seeded PRNG, the corpus on disk, and the loop
//! that replays the corpus and then runs seeded mutations of it, each input on its own thread with
//! a deadline (a hang fails) and a peak-memory bound (an allocation sized by the input fails).
//!
//! Knobs (environment): `OD_FUZZ_ITERS` mutations per target (default: the target's own, a few
//! seconds of debug build in all), `OD_FUZZ_SEED` a number or `random` (default: a fixed seed, so a
//! run is reproducible; the seed in use is printed). A failing input is written under
//! `CARGO_TARGET_TMPDIR/fuzz-failures/<target>/` and named in the panic message: copy it into
//! `tests/fixtures/fuzz/<target>/` to keep it as a regression.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

// ---- memory ----------------------------------------------------------------------------------------

/// The test binary's allocator: `System`, counting live bytes and their peak (all threads).
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let now = LIVE.fetch_add(n, Relaxed) + n;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: every call is forwarded to `System` with the same arguments; the counters are atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new >= l.size() {
                grew(new - l.size());
            } else {
                LIVE.fetch_sub(l.size() - new, Relaxed);
            }
        }
        q
    }
}

thread_local! {
    /// The longest any input of the current target took (for the summary line).
    static SLOWEST: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}

/// Targets run one at a time: the allocation counters are process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the process to one target at a time (the test harness runs tests on parallel threads).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

// ---- randomness ------------------------------------------------------------------------------------

/// splitmix64: small, seedable, good enough to pick mutations.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    /// True with probability `1/n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The seed of this run: `OD_FUZZ_SEED` (a number, or `random`), else a fixed one.
pub fn seed() -> u64 {
    match std::env::var("OD_FUZZ_SEED").ok().as_deref().map(str::trim) {
        None | Some("") => 0x0D_F0_22_5E_ED,
        Some("random") => {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            t.as_nanos() as u64 ^ ((std::process::id() as u64) << 32)
        }
        Some(n) => n.parse().unwrap_or_else(|_| panic!("OD_FUZZ_SEED={n:?}: a number or `random`")),
    }
}

/// Mutations per target: `OD_FUZZ_ITERS` when set, else `default`.
pub fn iterations(default: usize) -> usize {
    match std::env::var("OD_FUZZ_ITERS").ok() {
        Some(n) if !n.trim().is_empty() => n.trim().parse().unwrap_or_else(|_| panic!("OD_FUZZ_ITERS={n:?}")),
        _ => default,
    }
}

// ---- corpus ----------------------------------------------------------------------------------------

/// `tests/fixtures/fuzz/<target>`.
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz").join(target)
}

/// Marker line between the files of a packed folder (see [`pack`]).
pub const FILE_MARK: &str = "=== file: ";

/// A folder's files as one input: `=== file: <path>\n<bytes>\n` for each, sorted by path.
pub fn pack(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (path, bytes) in files {
        out.extend_from_slice(format!("{FILE_MARK}{path}\n").as_bytes());
        out.extend_from_slice(bytes);
        out.push(b'\n');
    }
    out
}

/// The inverse of [`pack`] (lenient: bytes before the first marker are dropped).
pub fn unpack(input: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for line in input.split_inclusive(|b| *b == b'\n') {
        match line.strip_prefix(FILE_MARK.as_bytes()) {
            Some(name) => files.push((String::from_utf8_lossy(name).trim_end().to_string(), Vec::new())),
            None => {
                if let Some((_, bytes)) = files.last_mut() {
                    bytes.extend_from_slice(line);
                }
            }
        }
    }
    for (_, bytes) in &mut files {
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
        }
    }
    files
}

fn read_tree(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            read_tree(root, &p, out);
        } else {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            out.push((rel, std::fs::read(&p).unwrap()));
        }
    }
}

/// The checked-in corpus of `target`, sorted by name: a file is one input, a folder is packed.
pub fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let Ok(rd) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    entries
        .into_iter()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            if e.path().is_dir() {
                let mut files = Vec::new();
                read_tree(&e.path(), &e.path(), &mut files);
                (name, pack(&files))
            } else {
                (name, std::fs::read(e.path()).unwrap())
            }
        })
        .collect()
}

// ---- running one input -----------------------------------------------------------------------------

/// What went wrong with one input.
pub enum Failure {
    /// The code under test panicked (the message).
    Panic(String),
    /// It did not finish within the deadline.
    Hang(Duration),
    /// Its peak live heap (bytes above what was live before) exceeded the bound.
    Memory { peak: usize, bound: usize },
}

impl std::fmt::Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Panic(m) => write!(f, "panicked: {m}"),
            Failure::Hang(d) => write!(f, "did not finish within {d:?}"),
            Failure::Memory { peak, bound } => write!(f, "peak heap {peak} bytes, over the bound of {bound}"),
        }
    }
}

/// How one target's inputs are bounded.
#[derive(Clone, Copy)]
pub struct Bounds {
    /// Generous: catches hangs, asserts nothing about speed.
    pub deadline: Duration,
    /// Peak heap allowed for an input of this many bytes.
    pub memory: fn(usize) -> usize,
}

pub type Check = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// Runs `check(input)` on its own thread within `bounds`; the peak heap it reached on success.
pub fn run_one(check: &Check, input: &[u8], bounds: Bounds) -> Result<usize, Failure> {
    let started = Instant::now();
    let (tx, rx) = mpsc::channel();
    let (check, data) = (check.clone(), input.to_vec());
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let handle = std::thread::Builder::new()
        .name("fuzz-input".into())
        .spawn(move || {
            check(&data);
            drop(data);
            let _ = tx.send(());
        })
        .expect("spawn");
    match rx.recv_timeout(bounds.deadline) {
        Ok(()) => {
            let _ = handle.join();
        }
        Err(mpsc::RecvTimeoutError::Timeout) => return Err(Failure::Hang(bounds.deadline)),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let payload = handle.join().expect_err("the check ended without finishing: it panicked");
            let msg = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "(non-string panic)".into());
            return Err(Failure::Panic(msg));
        }
    }
    let peak = PEAK.load(Relaxed).saturating_sub(base);
    SLOWEST.with(|s| s.set(s.get().max(started.elapsed())));
    let bound = (bounds.memory)(input.len());
    if peak > bound {
        return Err(Failure::Memory { peak, bound });
    }
    Ok(peak)
}

fn preview(input: &[u8]) -> String {
    let shown = &input[..input.len().min(300)];
    let more = if input.len() > shown.len() { format!(" … ({} bytes)", input.len()) } else { String::new() };
    format!("{}{more}", shown.escape_ascii())
}

fn save_failure(target: &str, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures").join(target);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("crash-{}", &blake3::hash(input).to_hex()[..16]));
    std::fs::write(&path, input).unwrap();
    path
}

// ---- the loop --------------------------------------------------------------------------------------

/// Derives a new input from a corpus entry (the rest of the corpus given for splicing).
pub type Mutator = fn(&mut Rng, &[u8], &[Vec<u8>]) -> Vec<u8>;

/// One fuzz target.
pub struct Target {
    /// Corpus folder name under `tests/fixtures/fuzz/` and the name in messages.
    pub name: &'static str,
    /// Mutations run by default (`OD_FUZZ_ITERS` overrides).
    pub iterations: usize,
    pub bounds: Bounds,
    /// Seeds built by the test (e.g. from bundled plugins), replayed after the checked-in corpus.
    pub seeds: Vec<(String, Vec<u8>)>,
    /// How to derive a new input from a corpus entry.
    pub mutate: Mutator,
}

/// What a run did, for the summary line.
pub struct Summary {
    pub replayed: usize,
    pub mutated: usize,
    pub max_peak: usize,
    pub elapsed: Duration,
    pub slowest: Duration,
}

/// Replays the corpus, then runs the target's mutations; panics naming the first failing input.
/// The caller holds [`serial`] (from before its setup, which allocates too).
pub fn fuzz(target: Target, check: impl Fn(&[u8]) + Send + Sync + 'static) -> Summary {
    assert!(SERIAL.try_lock().is_err(), "hold harness::serial() across the setup and the run");
    let started = Instant::now();
    let check: Check = Arc::new(check);
    let mut inputs = corpus(target.name);
    assert!(!inputs.is_empty() || !target.seeds.is_empty(), "{}: no corpus and no seeds", target.name);
    inputs.extend(target.seeds);
    let mut max_peak = 0;
    // Warm-up, unmeasured: statics initialised on first use (embedded schemas, lookup tables) are
    // not the input's doing.
    if let Some((_, first)) = inputs.first() {
        let _ = run_one(&check, first, Bounds { memory: |_| usize::MAX, ..target.bounds });
    }
    let fail = |label: &str, input: &[u8], f: Failure| -> ! {
        let saved = save_failure(target.name, input);
        panic!(
            "fuzz target {}: {label}: {f:?}\n  input saved to {}\n  input: {}",
            target.name,
            saved.display(),
            preview(input)
        )
    };
    for (name, input) in &inputs {
        match run_one(&check, input, target.bounds) {
            Ok(peak) => max_peak = max_peak.max(peak),
            Err(f) => fail(&format!("corpus entry {name:?}"), input, f),
        }
    }
    let pool: Vec<Vec<u8>> = inputs.into_iter().map(|(_, b)| b).collect();
    let seed = seed();
    let n = iterations(target.iterations);
    let salt = u64::from_le_bytes(blake3::hash(target.name.as_bytes()).as_bytes()[..8].try_into().unwrap());
    let mut rng = Rng::new(seed ^ salt);
    for i in 0..n {
        // The smaller of two: mutants of small inputs are as telling and much faster.
        let (x, y) = (rng.pick(&pool), rng.pick(&pool));
        let parent = if x.len() <= y.len() { x.clone() } else { y.clone() };
        let input = (target.mutate)(&mut rng, &parent, &pool);
        match run_one(&check, &input, target.bounds) {
            Ok(peak) => max_peak = max_peak.max(peak),
            Err(f) => fail(&format!("mutation {i} of seed {seed}"), &input, f),
        }
    }
    let slowest = SLOWEST.with(|s| s.replace(Duration::ZERO));
    let summary = Summary { replayed: pool.len(), mutated: n, max_peak, elapsed: started.elapsed(), slowest };
    eprintln!(
        "fuzz {}: {} corpus inputs + {} mutations (seed {seed}) in {:.1?}; per input: peak heap {} KiB, slowest {:.1?}",
        target.name,
        summary.replayed,
        summary.mutated,
        summary.elapsed,
        summary.max_peak / 1024,
        summary.slowest,
    );
    summary
}
