// Issue 39 #2: an agent-written HTML artifact cannot act as the person. The artifact
// (tests/fixtures/ui/agents/hostile-artifact.mjs) holds `<a ping="/api/daemon/stop">`, a form
// posting `text/plain` to the same route, and an inline script fetching it and appending a note.
// Shown in the run page's preview — a fully sandboxed frame, an opaque origin — clicking the link
// and the form changes nothing: every request that leaves the frame is refused (the ping as
// another origin's, `Origin: null`, and as a `text/ping` body), the daemon still answers, and
// nothing was recorded in the log. The preview still shows the artifact.

import assert from "node:assert/strict";
import { join } from "node:path";

export async function flow({ page, context, daemon, repo, api, until, openApp, screenshot, assertNoPageErrors }) {
  await api("POST", "/api/plugins/install", { source: join(repo, "tests", "fixtures", "ui", "plugins", "page-asker") });
  const agent = join(repo, "tests", "fixtures", "ui", "agents", "hostile-artifact.mjs");
  const started = await api("POST", "/api/runs", { pluginId: "page-asker", agent: "exec", agentCommand: [process.execPath, agent] });
  assert.equal(started.status, 202, JSON.stringify(started.body));
  const { runId } = started.body;
  await until("the run's end", async () => (await api("GET", `/api/runs/${runId}`)).body.run.status === "succeeded", 30000);

  // Every request to the daemon's stop route, from any frame, with the answer it got.
  const aimed = [];
  context.on("requestfinished", async (req) => {
    if (!req.url().includes("/api/daemon/stop") && !req.url().includes("/api/log/notes")) return;
    const res = await req.response();
    aimed.push({ url: req.url(), method: req.method(), type: req.headers()["content-type"] ?? null, status: res ? res.status() : null });
  });
  context.on("requestfailed", (req) => {
    if (req.url().includes("/api/")) aimed.push({ url: req.url(), method: req.method(), failed: req.failure()?.errorText });
  });

  await openApp(page, `#/runs/${runId}`);
  const frame = page.locator("#artifact-preview iframe");
  await frame.waitFor();
  assert.equal(await frame.getAttribute("sandbox"), "", "an opaque origin, no scripts, no forms");
  const inner = frame.contentFrame();
  assert.match(await inner.locator("h1").textContent(), /A very good offer/, "the artifact is shown");
  const before = (await api("GET", "/api/health")).body.lastSeq;

  // The form first: the link then navigates the frame away (its `#more` resolves against the
  // run page's URL, a srcdoc frame's base).
  await inner.locator("#send").click();
  await inner.locator("#ping").click();
  await page.waitForTimeout(1500); // pings and form posts leave after the click returns

  const health = await api("GET", "/api/health");
  assert.equal(health.status, 200, "the daemon still answers");
  assert.equal(health.body.lastSeq, before, "nothing was recorded");
  // Whatever the browser sent toward the API was refused, never served.
  for (const r of aimed) assert.ok(r.failed || r.status >= 400, `served: ${JSON.stringify(r)}`);
  console.log(`  requests from the artifact toward the API: ${JSON.stringify(aimed)}`);
  // The run page itself keeps working.
  assert.match(await page.locator("#artifacts-title").textContent(), /Artifacts/);
  await screenshot(page, "artifact-isolation");
  // The frame's blocked script and form, and the refused requests, are the browser's own reports.
  assertNoPageErrors(page, "artifact isolation", [/sandboxed/i, /Blocked/i, /403|415/, /Content Security Policy/i]);
}
