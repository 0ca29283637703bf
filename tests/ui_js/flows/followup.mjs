// A follow-up from the web UI (issue 30 item 3): a first run with a message ends (the daemon's
// configured exec agent, tests/fixtures/agents/write-page.sh); its page shows the conversation —
// the person's message and the agent's reply; the person types a follow-up in the composer and
// sends it; the follow-up's page (same conversation) shows both runs' messages, oldest first, and
// the follow-up ran only the pipeline's last stage (the default scenario declares no follow-up);
// the project page lists the conversation's messages; its rail opens on "What next" (plugins that
// refine the page it holds), and All with a filter finds the others.

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = join(fileURLToPath(import.meta.url), "..", "..", "..", "..");
export const daemonEnv = { OD_AGENT_CMD: join(repoRoot, "tests", "fixtures", "agents", "write-page.sh"), OD_AGENT: "" };

const messages = (page) => page.locator("#conversation-messages li[data-role]");

export async function flow({ page, api, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  const started = await api("POST", "/api/runs", { message: "Make a tea shop page" });
  assert.equal(started.status, 202, JSON.stringify(started.body));
  const first = started.body.runId;
  await openApp(page, `#/runs/${first}`);
  await page.locator('#timeline li[data-event="end"]').waitFor({ timeout: 30000 });
  // The status line follows the end event: wait for it rather than read it once.
  await page.waitForFunction(() => document.querySelector("#run-status")?.textContent.trim() === "succeeded", null, { timeout: 30000 });
  await page.locator('#conversation-messages li[data-role="agent"]').waitFor();
  assert.deepEqual(await messages(page).evaluateAll((l) => l.map((x) => x.dataset.role)), ["user", "agent"]);
  assert.match(await messages(page).first().textContent(), /Make a tea shop page/);
  assert.match(await messages(page).last().textContent(), /exec agent wrote index\.html/);

  await page.getByLabel("Follow-up message").fill("Now make it blue");
  await checkA11y(page, "run page with its conversation");
  await page.getByRole("button", { name: "Send follow-up" }).click();
  await page.waitForURL((u) => u.hash.startsWith("#/runs/") && !u.hash.endsWith(first));
  const second = decodeURIComponent(page.url().split("#/runs/")[1]);
  await page.locator('#timeline li[data-event="end"]').waitFor({ timeout: 30000 });
  // The status line follows the end event: wait for it rather than read it once.
  await page.waitForFunction(() => document.querySelector("#run-status")?.textContent.trim() === "succeeded", null, { timeout: 30000 });
  await page.locator(`#conversation-messages li[data-role="agent"][data-run="${second}"]`).waitFor();
  const shown = await messages(page).evaluateAll((l) => l.map((x) => [x.dataset.run, x.dataset.role]));
  assert.deepEqual(shown, [[first, "user"], [first, "agent"], [second, "user"], [second, "agent"]]);
  const text = await page.locator("#conversation-messages").textContent();
  assert.match(text, /Make a tea shop page[\s\S]*Now make it blue/, "both messages, oldest first");

  // The same conversation, and only the last stage ran.
  const [a, b] = await Promise.all([first, second].map(async (id) => (await api("GET", `/api/runs/${id}`)).body.run));
  assert.equal(b.conversationId, a.conversationId);
  assert.equal(b.projectId, a.projectId);
  const plan = await page.locator('#timeline li[data-event="follow_up_planned"]').textContent();
  assert.match(plan, /follow-up: runs \S+ \(last-stage\), builds on 1 run/);
  // The last stage (critique) may loop; it is the only stage the follow-up started.
  const startedRows = await page.locator('#timeline li[data-event="pipeline_stage_started"]').allTextContents();
  const stages = new Set(startedRows.map((t) => t.match(/stage (\S+) started/)[1]));
  assert.deepEqual([...stages], [plan.match(/runs (\S+) \(/)[1]], "the follow-up ran only the planned stage");
  await checkA11y(page, "follow-up run page");
  await screenshot(page, "follow-up");

  // The project page opens on chat beside canvas: the latest run's conversation (both runs'
  // messages, the composer) and the project's latest page as its run recorded it.
  await openApp(page, `#/projects/${b.projectId}`);
  // (The run page's list is gone once the project page's canvas is there.)
  const canvas = page.getByRole("region", { name: "Canvas" });
  await canvas.waitFor();
  await messages(page).nth(3).waitFor();
  assert.deepEqual(await messages(page).evaluateAll((l) => l.map((x) => x.dataset.role)), ["user", "agent", "user", "agent"]);
  await page.getByLabel("Follow-up message").waitFor();
  const frame = canvas.locator("iframe");
  await frame.waitFor();
  assert.equal(await frame.getAttribute("sandbox"), "");
  await frame.contentFrame().locator("h1").waitFor();
  assert.match(await canvas.textContent(), new RegExp(`as run ${second.slice(0, 8)} recorded it`));
  // And lists a conversation's messages on demand.
  await page.getByRole("button", { name: `Messages of ${b.conversationId.slice(0, 8)}` }).click();
  const listed = page.locator("#project-conversation-messages li[data-role]");
  await listed.nth(3).waitFor();
  assert.deepEqual(await listed.evaluateAll((l) => l.map((x) => [x.dataset.run, x.dataset.role])),
    [[first, "user"], [first, "agent"], [second, "user"], [second, "agent"]]);
  await checkA11y(page, "project page with a conversation's messages");

  // A plugin used in this project (the composer under the conversation): its inputs in place,
  // Send starts the next run in the same project and conversation with that plugin.
  // Its rail opens on "What next": with artifacts here, the plugins that refine them — not those
  // that start something new, which All and the filter still find.
  await page.locator("details.rail > summary").click();
  const rail = page.locator("details.rail");
  const nextFacet = rail.getByRole("button", { name: /^What next/ });
  await nextFacet.waitFor();
  assert.equal(await nextFacet.getAttribute("aria-pressed"), "true");
  const offered = async () => rail.locator("article.card h3").evaluateAll((l) => l.map((x) => x.firstChild.textContent));
  assert.deepEqual((await offered()).sort(), ["Design refine", "Tune & collaborate"], "what refines this project's page");
  await rail.getByLabel("Filter plugins").fill("generation");
  assert.deepEqual(await offered(), [], "New generation is not a next step here");
  await rail.getByRole("button", { name: /^All/ }).click();
  assert.ok((await offered()).includes("New generation"), "All with the filter finds it");
  assert.match(await rail.locator('[role="status"]').textContent(), /of \d+ plugins matching "generation"/);
  await checkA11y(page, "project page: the rail filtered");
  await page.getByRole("button", { name: "Use New generation" }).click();
  await page.getByLabel("What to make").fill("landing page");
  await page.getByLabel("Audience").fill("tea lovers");
  await page.getByLabel("Topic").fill("a tea shop");
  await page.getByRole("form", { name: "Next run with a plugin" }).getByRole("button", { name: "Send" }).click();
  await page.waitForURL(new RegExp(`#/runs/(?!${second})`));
  const third = decodeURIComponent(page.url().split("#/runs/")[1]);
  const c = (await api("GET", `/api/runs/${third}`)).body.run;
  assert.deepEqual([c.projectId, c.conversationId, c.pluginId], [b.projectId, b.conversationId, "od-new-generation"]);
  assertNoPageErrors(page, "follow-up");
}
