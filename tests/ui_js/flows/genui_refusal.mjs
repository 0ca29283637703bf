// A real refusal, rendered: a run of tests/fixtures/ui/plugins/brief waits on its form; a wrong
// answer gets od's 422; errorsByField puts each violation on its field; the page (under the app's
// CSP) shows the form with those messages beside their controls (role=alert, aria-describedby,
// aria-invalid) and axe finds no serious or critical violation; a right answer is accepted.

import assert from "node:assert/strict";
import { join } from "node:path";
import { errorsByField, readSurface } from "../../../src/http/ui/assets/genui.js";
import { stubForm } from "../genui_checks.mjs";

export async function flow({ page, repo, api, until, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  const installed = await api("POST", "/api/plugins/install", { source: join(repo, "tests/fixtures/ui/plugins/brief") });
  assert.equal(installed.status, 200, String(installed.body).slice(-500));
  assert.equal((await api("POST", "/api/projects", { id: "p", name: "Refusals" })).status, 200);
  const run = await api("POST", "/api/runs", { projectId: "p", pluginId: "brief" });
  assert.equal(run.status, 202, JSON.stringify(run.body));
  const runId = run.body.runId;
  await until("the brief to wait", async () => (await api("GET", `/api/runs/${runId}/genui`)).body.surfaces?.some((s) => s.status === "pending"));
  const { spec } = (await api("GET", `/api/runs/${runId}/genui/project-brief`)).body;

  const wrong = { audience: "ab", pages: 9, channels: ["web"] };
  const refused = await api("POST", `/api/runs/${runId}/genui/project-brief/respond`, { value: wrong });
  assert.equal(refused.status, 422, JSON.stringify(refused.body));
  const errors = errorsByField(refused.body, spec);
  assert.deepEqual(Object.keys(errors).sort(), ["/audience", "/pages", "/tone"], JSON.stringify(refused.body));

  await openApp(page);
  const shown = await page.evaluate(async ({ spec, errors, wrong }) => {
    const g = await import("/ui/genui.js");
    const host = document.createElement("section");
    host.setAttribute("aria-label", "Refused answer");
    host.innerHTML = g.renderSurface(spec, { idPrefix: "r-", errors, values: wrong });
    (document.querySelector("main") ?? document.body).append(host);
    return [...host.querySelectorAll('[role="alert"].genui-error')].map((p) => {
      const control = host.querySelector(`[aria-describedby~="${p.id}"]`);
      return { name: control?.getAttribute("name") ?? control?.dataset.name, invalid: control?.getAttribute("aria-invalid"), text: p.textContent };
    });
  }, { spec, errors, wrong });
  assert.deepEqual(shown.map((s) => [s.name, s.invalid, s.text]).sort(), Object.entries(errors).map(([k, v]) => [k, "true", v]).sort());
  await screenshot(page, "genui-refusal");
  await checkA11y(page, "genui: a refused answer");
  assertNoPageErrors(page, "genui refusal");

  const right = readSurface(stubForm([["/audience", "designers"], ["/tone", "1"], ["/pages", "2"], ["/channels", "0"]]), spec);
  const accepted = await api("POST", `/api/runs/${runId}/genui/project-brief/respond`, { value: right });
  assert.equal(accepted.status, 200, JSON.stringify(accepted.body));
  assert.deepEqual(accepted.body.surface.value, { audience: "designers", tone: "bold", pages: 2, channels: ["web"], darkMode: false });
}
