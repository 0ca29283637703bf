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
/// flushes data blocks (no size or extent metadata). 16 MiB (the smallest allowed) is ~60,000
/// typical events per file; creating one (writing its zeros) takes ~30 ms, in the background. The
/// preallocated space not yet holding records (the current segment's rest, and the next segment,
/// prepared once the current one is half full) is at most 1.5 segments: 24 MiB, not 96.
pub const DEFAULT_SEGMENT_BYTES: u64 = MIN_SEGMENT_BYTES;

/// Log bytes written between checkpoints (sled's index made durable, so recovery rescans at most
/// this much of the segments). 16 MiB rescans (hash + re-index) in well under 0.5 s after a
/// `kill -9`; see also [`CHECKPOINT_INTERVAL_MS`], the bound in time.
pub const CHECKPOINT_BYTES: u64 = 16 * 1024 * 1024;

/// Largest span of records one index entry (a "pack") covers; bounds a single read.
pub const PACK_MAX_BYTES: u32 = 64 * 1024;

/// Smallest segment accepted: twice the biggest append, so any batch fits in a fresh segment.
pub const MIN_SEGMENT_BYTES: u64 = 2 * MAX_APPEND_BYTES as u64;

/// Published batches kept for live subscribers. A subscriber further behind than this is not
/// waited for: it is told it lagged and re-reads from the log (the writer never blocks on it).
pub const SUBSCRIBER_BUFFER: usize = 256;

/// Frames a catching-up subscriber reads from the log per step, bounding its memory.
pub const SUBSCRIBER_READ_CHUNK: usize = 512;

/// Longest op id accepted; it is a key, not data (`store/ident.rs` holds every op id to it, with
/// no NUL or control character, on every backend).
pub const MAX_OP_ID_BYTES: usize = 200;

/// Longest `clientRequestId` of `POST /api/runs`: the run's op id is `run:<clientRequestId>`, so
/// the id leaves room for the prefix within [`MAX_OP_ID_BYTES`].
pub const MAX_CLIENT_REQUEST_ID_BYTES: usize = MAX_OP_ID_BYTES - "run:".len();

/// Packs listed by one stream-index chunk (24 bytes each, so a chunk stays under 1 KiB): replaying a
/// fully interleaved stream then costs one index read per 32 events instead of one per event.
pub const STREAM_CHUNK_RUNS: usize = 32;

/// Record bytes of one stream's packs hinted to the OS ahead of the reader (`store/sled/ahead.rs`):
/// enough to keep many disk reads in flight on a cold cache (a 10,000-event stream of 500-byte
/// events is ~6 MiB), small enough that the hinted pages are still cached when the reader gets
/// there. The pages go to the OS page cache, not to od's memory.
pub const STREAM_READ_AHEAD_BYTES: u64 = 8 * 1024 * 1024;

/// Bytes between two packs of a stream below which their read-ahead hints are merged into one
/// range (reading a small gap of other streams' records costs less than another disk request).
pub const READ_AHEAD_GAP: u32 = 16 * 1024;

/// Largest range in one read-ahead hint: Linux reads at most max(the device's largest request,
/// its readahead window) per `MADV_WILLNEED` call and silently drops the rest, and the window is
/// 128 KiB by default.
pub const READ_AHEAD_PIECE: u32 = 128 * 1024;

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

/// Files one run stages into its working folder (assets, context files, the MCP configuration):
/// a plugin naming more is refused before anything is written — each file is read into memory and
/// listed in one `substrate_staged` event, which must stay well under a frame.
pub const MAX_STAGED_FILES: usize = 256;

/// Bytes one run stages in all (each file is also bounded by [`MAX_PROJECT_FILE_BYTES`]): staging
/// holds them in memory until they are blobs and copies.
pub const MAX_STAGED_BYTES: u64 = 64 * 1024 * 1024;

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

// ---- HTTP serving (issue 11: browsers, hanging connections) ----------------------------------

/// A connection must deliver a complete request head within this, counted from when it opens or
/// its previous response ends: it bounds half-sent headers (slowloris) and idle keep-alive
/// connections alike (hyper re-arms the same timer for each head). Clients here are the CLI and
/// local tools that send a request the moment they connect; 10 s is generous for them.
pub const HTTP_HEADER_READ_TIMEOUT_MS: u64 = 10_000;

/// A request body must arrive in full within this, counted from when the handler starts reading
/// it. The largest body (a 64 MiB tool catalog) takes well under a second on loopback; a client
/// holding a half-sent body holds a connection slot and a buffer.
pub const HTTP_BODY_READ_TIMEOUT_MS: u64 = 30_000;

/// A connection whose peer accepts no bytes for this long (its socket buffer stays full, or its
/// unacknowledged data is not acknowledged: `TCP_USER_TIMEOUT`) is closed: the peer is gone or
/// stuck, and its stream would otherwise hold a subscription forever. Four keep-alive periods.
pub const HTTP_WRITE_STALL_TIMEOUT_MS: u64 = 60_000;

/// Silence after which a streaming response (SSE `:` comment, ND-JSON empty line) sends a
/// keep-alive, so proxies keep the connection and a dead peer is found by the write. The reference
/// daemon sends one every 25 s; axum's default is 15 s.
pub const STREAM_KEEPALIVE_MS: u64 = 15_000;

/// Open HTTP connections at most. At the cap a new connection sheds the oldest idle one (no request
/// in flight); with none idle it gets a 503 and is closed. Each connection costs a descriptor and
/// buffers (~45 KB idle), and the log, sled and agents need descriptors too; a thousand watchers of
/// one run is a supported load (tests/api/sse.rs), so the cap leaves room above it for the CLI and
/// health. [`HTTP_CONNECTIONS_FD_SHARE`] lowers it under a small descriptor limit.
pub const MAX_HTTP_CONNECTIONS: usize = 2048;

/// Connections never take more than this share (1/N) of the process's file-descriptor limit
/// (`RLIMIT_NOFILE`), whatever `OD_HTTP_MAX_CONNECTIONS` says: the rest stay free for the log's
/// segments, sled and agents' pipes, so accepting never fails for want of a descriptor.
pub const HTTP_CONNECTIONS_FD_SHARE: usize = 2;

