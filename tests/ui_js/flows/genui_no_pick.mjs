// Issue 34: a confirmation answered with nothing picked is refused at the field, not recorded as
// the person's `null`. A run of tests/fixtures/ui/plugins/confirmer waits on "Go ahead with the
// page?"; on the run page, Send with no choice gets od's 422, shown beside the Yes/No group
// (aria-invalid, role=alert) while the run still waits; picking Yes is accepted and the run ends.

import assert from "node:assert/strict";
import { join } from "node:path";

export async function flow({ page, repo, api, until, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  const installed = await api("POST", "/api/plugins/install", { source: join(repo, "tests/fixtures/ui/plugins/confirmer") });
  assert.equal(installed.status, 200, String(installed.body).slice(-500));
  const run = await api("POST", "/api/runs", { pluginId: "confirmer" });
  assert.equal(run.status, 202, JSON.stringify(run.body));
  const { runId } = run.body;
  await until("the confirmation to wait", async () => (await api("GET", `/api/runs/${runId}/genui`)).body.surfaces?.some((s) => s.status === "pending"));

  await openApp(page, `#/runs/${runId}`);
  const card = page.locator('section.surface[data-surface="go-ahead"]');
  await card.waitFor();
  await card.getByRole("button", { name: "Send" }).click();
  const alert = card.locator('[role="alert"].genui-error');
  await alert.first().waitFor();
  assert.match(await alert.first().textContent(), /no answer was given/);
  assert.equal(await card.locator('[aria-invalid="true"]').count() > 0, true, "the Yes/No group is marked invalid");
  const surfaces = (await api("GET", `/api/runs/${runId}/genui`)).body.surfaces;
  assert.ok(surfaces.some((s) => s.surfaceId === "go-ahead" && s.status === "pending"), "nothing was recorded: it still waits");
  await checkA11y(page, "genui: no pick");
  await screenshot(page, "genui-no-pick");

  await card.getByLabel("Yes").check();
  await card.getByRole("button", { name: "Send" }).click();
  await card.waitFor({ state: "detached" });
  await until("the run's end", async () => (await api("GET", `/api/runs/${runId}`)).body.run.status === "succeeded", 30000);
  const answered = (await api("GET", `/api/runs/${runId}/genui/go-ahead`)).body;
  assert.equal(answered.value ?? answered.surface?.value, true, JSON.stringify(answered));
  assertNoPageErrors(page, "genui no pick", [/422/]);
}
