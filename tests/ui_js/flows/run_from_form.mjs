// Start a run from a plugin's inputs form and watch it live: the apply preview shows the composed
// brief and the manifest digest; "Start run" opens the run's page, whose stage timeline follows
// the devloop (critique scores 2, 3, 4, the `until` condition and why the loop stopped) until
// `end`, and the critique rounds show each score, the until and what the agent said; the HTML
// artifact is previewed in a sandboxed frame; "Verify replay" checks the digests.

import assert from "node:assert/strict";
import { join } from "node:path";

export async function flow({ page, repo, api, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  const folder = join(repo, "tests", "fixtures", "ui", "plugins", "poster");
  const installed = await api("POST", "/api/plugins/install", { source: folder });
  assert.equal(installed.status, 200);
  await openApp(page, "#/plugins/poster");
  await page.getByLabel("Headline").fill("Spring tea tasting");
  await page.getByLabel("Tone").selectOption("bold");
  await page.getByLabel("Dark background").check();
  await page.getByRole("button", { name: "Preview" }).click();
  const preview = page.getByRole("region", { name: "Apply preview" });
  await preview.waitFor();
  const text = await preview.textContent();
  assert.match(text, /A bold poster headlined "Spring tea tasting"/);
  assert.match(text, /[0-9a-f]{64}/, "the manifest digest");
  await checkA11y(page, "plugin page");
  await screenshot(page, "plugin-form");

  await page.getByRole("button", { name: "Start run" }).click();
  await page.waitForURL(/#\/runs\//);
  const runId = decodeURIComponent(page.url().split("#/runs/")[1]);
  // Live: the page shows the run before it ends, then every stage and iteration as they happen.
  await page.locator('#timeline li[data-event="end"]').waitFor({ timeout: 30000 });
  // The status line follows the end event: wait for it rather than read it once.
  await page.waitForFunction(() => document.querySelector("#run-status")?.textContent.trim() === "succeeded", null, { timeout: 30000 });
  const critique = page.locator('[data-stage="critique"]');
  assert.match(await critique.textContent(), /until critique\.score>=4 \|\| iterations>=5/);
  assert.deepEqual(await critique.locator("[data-iteration]").evaluateAll((l) => l.map((x) => x.dataset.iteration)), ["1", "2", "3"]);
  assert.match(await critique.locator("[data-iteration]").last().textContent(), /critique\.score=4.*stopped: until-satisfied/);
  // The critique theater: one row per round — its score, whether the until was met, what the
  // agent said in that round.
  const rows = page.locator("#critique-panel tbody tr");
  assert.deepEqual(await rows.evaluateAll((l) => l.map((r) => [r.dataset.loop, r.dataset.round])), [["critique", "1"], ["critique", "2"], ["critique", "3"]]);
  const cells = await rows.evaluateAll((l) => l.map((r) => [...r.cells].map((c) => c.textContent)));
  assert.deepEqual(cells.map((c) => c[2].match(/critique\.score=(\d)/)[1]), ["2", "3", "4"]);
  assert.deepEqual(cells.map((c) => c[3].startsWith("not yet") ? "not yet" : c[3].startsWith("met") ? "met" : c[3]), ["not yet", "not yet", "met"]);
  assert.match(cells[0][4], /critique/, "what the agent said in round 1");
  const frame = page.locator("#artifact-preview iframe");
  assert.equal(await frame.getAttribute("sandbox"), "", "an opaque origin: no scripts, forms or same-origin access in the artifact frame");
  assert.match(await frame.contentFrame().locator("h1").textContent(), /Spring tea tasting/);

  await page.getByRole("button", { name: "Verify replay" }).click();
  await page.locator("#verify-result").waitFor();
  assert.match(await page.locator("#verify-result").textContent(), /Replay verified: [1-9]\d* prompt digests match/);
  const server = await api("GET", `/api/runs/${runId}`);
  const seqs = await page.locator("#timeline li").evaluateAll((l) => l.map((x) => Number(x.dataset.seq)));
  assert.deepEqual(seqs, Array.from({ length: server.body.run.lastEventId }, (_, i) => i + 1));
  await checkA11y(page, "run page");
  await screenshot(page, "run-live-end");
  assertNoPageErrors(page, "run from form");
}
