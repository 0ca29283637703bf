// Real AG-UI clients against a live od run (driven by tests/api/agui_clients.rs).
//
// Usage: node agui-check.cjs <baseUrl> <runId> <answerJson>
//
// 1. The stock @ag-ui/client HttpAgent (POST, RunAgentInput, SSE) runs the od run: its first
//    runAgent() must end with an `interrupt` outcome while the GenUI surface waits; the script then
//    answers through AG-UI itself (runAgent({resume:[{interruptId, status:"resolved", payload}]})) and
//    follows until the run finishes. Every event it receives is checked below.
// 2. The whole projection, fetched raw segment by segment (GET, then GET ?resume=<interruptId>), is
//    checked with @ag-ui/core's zod schemas (EventSchemas), with no extra top-level key, no null
//    anywhere and integer timestamps, and with @ag-ui/client's verifyEvents() ordering rules.
// Prints one JSON summary line on stdout. Any console.warn/console.error (the clients' warnings)
// or any failed check exits non-zero.
"use strict";

const { HttpAgent, verifyEvents } = require("@ag-ui/client");
const { EventSchemas } = require("@ag-ui/core/schemas");
const { from, lastValueFrom, toArray } = require("rxjs");

const warnings = [];
for (const level of ["warn", "error"]) {
  const orig = console[level].bind(console);
  console[level] = (...args) => {
    warnings.push(`${level}: ${args.map(String).join(" ")}`);
    orig(...args);
  };
}

const [base, runId, answerJson] = process.argv.slice(2);
const answer = JSON.parse(answerJson);
const url = `${base}/api/runs/${runId}/agui`;
const shapes = new Map(EventSchemas.options.map((o) => [o.shape.type.value, o.shape]));

function fail(msg) {
  throw new Error(msg);
}

function noNulls(v, path) {
  if (v === null) fail(`null at ${path}`);
  if (Array.isArray(v)) v.forEach((x, i) => noNulls(x, `${path}[${i}]`));
  else if (typeof v === "object") for (const [k, x] of Object.entries(v)) noNulls(x, `${path}.${k}`);
}

/** Schema, strict top-level keys, no null, integer timestamp. */
function checkEvent(e, where) {
  const shape = shapes.get(e.type);
  if (!shape) fail(`${where}: unknown event type ${e.type}`);
  const r = EventSchemas.safeParse(e);
  if (!r.success) fail(`${where}: ${e.type} fails the schema: ${JSON.stringify(r.error.issues)}`);
  for (const k of Object.keys(e)) if (!(k in shape)) fail(`${where}: ${e.type} has an extra key ${k}`);
  noNulls(e, `${where}:${e.type}`);
  if (!Number.isInteger(e.timestamp)) fail(`${where}: ${e.type} timestamp ${e.timestamp} is not an integer`);
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object") return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  return v;
}

async function verifyOrder(events, where) {
  try {
    await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
  } catch (err) {
    fail(`${where}: verifyEvents rejected the stream: ${err.message}`);
  }
}

/** One raw GET of the projection: the events of one segment. */
async function fetchSegment(resume) {
  const res = await fetch(resume ? `${url}?resume=${encodeURIComponent(resume)}` : url, {
    headers: { Accept: "text/event-stream" },
  });
  if (res.status !== 200) fail(`GET ${url}: HTTP ${res.status} ${await res.text()}`);
  const ct = res.headers.get("content-type") || "";
  if (!ct.startsWith("text/event-stream")) fail(`content-type ${ct}`);
  const text = await res.text();
  if (text.includes("\r")) fail("CR in the SSE framing");
  const events = [];
  for (const frame of text.split("\n\n")) {
    const data = frame.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, ""));
    if (data.length) events.push(JSON.parse(data.join("\n")));
  }
  return events;
}

async function drive() {
  const agent = new HttpAgent({ url });
  const seen = [];
  const sub = { onEvent: ({ event }) => void seen.push(event) };
  const interrupts = [];
  let rounds = 0;
  let result;
  for (;;) {
    const pending = agent.pendingInterrupts;
    const resume = pending.map((i) => ({ interruptId: i.id, status: "resolved", payload: answer }));
    ({ result } = await agent.runAgent(resume.length ? { resume } : {}, sub));
    rounds += 1;
    if (agent.pendingInterrupts.length === 0) break;
    interrupts.push(...agent.pendingInterrupts);
    if (rounds > 10) fail("too many interrupts");
  }
  seen.forEach((e, i) => checkEvent(e, `HttpAgent event ${i}`));
  return { agent, seen, interrupts, rounds, result };
}

async function main() {
  const { agent, seen, interrupts, rounds, result } = await drive();
  if (interrupts.length < 1) fail("the HttpAgent saw no interrupt");
  const first = interrupts[0];
  if (!first.responseSchema || !first.expiresAt || !first.reason) fail(`interrupt shape: ${JSON.stringify(first)}`);

  // The raw projection, segment by segment, ends exactly where the HttpAgent's runs ended.
  const segments = [];
  let resume;
  for (;;) {
    const evs = await fetchSegment(resume);
    segments.push(evs);
    const last = evs[evs.length - 1];
    if (!last || !["RUN_FINISHED", "RUN_ERROR"].includes(last.type)) fail(`segment ${segments.length} has no terminal event`);
    if (last.type === "RUN_FINISHED" && last.outcome && last.outcome.type === "interrupt") {
      resume = last.outcome.interrupts[0].id;
      continue;
    }
    break;
  }
  const all = segments.flat();
  all.forEach((e, i) => checkEvent(e, `raw event ${i}`));
  await verifyOrder(all, "raw projection");
  for (const [i, s] of segments.entries()) await verifyOrder(s, `segment ${i}`);
  if (all.length !== seen.length) fail(`the HttpAgent saw ${seen.length} events, the raw GETs ${all.length}`);
  all.forEach((e, i) => {
    if (JSON.stringify(sortKeys(e)) !== JSON.stringify(sortKeys(seen[i])))
      fail(`event ${i} differs: raw ${JSON.stringify(e)} vs HttpAgent ${JSON.stringify(seen[i])}`);
  });

  const types = new Set(all.map((e) => e.type));
  const msgs = agent.messages;
  const toolCalls = msgs.flatMap((m) => m.toolCalls || []);
  const summary = {
    ok: warnings.length === 0,
    rounds,
    segments: segments.map((s) => s.length),
    types: [...types].sort(),
    steps: all.filter((e) => e.type === "STEP_STARTED").map((e) => e.stepName),
    interrupts: interrupts.map((i) => ({ id: i.id, reason: i.reason, message: i.message })),
    assistantTexts: msgs.filter((m) => m.role === "assistant" && m.content).map((m) => m.content),
    toolCalls: toolCalls.map((t) => ({ id: t.id, name: t.function.name, arguments: t.function.arguments })),
    toolResults: msgs.filter((m) => m.role === "tool").map((m) => ({ toolCallId: m.toolCallId, content: m.content })),
    state: agent.state,
    result,
    usage: all.filter((e) => e.type === "RUN_FINISHED").map((e) => e.usage || null),
    warnings,
  };
  console.log(JSON.stringify(summary));
  if (warnings.length) process.exit(3);
}

main().catch((err) => {
  process.stdout.write(JSON.stringify({ ok: false, error: String(err && err.stack ? err.stack : err), warnings }) + "\n");
  process.exit(2);
});
