// A run waits on a GenUI form: the surface appears in the run's page and in the inbox; a wrong
// answer shows the server's 422 message at the field it names (and resumes nothing); a right one
// resumes the run without a reload. The answer is remembered for the project (a second run there
// does not ask); revoking it on the project's page makes the next run ask again.

import assert from "node:assert/strict";
import { join } from "node:path";

export async function flow({ page, repo, api, until, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  await api("POST", "/api/plugins/install", { source: join(repo, "tests", "fixtures", "ui", "plugins", "brief") });
  const started = await api("POST", "/api/runs", { pluginId: "brief", message: "a tea shop" });
  assert.equal(started.status, 202, JSON.stringify(started.body));
  const { runId, projectId } = started.body;
  await until("the run to wait", async () => (await api("GET", `/api/runs/${runId}`)).body.run.status === "awaiting-input");

  // The inbox lists it.
  await openApp(page, "#/inbox");
  const inboxCard = page.locator(`[data-surface="project-brief"][data-run="${runId}"]`);
  await inboxCard.waitFor();
  await checkA11y(page, "inbox");
  await screenshot(page, "genui-inbox");

  await page.goto(`${page.url().split("#")[0]}#/runs/${runId}`);
  const card = page.locator('#run-surfaces [data-surface="project-brief"]');
  await card.waitFor();
  await checkA11y(page, "run page with a waiting form");
  // Wrong: too short an audience. The server's message appears beside that field.
  await card.getByLabel("Audience").fill("ab");
  await card.getByRole("button", { name: "Send" }).click();
  const alert = card.getByRole("alert").filter({ hasText: /length|3/ });
  await alert.first().waitFor();
  assert.equal(await card.getByLabel("Audience").getAttribute("aria-invalid"), "true");
  const described = (await card.getByLabel("Audience").getAttribute("aria-describedby")) || "";
  const alertId = await alert.first().getAttribute("id");
  assert.ok(alertId && described.split(" ").includes(alertId), "the message is linked to the field");
  assert.equal((await api("GET", `/api/runs/${runId}`)).body.run.status, "awaiting-input", "nothing resumed");
  await screenshot(page, "genui-wrong-answer");

  // Right: the run resumes and ends, the page updates in place.
  await card.getByLabel("Audience").fill("tea lovers");
  await card.getByLabel("web").check();
  await card.getByRole("button", { name: "Send" }).click();
  await page.locator('#timeline li[data-event="end"]').waitFor({ timeout: 30000 });
  // The status line follows the end event: wait for it rather than read it once.
  await page.waitForFunction(() => document.querySelector("#run-status")?.textContent.trim() === "succeeded", null, { timeout: 30000 });
  assert.equal(await page.locator("#run-surfaces [data-surface]").count(), 0);
  const answered = await api("GET", `/api/runs/${runId}/genui/project-brief`);
  assert.equal(answered.body.surface.value.audience, "tea lovers");
  assert.deepEqual(answered.body.surface.value.channels, ["web"]);

  // Remembered for the project: a second run there goes straight through.
  const second = await api("POST", "/api/runs", { pluginId: "brief", projectId, message: "again" });
  await until("the second run to end", async () => (await api("GET", `/api/runs/${second.body.runId}`)).body.run.status === "succeeded");

  // Revoke it on the project's page.
  await page.goto(`${page.url().split("#")[0]}#/projects/${projectId}`);
  const revoke = page.getByRole("button", { name: "Revoke project-brief" });
  await revoke.waitFor();
  await checkA11y(page, "project page");
  await screenshot(page, "genui-remembered");
  await revoke.click();
  await page.getByText("No remembered answers.").waitFor();
  const third = await api("POST", "/api/runs", { pluginId: "brief", projectId, message: "once more" });
  await until("the third run to ask again", async () => (await api("GET", `/api/runs/${third.body.runId}`)).body.run.status === "awaiting-input");
  assertNoPageErrors(page, "genui answer", [/status of 422/]);
}
