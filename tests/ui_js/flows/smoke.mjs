// The app loads at `/` from the daemon: its first view renders (body[data-ready="1"]), with no page
// error or console error (a CSP refusal would be one), and no serious or critical axe violation;
// the API answers beside it with the discovery file's token.

import assert from "node:assert/strict";

export async function flow({ page, openApp, screenshot, checkA11y, assertNoPageErrors, api }) {
  const health = await api("GET", "/api/health");
  assert.equal(health.status, 200, JSON.stringify(health.body));
  await openApp(page);
  assert.ok((await page.title()).trim(), "the page has a title");
  assert.equal(await page.evaluate(() => document.documentElement.lang !== ""), true, "the page declares its language");
  await screenshot(page, "smoke");
  await checkA11y(page, "smoke: /");
  assertNoPageErrors(page, "smoke");
}
