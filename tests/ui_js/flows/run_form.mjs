// The run form starts a run in a chosen existing project with the daemon's configured agent
// (issue 30 item 4): the daemon has OD_AGENT_CMD (tests/fixtures/agents/write-page.sh, an exec
// agent that writes index.html and reports it); the plugin page lists the projects and the agents
// (`GET /api/agents`, exec preselected as the default); the person picks the project and the exec
// agent by keyboard-reachable labelled controls, starts the run, and sees it succeed in that
// project with the exec agent's page as its artifact.

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = join(fileURLToPath(import.meta.url), "..", "..", "..", "..");
export const daemonEnv = { OD_AGENT_CMD: join(repoRoot, "tests", "fixtures", "agents", "write-page.sh"), OD_AGENT: "" };

export async function flow({ page, repo, api, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  const installed = await api("POST", "/api/plugins/install", { source: join(repo, "tests", "fixtures", "ui", "plugins", "page-asker") });
  assert.equal(installed.status, 200, JSON.stringify(installed.body));
  const made = await api("POST", "/api/projects", { name: "Tea shop" });
  assert.ok(made.status < 300, JSON.stringify(made.body));
  const projectId = made.body.projectId || made.body.id || made.body.project.id;

  await openApp(page, "#/plugins/page-asker");
  const agent = page.getByLabel("Agent");
  await page.locator('#run-agent option[value="exec"]').waitFor({ state: "attached" });
  assert.equal(await agent.inputValue(), "exec", "the configured exec agent is preselected as the default");
  await page.locator(`#run-project option[value="${projectId}"]`).waitFor({ state: "attached" });
  await page.getByLabel("Project").selectOption(projectId);
  await agent.selectOption("exec");
  await checkA11y(page, "run form");
  await screenshot(page, "run-form");

  await page.getByRole("button", { name: "Start run" }).click();
  await page.waitForURL(/#\/runs\//);
  const runId = decodeURIComponent(page.url().split("#/runs/")[1]);
  await page.locator('#timeline li[data-event="end"]').waitFor({ timeout: 30000 });
  // The status line follows the end event: wait for it rather than read it once.
  await page.waitForFunction(() => document.querySelector("#run-status")?.textContent.trim() === "succeeded", null, { timeout: 30000 });
  const run = (await api("GET", `/api/runs/${runId}`)).body.run;
  assert.equal(run.projectId, projectId, "the run is in the chosen project");
  assert.equal(run.agent, "exec");
  assert.equal(run.agentSource, "OD_AGENT_CMD");
  assert.match(await page.locator("main").textContent(), /exec \(from OD_AGENT_CMD\)/);
  const frame = page.locator("#artifact-preview iframe");
  await frame.waitFor();
  assert.match(await frame.contentFrame().locator("h1").textContent(), /written by the exec agent/);
  await screenshot(page, "run-form-exec-end");

  // The short id the CLI prints opens the run too, and the address becomes the whole id.
  await openApp(page, `#/runs/${runId.slice(0, 8)}`);
  await page.waitForURL((u) => u.hash === `#/runs/${runId}`, { timeout: 30000 });
  await page.waitForFunction(() => document.querySelector("#run-status")?.textContent.trim() === "succeeded", null, { timeout: 30000 });
  await openApp(page, `#/projects/${projectId.slice(0, 8)}`);
  await page.waitForURL((u) => u.hash === `#/projects/${projectId}`, { timeout: 30000 });
  assertNoPageErrors(page, "run form");
}
