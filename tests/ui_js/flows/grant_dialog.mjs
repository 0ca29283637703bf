// A plugin installed `restricted` needs capabilities it was not granted: "Start run" shows a
// grant dialog naming them (never a raw 409). Cancel starts nothing; "Grant once" starts the run
// with `grantCaps` and leaves the plugin's grants as they were; "Grant and remember" records the
// grant on the plugin, so the next run needs no dialog.

import assert from "node:assert/strict";
import { join } from "node:path";

export async function flow({ page, repo, api, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  await api("POST", "/api/plugins/install", { source: join(repo, "tests", "fixtures", "ui", "plugins", "guarded"), trust: "restricted" });
  await openApp(page, "#/plugins/guarded");
  const runsBefore = (await api("GET", "/api/runs")).body.runs.length;

  await page.getByRole("button", { name: "Start run" }).click();
  const dialog = page.getByRole("dialog", { name: "Grant capabilities" });
  await dialog.waitFor();
  const text = await dialog.textContent();
  for (const cap of ["fs:write", "network"]) assert.ok(text.includes(cap), `the dialog names ${cap}`);
  await checkA11y(page, "grant dialog");
  await screenshot(page, "grant-dialog");
  await dialog.getByRole("button", { name: "Cancel" }).click();
  await page.getByRole("alert").filter({ hasText: "not granted" }).waitFor();
  assert.equal((await api("GET", "/api/runs")).body.runs.length, runsBefore, "cancel starts nothing");

  await page.getByRole("button", { name: "Start run" }).click();
  await dialog.getByRole("button", { name: "Grant once" }).click();
  await page.waitForURL(/#\/runs\//);
  await page.locator('#timeline li[data-event="end"]').waitFor({ timeout: 30000 });
  let plugin = (await api("GET", "/api/plugins/guarded")).body.plugin;
  assert.ok(!plugin.capabilitiesGranted.includes("network"), "grant once is not remembered");

  await page.goto(`${page.url().split("#")[0]}#/plugins/guarded`);
  await page.getByRole("button", { name: "Start run" }).click();
  await dialog.getByRole("button", { name: "Grant and remember" }).click();
  await page.waitForURL(/#\/runs\//);
  plugin = (await api("GET", "/api/plugins/guarded")).body.plugin;
  assert.ok(plugin.capabilitiesGranted.includes("network") && plugin.capabilitiesGranted.includes("fs:write"));
  await page.locator('#timeline li[data-event="end"]').waitFor({ timeout: 30000 });

  await page.goto(`${page.url().split("#")[0]}#/plugins/guarded`);
  await page.getByRole("button", { name: "Start run" }).click();
  await page.waitForURL(/#\/runs\//);
  assert.equal(await dialog.count(), 0, "remembered: no dialog");
  assertNoPageErrors(page, "grant dialog", [/status of 409/]);
}
