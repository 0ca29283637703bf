// Issue 34: the tool catalog and connectors pages. Tools lists what agents can find, and its search
// works as an agent's does: "files" finds od's file tools, each saying whether it only reads, how
// to call it from the CLI and, opened, its input schema; a word nothing matches says so. Connectors
// lists od's built-in connectors, each unavailable until its client id is configured — the page
// says why, and offers no Connect that could only fail (the whole connect and disconnect path runs
// against a live provider in oauth_connect.mjs).

import assert from "node:assert/strict";

export async function flow({ page, openApp, until, screenshot, checkA11y, assertNoPageErrors }) {
  await openApp(page, "#/tools");
  const count = page.locator("#tools-count");
  await until("the catalog", async () => /^\d+ of \d+ tools$/.test((await count.textContent()).trim()));
  const all = Number((await count.textContent()).match(/of (\d+)/)[1]);
  assert.ok(all >= 10, `od's own tools are listed (${all})`);
  await page.getByLabel("Search tools").fill("files");
  await until("the search", async () => /for "files"/.test(await count.textContent()));
  const names = await page.locator("li.tool").evaluateAll((l) => l.map((x) => x.dataset.tool));
  for (const want of ["files.read", "files.write", "files.list"]) assert.ok(names.includes(want), `${want} in ${names}`);
  const read = page.locator('li.tool[data-tool="files.read"]');
  assert.match(await read.textContent(), /read-only/);
  assert.doesNotMatch(await page.locator('li.tool[data-tool="files.write"]').textContent(), /read-only/);
  assert.match(await read.textContent(), /Call: od files read/);
  await read.getByText("Input of files.read").click();
  assert.match(await read.locator("pre").textContent(), /"projectId"/);
  await checkA11y(page, "tools, searched");
  await screenshot(page, "tools");
  await page.getByLabel("Search tools").fill("zzzqqq");
  await page.getByText("No tool matches.").waitFor();

  await openApp(page, "#/connectors");
  const github = page.locator('article[data-connector="github"]');
  await github.waitFor();
  assert.equal(await github.getAttribute("data-status"), "unavailable");
  assert.match(await github.textContent(), /no clientId configured/);
  assert.ok(await github.getByRole("button", { name: "Connect GitHub" }).isDisabled());
  assert.match(await github.textContent(), /4 tools/);
  await checkA11y(page, "connectors");
  await screenshot(page, "connectors");
  assertNoPageErrors(page, "catalog pages");
}