/// Over-cap connections answered (503, then closed) at once; past this they are closed unanswered,
/// so a flood costs a bounded number of descriptors.
pub const HTTP_OVERFLOW_ANSWERS: usize = 64;

/// Largest request body of a route that names no larger limit (JSON commands are a few KB; run
/// inputs and prefills a few hundred). It is axum's default, now named so a 413 can say which.
pub const MAX_REQUEST_BODY_BYTES: usize = 2 * 1024 * 1024;

/// Longest `agentTimeoutMs` / `agentIdleTimeoutMs` a request may set: an agent invocation longer
/// than a day is a hang, and the bound keeps `now + timeout` far from overflowing a clock.
pub const MAX_AGENT_TIMEOUT_MS: u64 = 86_400_000;

/// How long a stopping daemon lets in-flight responses finish before it drops their connections
/// (streams end at once on shutdown; this is for a slow reader of a large answer).
pub const HTTP_SHUTDOWN_DRAIN_MS: u64 = 5_000;

/// How long an over-cap connection's 503 may take to write (and the client's request to be read
/// and dropped, so closing does not reset the answer away) before the socket is closed anyway.
pub const HTTP_OVERFLOW_LINGER_MS: u64 = 1_000;

/// Largest PEM file the daemon reads for `--tls-cert` / `--tls-key`: a leaf with a few
/// intermediates is a few KB; a file past this is not a certificate chain (a wrong path to a log
/// or an archive) and is refused by name rather than read into memory.
pub const TLS_PEM_MAX_BYTES: u64 = 1024 * 1024;

/// Pause after a failed `accept` (out of descriptors, most often) before the next one, so the
/// loop does not spin while descriptors are short.
pub const HTTP_ACCEPT_BACKOFF_MS: u64 = 50;

// ---- Fuzzing findings (tests/fuzz.rs) -------------------------------------------------------------

/// Most schema nodes one JSON Schema check visits (a manifest against the plugin schema), and the
/// most a GenUI answer or tool input may be estimated to need (src/plugins/validator.rs bounds
/// it before validating: visits per instance node from the schema's shape, times the nodes).
/// `$ref` and `anyOf` multiply: `{"enum":[1],"anyOf":[{"$ref":"#"},{"$ref":"#"}]}` fans out 2^32
/// times within the depth limit, which held a daemon thread for good on one answer. The bundled
/// manifests take under 100 steps and an answer that fills an event (64 KiB: ~16,000 array items)
/// a few tens of thousands, so the budget is ten times that (well under a second even at its end);
/// past it the value is refused, naming it.
pub const MAX_SCHEMA_STEPS: usize = 250_000;

/// Largest GNU long-name, long-link or pax record a tar archive may carry. The tar reader holds
/// such a record in memory whole; real ones are a path or a few keys (a few KiB), while 64 KiB of
/// gzip inflated a 64 MiB record into a 400 MB heap peak.
pub const MAX_TAR_META_BYTES: u64 = 64 * 1024;

/// Most violations one JSON Schema check reports, and most `enum` values one message lists. Each
/// violation is a message: an answer of 5,000 items against a 500-value `enum` (27 KB) built 25 MB
/// of them. Nobody reads past the first hundred; `od plugin doctor` shows them all below that.
pub const MAX_SCHEMA_VIOLATIONS: usize = 100;
pub const SCHEMA_ENUM_SHOWN: usize = 10;

/// Most values a SKILL.md frontmatter may expand to. Without aliases a block holds fewer values
/// than bytes ([`crate::plugins::MAX_FRONTMATTER_BYTES`] is 64 KiB, the largest real one 4.2 KiB);
/// an alias replays its anchor's whole subtree, and 5 KiB of `[*a, *a, …]` built 1 million values
/// (72 MB) — 64 KiB would build 169 million.
pub const MAX_FRONTMATTER_NODES: usize = 64 * 1024;

// ---- runner: what one agent invocation may record, and its processes (issue 11) ----

/// Payload bytes of output (text, tool calls and results, stdout/stderr lines …) one agent
/// invocation may record (`OD_AGENT_OUTPUT_MAX_BYTES`, or the run's `outputMaxBytes`). An agent
/// printing 100 MB made 406,945 events, 385 MB of segments and a 1.18 GB daemon; a real stage's
/// stream (Claude Code's stream-json with its tool results) stays in the low megabytes. Past it,
/// output is dropped (counted, and said so by an `output-truncated` status); the run goes on.
pub const AGENT_OUTPUT_MAX_BYTES: u64 = 8 * 1024 * 1024;

/// Events (output pieces, signals, artifacts, surface requests) one agent invocation may record
/// (`OD_AGENT_OUTPUT_MAX_EVENTS`, or `outputMaxEvents`): bounds the log, the catch-up work of every
/// watcher and the executor's queue when an agent prints many tiny lines.
pub const AGENT_OUTPUT_MAX_EVENTS: u64 = 20_000;

/// The most the environment or a run may raise those two to.
pub const AGENT_OUTPUT_MAX_BYTES_CAP: u64 = 64 * 1024 * 1024;
pub const AGENT_OUTPUT_MAX_EVENTS_CAP: u64 = 200_000;

/// Largest payload of one recorded agent output event: longer text is split into pieces of this
/// size, a bigger structured item has its largest fields cut to previews. Half of
/// [`MAX_EVENT_BYTES`], leaving room for the event's other fields (a 10 MB line used to fail the
/// whole run with "event bytes exceeded").
pub const AGENT_EVENT_PAYLOAD_BYTES: usize = 32 * 1024;

/// Longest signal name, surface id, kind or atom an agent may report (they are names, not data).
pub const MAX_AGENT_NAME_BYTES: usize = 256;

/// Most options an agent may propose for a choice it asks (the direction picker offers three to
/// five; a dozen is already more than a person compares as cards).
pub const MAX_CHOICE_OPTIONS: usize = 12;

/// Longest option an agent may propose, as JSON (a value, a label and a line of description;
/// twelve of them stay well inside one recorded request).
pub const MAX_CHOICE_OPTION_BYTES: usize = 1024;

/// Rounds of the sweep that ends an invocation's leftover processes: each round kills what it
/// found, and what those had started shows up in the next; a fork bomb outrunning this many rounds
/// is still cut by the process group kill.
pub const AGENT_SWEEP_ROUNDS: usize = 8;

