// Issue 34: a run's HTML artifact is previewed as the designer made it, and as that run made it.
// An exec agent (tests/fixtures/ui/agents/styled-page.mjs) writes index.html with an inline
// <style>, a style attribute and a linked style.css; the run page's preview applies all three (the
// frame is the run's own address under the artifact CSP, still sandboxed: no script). A second run
// in the same project rewrites the page; the first run's preview still shows what the first run
// recorded, and "Compare versions" shows both runs' pages side by side.

import assert from "node:assert/strict";
import { join } from "node:path";

const color = (frame, sel) => frame.locator(sel).evaluate((el) => getComputedStyle(el).color);

export async function flow({ page, repo, api, until, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  await api("POST", "/api/plugins/install", { source: join(repo, "tests", "fixtures", "ui", "plugins", "page-asker") });
  const agent = join(repo, "tests", "fixtures", "ui", "agents", "styled-page.mjs");
  const start = async (body) => {
    const r = await api("POST", "/api/runs", { pluginId: "page-asker", agent: "exec", ...body });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const { runId } = r.body;
    await until(`run ${runId} ends`, async () => (await api("GET", `/api/runs/${runId}`)).body.run.status === "succeeded", 30000);
    return (await api("GET", `/api/runs/${runId}`)).body.run;
  };
  const first = await start({ agentCommand: [process.execPath, agent, "First version"] });
  await start({ projectId: first.projectId, agentCommand: [process.execPath, agent, "Second version"] });

  await openApp(page, `#/runs/${first.runId}`);
  await page.getByRole("button", { name: "Styled page" }).click();
  const frame = page.locator("#artifact-preview iframe");
  await frame.waitFor();
  assert.equal(await frame.getAttribute("sandbox"), "", "still an opaque origin with no script");
  const inner = frame.contentFrame();
  await inner.locator("h1").waitFor();
  assert.equal(await inner.locator("h1").textContent(), "First version", "the first run's page, not the project's current one");
  assert.equal(await color(inner, "h1"), "rgb(200, 30, 40)", "the inline <style> applies");
  assert.equal(await color(inner, "#linked"), "rgb(10, 120, 60)", "the linked style.css applies");
  assert.equal(await inner.locator("#attr").evaluate((el) => getComputedStyle(el).fontWeight), "700", "the style attribute applies");
  // Two versions side by side: this run's page beside the other run's, each as its run recorded it.
  await page.getByRole("button", { name: "Compare versions" }).click();
  const sides = page.locator("#compare-view iframe");
  await sides.nth(1).waitFor();
  const heading = async (i) => {
    const f = sides.nth(i).contentFrame();
    await f.locator("h1").waitFor();
    return f.locator("h1").textContent();
  };
  assert.deepEqual([await heading(0), await heading(1)], ["First version", "Second version"]);
  assert.equal(await color(sides.nth(1).contentFrame(), "h1"), "rgb(200, 30, 40)", "each side with its CSS");
  await checkA11y(page, "styled artifact preview");
  await screenshot(page, "artifact-styles");
  assertNoPageErrors(page, "artifact styles");
}
