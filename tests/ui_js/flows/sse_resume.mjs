// An SSE connection dropped mid-run resumes with no gap and no duplicate: a run waits on a GenUI
// form with its page open; the daemon is restarted on the same port (every connection drops; the
// waiting run survives the restart); the page's stream reconnects from the last event id it
// delivered; answering the form then takes the run to its end. The timeline holds each event id
// exactly once, 1..lastEventId, in order.

import assert from "node:assert/strict";
import { join } from "node:path";

export async function flow({ page, daemon, repo, api, until, openApp, screenshot, assertNoPageErrors }) {
  await api("POST", "/api/plugins/install", { source: join(repo, "tests", "fixtures", "ui", "plugins", "brief") });
  const { runId } = (await api("POST", "/api/runs", { pluginId: "brief", message: "resume me" })).body;
  await openApp(page, `#/runs/${runId}`);
  const card = page.locator('#run-surfaces [data-surface="project-brief"]');
  await card.waitFor();
  await page.locator('#run-conn[data-state="live"]').waitFor();
  const before = await page.locator("#timeline li").count();
  const pid = daemon.pid;

  await daemon.restart();
  assert.notEqual(daemon.pid, pid, "a new daemon process");
  // The page noticed the drop and came back live on its own.
  await until("the page's stream to drop and come back", async () =>
    Number(await page.locator("#run-conn").getAttribute("data-drops")) >= 1 &&
    (await page.locator("#run-conn").getAttribute("data-state")) === "live", 30000);
  assert.equal(await page.locator("#timeline li").count(), before, "nothing replayed twice");

  await card.getByLabel("Audience").fill("returning readers");
  await card.getByRole("button", { name: "Send" }).click();
  await page.locator('#timeline li[data-event="end"]').waitFor({ timeout: 30000 });
  const server = (await api("GET", `/api/runs/${runId}`)).body.run;
  const seqs = await page.locator("#timeline li").evaluateAll((l) => l.map((x) => Number(x.dataset.seq)));
  assert.deepEqual(seqs, Array.from({ length: server.lastEventId }, (_, i) => i + 1), "every event once, in order");
  assert.equal(server.status, "succeeded");
  await screenshot(page, "sse-resumed");
  // The dropped connection itself is reported by the browser; nothing else may be.
  assertNoPageErrors(page, "sse resume", [/ERR_CONNECTION_REFUSED|net::|EventSource/]);
}