/// Longest a run's `timeoutMs` / `idleTimeoutMs` (and GenUI timeouts) may be: 30 days. `Instant +
/// u64::MAX ms` panics; nothing od waits for needs longer.
pub const MAX_TIMEOUT_MS: u64 = 30 * 24 * 3_600_000;

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

// ---- Paging (history at scale) ----

/// Items in a list page when the request names no `limit`: a screenful, and small enough that a
/// list answers in well under a millisecond of serialisation whatever the history holds.
pub const DEFAULT_PAGE_LIMIT: usize = 50;

/// Most items one list page returns. Bounds the work and the body of any single list request
/// (1,000 runs are ~0.5 MB of JSON); `--all` walks pages instead of asking for more.
pub const MAX_PAGE_LIMIT: usize = 1_000;

/// Longest sort key a cursor may carry (its hex is twice this). Keys are ids and big-endian
/// numbers, far shorter; the bound stops a crafted cursor from costing memory.
pub const MAX_CURSOR_KEY_BYTES: usize = 512;

// ---- Paging of the lists outside the read models (plugins, marketplaces, tools, files, a run's
// ---- logs and devloop rows, log pages) ----

/// Frames read at a time while a page of a run's logs or devloop rows is filled from the run's
/// stream: a page stops reading once full, so a run with 200,000 output events costs a page a
/// few chunks, not the whole stream.
pub const RUN_PAGE_READ_CHUNK: usize = 256;

/// Ranked tool-search results read around a cursor's anchor (its old position ± this) before the
/// whole ranking is read to find it: a registration between two pages moves an anchor a few places
/// at most, so the next page costs what the first did.
pub const TOOL_SEARCH_ANCHOR_WINDOW: usize = 64;

// ---- Run recording (history at scale: fewer commits per run) ----

/// Most events the executor buffers before it sends them as one append (it also sends whenever it
/// is about to wait; see `runner/recorder.rs`). A whole dry-run run is ~60 events, so it lands in
/// one append; a chatty agent's burst still reaches watchers in appends of at most this many.
pub const RUN_BUFFER_EVENTS: usize = 256;

/// Most payload bytes (plus a frame's overhead per event) the executor buffers before it sends
/// them. Keeps one run append far below [`MAX_APPEND_BYTES`] and [`MAX_BATCH_BYTES`], so it never
/// fills a group commit alone and its ack never waits on a large write.
pub const RUN_BUFFER_BYTES: usize = 1024 * 1024;

// ---- Store: opening costs the tail (history at scale) ----

/// Longest a commit stays out of a checkpoint: once something was written and this long has
/// passed, the writer checkpoints (sled flush + fdatasync), even when idle. Bounds in time what a
/// restart after `kill -9` rescans (besides [`CHECKPOINT_BYTES`]) and how long read-model records
/// in sled stay volatile; one checkpoint (~5–20 ms of syncs) per second is ~1% of the writer.
pub const CHECKPOINT_INTERVAL_MS: u64 = 1_000;

/// The daemon's background verification starts this long after the daemon (on its clock), so a
/// start is never slowed by it.
pub const BACKGROUND_VERIFY_DELAY_MS: i64 = 60_000;

/// A new background pass over the whole log starts this long after the last one began: bit rot in
/// old segments is found within a day.
pub const BACKGROUND_VERIFY_INTERVAL_MS: i64 = 24 * 3_600_000;

/// Frame bytes one step of the background pass checks before it pauses.
pub const BACKGROUND_VERIFY_STEP_BYTES: u64 = 4 * 1024 * 1024;

/// The pause between steps (on the daemon's clock): with 4 MiB steps the pass reads at most
/// ~40 MB/s, so it never starves the writer or readers of I/O (a 2 GB log takes under a minute).
pub const BACKGROUND_VERIFY_PAUSE_MS: i64 = 100;

// ---- Read models on disk (issue 12: projections per entity, memory bounded by the working set) ----

/// Most events a projection folds before it writes them (one sled batch with its checkpoint seq).
/// Bounds the memory of a chunk's pending record writes (a few MB at most) while keeping the number
/// of sled batches of a rebuild small.
pub const PROJECTION_CHUNK_EVENTS: usize = 4_096;

/// An in-memory projection writes its checkpoint once it reflects this many events more than the
/// last one, and a record projection its overlay of folded records with theirs (the follower
/// writes any newer state once the log is idle, see [`PROJECTION_IDLE_CHECKPOINT_MS`]), so a
/// restart after a kill folds at most about this many events for each. An in-memory checkpoint
/// is one small value (plugins, marketplaces, tool definitions).
pub const PROJECTION_CHECKPOINT_EVENTS: u64 = 1_024;

/// How long the log must be quiet before the follower checkpoints in-memory projections that moved
/// and writes record projections' waiting records. A time bound on what a kill can cost them,
/// without a write per append.
pub const PROJECTION_IDLE_CHECKPOINT_MS: u64 = 1_000;

/// Conversations embedded in a project's summary (`conversations` of `/api/projects` items and
/// `/api/projects/:id`), oldest first; the paged `/api/projects/:id/conversations` has them all.
/// Keeps a project summary small whatever a project accumulates.
pub const MAX_INLINE_CONVERSATIONS: usize = 100;

/// Referrers listed in a snapshot's `referencedBy` (its `refCount` counts them all). A project's
/// pinned snapshot is referenced by each of its runs; the list stays a bounded sample.
pub const MAX_INLINE_SNAPSHOT_REFS: usize = 100;

/// Most index entries one filtered run-list page examines when a second filter narrows the index
/// it reads (e.g. `projectId` and `status`): a page may come back short with a `nextCursor`, so a
/// request costs a bounded read however rare the matching runs are.
pub const MAX_RUN_LIST_EXAMINED: usize = 10_000;

/// Most records a fold-internal bulk read (a surface's remembered answers, a run's live sessions)
/// returns to one engine read: these sets are bounded by what one run or one surface holds.
pub const MAX_WORKING_SET_READ: usize = 10_000;

// ---- read-model bytes (issue 12: index + read models ≤ 50% of segment bytes) ----

