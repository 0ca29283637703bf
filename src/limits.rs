//! Every bound od enforces, in one place, each with the reason it has the value it has.
//!
//! Nothing in od is unbounded: input that exceeds one of these is refused with
//! [`crate::store::StoreError::LimitExceeded`] (or the HTTP/CLI equivalent), naming the limit.

/// Largest encoded event payload (rkyv bytes). sled 0.34.7 moves values over ~128 KiB into
/// `blobs/` files it never fsyncs (see shared/reference/sled-facts.md); keeping every frame well
/// under that keeps all stored data in the file we do sync at checkpoints.
pub const MAX_EVENT_BYTES: usize = 64 * 1024;

/// Most events in one append call. An append is one atomic fact group (a run's start, an apply);
/// thousands is already a bulk import, which should be split.
pub const MAX_EVENTS_PER_APPEND: usize = 4096;

/// Most bytes of frames in one append call. Must stay below half a segment so that one append
/// always fits in a fresh segment (a batch never spans two).
pub const MAX_APPEND_BYTES: usize = 8 * 1024 * 1024;

/// Most frame bytes the writer packs into one group commit. Bigger batches amortise the fsync
/// further but delay every ack in the batch; 4 MiB is ~7,000 typical events, past the knee.
pub const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;

/// Most append requests the writer takes into one group commit.
pub const MAX_BATCH_REQUESTS: usize = 1024;

/// Capacity of the writer's request queue. Appenders block (backpressure) when it is full rather
/// than queueing without bound.
pub const WRITER_QUEUE: usize = 4096;

/// Segment file size. Segments are preallocated with zeros so that each commit's fdatasync only
/// flushes data blocks (no size or extent metadata). 64 MiB is ~100,000 typical events per file;
/// creating one (writing its zeros) takes ~0.1 s, once per 64 MiB of log.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 * 1024 * 1024;

/// Log bytes written between checkpoints (sled's index made durable, so recovery rescans at most
/// this much of the segments).
pub const CHECKPOINT_BYTES: u64 = 64 * 1024 * 1024;

/// Largest span of records one index entry (a "pack") covers; bounds a single read.
pub const PACK_MAX_BYTES: u32 = 64 * 1024;

/// Smallest segment accepted: twice the biggest append, so any batch fits in a fresh segment.
pub const MIN_SEGMENT_BYTES: u64 = 2 * MAX_APPEND_BYTES as u64;

/// Published batches kept for live subscribers. A subscriber further behind than this is not
/// waited for: it is told it lagged and re-reads from the log (the writer never blocks on it).
pub const SUBSCRIBER_BUFFER: usize = 1024;

/// Frames a catching-up subscriber reads from the log per step, bounding its memory.
pub const SUBSCRIBER_READ_CHUNK: usize = 512;

/// Longest op id (client request id) accepted; it is a key, not data.
pub const MAX_OP_ID_BYTES: usize = 200;

/// Packs listed by one stream-index chunk (24 bytes each, so a chunk stays under 1 KiB): replaying a
/// fully interleaved stream then costs one index read per 32 events instead of one per event.
pub const STREAM_CHUNK_RUNS: usize = 32;

/// Stream heads cached in memory by the writer before the cache is cleared and refilled from sled.
pub const HEAD_CACHE_ENTRIES: usize = 100_000;

/// Most events one HTTP/CLI log read returns per page.
pub const MAX_READ_PAGE: usize = 10_000;

/// How many times opening sled is retried (sleeping 10 ms × attempt, ~2 s in all) when its directory
/// lock is still held by a handle that was just dropped (sled 0.34.7 releases it late; sled-facts.md
/// saw 2 of 6 reopens fail). Longer than that, another process really holds the data dir.
pub const SLED_OPEN_RETRIES: u32 = 20;

/// Runs executing at once; more wait (status `queued`) for a slot. Each holds an agent (for exec, a
/// child process) and its buffers, so this bounds memory and processes under a burst of starts.
pub const MAX_CONCURRENT_RUNS: usize = 16;

/// Default devloop ceiling (`OD_MAX_DEVLOOP_ITERATIONS`): spec §10.2, stops a buggy plugin from
/// burning provider quota in an endless loop.
pub const DEFAULT_MAX_DEVLOOP_ITERATIONS: u32 = 10;

/// Hard upper bound on `OD_MAX_DEVLOOP_ITERATIONS`, whatever the environment says.
pub const MAX_DEVLOOP_ITERATIONS_CAP: u32 = 100;

/// Attempts of a stage iteration under `onFailure: retry` before the run is failed.
pub const STAGE_RETRY_ATTEMPTS: u32 = 3;

/// Default exec agent wall-clock timeout per stage iteration (`timeoutMs`).
pub const AGENT_TIMEOUT_MS: u64 = 600_000;

/// Default exec agent silence timeout (`idleTimeoutMs`): no output this long counts as a hang.
pub const AGENT_IDLE_TIMEOUT_MS: u64 = 120_000;

/// Agent events recorded per append: what the agent produced while the previous append committed.
pub const AGENT_EVENTS_PER_APPEND: usize = 256;

/// Largest project file `od files write|upload` accepts (one request body held in memory).
pub const MAX_PROJECT_FILE_BYTES: usize = 16 * 1024 * 1024;

/// Build/test commands of the `build-test` worker are killed after this long.
pub const BUILD_TEST_TIMEOUT_MS: u64 = 300_000;

/// sled's page cache. The index is small (one entry per pack, 32 packs per stream chunk), so a
/// modest cache keeps it hot while bounding the daemon's resident memory as the log grows (sled
/// fills whatever it is given: at 256 MiB the daemon's memory climbed with every run recorded).
pub const SLED_CACHE_BYTES: u64 = 32 * 1024 * 1024;

/// Default period of the daemon's snapshot expiry pass (`OD_SNAPSHOT_GC_INTERVAL_MS`, spec: 6 h):
/// TTLs are days long, so a few passes a day expire them on time without churning the log.
pub const SNAPSHOT_GC_INTERVAL_MS: i64 = 6 * 3_600_000;
