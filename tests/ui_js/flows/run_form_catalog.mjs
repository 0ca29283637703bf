// The run form offers the detected catalog agents (issue 31): the daemon's PATH holds a fake
// `claude` (tests/fixtures/agents/catalog-bin/claude, answering --version like the real CLI); the
// plugin page lists it with its version, and choosing it shows a model field and the permission
// modes (accept-edits preselected). The person picks claude, types a model and starts the run; it
// succeeds with the claude agent, its command line carrying the mapped flags (the page it writes
// names them). Home's composer offers the same agent and model for a run from a brief.

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = join(fileURLToPath(import.meta.url), "..", "..", "..", "..");
export const daemonEnv = {
  PATH: `${join(repoRoot, "tests", "fixtures", "agents", "catalog-bin")}:/usr/bin:/bin`,
  OD_AGENT: "", OD_AGENT_CMD: "", CLAUDE_BIN: "",
};

export async function flow({ page, repo, api, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  const installed = await api("POST", "/api/plugins/install", { source: join(repo, "tests", "fixtures", "ui", "plugins", "page-asker") });
  assert.equal(installed.status, 200, JSON.stringify(installed.body));

  await openApp(page, "#/plugins/page-asker");
  const agent = page.getByLabel("Agent");
  const claude = page.locator('#run-agent option[value="claude"]');
  await claude.waitFor({ state: "attached" });
  assert.match(await claude.textContent(), /Claude Code 2\.1\.197/);
  assert.equal(await page.locator("#run-model").isVisible(), false, "dry-run takes no model");
  await agent.selectOption("claude");
  const model = page.getByLabel("Model (optional)");
  await model.waitFor();
  assert.equal(await page.getByLabel("Permission mode").inputValue(), "accept-edits");
  assert.match(await page.locator("#run-agent-hint").textContent(), /catalog-bin\/claude/, "the hint says where it was found");
  await model.fill("m");
  await checkA11y(page, "run form with a catalog agent");
  await screenshot(page, "run-form-catalog");

  await page.getByRole("button", { name: "Start run" }).click();
  await page.waitForURL(/#\/runs\//);
  const runId = decodeURIComponent(page.url().split("#/runs/")[1]);
  await page.locator('#timeline li[data-event="end"]').waitFor({ timeout: 30000 });
  // The status line follows the end event: wait for it rather than read it once.
  await page.waitForFunction(() => document.querySelector("#run-status")?.textContent.trim() === "succeeded", null, { timeout: 30000 });
  const run = (await api("GET", `/api/runs/${runId}`)).body.run;
  assert.equal(run.agent, "claude");
  const frame = page.locator("#artifact-preview iframe");
  await frame.waitFor();
  const said = await frame.contentFrame().locator("h1").textContent();
  assert.match(said, /--model m/);
  assert.match(said, /--permission-mode acceptEdits/);

  // Home's composer chooses the agent and its model per run too.
  await openApp(page, "#/");
  const homeAgent = page.locator("#home-agent");
  await page.locator('#home-agent option[value="claude"]').waitFor({ state: "attached" });
  assert.equal(await page.locator("#home-model").isVisible(), false, "the default dry run takes no model");
  await homeAgent.selectOption("claude");
  await page.locator("#home-model").fill("m2");
  await page.getByLabel("Brief").fill("a poster for a tea tasting");
  await checkA11y(page, "home with a catalog agent");
  await page.getByRole("button", { name: "Send" }).click();
  await page.waitForURL(new RegExp(`#/runs/(?!${runId})`));
  const second = decodeURIComponent(page.url().split("#/runs/")[1]);
  await page.waitForFunction(() => document.querySelector("#run-status")?.textContent.trim() === "succeeded", null, { timeout: 30000 });
  assert.equal((await api("GET", `/api/runs/${second}`)).body.run.agent, "claude");
  await page.locator("#artifact-preview iframe").waitFor();
  assert.match(await page.locator("#artifact-preview iframe").contentFrame().locator("h1").textContent(), /--model m2/);
  assertNoPageErrors(page, "run form with a catalog agent");
}
