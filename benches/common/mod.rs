//! Helpers shared by the benches: the workload (500-byte events over 20 streams), the SQLite peer,
//! the fold both systems run on replay, statistics, and writing results to
//! `target/bench-results/<bench>.json`.
#![allow(dead_code)]

use od_events::system::{ArchivedNoteRecorded, NoteRecorded};
use od_events::{Event, EventKind, StreamId};
use rusqlite::{params, Connection, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// Streams the workload spreads its events over.
pub const STREAMS: usize = 20;
/// Encoded payload size of every workload event (rkyv bytes of a `NoteRecorded`).
pub const EVENT_BYTES: usize = 500;

/// Seconds each measured cell runs (`OD_BENCH_SECS` overrides).
pub fn cell_secs(default: f64) -> Duration {
    let s = std::env::var("OD_BENCH_SECS").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(default);
    Duration::from_secs_f64(s)
}

/// `bench:sNN`, the workload's stream names.
pub fn stream_name(i: usize) -> String {
    format!("bench:s{:02}", i % STREAMS)
}

/// The workload's streams as typed ids.
pub fn stream_ids() -> Vec<StreamId> {
    (0..STREAMS).map(|i| StreamId::new(stream_name(i)).expect("valid stream id")).collect()
}

/// Text length that makes a tag-less `NoteRecorded` payload exactly [`EVENT_BYTES`] long.
pub fn text_len() -> usize {
    static LEN: OnceLock<usize> = OnceLock::new();
    *LEN.get_or_init(|| {
        (EVENT_BYTES / 2..EVENT_BYTES)
            .rev()
            .find(|&l| note_text(&"x".repeat(l)).encode_payload().len() <= EVENT_BYTES)
            .expect("a text length that fits")
    })
}

fn note_text(text: &str) -> Event {
    Event::NoteRecorded(NoteRecorded { text: text.to_string(), tags: vec![] })
}

/// A workload event whose text starts with `id` as 16 hex digits (padded to [`text_len`]).
pub fn note_with_id(id: u64) -> Event {
    let mut t = format!("{id:016x}");
    t.extend(std::iter::repeat_n('x', text_len() - 16));
    note_text(&t)
}

/// The id a [`note_with_id`] payload carries (zero-copy).
pub fn id_of_payload(payload: &[u8]) -> u64 {
    let a = rkyv::access::<ArchivedNoteRecorded, rkyv::rancor::Error>(payload).expect("payload");
    u64::from_str_radix(&a.text.as_str()[..16], 16).expect("hex id")
}

/// `n` workload events.
pub fn batch_events(n: usize) -> Vec<Event> {
    (0..n as u64).map(note_with_id).collect()
}

/// Kind code and schema of the workload events (what SQLite rows implicitly carry).
pub fn note_kind() -> (u16, u16) {
    let k = EventKind::NoteRecorded;
    (k.code(), k.current_schema())
}

/// Zero-copy fold step: validated rkyv access, text length.
pub fn fold_zero_copy(payload: &[u8]) -> usize {
    rkyv::access::<ArchivedNoteRecorded, rkyv::rancor::Error>(payload).expect("valid payload").text.len()
}

/// Owned fold step: full decode through the migration path (as projections do), text length.
pub fn fold_decode(kind: u16, schema: u16, payload: &[u8]) -> usize {
    match od_migrations::decode_any(kind, schema, payload).expect("decodable payload") {
        Event::NoteRecorded(n) => n.text.len(),
        other => panic!("unexpected event {other:?}"),
    }
}

// ---------------------------------------------------------------- SQLite peer

/// Opens (creating) the SQLite peer: WAL, `synchronous=FULL`, events table + (stream, version) index.
pub fn sqlite_open(path: &Path) -> Connection {
    let c = Connection::open(path).expect("open sqlite");
    c.pragma_update(None, "journal_mode", "WAL").expect("wal");
    c.pragma_update(None, "synchronous", "FULL").expect("sync");
    c.busy_timeout(Duration::from_secs(30)).expect("busy");
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS events(
             seq INTEGER PRIMARY KEY, stream TEXT NOT NULL, version INTEGER NOT NULL,
             payload BLOB NOT NULL);
         CREATE UNIQUE INDEX IF NOT EXISTS events_stream_version ON events(stream, version);",
    )
    .expect("schema");
    let mode: String = c.pragma_query_value(None, "journal_mode", |r| r.get(0)).expect("mode");
    assert_eq!(mode, "wal");
    c
}