/// Most events a record projection folds into ONE transaction (with its checkpoint seq) while it
/// catches up with a backlog, reading [`PROJECTION_CHUNK_EVENTS`] at a time. Fewer, larger
/// transactions write each touched page once per batch, not once per chunk; this bounds the
/// batch's pending writes held in memory (a dry-run run's records are ~3 KB, ~60 events: a few MB
/// at most).
pub const PROJECTION_BATCH_EVENTS: usize = 65_536;

/// A record projection writes its folded records to SQLite once its in-memory overlay holds this
/// many (or [`PROJECTION_CHECKPOINT_EVENTS`] events went by, or the log went idle): bounds what
/// the overlay holds between writes (a dry run's ~60 events write ~40 records of ~100 B: a few
/// hundred KB at most here).
pub const PROJECTION_OVERLAY_RECORDS: usize = 4_096;

// ---- daemon memory under bursts of runs (issue 12 item 2: bursts leave memory flat) ----

/// glibc malloc arenas the daemon process uses (`mallopt(M_ARENA_MAX)` at its start). By default
/// glibc gives each new thread that meets contention an arena of its own, up to 8 per core; the
/// dozens of handler threads a burst of runs spawns each left freed memory in theirs, so resident
/// memory rose with every burst although the live heap did not (5 bursts of 50 dry-run runs,
/// RssAnon 1 s after bursts 1 and 5: 13.8 -> 29.8 MB with the default, 10.5 -> 17.3 MB with one
/// arena, 8.9 -> 17.4 MB with two). Two keeps both cores allocating without contending on one lock.
pub const MALLOC_ARENAS: i32 = 2;

// ---- Read models' SQLite database (issue 12: read models out of sled; src/projector/db.rs) ----

/// Page cache of the read models' writer connection, in KiB (SQLite's `cache_size`). The fold of a
/// backlog batch touches the pages of the records it rewrites; 8 MiB holds the hot interior and
/// index pages of a 100,000-run database, and bounds what the cache can keep after a big fold.
pub const READ_MODEL_WRITER_CACHE_KB: i64 = 8 * 1024;

/// Page cache of each reader connection, in KiB. A list page reads a few dozen records along one
/// index: 2 MiB (SQLite's default) keeps the B-tree's upper levels hot for them.
pub const READ_MODEL_READER_CACHE_KB: i64 = 2 * 1024;

/// Reader connections for HTTP reads, opened on first use. Reads run on the runtime's worker
/// threads (2 on the machines measured); a few more let a slow read not block others. Each one
/// costs at most [`READ_MODEL_READER_CACHE_KB`] of cache.
pub const READ_MODEL_READERS: usize = 4;

/// Prepared statements cached per connection: a records table has 14 (get, put, delete, 8 scans,
/// dump, …) and the checkpoints a few; two projections' tables plus the checkpoints fit.
pub const READ_MODEL_STATEMENTS: usize = 48;

/// How long a connection waits for SQLite's lock (the writer's WAL checkpoint, a second writer
/// such as `od projections rebuild` in embedded mode) before the operation fails.
pub const READ_MODEL_BUSY_TIMEOUT_MS: u64 = 5_000;

/// Size the WAL file is truncated back to after a checkpoint (`journal_size_limit`): a backlog
/// batch may grow it past SQLite's 1,000-page autocheckpoint; this caps what stays on disk after.
pub const READ_MODEL_WAL_LIMIT_BYTES: i64 = 16 * 1024 * 1024;

// ---- Daemons started on demand (issue 13 items 4-5: src/cli/autostart.rs) ----

/// How long a command waits for a daemon it started (or one another command is starting) to
/// answer. Opening a 100,000-run log takes ~64 ms (benches/history) and binding a port less; the
/// rest covers a short command holding the data dir in embedded mode (it lets go in well under a
/// second) and a loaded machine. `OD_DAEMON_START_TIMEOUT_MS` overrides it.
pub const AUTOSTART_WAIT_MS: u64 = 20_000;

/// A daemon started on demand stops after this long with no run in flight and no open connection
/// (`OD_DAEMON_IDLE_EXIT_MS`; 0 = never). Long enough that a person's next command within a few
/// minutes finds it warm; short enough that it does not linger for hours after the last run.
pub const AUTOSTART_IDLE_EXIT_MS: u64 = 10 * 60 * 1000;

/// How often such a daemon checks whether it is idle or its data dir is gone: a removed temporary
/// data dir (tests, scratch runs) stops its daemon within about this long.
pub const IDLE_CHECK_MS: i64 = 500;

/// Size at which a daemon's `daemon.log` is rotated to `daemon.log.1` (src/daemon_log.rs): at the
/// default `info` level a daemon logs a few lines per run, so 8 MiB holds tens of thousands of
/// runs' worth, and the pair never takes more than 16 MiB of the data dir.
pub const DAEMON_LOG_MAX_BYTES: u64 = 8 * 1024 * 1024;

/// Lines `od daemon logs` prints by default (like `tail`).
pub const DAEMON_LOG_TAIL_LINES: usize = 50;
// ---- The terminal view of a followed run (issue 13: src/cli/follow_view.rs, src/cli/ask.rs) ----

/// Longest line the progress view prints for one event (tool input, agent text line, artifact):
/// a tool's `input` can be a whole file, and one event should stay one line on a usual terminal
/// width rather than scroll the view away. Longer lines end in `…`.
pub const FOLLOW_LINE_CHARS: usize = 160;

/// How often the spinner of the status line turns while a stage runs, ms: often enough to show the
/// view is live, rare enough to cost nothing (indicatif redraws at most at this rate).
pub const FOLLOW_TICK_MS: u64 = 120;

/// Times one answer is posted again after the daemon refuses it: a person re-asked this often is
/// better told the constraints once more by `od ui show --schema` than looped on forever, and a
/// schema no input can satisfy must not trap the terminal.
pub const ASK_RETRIES: usize = 5;
// ---- JSON Schema validation, orphaned agents (issue 13: src/plugins/validator.rs, src/runner/orphans.rs) ----

/// Compiled JSON Schemas kept (GenUI surface schemas, tool input schemas), keyed by digest.
/// Compiling one costs a metaschema check and its regexes; a run asks the same few surfaces and
/// tools again and again, and a catalog has a few hundred tools. Past the cap the cache starts
/// over (a compiled schema is a few KiB to a few hundred).
pub const SCHEMA_CACHE_ENTRIES: usize = 512;

