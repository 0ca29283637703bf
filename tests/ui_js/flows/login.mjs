// A daemon that requires a token (OD_API_TOKEN, as every non-loopback bind does): the app sends a
// browser without one to the login page; a wrong token is refused there; the right one is kept
// as a session of its own (never the token) in an HttpOnly cookie that scripts cannot read, with
// which the whole app works — pages, a run's SSE stream, answering its form; "Log out" ends the
// session and the app is closed again, even to the old cookie.

import assert from "node:assert/strict";
import { join } from "node:path";

const TOKEN = "ui-flow-token-7c1f0b6a2e";
export const daemonEnv = { OD_API_TOKEN: TOKEN };

export async function flow({ page, context, daemon, repo, api, checkA11y, screenshot, assertNoPageErrors }) {
  await page.goto(`${daemon.url}/`);
  await page.waitForURL(/\/login/);
  await page.waitForFunction(() => document.body.dataset.ready === "1");
  await checkA11y(page, "login page");
  await page.getByLabel("Token").fill("not-the-token");
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByRole("alert").filter({ hasText: /token/i }).waitFor();
  assert.equal((await context.cookies()).length, 0, "no cookie for a wrong token");
  await screenshot(page, "login-refused");

  await page.getByLabel("Token").fill(TOKEN);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.waitForFunction(() => document.body.dataset.ready === "1" && document.querySelector("nav"));
  const [cookie] = await context.cookies();
  assert.ok(cookie && cookie.httpOnly && cookie.sameSite === "Strict", JSON.stringify(cookie));
  // Over HTTPS (run-flows under OD_UI_TLS_*) the cookie is Secure: never sent over plain HTTP.
  assert.equal(cookie.secure, daemon.url.startsWith("https://"), JSON.stringify(cookie));
  assert.equal(await page.evaluate(() => document.cookie), "", "scripts cannot read it");
  assert.ok(!decodeURIComponent(cookie.value).includes(TOKEN) && cookie.expires > 0, "a session of its own, expiring");

  await api("POST", "/api/plugins/install", { source: join(repo, "tests", "fixtures", "ui", "plugins", "brief") });
  const { runId } = (await api("POST", "/api/runs", { pluginId: "brief", message: "behind a token" })).body;
  await page.goto(`${daemon.url}/#/runs/${runId}`);
  const card = page.locator('#run-surfaces [data-surface="project-brief"]');
  await card.waitFor();
  await card.getByLabel("Audience").fill("token holders");
  await card.getByRole("button", { name: "Send" }).click();
  await page.locator('#timeline li[data-event="end"]').waitFor({ timeout: 30000 });

  await page.getByRole("button", { name: "Log out" }).click();
  await page.waitForURL(/\/login/);
  const r = await page.evaluate(async () => (await fetch("/api/plugins")).status);
  assert.equal(r, 401, "the app is closed again");
  // Logging out ended the session: the old cookie, put back, opens nothing.
  await context.addCookies([cookie]);
  const replayed = await page.evaluate(async () => (await fetch("/api/plugins")).status);
  assert.equal(replayed, 401, "a logged-out session is revoked");
  assertNoPageErrors(page, "login", [/status of 401/]);
}
