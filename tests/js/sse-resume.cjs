// npm `eventsource` (a WHATWG EventSource for Node) on od's run SSE, with a connection dropped
// mid-run (driven by tests/api/agui_clients.rs).
//
// Usage: node sse-resume.cjs <baseUrl> <runId> <gate1> <gate2> <dropAfterEvents>
//
// The run's agent waits for <gate1>, then for <gate2>. The script connects, and after
// <dropAfterEvents> events cuts the connection (the response body is cancelled, as when a network
// drops it) and opens <gate1>, so the run goes on while nobody listens. EventSource reconnects by
// itself and sends Last-Event-ID; once it is open again the script opens <gate2> and reads until
// `end`. Checks: the ids are 1, 2, … with no gap and no duplicate across the drop; the reconnect
// carried Last-Event-ID = the last id seen. Prints a JSON summary; any warning fails.
"use strict";

const fs = require("fs");
const { EventSource } = require("eventsource");

const warnings = [];
for (const level of ["warn", "error"]) {
  const orig = console[level].bind(console);
  console[level] = (...args) => {
    warnings.push(`${level}: ${args.map(String).join(" ")}`);
    orig(...args);
  };
}

const [base, runId, gate1, gate2, dropAfterArg] = process.argv.slice(2);
const dropAfter = Number(dropAfterArg);
const url = `${base}/api/runs/${runId}/events`;
const requests = [];
const ids = [];
const names = [];
let cut = null;

/** fetch that records each request's Last-Event-ID and lets the script cut the first response. */
async function recordingFetch(input, init) {
  const headers = new Headers(init && init.headers);
  requests.push({ lastEventId: headers.get("last-event-id"), lastSeen: ids.length ? String(ids[ids.length - 1]) : null });
  const res = await fetch(input, init);
  if (requests.length > 1 || !res.body) return res;
  const reader = res.body.getReader();
  let controllerRef;
  const body = new ReadableStream({
    start(c) {
      controllerRef = c;
    },
    async pull(c) {
      const { done, value } = await reader.read().catch(() => ({ done: true }));
      if (done) c.close();
      else c.enqueue(value);
    },
    cancel() {
      return reader.cancel();
    },
  });
  cut = () => {
    reader.cancel().catch(() => {});
    controllerRef.close();
  };
  return new Response(body, { status: res.status, headers: res.headers });
}

function main() {
  return new Promise((resolve, reject) => {
    let dropped = false;
    let opens = 0;
    const es = new EventSource(url, { fetch: recordingFetch });
    const timer = setTimeout(() => reject(new Error(`timed out; ids so far ${ids.join(",")}`)), 60000);
    es.addEventListener("open", () => {
      opens += 1;
      if (opens === 2) fs.writeFileSync(gate2, "go");
    });
    es.addEventListener("error", (e) => {
      // A reconnect after the cut is expected; anything after `end` is not.
      if (names[names.length - 1] === "end") reject(new Error(`error after end: ${e.message}`));
    });
    const onEvent = (ev) => {
      ids.push(Number(ev.lastEventId));
      names.push(ev.type);
      if (!dropped && ids.length === dropAfter) {
        dropped = true;
        cut();
        fs.writeFileSync(gate1, "go");
      }
      if (ev.type === "end") {
        clearTimeout(timer);
        es.close();
        resolve({ ids, names, opens });
      }
    };
    for (const name of [
      "pipeline_stage_started", "pipeline_stage_completed", "pipeline_stage_failed", "prompt_composed", "start",
      "agent", "stdout", "stderr", "signal", "artifact", "devloop_iteration", "devloop_broken", "run_responded",
      "genui_surface_request", "genui_surface_response", "genui_surface_timeout", "end", "message",
    ]) {
      es.addEventListener(name, onEvent);
    }
  });
}

main()
  .then(({ ids, names, opens }) => {
    const problems = [];
    ids.forEach((id, i) => {
      if (id !== i + 1) problems.push(`event ${i} has id ${id}, expected ${i + 1}`);
    });
    if (requests.length < 2) problems.push("no reconnect");
    else if (requests[1].lastEventId !== requests[1].lastSeen)
      problems.push(`reconnect sent Last-Event-ID ${requests[1].lastEventId}, last seen ${requests[1].lastSeen}`);
    if (ids.length <= dropAfter) problems.push("nothing arrived after the reconnect");
    if (requests[0].lastEventId !== null) problems.push("the first request carried a Last-Event-ID");
    const summary = { ok: problems.length === 0 && warnings.length === 0, ids, names, opens, requests, problems, warnings };
    console.log(JSON.stringify(summary));
    process.exit(summary.ok ? 0 : 3);
  })
  .catch((err) => {
    console.log(JSON.stringify({ ok: false, error: String(err), requests, warnings }));
    process.exit(2);
  });
