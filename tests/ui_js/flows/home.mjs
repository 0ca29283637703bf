// Issue 34, Home (spec §11.6 "inline apply"): a new daemon's home asks what to design and lists the
// plugins a person starts from (scenarios, not atoms nor the hidden router) with facets by task
// kind and a text filter, and an empty "Recent runs" that says so.
// Send with nothing written and no plugin is refused at the brief. "Use" on the Poster card
// hydrates the brief with its query and the chips with its context, and its inputs appear; a
// typed input re-renders the brief live; once the designer edits the brief it is theirs (an input
// no longer overwrites it), and using a plugin over a brief they wrote asks first. Send starts the
// first run of a new project with the configured exec agent (tests/fixtures/ui/agents/styled-page.mjs),
// the edited brief as its message; the run page previews the page with its CSS applied. A chip
// removed before Send (×) is gone from the run's snapshot.

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { mkdtempSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";

const repoRoot = join(fileURLToPath(import.meta.url), "..", "..", "..", "..");
const agent = join(repoRoot, "tests", "fixtures", "ui", "agents", "styled-page.mjs");
export const daemonEnv = { OD_AGENT_CMD: `'${process.execPath}' '${agent}' 'From home'`, OD_AGENT: "" };

export async function flow({ page, repo, api, until, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  await openApp(page, "#/");
  await page.getByRole("heading", { name: "What are we designing?" }).waitFor();
  await page.getByText("Nothing yet: your first run will show here.").waitFor();
  const rail = page.getByRole("region", { name: "Start from a plugin" });
  await rail.getByRole("button", { name: /^Use / }).first().waitFor();
  assert.equal(await rail.getByRole("heading", { name: "Patch edit" }).count(), 0, "atoms are not offered as a start");
  assert.equal(await rail.getByRole("heading", { name: "Default design router" }).count(), 0, "nor the hidden router a bare brief runs");
  // Facets by task kind, with counts from the manifests; the filter narrows by text.
  const titles = () => rail.locator("article.card h3").evaluateAll((l) => l.map((x) => x.firstChild.textContent));
  await rail.getByRole("button", { name: "From code (1)" }).click();
  assert.deepEqual(await titles(), ["Code migration"]);
  await rail.getByRole("button", { name: /^All \(\d+\)$/ }).click();
  await rail.getByLabel("Filter plugins").fill("figma");
  assert.deepEqual(await titles(), ["Figma migration"]);
  await rail.getByLabel("Filter plugins").fill("");
  assert.ok((await titles()).length >= 5);
  await checkA11y(page, "home, empty");
  await screenshot(page, "home-empty");

  // Nothing written, no plugin: refused at the brief, nothing started.
  await page.getByRole("button", { name: "Send" }).click();
  await page.getByRole("alert").filter({ hasText: "Write a brief or use a plugin." }).waitFor();
  assert.equal(await page.getByLabel("Brief").getAttribute("aria-invalid"), "true");
  assert.equal((await api("GET", "/api/runs")).body.runs.length, 0);

  const installed = await api("POST", "/api/plugins/install", { source: join(repo, "tests", "fixtures", "ui", "plugins", "poster") });
  assert.equal(installed.status, 200, JSON.stringify(installed.body));
  await openApp(page, "#/plugins");
  await openApp(page, "#/");
  const brief = page.getByLabel("Brief");

  // A brief the designer wrote is not replaced without asking.
  await brief.fill("my own idea");
  await page.getByRole("button", { name: "Use Poster" }).click();
  const ask = page.getByRole("dialog", { name: "Replace your brief?" });
  await ask.waitFor();
  await ask.getByRole("button", { name: "Keep mine" }).click();
  assert.equal(await brief.inputValue(), "my own idea");
  assert.equal(await page.getByLabel("Headline").count(), 0, "not applied");

  await brief.fill("");
  await page.getByRole("button", { name: "Use Poster" }).click();
  await page.getByLabel("Headline").waitFor();
  await until("the brief to hydrate", async () => (await brief.inputValue()).startsWith("A calm poster"));
  assert.equal(await brief.inputValue(), 'A calm poster headlined "{{headline}}" with 2 sections.');
  const chips = page.getByRole("list", { name: "Context" });
  // Poster names no skills or assets: its chips are its stages' atoms.
  const kinds = await chips.locator("li").evaluateAll((l) => l.map((x) => x.dataset.kind));
  assert.ok(kinds.length >= 2 && kinds.every((k) => k === "atom"), JSON.stringify(kinds));
  assert.match(await chips.textContent(), /file-write/);
  assert.match(await chips.textContent(), /critique-theater/);
  // Inputs re-render the brief live.
  await page.getByLabel("Headline").fill("Spring tea tasting");
  await page.getByLabel("Tone").selectOption("bold");
  await until("the brief to follow the inputs", async () => (await brief.inputValue()) === 'A bold poster headlined "Spring tea tasting" with 2 sections.');
  // Using the same plugin again keeps what was typed (until "Stop using it").
  await page.getByRole("button", { name: "Use Poster" }).click();
  await until("the inputs to come back", async () => (await page.getByLabel("Headline").inputValue()) === "Spring tea tasting");
  assert.equal(await page.getByLabel("Tone").inputValue(), "bold");
  // Edited, the brief is the designer's: an input no longer overwrites it.
  await brief.fill('A bold poster headlined "Spring tea tasting", with a teapot.');
  await page.getByLabel("Sections").fill("3");
  await page.waitForTimeout(200);
  assert.equal(await brief.inputValue(), 'A bold poster headlined "Spring tea tasting", with a teapot.');
  await checkA11y(page, "home, plugin applied");
  await screenshot(page, "home-applied");

  await page.getByRole("button", { name: "Send" }).click();
  await page.waitForURL(/#\/runs\//);
  const runId = decodeURIComponent(page.url().split("#/runs/")[1]);
  await until("the run to end", async () => (await api("GET", `/api/runs/${runId}`)).body.run.status === "succeeded", 30000);
  const { run } = (await api("GET", `/api/runs/${runId}`)).body;
  assert.equal(run.pluginId, "poster");
  assert.equal(run.agent, "exec", JSON.stringify(run));
  const { body: projects } = await api("GET", "/api/projects");
  assert.equal(projects.projects.length, 1, "Home starts a new project");
  const conv = await api("GET", `/api/projects/${run.projectId}/conversations/${run.conversationId}/messages`);
  assert.equal(conv.status, 200, JSON.stringify(conv.body));
  const mine = conv.body.messages.filter((m) => m.role === "user").map((m) => m.text);
  assert.deepEqual(mine, ['A bold poster headlined "Spring tea tasting", with a teapot.']);

  // Each stage iteration recorded the page again: the last is what the run ended with.
  await page.getByRole("button", { name: "Styled page" }).last().click();
  const inner = page.locator("#artifact-preview iframe").contentFrame();
  await inner.locator("h1").waitFor();
  assert.equal(await inner.locator("h1").textContent(), "From home");
  assert.equal(await inner.locator("h1").evaluate((el) => getComputedStyle(el).color), "rgb(200, 30, 40)", "its CSS applies");

  await openApp(page, "#/");
  await page.getByRole("table", { name: "Recent runs" }).getByRole("link").first().waitFor();
  // Ranked by recent use: Poster first, marked so.
  await until("the rail to rank Poster first", async () => (await titles())[0] === "Poster");
  assert.match(await rail.locator("article.card").first().textContent(), /used recently/);

  // A chip removed before Send: the run's snapshot goes without it (the prompt and folder too:
  // tests/runs/prompt_stack.rs).
  const dir = mkdtempSync(join(tmpdir(), "od-ui-home-"));
  const plugin = join(dir, "moodboard");
  mkdirSync(plugin);
  writeFileSync(join(plugin, "SKILL.md"), "---\nname: moodboard\ndescription: A moodboard in the brand's colours.\n---\nMake a moodboard.\n");
  writeFileSync(join(plugin, "DESIGN.md"), "# Brand\n\n## Colors\n\nTeal.\n");
  writeFileSync(join(plugin, "craft.md"), "# Craft\n\nGrids.\n");
  writeFileSync(join(plugin, "open-design.json"), JSON.stringify({ specVersion: "1.0.0", name: "moodboard", version: "1.0.0", title: "Moodboard",
    description: "A moodboard in the brand's colours.",
    od: { kind: "scenario", taskKind: "new-generation", useCase: { query: "A moodboard" },
      context: { designSystem: { path: "DESIGN.md" }, craft: ["craft.md"] }, pipeline: { stages: [{ id: "make", atoms: ["file-write"] }] } } }));
  assert.equal((await api("POST", "/api/plugins/install", { source: plugin })).status, 200);
  await openApp(page, "#/plugins");
  await openApp(page, "#/");
  await page.getByRole("button", { name: "Use Moodboard" }).click();
  await chips.locator('li[data-key="design-system:DESIGN.md"]').waitFor();
  await page.getByRole("button", { name: "Remove design-system DESIGN.md" }).click();
  await page.getByRole("button", { name: "Restore 1 removed" }).waitFor();
  assert.deepEqual(await chips.locator("li[data-key]").evaluateAll((l) => l.map((x) => x.dataset.key)), ["craft:craft.md", "atom:file-write"]);
  await checkA11y(page, "home, a chip removed");
  await screenshot(page, "home-chip-removed");
  await page.getByRole("button", { name: "Send" }).click();
  await page.waitForURL(new RegExp(`#/runs/(?!${runId})`));
  const second = decodeURIComponent(page.url().split("#/runs/")[1]);
  const snapId = (await api("GET", `/api/runs/${second}`)).body.run.appliedPluginSnapshotId;
  const snap = (await api("GET", `/api/applied-plugins/${snapId}`)).body.snapshot;
  assert.deepEqual(snap.excludedContext, ["design-system:DESIGN.md"]);
  assert.equal(snap.manifest.od.context.designSystem, null, "the snapshot's manifest goes without it");
  assertNoPageErrors(page, "home");
}
