// Marketplaces in the page: add a local marketplace index, browse its plugins, install one (it
// appears among the plugins), refresh, and remove the marketplace.

import assert from "node:assert/strict";
import { join } from "node:path";

export async function flow({ page, repo, api, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  await openApp(page, "#/marketplaces");
  await page.getByLabel("Marketplace source").fill(join(repo, "tests", "fixtures", "ui", "open-design-marketplace.json"));
  await page.getByRole("button", { name: "Add marketplace" }).click();
  const row = page.getByRole("row").filter({ hasText: "od-ui" });
  await row.first().waitFor();
  const id = (await api("GET", "/api/marketplaces")).body.marketplaces[0].id;
  await page.getByRole("button", { name: `Browse ${id}` }).click();
  await page.getByRole("button", { name: "Install od-ui/brief" }).click();
  await page.getByRole("link", { name: "brief" }).waitFor();
  const plugins = (await api("GET", "/api/plugins?limit=1000")).body.plugins.map((p) => p.id);
  assert.ok(plugins.includes("brief"), plugins.join(","));
  await checkA11y(page, "marketplaces");
  await screenshot(page, "marketplace");
  await page.getByRole("button", { name: "Refresh" }).click();
  await page.locator("main").getByRole("status").filter({ hasText: `Refreshed ${id}` }).waitFor();
  await page.getByRole("button", { name: "Remove" }).click();
  await page.getByText("No marketplaces.").waitFor();
  assert.equal((await api("GET", "/api/marketplaces")).body.marketplaces.length, 0);
  assertNoPageErrors(page, "marketplace");
}