/// Longest message of one schema violation or compile error, in characters: an `enum` of 500
/// values lists them all, and 100 such violations would fill the error reply.
pub const SCHEMA_MESSAGE_CHARS: usize = 300;

/// How long an orphaned agent's process group (left running by a daemon that was killed) gets
/// between SIGTERM and SIGKILL when the next daemon start ends it. Agents get SIGTERM first so a
/// well-behaved one (Claude Code) can stop its own tools; two seconds is what `od daemon stop`
/// gives runs to record their end.
pub const ORPHAN_AGENT_GRACE_MS: u64 = 2_000;
// ---- Human output and id prefixes (issue 13: od for people; src/cli/human.rs, engine/resolve.rs) ----

/// Candidates an ambiguous id prefix error names (one more is read to know whether others exist):
/// enough to pick from at a glance, and the error stays one short line per candidate.
pub const MAX_ID_CANDIDATES: usize = 10;

/// Characters of an id a table shows at least (UUIDs: the first 8 hex digits, 32 bits, so ids seen
/// together rarely share them); longer where two shown ids share that start.
pub const SHORT_ID_CHARS: usize = 8;
// ---- Web UI (issue 14: src/http/ui/) ----

/// Most bytes the web app's first load may weigh, gzipped: every file under `src/http/ui/assets/`
/// except the login page's own (`login.*`, loaded instead of the app, not with it). The issue
/// asks for under 150 KB compressed so the page opens fast on a slow link and the app stays small
/// enough to read; `tests/api/ui_serve.rs` sums the gzip size of every file (as the daemon serves
/// them) against it.
pub const UI_FIRST_LOAD_MAX_GZIP_BYTES: usize = 150_000;

// --- The PostgreSQL backend (src/store/pg/) ---

/// How often a PostgreSQL-backed daemon reads the log for frames it was not notified of: LISTEN/
/// NOTIFY is only a wake-up (a notification can be lost with a dropped connection), so this poll
/// bounds how late a live subscriber can hear of another daemon's commit.
pub const PG_POLL_INTERVAL_MS: u64 = 500;

/// Connections a PostgreSQL-backed daemon reads the log through, in turn (besides its writer, its
/// LISTEN connection and its lease connection): enough that a long read (a replay, a page of the
/// log) does not hold up the short ones, few enough that a dozen daemons stay far under
/// PostgreSQL's default 100 connections.
pub const PG_READ_CONNECTIONS: usize = 4;

/// Largest `sslrootcert` file od reads (PEM CA certificates for PostgreSQL's TLS): a whole public
/// CA bundle is about 250 KB, so this leaves room for a corporate bundle and refuses to read a
/// wrong path's multi-gigabyte file into memory.
pub const PG_ROOT_CERT_MAX_BYTES: u64 = 4 << 20;

/// How long a daemon on a shared log may go without a heartbeat before another daemon takes over
/// its runs (`store/pg/lease.rs`; `OD_LEASE_TTL_MS` overrides it). Heartbeats go every TTL/5, so a
/// database restart or a stall shorter than four heartbeats loses no lease; a killed daemon's runs
/// are taken over within TTL + [`LEASE_SCAN_MS`] (10 s + 1 s).
pub const LEASE_TTL_MS: u64 = 10_000;

/// Most runs `od log verify` names as ended more than once (a log written before od refused
/// appends after a run's end): enough to find them, bounded so the report and the saved
/// background pass stay small.
pub const MAX_VERIFY_DOUBLE_ENDS: usize = 100;

/// How long PostgreSQL lets a daemon's session sit idle inside a transaction before ending it
/// (`idle_in_transaction_session_timeout`): a daemon's own transactions send their statements
/// back to back, so only a stalled daemon (SIGSTOP, a paused VM) idles this long — and while it
/// does it holds the log's head row, which every other daemon's appends wait for.
pub const PG_IDLE_IN_TRANSACTION_MS: u64 = 1_000;

/// How often a daemon on a shared log looks for runs no live daemon holds: queued runs it has room
/// for, and runs whose daemon stopped heart-beating.
pub const LEASE_SCAN_MS: u64 = 1_000;

// --- Copying a log between backends (issue 15: `od log copy`, src/store/import.rs, src/cli/log_copy.rs) ---

/// Most frames one [`EventLog::import`](crate::store::EventLog::import) takes, and how many `od log
/// copy` sends at a time. Each import is one commit (one fdatasync of a segment, or one PostgreSQL
/// transaction), so a chunk this size amortises the commit as a full write batch does
/// ([`MAX_BATCH_REQUESTS`]), keeps the copy's memory small, and is all an interrupted copy redoes.
pub const MAX_IMPORT_FRAMES: usize = 1024;

/// Most bytes (frames plus their 20-byte segment records) one import takes: the bound of one atomic
/// append ([`MAX_APPEND_BYTES`]), since the embedded log writes an import as one batch, which never
/// spans two segments (a segment holds at least twice this, [`MIN_SEGMENT_BYTES`]).
pub const MAX_IMPORT_BYTES: usize = MAX_APPEND_BYTES;

/// How often `od log copy` reports its progress on stderr, in frames copied: a line every few
/// seconds on a large log, not one per chunk.
pub const COPY_PROGRESS_FRAMES: u64 = 10_000;

// --- Browser-action results across daemons (issue 15 Build 3: src/tools/browser_once.rs) ---

/// Most times a browser-action result (or a request that supersedes others) is re-checked and
/// re-appended after its run stream moved between the check and the append (the append expects the
/// version it checked, so a result another daemon recorded meanwhile is never doubled). A run
/// streaming its agent's output moves its stream often; each retry re-reads only the frames since
/// the request, so a bound well above any plausible run of collisions costs little.
pub const MAX_RESULT_APPEND_TRIES: usize = 64;

/// Frames read per page while looking for an invocation's recorded result in its run stream.
pub const RESULT_SCAN_PAGE: usize = 256;

// --- Runs as data (issue 16): content-addressed artifact blobs (src/blobs.rs) ---

/// Largest artifact a run stores as a blob: a blob is streamed to disk in 64 KiB pieces, so memory
/// does not bound it; this bounds the disk one recorded file can take (a generated site or image is
/// far below; a runaway agent writing gigabytes is refused with `artifact-rejected`).
pub const MAX_BLOB_BYTES: u64 = 256 * 1024 * 1024;