/// One durable transaction: the stream's next versions, one row per event (payloads encoded here,
/// as od encodes them in the caller's thread).
pub fn sqlite_append(c: &Connection, stream: &str, events: &[Event]) {
    // IMMEDIATE takes the write lock first, so concurrent connections queue on busy_timeout
    // rather than failing a read-to-write upgrade.
    let tx = Transaction::new_unchecked(c, TransactionBehavior::Immediate).expect("begin");
    let next: i64 = tx
        .prepare_cached("SELECT COALESCE(MAX(version) + 1, 0) FROM events WHERE stream = ?1")
        .expect("prepare")
        .query_row(params![stream], |r| r.get(0))
        .expect("head");
    {
        let mut ins =
            tx.prepare_cached("INSERT INTO events(stream, version, payload) VALUES (?1, ?2, ?3)").expect("prepare");
        for (i, e) in events.iter().enumerate() {
            ins.execute(params![stream, next + i as i64, e.encode_payload()]).expect("insert");
        }
    }
    tx.commit().expect("commit");
}

// ---------------------------------------------------------------- measurement helpers

/// A fresh directory on the real disk (ext4 here; never tmpfs, which would make fsync free).
pub fn tempdir() -> tempfile::TempDir {
    let base = target_dir().join("bench-tmp");
    std::fs::create_dir_all(&base).expect("bench tmp dir");
    tempfile::Builder::new().prefix("cell-").tempdir_in(base).expect("tempdir")
}

/// Evicts every file under `dir` from the OS page cache (after syncing it), so the next read
/// really comes from disk.
pub fn drop_page_cache(dir: &Path) {
    use std::os::fd::AsRawFd;
    for e in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            drop_page_cache(&p);
        } else if let Ok(f) = std::fs::File::open(&p) {
            let _ = f.sync_data();
            // SAFETY: a valid open fd; advisory call with no memory effects.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }
}

/// Bytes under `p`.
pub fn dir_bytes(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() {
                        dir_bytes(&p)
                    } else {
                        e.metadata().map(|m| m.len()).unwrap_or(0)
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

/// The `q`-quantile (0..=1) of sorted values.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

/// The median of `v` (sorts it).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    quantile(v, 0.5)
}

/// `12.3k`, `1.23M`.
pub fn si(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

pub fn verdict(pass: bool) -> &'static str {
    if pass {
        "PASS"
    } else {
        "MISS"
    }
}

/// `$CARGO_TARGET_DIR`, else `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

/// Writes `value` to `target/bench-results/<bench>.json` and says where.
pub fn write_json(bench: &str, value: &serde_json::Value) {
    let dir = target_dir().join("bench-results");
    std::fs::create_dir_all(&dir).expect("results dir");
    let path = dir.join(format!("{bench}.json"));
    let text = serde_json::to_string_pretty(value).expect("json");
    std::fs::write(&path, text + "\n").expect("write results");
    println!("\nwrote {}", path.display());
}

/// What the machine looked like, for the JSON.
pub fn machine() -> serde_json::Value {
    serde_json::json!({
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    })
}

/// CPU time a process has used so far (user + system, all its threads), in ms, from
/// `/proc/<pid>/stat`: on a machine whose disk and neighbours make wall-clock throughput swing, the
/// daemon's CPU per run is the steadier figure to compare builds by.
pub fn cpu_ms(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/<pid>/stat");
    // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
    let rest = &text[text.rfind(')').expect("stat's command name") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks: f64 = fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
    let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks * 1000.0 / per_s
}

/// Memory of a process, from `/proc/<pid>/status` (kB there = KiB).
#[derive(Clone, Copy, Debug, Default)]
pub struct Mem {
    pub rss_kib: u64,
    pub hwm_kib: u64,
    /// The anonymous part of VmRSS (heap, stacks) and the file-backed part (binary, mapped files).
    pub anon_kib: u64,
    pub file_kib: u64,
    pub threads: u64,
}

impl Mem {
    pub fn of(pid: u32) -> Mem {
        let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/<pid>/status");
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
        };
        Mem {
            rss_kib: field("VmRSS:"),
            hwm_kib: field("VmHWM:"),
            anon_kib: field("RssAnon:"),
            file_kib: field("RssFile:"),
            threads: field("Threads:"),
        }
    }
    pub fn rss_mb(&self) -> f64 {
        mb(self.rss_kib)
    }
    pub fn hwm_mb(&self) -> f64 {
        mb(self.hwm_kib)
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "rss_mb": self.rss_mb(), "hwm_mb": self.hwm_mb(), "rss_anon_mb": mb(self.anon_kib),
            "rss_file_mb": mb(self.file_kib), "threads": self.threads,
        })
    }
}

/// KiB → MB (10^6 bytes).
pub fn mb(kib: u64) -> f64 {
    kib as f64 * 1024.0 / 1e6
}
