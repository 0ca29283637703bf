// Runs every flow in tests/ui_js/flows/*.mjs (or those whose file name contains argv[2]) against a
// fresh od daemon each ($OD_BIN) in one headless chromium, and exits 1 if any flow failed.
// A flow exports `async function flow(ctx)` (and optionally `daemonEnv`, extra environment for its
// daemon); ctx: {daemon, browser, context, page, api(method, path, body), screenshot, checkA11y,
// openApp(page, hash), assertNoPageErrors, until, repo}. A failing flow leaves a screenshot named
// `<flow>-failed` under target/ui-screenshots/ and the end of the daemon's output in the report.
// With OD_UI_TLS_CERT/OD_UI_TLS_KEY (harness.tlsFromEnv) every daemon serves HTTPS and a flow
// whose daemon does not is a failure.

import { readdirSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import * as h from "./harness.mjs";

const dir = join(h.repo, "tests", "ui_js", "flows");
const only = process.argv[2] ?? "";
const files = readdirSync(dir).filter((f) => f.endsWith(".mjs") && f.includes(only)).sort();
if (!files.length) {
  console.error(`no flow in ${dir} matches ${JSON.stringify(only)}`);
  process.exit(1);
}

const browser = await h.launchBrowser();
const failures = [];
try {
  for (const file of files) {
    const name = file.replace(/\.mjs$/, "");
    const started = Date.now();
    const { flow, daemonEnv } = await import(pathToFileURL(join(dir, file)).href);
    if (typeof flow !== "function") {
      failures.push(name);
      console.log(`not ok - ${name}: exports no \`flow\` function`);
      continue;
    }
    const daemon = await h.startDaemon({ env: daemonEnv ?? {} });
    if (h.tlsFromEnv() && !daemon.url.startsWith("https://")) {
      await daemon.stop();
      failures.push(name);
      console.log(`not ok - ${name}: asked for TLS, the daemon serves ${daemon.url}`);
      continue;
    }
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const ctx = { daemon, browser, context, page, repo: h.repo, until: h.until, screenshot: h.screenshot, checkA11y: h.checkA11y,
      openApp: (p, hash) => h.openApp(p, daemon, hash), assertNoPageErrors: h.assertNoPageErrors,
      api: (method, path, body) => h.api(daemon.url, method, path, body, daemon.token) };
    try {
      await flow(ctx);
      console.log(`ok - ${name} (${Date.now() - started} ms)`);
    } catch (e) {
      failures.push(name);
      await h.screenshot(page, `${name}-failed`).catch(() => {});
      console.log(`not ok - ${name} (${Date.now() - started} ms)\n${e?.stack ?? e}\n--- daemon output (end) ---\n${daemon.log()}`);
    } finally {
      await context.close().catch(() => {});
      await daemon.stop();
    }
  }
} finally {
  await browser.close();
}
console.log(failures.length ? `${failures.length} of ${files.length} flow(s) failed: ${failures.join(", ")}` : `${files.length} flow(s) passed`);
process.exit(failures.length ? 1 : 0);