/// A blob up to this size is read and hashed in memory before any file is made for it: one already
/// stored then costs no temp file at all (creating a file, then removing it, made every unchanged
/// artifact an inode allocated and freed — and freed inodes make ext4's next allocations slower;
/// issue 33). Larger blobs are streamed through a temp file in pieces of this size, as before. The
/// same 64 KiB as the streaming buffer, so a recorder never holds more per blob than it did.
pub const BLOB_IN_MEMORY_BYTES: usize = 64 * 1024;

/// How many forks deep a run's lineage may go. Reading a fork's history reads one stream per
/// ancestor: the bound keeps that (and a corrupted link's loop) finite.
pub const MAX_FORK_DEPTH: usize = 64;

/// The largest file `od run diff` shows a unified diff of (bigger or binary files are compared by
/// digest only): a diff is computed in memory and printed whole.
pub const MAX_DIFF_TEXT_BYTES: u64 = 1024 * 1024;

/// How many forks `od run tree` lists below a run (the answer says `truncated` past it).
pub const MAX_TREE_RUNS: usize = 1000;

/// The largest run bundle `od run import` takes (spooled to a file and checked before anything is
/// written; only its manifest and frames are held in memory): a blob's limit, since a bundle usually
/// carries a handful of artifacts.
pub const MAX_RUN_BUNDLE_BYTES: u64 = 256 * 1024 * 1024;

/// Frames of a `snapshot-body:<digest>` stream read looking for the body that hashes to its digest.
/// Only the engine writes there now (notes have `note:` streams); a log from before that rule may
/// hold a few notes squatting such a stream ahead of the body, and this many are skipped.
pub const MAX_BODY_STREAM_SCAN: usize = 64;

/// Bytes of a run bundle's `manifest.json` and of its `frames.bin`, which an import holds in memory
/// (its blobs stream through a hash instead): the frames are a run's events, far below the bundle.
pub const MAX_BUNDLE_FRAMES_BYTES: u64 = 64 * 1024 * 1024;

// --- Connectors (issue 17): src/connectors/ ---

/// The largest `connectors.json` read: it holds definitions (endpoints, tool routes), a few KiB each.
pub const MAX_CONNECTOR_CATALOG_BYTES: usize = 1024 * 1024;

/// How long an OAuth authorization waits for its callback: long enough to log in at the provider
/// and approve, short enough that a stale `state` cannot be replayed days later.
pub const PENDING_AUTH_TTL_MS: i64 = 10 * 60 * 1000;

/// Authorizations waiting at once (each holds a PKCE verifier in memory): a user connects a few
/// accounts at a time; the bound stops a page from filling memory through `connect/start`.
pub const MAX_PENDING_AUTHORIZATIONS: usize = 64;

/// The longest lifetime od believes a provider's `expires_in` (one year): a bigger one — up to
/// 2^64 − 1 seconds, which would overflow the expiry time — is clamped, so the token is refreshed
/// a year on at the latest instead of looking expired before its first use.
pub const MAX_TOKEN_LIFETIME_MS: i64 = 365 * 24 * 60 * 60 * 1000;

/// Deadline of one request to a provider (token exchange, refresh, an API call): a provider that
/// stops answering must not hold an agent's tool call forever.
pub const OAUTH_HTTP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The largest provider answer a connector tool call returns to the agent (read whole, as JSON).
pub const MAX_CONNECTOR_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;

/// How long a run's tool token lives: past the longest agent invocation od allows, and renewed
/// with each invocation (a token outlives neither the daemon, whose key it needs, nor the run,
/// whose state every call re-reads).
pub const TOOL_TOKEN_TTL_MS: i64 = 6 * 60 * 60 * 1000;

/// Files the `code-import` worker lists in `code/index.json`: a repository's source tree is a few
/// thousand files; past the bound the index says `truncated` (a vendored tree must not stall a stage).
pub const MAX_CODE_INDEX_FILES: usize = 20_000;

/// Files larger than this are listed by `code-import` with their size only (no digest, no line
/// count): they are data, not code, and reading them would cost the stage for nothing.
pub const MAX_CODE_INDEX_FILE_BYTES: u64 = 2 * 1024 * 1024;

/// Hot reload of linked plugins: the watcher's period, and the quiet time a changed folder must
/// hold before it is loaded again (an editor's save is several writes; 500 ms is the spec's default).
pub const HOT_RELOAD_DEBOUNCE_MS: u64 = 500;

/// Entries of a linked folder the watcher's fingerprint covers: a plugin is a few dozen files; a
/// folder with a `node_modules` inside must not make every period walk a hundred thousand.
pub const HOT_RELOAD_MAX_FILES: usize = 5_000;

/// The largest file a plugin's preview endpoints serve (spec §9.2 "resources over the size cap"):
/// a preview page, its images and a short clip; read whole into the response.
pub const MAX_PREVIEW_ASSET_BYTES: u64 = 16 * 1024 * 1024;

/// Wrong tokens one client address may present (on `/api/*` or at login) in one window before it
/// is throttled (`http/throttle.rs`): a person mistypes a few times; a guesser needs millions.
/// Twenty leaves room for a browser's stale login cookie.
pub const AUTH_FAILURES_PER_WINDOW: u32 = 20;

/// Once an address is throttled, the `OD_API_TOKEN` candidates it may still have checked at once
/// (then one more per [`AUTH_FAILURE_WINDOW_MS`] / [`AUTH_FAILURES_PER_WINDOW`]): the right token
/// from the same address (a person behind the same NAT, or on the same machine) still gets in,
/// while a guesser stays at about twenty guesses a minute.
pub const AUTH_THROTTLED_CHECKS: u32 = 5;

/// How long a browser session (a login) lasts: a working day and its night. A stolen cookie is
/// good at most this long; logging in again is one paste.
pub const SESSION_TTL_MS: i64 = 24 * 60 * 60 * 1000;

/// Live browser sessions a daemon keeps (in memory): past it expired ones go, then the oldest.
/// A person has a few browsers; a script logging in in a loop must not grow the daemon.
pub const MAX_SESSIONS: usize = 1_000;

/// The window those failures are counted in (and the longest a blocked client waits).
pub const AUTH_FAILURE_WINDOW_MS: i64 = 60_000;

