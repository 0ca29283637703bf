// Install a plugin from a fixture folder through the Plugins page: the daemon's progress lines
// appear, then the installed plugin's doctor report; the plugin is listed with its trust tier.
// A folder that is not a plugin shows the daemon's error instead, and nothing is installed.

import assert from "node:assert/strict";
import { join } from "node:path";

export async function flow({ page, repo, api, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  const folder = join(repo, "tests", "fixtures", "ui", "plugins", "poster");
  await openApp(page, "#/plugins");
  await checkA11y(page, "plugins page");
  await page.getByLabel("Source").fill(folder);
  await page.getByRole("button", { name: "Install" }).click();
  const doctor = page.getByRole("region", { name: "Doctor" });
  await doctor.waitFor();
  assert.match(await doctor.textContent(), /No problems found/);
  assert.ok((await page.getByRole("log", { name: "Install progress" }).locator("li").count()) >= 3, "progress lines shown");
  const row = page.getByRole("row").filter({ hasText: "poster" });
  await row.first().waitFor();
  assert.match(await row.first().textContent(), /trusted/);
  await screenshot(page, "install-doctor");

  // A folder without a plugin: the error is shown, the list is unchanged.
  await page.getByLabel("Source").fill(join(repo, "tests", "fixtures", "ui", "agents"));
  await page.getByRole("button", { name: "Install" }).click();
  await page.getByRole("alert").first().waitFor();
  const { body } = await api("GET", "/api/plugins?limit=1000");
  assert.deepEqual(body.plugins.filter((p) => p.sourceKind === "local").map((p) => p.id), ["poster"]);
  assertNoPageErrors(page, "install", [/status of 4\d\d/]);
}
