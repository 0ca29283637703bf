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
pub const SUBSCRIBER_BUFFER: usize = 256;

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

/// Most tools the catalog holds. The search index lives in memory (~1 KiB per tool with its
/// descriptor); 200,000 is twice the size `benches/tool_search` holds to its 5 ms p99 target.
pub const MAX_CATALOG_TOOLS: usize = 200_000;

/// Largest tool descriptor (canonical JSON). It travels inside one `tool_registered` event, which
/// must stay under [`MAX_EVENT_BYTES`] with its description and keywords beside it.
pub const MAX_TOOL_DESCRIPTOR_BYTES: usize = 24 * 1024;

/// Longest tool name. MCP clients show and send names verbatim; 128 is the MCP spec's own bound.
pub const MAX_TOOL_NAME_BYTES: usize = 128;

/// Default and largest page of `od tools search` / `GET /api/tools/search`. A page is read by a
/// person or an agent; 100 full descriptors is already tens of thousands of tokens.
pub const TOOL_SEARCH_DEFAULT_PAGE: usize = 20;
pub const TOOL_SEARCH_MAX_PAGE: usize = 100;

/// Default and largest page of the disclosure list meta-tool (names + one-line summaries): the
/// point of disclosure is a small, flat model-facing cost per call whatever the catalog size.
pub const DISCLOSURE_LIST_PAGE: usize = 15;
pub const DISCLOSURE_LIST_MAX_PAGE: usize = 40;

/// Longest one-line summary the list meta-tool shows per tool (characters).
pub const DISCLOSURE_SUMMARY_CHARS: usize = 90;

/// Largest `od tools import` request body: a catalog of this many bytes is ~100,000 descriptors.
pub const MAX_TOOL_IMPORT_BYTES: usize = 64 * 1024 * 1024;

/// Browser tools one session may advertise at once (a UI mounts tens, not thousands).
pub const MAX_SESSION_TOOLS: usize = 256;

/// Default wait for a browser action's result, and the longest a caller may ask for. A view
/// movement acknowledges in well under a second; a consent prompt waits for a person.
pub const BROWSER_ACTION_TIMEOUT_MS: i64 = 30_000;
pub const MAX_BROWSER_ACTION_TIMEOUT_MS: i64 = 600_000;

/// Browser actions waiting at once, per run and in all: each holds a waiter and a timer, and a
/// browser runs a handful of actions at a time.
pub const MAX_INFLIGHT_ACTIONS_PER_RUN: usize = 32;
pub const MAX_INFLIGHT_ACTIONS: usize = 1024;

/// Largest browser-action input and result (compact JSON); both are stored in one event.
pub const MAX_ACTION_INPUT_BYTES: usize = 16 * 1024;
pub const MAX_ACTION_RESULT_BYTES: usize = 40 * 1024;

/// How long a plugin's MCP server gets to start and answer `tools/list` or `tools/call`.
pub const MCP_SERVER_TIMEOUT_MS: u64 = 20_000;

/// Most `tools/list` pages read from one plugin MCP server (a cursor loop must end).
pub const MAX_MCP_LIST_PAGES: usize = 50;

/// Tools per `tools/list` page in `od mcp --flat` (clients follow `nextCursor`): one search page.
pub const MCP_FLAT_PAGE: usize = TOOL_SEARCH_MAX_PAGE;

/// Largest batch published to live subscribers with its frames; a bigger one is published as an
/// empty wake-up and read from the log. The ring keeps its last `SUBSCRIBER_BUFFER` batches, so this
/// bounds its memory at 256 × 64 KiB = 16 MiB (it was 1024 whole batches: memory climbed with every
/// burst of runs). 64 KiB keeps a 64-run group commit of agent events inline (at 16 KiB every tail
/// re-read its index per batch there and SSE p99 doubled).
pub const PUBLISH_INLINE_BYTES: usize = 64 * 1024;

/// Times `od run watch` / `--follow` reconnects after a dropped stream (resuming after the last
/// event id it printed) before giving up.
pub const WATCH_RECONNECTS: u32 = 5;

// ---------------------------------------------------------------------------------------------
// Event store (issue 11: atomic multi-stream appends, crash damage, disk full).
// ---------------------------------------------------------------------------------------------

/// Most parts (streams) in one atomic multi-stream append. A command touches a handful of streams
/// (a run's start: project, conversation, run); more is a bulk job, which should be split. Each part
/// costs a head lookup in the writer while it holds the batch.
pub const MAX_APPEND_PARTS: usize = 16;

/// While commits fail (disk full, I/O errors), how long the idle writer waits between probes of
/// whether writes work again (a page of zeros written and fdatasynced past the commit mark). Health
/// then turns back to ok within this long of space returning, without waiting for a write; a probe
/// is one small write, so every few seconds costs nothing.
pub const STORE_PROBE_INTERVAL_MS: u64 = 5_000;