/// Client addresses the failure count remembers: beyond it the oldest window is forgotten, so a
/// flood of addresses (IPv6) cannot grow the daemon's memory.
pub const MAX_THROTTLED_CLIENTS: usize = 10_000;

// --- Outbound requests (issue 36 #7, #9; issue 39 #3, #4): src/net/ ---

/// Deadline of one outbound fetch that has none of its own (a marketplace index, a plugin
/// archive): connect, redirects, headers and body together. `OD_OUTBOUND_TIMEOUT_MS` overrides it.
/// A server that trickles a byte a second must not hold a request (and the daemon's stop) forever;
/// 60 s fetches a 50 MiB archive at under 1 MiB/s.
pub const OUTBOUND_TIMEOUT_MS: u64 = 60_000;

/// How long connecting to an outbound server (or its proxy) may take, TCP only, within the
/// request's deadline: a host that drops SYNs fails in this, not after the whole deadline. 10 s
/// covers a SYN retransmitted twice (1 s, then 3 s) on a lossy path. `OD_OUTBOUND_CONNECT_TIMEOUT_MS`
/// overrides it.
pub const OUTBOUND_CONNECT_TIMEOUT_MS: u64 = 10_000;

/// How long an outbound https server may send nothing (the TLS handshake, the answer's head, any
/// part of its body) before the request is given up, within the deadline: a connection that died
/// mid-download fails in this, not at the end of the deadline. 30 s is longer than any pause a
/// working server or proxy makes. `OD_OUTBOUND_READ_TIMEOUT_MS` overrides it. Plain http (loopback
/// only) is bounded by the deadline alone (src/net/stall.rs says why).
pub const OUTBOUND_READ_TIMEOUT_MS: u64 = 30_000;

/// How long a stopping daemon waits, once its stop is recorded, for work still running on blocking
/// threads (a download before its deadline): the requests were already given up by the drain
/// ([`HTTP_SHUTDOWN_DRAIN_MS`]), and the log is safe at any point, so SIGTERM ends the process
/// about this much after the drain.
pub const SHUTDOWN_BLOCKING_GRACE_MS: u64 = 1_000;

/// Redirects an outbound GET follows (each to the same host, each checked by the URL rule).
pub const MAX_OUTBOUND_REDIRECTS: usize = 5;

/// Entries of `OD_OUTBOUND_ALLOW` or `OD_OUTBOUND_DENY` (`src/net/policy.rs`): each is compared
/// with every address a host resolves to, linearly; an operator's list is a few dozen entries, and
/// a variable pasted from somewhere else by mistake must fail at start, not slow every request.
pub const MAX_OUTBOUND_LIST_ENTRIES: usize = 1_024;

/// The largest marketplace index read (a file or a download): the official index lists a few
/// hundred entries in well under 1 MiB; 4 MiB leaves room for thousands.
pub const MAX_MARKETPLACE_INDEX_BYTES: u64 = 4 * 1024 * 1024;

// --- Diffs (issue 36 #6): src/engine/run_diff.rs, run_files.rs ---

/// CPU time one text diff may take before it gives up with `diff-too-costly` (the diff library's
/// own deadline): two 1 MiB texts with nothing in common took 30 s without one. A person reads a
/// diff that took longer than this as a file replaced whole anyway.
pub const DIFF_DEADLINE_MS: u64 = 2_000;

// --- Project files (issue 36 #15): src/engine/files.rs ---

/// The longest name (one path component) of a project file: what Linux file systems hold
/// (`NAME_MAX`); a longer one is refused as bad input naming the path, before the OS is asked.
pub const MAX_FILE_NAME_BYTES: usize = 255;

/// Derived-copy repairs (issue 38) a daemon keeps for `od doctor` since it started: a repair is
/// rare (a power cut, a hand edit); a data dir damaged over and over must not grow memory.
pub const MAX_REPAIRS_KEPT: usize = 1_000;

/// Threads one batch of fsyncs (a run's project copies, a plugin's tree) is issued from: fsyncs
/// issued together are committed together by the file system's journal; a few threads get most of
/// that, and a batch of thousands must not start thousands of threads.
pub const MAX_SYNC_THREADS: usize = 8;

// --- Conversations and follow-ups (issue 30 item 3): src/engine/conversations.rs ---

/// The longest agent reply a run records as its conversation message (its agent text output,
/// joined; the rest is cut at a character boundary and marked): the message must fit one event
/// ([`MAX_EVENT_BYTES`]) beside its ids, and a follow-up's prompt carries every earlier reply.
pub const MAX_AGENT_REPLY_BYTES: usize = 16 * 1024;

/// Most earlier runs of a conversation a follow-up builds on (the newest ones): their events are
/// read for every prompt of the follow-up (and its replay), so a conversation of thousands of runs
/// must not make each prompt read thousands of streams.
pub const MAX_FOLLOW_UP_RUNS: usize = 32;

/// Most runs of a conversation `GET …/conversations/:cid/messages` reads (the newest ones; the
/// answer says `truncated`): each is one stream read.
pub const MAX_CONVERSATION_RUNS_LISTED: usize = 500;

// --- The prompt stack's token budget (issue 30 item 1): src/engine/prompt/stack.rs ---

/// Default prompt budget (estimated tokens) of an exec agent. Code agents run on models with
/// 128k–200k-token contexts; the prompt gets about half of the smaller, leaving the rest to the
/// agent's own system prompt, the files it reads and its tool results. The agent catalog's
/// per-agent context sizes will replace this default in `stack::budget_for` (one lookup).
pub const PROMPT_BUDGET_TOKENS_EXEC: u64 = 64_000;

/// Default prompt budget of the dry-run agent: no model reads it, but a dry run shows what a
/// modest agent would get (a 32k-context model's prompt), so trimming is visible before a real run.
pub const PROMPT_BUDGET_TOKENS_DRY_RUN: u64 = 16_000;

/// Smallest `promptBudgetTokens` a run may ask for: below it the never-trimmed parts (od's base
/// prompt alone is ~510 o200k tokens) would always pass it.
pub const MIN_PROMPT_BUDGET_TOKENS: u64 = 256;

