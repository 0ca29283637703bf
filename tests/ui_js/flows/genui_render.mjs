// The GenUI renderer in the real page: /ui/genui.js, as the daemon serves it, renders every surface
// of the repository's manifests (and the oauth-prompt od derives for a connector) into the app's
// page under its CSP; axe finds no serious or critical violation in them; a person's typing and
// clicking, read back through the browser's own FormData, gives the typed answer.

import assert from "node:assert/strict";
import { join } from "node:path";
import { surfacesUnder } from "../genui_checks.mjs";

export async function flow({ page, repo, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  const surfaces = [...surfacesUnder(join(repo, "bundled")), ...surfacesUnder(join(repo, "tests", "fixtures"))].map((s) => s.spec);
  surfaces.push({ id: "__auto_connector_github", kind: "oauth-prompt", persist: "project", capabilitiesRequired: ["connector:github"], connector: { id: "github" } });
  await openApp(page);
  await page.evaluate(async (list) => {
    const g = await import("/ui/genui.js");
    const host = document.createElement("section");
    host.id = "genui-flow";
    host.setAttribute("aria-label", "GenUI surfaces");
    host.innerHTML = list.map((s, i) => g.renderSurface(s, { idPrefix: `s${i}-` })).join("\n");
    (document.querySelector("main") ?? document.body).append(host);
  }, surfaces);
  await page.evaluate(() => document.getElementById("genui-flow").scrollIntoView());
  await checkA11y(page, "genui: every fixture surface rendered");

  const i = surfaces.findIndex((s) => s.id === "brief" && s.schema?.properties?.pages);
  const form = page.locator(`#s${i}-form`);
  await form.getByLabel("audience").fill("designers");
  await form.getByLabel("bold").check();
  await form.getByLabel("pages").fill("3");
  await form.scrollIntoViewIfNeeded();
  await screenshot(page, "genui-render");
  const value = await page.evaluate(async ({ id, spec }) => {
    const g = await import("/ui/genui.js");
    return g.readSurface(new FormData(document.getElementById(id)), spec);
  }, { id: `s${i}-form`, spec: surfaces[i] });
  assert.deepEqual(value, { audience: "designers", tone: "bold", pages: 3 });

  // The oauth-prompt's buttons: the pressed one travels in FormData(form, submitter).
  const o = surfaces.length - 1;
  const answers = await page.evaluate(async ({ id, spec }) => {
    const g = await import("/ui/genui.js");
    const f = document.getElementById(id);
    const [connect, decline] = f.querySelectorAll("button[type=submit]");
    return [g.readSurface(new FormData(f, connect), spec), g.readSurface(new FormData(f, decline), spec)];
  }, { id: `s${o}-form`, spec: surfaces[o] });
  assert.deepEqual(answers, [{ connected: true, connectorId: "github" }, null]);
  assertNoPageErrors(page, "genui");
}
