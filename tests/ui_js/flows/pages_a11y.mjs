// Every page at 360 px wide and on a desktop: it renders, nothing overflows sideways, axe finds no
// serious or critical violation, and the main controls are reachable with the keyboard alone
// (Tab from the top reaches the navigation, and Enter on a nav link changes the page).

import assert from "node:assert/strict";
import { join } from "node:path";

const PAGES = ["#/", "#/runs", "#/plugins", "#/plugins/poster", "#/inbox", "#/projects", "#/marketplaces", "#/log"];

export async function flow({ page, repo, api, until, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  await api("POST", "/api/plugins/install", { source: join(repo, "tests", "fixtures", "ui", "plugins", "poster") });
  const { runId, projectId } = (await api("POST", "/api/runs", { pluginId: "poster", pluginInputs: { headline: "Narrow" } })).body;
  await until("the run to end", async () => (await api("GET", `/api/runs/${runId}`)).body.run.status === "succeeded");
  const pages = [...PAGES, `#/runs/${runId}`, `#/projects/${projectId}`];
  for (const width of [360, 1280]) {
    await page.setViewportSize({ width, height: 800 });
    for (const hash of pages) {
      await openApp(page, hash);
      await page.waitForTimeout(50);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      assert.ok(overflow <= 1, `${hash} at ${width}px overflows by ${overflow}px`);
      await checkA11y(page, `${hash} at ${width}px`);
      if (width === 360) await screenshot(page, `narrow-${hash.replace(/[#/]+/g, "-").replace(/^-|-$/g, "") || "home"}`);
    }
  }
  // A bundled plugin offers no Uninstall (the daemon would answer 409); an installed one does.
  await openApp(page, "#/plugins/od-new-generation");
  await page.getByText("Bundled with od: it cannot be uninstalled.").waitFor();
  assert.equal(await page.getByRole("button", { name: "Uninstall" }).count(), 0, "no Uninstall on a bundled plugin");
  await openApp(page, "#/plugins/poster");
  await page.getByRole("button", { name: "Uninstall" }).waitFor();

  // The log page verifies the chain on demand and shows the daemon's last verification.
  await openApp(page, "#/log");
  await page.getByRole("button", { name: "Verify the log now" }).click();
  await page.locator("#verify-result").waitFor();
  assert.match(await page.locator("#verify-result").textContent(), /Chain intact: \d+ events verified/);

  // Keyboard: from the content (where a page load puts focus), Shift+Tab walks back through the
  // navigation to the skip link; the skip link returns to the content; Enter on a nav link
  // changes the page.
  await openApp(page, "#/runs");
  const walked = [];
  for (let i = 0; i < 15 && walked[walked.length - 1] !== "Skip to content"; i += 1) {
    await page.keyboard.press("Shift+Tab");
    walked.push(await page.evaluate(() => document.activeElement.textContent.trim()));
  }
  assert.equal(walked[walked.length - 1], "Skip to content", walked.join(" | "));
  assert.ok(walked.includes("Plugins"), walked.join(" | "));
  await page.keyboard.press("Enter");
  assert.equal(await page.evaluate(() => document.activeElement.id), "main");
  assert.ok(page.url().endsWith("#/runs"), "the skip link keeps the route");
  await page.evaluate(() => document.querySelector('nav a[href="#/plugins"]').focus());
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { level: 1, name: "Plugins" }).waitFor();
  assertNoPageErrors(page, "pages");
}