/// Largest `promptBudgetTokens` a run may ask for: no model od drives has a context near 2M tokens;
/// a larger number is a typo, and staged context is bounded by `MAX_STAGED_BYTES` anyway.
pub const MAX_PROMPT_BUDGET_TOKENS: u64 = 2_000_000;

/// The estimator's error bound against tiktoken o200k_base per document of the measured corpus
/// (percent of the real count; documents under 40 tokens may be off by 6 tokens instead), checked
/// by `tests/runs/prompt_tokens.rs`. Budgets are set well inside context sizes to absorb it.
pub const PROMPT_ESTIMATOR_MAX_ERROR_PCT: f64 = 20.0;

/// Prompt-part token counts remembered by the text's hash (`engine::prompt::stack`): a daemon
/// composes the same few skills, design systems and plugin blocks over and over; 4,096 entries of
/// 40 bytes is at most ~200 KB, and a full memo is emptied, not grown.
pub const PROMPT_ESTIMATE_MEMO_ENTRIES: usize = 4096;

/// Texts shorter than this are counted rather than looked up (hashing and locking cost about as
/// much as counting a few hundred bytes).
pub const PROMPT_ESTIMATE_MEMO_MIN_BYTES: usize = 512;

/// The estimator's error bound on the whole corpus (the sum of its documents), percent.
pub const PROMPT_ESTIMATOR_MAX_TOTAL_ERROR_PCT: f64 = 3.0;

// --- ACP agents (issue 31 item 4): src/runner/acp/ ---

/// How long an ACP agent has to answer `session/cancel` with its `cancelled` stop reason before
/// od ends its process group: the spec asks agents to stop promptly; one that does not is killed.
pub const ACP_CANCEL_GRACE_MS: u64 = 3_000;

/// How long an ACP agent has to answer `initialize`, `authenticate` and `session/new` (the
/// handshake before any model call): a binary that prints nothing this long is not speaking ACP.
pub const ACP_HANDSHAKE_TIMEOUT_MS: u64 = 60_000;

/// Largest file an ACP agent may read through `fs/read_text_file` (held in memory and sent as
/// one JSON-RPC line): the same bound as a project file written through the API.
pub const ACP_MAX_READ_BYTES: usize = MAX_PROJECT_FILE_BYTES;

/// Largest content an ACP agent may write through `fs/write_text_file` (one JSON-RPC line held in
/// memory, then an artifact): the bound on a project file.
pub const ACP_MAX_WRITE_BYTES: usize = MAX_PROJECT_FILE_BYTES;

/// Longest JSON-RPC line od reads from an ACP agent: a write of [`ACP_MAX_WRITE_BYTES`] escaped
/// (worst case doubled) plus its envelope; longer lines are dropped as malformed.
pub const ACP_MAX_LINE_BYTES: usize = 2 * ACP_MAX_WRITE_BYTES + 64 * 1024;

/// Permission requests of one ACP invocation waiting for an answer at once: an agent asks one at
/// a time; more than this is a runaway and is answered `cancelled`.
pub const ACP_MAX_PENDING_ASKS: usize = 16;

/// Tool calls of one ACP invocation whose kind and locations od remembers (to judge a later
/// permission request): a real turn makes a few dozen.
pub const ACP_MAX_TRACKED_TOOL_CALLS: usize = 1_000;

/// Bytes of an ACP agent's stderr kept for a crash report (`AgentFailure::Crashed`).
pub const ACP_STDERR_TAIL_BYTES: usize = 4_096;

/// Longest one agent detection probe (`--version`, `--help`, the auth probe, the model list) may
/// take before its process group is killed. Measured with the real npm CLIs on a 2-core machine
/// at load 9: `--version` took 0.4 s (claude, codex), 2.2 s (copilot), 2.5 s (qwen), 3.3 s
/// (opencode), 7.2 s (gemini, which starts itself again in a bigger Node unless
/// `GEMINI_CLI_NO_RELAUNCH` is set) — and past 5 s for three of them with four runs starting at
/// once. 20 s keeps a loaded machine's real CLIs available; a hung binary is still diagnosed, and
/// the result is cached ([`AGENT_PROBE_CACHE_TTL_MS`]).
pub const AGENT_PROBE_TIMEOUT_MS: u64 = 20_000;

/// How long one agent's detection is reused (same binary path and modification time). An
/// install or upgrade changes the path or mtime and is seen at once; a login is seen within this.
pub const AGENT_PROBE_CACHE_TTL_MS: i64 = 300_000;

/// Most bytes of a probe's stdout or stderr kept (a version line, a help text, a model list).
pub const AGENT_PROBE_OUTPUT_BYTES: usize = 256 * 1024;

/// Most models kept from a CLI's own model list.
pub const MAX_AGENT_MODELS: usize = 500;

/// Most `<data-dir>/agents/*.json` files read, and most entries the detection cache holds:
/// a catalog is tens of agents; more is a mistake, not a catalog.
pub const MAX_AGENT_CATALOG_FILES: usize = 256;
pub const MAX_AGENT_CATALOG_ENTRIES: usize = 1024;

/// Largest agent catalog file.
pub const MAX_AGENT_CATALOG_FILE_BYTES: usize = 256 * 1024;

/// Largest prompt put in an agent's command line (agents declaring `argv` delivery); a longer one
/// goes the entry's fallback way (stdin or a file). Linux caps one argument at 128 KiB
/// (MAX_ARG_STRLEN); 96 KiB leaves room for the rest of the command line.
pub const MAX_PROMPT_ARGV_BYTES: usize = 96 * 1024;

/// Longest `od agents test <id>` waits for the agent's answer to "say ok" before killing it.
pub const AGENT_TEST_TIMEOUT_MS: u64 = 120_000;

/// How long `od open` waits to see whether the browser opener failed: `xdg-open`/`open` hand the
/// URL to the browser and exit at once, so an exit with an error inside this window means nothing
/// opened; one still running after it (an `OD_BROWSER` that is the browser itself) counts as opened.
pub const OPENER_EXIT_WAIT_MS: u64 = 3_000;

/// How long a run's artifact-preview address stays valid (`http/artifact_preview.rs`): the web UI
/// asks for a fresh one each time it shows an artifact, so an hour only has to outlast a page
/// that stays open; a copied address stops working after it.
pub const PREVIEW_URL_TTL_MS: i64 = 3_600_000;
