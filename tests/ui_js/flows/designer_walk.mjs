// Issue 34's Show, as one walk a designer takes. Home: "Use" on the Studio card hydrates the brief
// and the chips; the designer fills the topic, edits the brief and removes a chip, and sends it
// with the configured exec agent (tests/fixtures/ui/agents/studio.mjs). In the run's chat the
// agent's three directions come as cards; the designer picks one. The draft in that direction
// shows in the preview (its CSS applied) while the run asks whether to refine it; Send with
// nothing picked is refused at the field, Yes goes on, and the preview follows the page live to the
// finished one while the critique panel shows the rounds. A follow-up from the composer continues the same project and conversation (the picked
// direction carried into it); the two versions compare side by side; the first run's page still
// previews what it recorded while the project's file is version 2.

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = join(fileURLToPath(import.meta.url), "..", "..", "..", "..");
const agent = join(repoRoot, "tests", "fixtures", "ui", "agents", "studio.mjs");
export const daemonEnv = { OD_AGENT_CMD: `'${process.execPath}' '${agent}'`, OD_AGENT: "" };

const runIdOf = (page) => decodeURIComponent(page.url().split("#/runs/")[1]);

/** The run page's preview frame's heading, once it reads `text`; returns the frame. */
async function previewShows(page, until, text) {
  await until(`the preview to show "${text}"`, async () => {
    const frame = page.locator("#artifact-preview iframe").contentFrame();
    return (await frame.locator("h1").textContent({ timeout: 500 }).catch(() => null)) === text;
  }, 30000);
  return page.locator("#artifact-preview iframe").contentFrame();
}

/** Answers the run's confirmation: Send with nothing picked is refused at the field, then Yes. */
async function confirm(page, api, runId, checkA11y, screenshot) {
  const card = page.locator('.chat section.surface[data-surface="go-ahead"]');
  await card.waitFor({ timeout: 30000 });
  await card.getByRole("button", { name: "Send" }).click();
  const alert = card.locator('[role="alert"].genui-error');
  await alert.first().waitFor();
  assert.match(await alert.first().textContent(), /no answer was given/);
  assert.ok((await card.locator('[aria-invalid="true"]').count()) > 0, "the Yes/No group is marked invalid");
  const pending = (await api("GET", `/api/runs/${runId}/genui`)).body.surfaces;
  assert.ok(pending.some((s) => s.surfaceId === "go-ahead" && s.status === "pending"), "nothing recorded: it still waits");
  if (checkA11y) await checkA11y(page, "walk: a confirmation refused with no pick");
  if (screenshot) await screenshot(page, "walk-confirm-refused");
  await card.getByLabel("Yes").check();
  await card.getByRole("button", { name: "Send" }).click();
  await card.waitFor({ state: "detached" });
}

