// Marketplaces in the page: add a local marketplace index, browse its plugins as cards (filtered
// by text), install one (it appears among the plugins, and its card then opens it), refresh, and
// remove the marketplace.

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
  // Cards, not a table: each with its description and tags; the filter narrows them.
  const cards = page.locator("article.card");
  await cards.first().waitFor();
  assert.equal(await cards.count(), 2);
  assert.match(await page.getByRole("article", { name: "Poster" }).textContent(), /Designs a one-page poster from a headline\..*poster/s);
  await page.getByLabel("Filter").fill("structured");
  await page.getByText("1 of 2 plugins").waitFor();
  assert.deepEqual(await cards.locator("h3").allTextContents(), ["Brief first"]);
  await page.getByRole("button", { name: "Install od-ui/brief" }).click();
  await page.getByRole("link", { name: "brief" }).waitFor();
  const plugins = (await api("GET", "/api/plugins?limit=1000")).body.plugins.map((p) => p.id);
  assert.ok(plugins.includes("brief"), plugins.join(","));
  // Browsed again, the installed one opens its page instead of installing again.
  await page.getByRole("button", { name: `Browse ${id}` }).click();
  await page.getByRole("link", { name: "Installed: open brief" }).waitFor();
  assert.equal(await page.getByRole("button", { name: "Install od-ui/poster" }).count(), 1);
  await checkA11y(page, "marketplaces");
  await screenshot(page, "marketplace");
  await page.getByRole("button", { name: "Refresh" }).click();
  await page.locator("main").getByRole("status").filter({ hasText: `Refreshed ${id}` }).waitFor();
  await page.getByRole("button", { name: "Remove" }).click();
  await page.getByText("No marketplaces.").waitFor();
  assert.equal((await api("GET", "/api/marketplaces")).body.marketplaces.length, 0);
  assertNoPageErrors(page, "marketplace");
}
