// The page is the run's live browser session. An exec agent (tests/fixtures/ui/agents/ask-page.mjs)
// writes an HTML artifact and calls the page's tools through the daemon: the page answers
// `page.read_artifact_text` from its preview with the invocation id (a round trip in the same
// run); two `page.highlight` requests follow, the second superseding the first (whose consent
// question closes); the person declines the second, which the agent gets as USER_DENIED.

import assert from "node:assert/strict";
import { join } from "node:path";

export async function flow({ page, repo, api, until, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  await api("POST", "/api/plugins/install", { source: join(repo, "tests", "fixtures", "ui", "plugins", "page-asker") });
  const agent = join(repo, "tests", "fixtures", "ui", "agents", "ask-page.mjs");
  // The agent command needs the daemon's token (the harness's api sends it), as the CLI would.
  const started = await api("POST", "/api/runs", { pluginId: "page-asker", agent: "exec", agentCommand: [process.execPath, agent] });
  assert.equal(started.status, 202, JSON.stringify(started.body));
  const { runId } = started.body;
  await openApp(page, `#/runs/${runId}`);

  const consent = page.getByRole("dialog", { name: "The agent asks to change the preview" });
  await consent.waitFor({ timeout: 30000 });
  assert.match(await consent.textContent(), /first request/);
  // The second request supersedes the first: its question replaces the first one.
  await until("the superseding request's question", async () => /second request/.test(await page.locator("dialog[open]").first().textContent()), 30000);
  assert.equal(await page.locator("dialog[open]").count(), 1);
  await checkA11y(page, "consent dialog");
  await screenshot(page, "browser-consent");
  await page.locator("dialog[open]").getByRole("button", { name: "Deny" }).click();

  await page.locator('#timeline li[data-event="end"]').waitFor({ timeout: 30000 });
  const said = await page.locator("#agent-text").textContent();
  assert.match(said, /The page shows: Spring tea tasting\s+Saturday at ten/);
  assert.match(said, /highlight 1: SUPERSEDED; highlight 2: USER_DENIED/);

  // The log has each result once, by invocation id, answered by the page.
  const events = await fetch(`${page.url().split("#")[0]}api/runs/${runId}/watch`).then((r) => r.text());
  const lines = events.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
  const requests = lines.filter((l) => l.event === "browser_action_request").map((l) => l.data);
  const results = lines.filter((l) => l.event === "browser_action_result").map((l) => l.data);
  // Every request has exactly one result. A read that reached the page before its preview had
  // loaded was answered TOOL_NOT_AVAILABLE (and retried by the agent); the last read is the answer.
  assert.deepEqual(results.map((r) => r.invocationId).sort(), requests.map((r) => r.invocationId).sort());
  const byTool = (t) => results.filter((r) => r.tool === t);
  const reads = byTool("page.read_artifact_text");
  assert.equal(reads[reads.length - 1].ok, true);
  assert.ok(reads.slice(0, -1).every((r) => r.error && r.error.code === "TOOL_NOT_AVAILABLE"));
  assert.deepEqual(byTool("page.highlight").map((r) => r.error && r.error.code).sort(), ["SUPERSEDED", "USER_DENIED"]);
  await screenshot(page, "browser-tools-end");
  assertNoPageErrors(page, "browser tools");
}