export async function flow({ page, repo, api, until, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  const installed = await api("POST", "/api/plugins/install", { source: join(repo, "tests", "fixtures", "ui", "plugins", "studio") });
  assert.equal(installed.status, 200, JSON.stringify(installed.body));

  // Home: the Studio card, its brief and chips.
  await openApp(page, "#/");
  await page.getByRole("button", { name: "Use Studio" }).click();
  await page.getByLabel("Topic").fill("a tea shop");
  const brief = page.getByLabel("Brief");
  await until("the brief to hydrate", async () => (await brief.inputValue()) === "A landing page for a tea shop.");
  await brief.fill("A landing page for a tea shop, with a tasting menu.");
  const chips = page.getByRole("list", { name: "Context" });
  await chips.locator('li[data-key="craft:craft.md"]').waitFor();
  await page.getByRole("button", { name: "Remove craft craft.md" }).click();
  await page.getByRole("button", { name: "Restore 1 removed" }).waitFor();
  await checkA11y(page, "walk: home with Studio applied");
  await screenshot(page, "walk-home");
  await page.getByRole("button", { name: "Send" }).click();
  await page.waitForURL(/#\/runs\//);
  const first = runIdOf(page);

  // The directions, as cards in the chat.
  const pick = page.locator('.chat section.surface[data-surface="direction-choice"]');
  await pick.waitFor({ timeout: 30000 });
  // In line in the conversation: the brief, the agent's words as they stream, then its question.
  await page.locator("#conversation-live").getByText("Here are three directions; pick one.").waitFor();
  assert.ok(await page.evaluate(() => {
    const [msg, live, card, composer] = ["#conversation-messages li[data-role=user]", "#conversation-live",
      '[data-surface="direction-choice"]', "#follow-up-text"].map((q) => document.querySelector(q));
    const before = (a, b) => !!(a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING);
    return before(msg, live) && before(live, card) && before(card, composer);
  }), "message, the agent's words, its question, the composer — in that order");
  const cards = pick.locator("fieldset.genui-cards");
  await cards.waitFor();
  assert.deepEqual(await cards.getByRole("radio").evaluateAll((l) => l.length), 3);
  assert.match(await cards.textContent(), /Warm paper[\s\S]*Cream, rust and a serif headline[\s\S]*Cool glass[\s\S]*Mono grid/);
  await checkA11y(page, "walk: directions as cards");
  await screenshot(page, "walk-directions");
  await cards.getByRole("radio", { name: /Warm paper/ }).check();
  await pick.getByLabel("Anything to adjust?").fill("keep it airy");
  await pick.getByRole("button", { name: "Send" }).click();
  await pick.waitFor({ state: "detached" });

  // The draft shows while the run waits to refine it; once confirmed, the preview follows the
  // page live to the finished one, its CSS applied.
  let frame = await previewShows(page, until, "Warm paper (draft)");
  assert.equal(await frame.locator("h1").evaluate((el) => getComputedStyle(el).color), "rgb(170, 70, 30)");
  await confirm(page, api, first, checkA11y, screenshot);
  frame = await previewShows(page, until, "Warm paper");
  assert.equal(await frame.locator("h1").evaluate((el) => getComputedStyle(el).color), "rgb(170, 70, 30)", "the inline style applies");
  assert.equal(await frame.locator("#lede").evaluate((el) => getComputedStyle(el).fontWeight), "400", "style.css applies");
  await page.waitForFunction(() => document.querySelector("#run-status")?.textContent.trim() === "succeeded", null, { timeout: 30000 });
  const rounds = page.locator("#critique-panel tbody tr");
  assert.equal(await rounds.count(), 2);
  assert.match(await rounds.last().textContent(), /met: critique\.score>=4/);
  await checkA11y(page, "walk: the finished page");
  await screenshot(page, "walk-first-version");
  const a = (await api("GET", `/api/runs/${first}`)).body.run;
  assert.equal(a.agent, "exec");
  const snap = (await api("GET", `/api/applied-plugins/${a.appliedPluginSnapshotId}`)).body.snapshot;
  assert.deepEqual(snap.excludedContext, ["craft:craft.md"], "the removed chip is gone from the run");
  const conv = await api("GET", `/api/projects/${a.projectId}/conversations/${a.conversationId}/messages`);
  assert.deepEqual(conv.body.messages.filter((m) => m.role === "user").map((m) => m.text), ["A landing page for a tea shop, with a tasting menu."]);

  // A follow-up: the same project and conversation, the direction carried, version 2.
  await page.getByLabel("Follow-up message").fill("Make the lede bolder");
  await page.getByRole("button", { name: "Send follow-up" }).click();
  await page.waitForURL((u) => u.hash.startsWith("#/runs/") && !u.hash.endsWith(first));
  const second = runIdOf(page);
  await confirm(page, api, second);
  frame = await previewShows(page, until, "Warm paper — version 2");
  assert.equal(await frame.locator("#lede").evaluate((el) => getComputedStyle(el).fontWeight), "700");
  await page.waitForFunction(() => document.querySelector("#run-status")?.textContent.trim() === "succeeded", null, { timeout: 30000 });
  const b = (await api("GET", `/api/runs/${second}`)).body.run;
  assert.deepEqual([b.projectId, b.conversationId], [a.projectId, a.conversationId], "the follow-up continues the project");
  assert.equal((await api("GET", `/api/projects`)).body.projects.length, 1);

  // The two versions side by side, each as its run recorded it.
  await page.locator("#compare-run").selectOption(first);
  await page.getByRole("button", { name: "Compare versions" }).click();
  const mine = page.getByTitle(`index.html as run ${second.slice(0, 8)} recorded it`).contentFrame();
  const theirs = page.getByTitle(`index.html as run ${first.slice(0, 8)} recorded it`).contentFrame();
  await until("both versions", async () =>
    (await mine.locator("h1").textContent({ timeout: 500 }).catch(() => "")) === "Warm paper — version 2"
    && (await theirs.locator("h1").textContent({ timeout: 500 }).catch(() => "")) === "Warm paper", 20000);
  await checkA11y(page, "walk: two versions compared");
  await screenshot(page, "walk-compare");

  // The first run's page previews what it recorded, though the project's file is version 2 now.
  const current = await api("GET", `/api/projects/${a.projectId}/files/index.html`);
  assert.match(typeof current.body === "string" ? current.body : JSON.stringify(current.body), /version 2/);
  await openApp(page, `#/runs/${first}`);
  frame = await previewShows(page, until, "Warm paper");
  assert.equal(await frame.locator("h1").evaluate((el) => getComputedStyle(el).color), "rgb(170, 70, 30)");
  assertNoPageErrors(page, "designer walk", [/422/]);
}
