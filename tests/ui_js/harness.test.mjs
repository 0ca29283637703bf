// Tests of the browser harness itself (run by tests/api/ui_browser.rs before the flows): the daemon
// starts on a fresh data dir, answers with its discovery token, restarts on the same port; axe
// runs in a page whose CSP forbids every script and still reports a real violation; screenshots
// land under target/ui-screenshots/.

import test from "node:test";
import assert from "node:assert/strict";
import { existsSync, statSync } from "node:fs";
import { startDaemon, launchBrowser, checkA11y, screenshot, api, assertNoPageErrors } from "./harness.mjs";

test("startDaemon: a fresh data dir, /api/health with the discovery token, restart on the same port, stop", async () => {
  const d = await startDaemon();
  try {
    assert.match(d.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.match(d.token, /^[0-9a-f]{64}$/);
    assert.ok(existsSync(`${d.dataDir}/daemon.json`));
    const h = await api(d.url, "GET", "/api/health", undefined, d.token);
    assert.equal(h.status, 200);
    assert.equal(h.body.status, "ok");
    const before = { port: d.port, pid: d.pid };
    const created = await api(d.url, "POST", "/api/projects", { id: "p1", name: "Kept" }, d.token);
    assert.equal(created.status, 200, JSON.stringify(created.body));
    await d.restart();
    assert.equal(d.port, before.port, "same port after a restart");
    assert.notEqual(d.pid, before.pid, "a new process");
    const again = await api(d.url, "GET", "/api/projects/p1", undefined, d.token);
    assert.equal(again.status, 200, "same data dir after a restart");
  } finally {
    await d.stop();
  }
  assert.ok(!existsSync(d.dataDir), "stop removes the data dir");
});

const STRICT = "default-src 'none'; script-src 'self'; style-src 'self'";

async function pageWithCsp(browser, html) {
  const page = await browser.newPage();
  await page.route("http://od.test/", (r) => r.fulfill({ status: 200, headers: { "content-type": "text/html", "content-security-policy": STRICT }, body: html }));
  const refused = [];
  page.on("console", (m) => m.type() === "error" && refused.push(m.text()));
  await page.goto("http://od.test/");
  return { page, refused };
}

test("checkA11y: runs under a CSP that forbids inline scripts, fails on a serious violation, passes a clean page", async () => {
  const browser = await launchBrowser();
  try {
    const { page, refused } = await pageWithCsp(browser, `<!doctype html><html lang="en"><title>t</title><body><main><h1>Form</h1><input id="x"><script>document.title="inline ran"</script></main></body></html>`);
    assert.equal(await page.title(), "t", "the CSP is in force: the inline script did not run");
    assert.ok(refused.some((m) => /Content Security Policy/.test(m)), "chromium reported the refused inline script");
    await assert.rejects(checkA11y(page, "unlabelled"), (e) => /critical\] label: Form elements must have labels/.test(e.message) && /at #x/.test(e.message));
    const { page: clean } = await pageWithCsp(browser, `<!doctype html><html lang="en"><title>ok</title><body><main><h1>Form</h1><label for="x">Name</label><input id="x"></main></body></html>`);
    const result = await checkA11y(clean, "labelled");
    assert.ok(Array.isArray(result.violations));
    const path = await screenshot(clean, "harness-selftest");
    assert.ok(statSync(path).size > 0 && path.endsWith("/ui-screenshots/harness-selftest.png"));
  } finally {
    await browser.close();
  }
});

test("assertNoPageErrors: fails on a page error unless an allowed pattern matches it", () => {
  const page = { odErrors: ["console: Failed to load resource: the server responded with a status of 422 ()"] };
  assert.throws(() => assertNoPageErrors(page, "x"), /x: the page reported errors:\nconsole: Failed to load resource/);
  assertNoPageErrors(page, "x", [/status of 422/]);
  page.odErrors.push("pageerror: boom");
  assert.throws(() => assertNoPageErrors(page, "x", [/status of 422/]), /pageerror: boom/);
});
