// The real-browser test harness: a live od daemon on a fresh data dir, Debian's chromium driven by
// playwright-core (the system browser; nothing downloads one), screenshots under
// target/ui-screenshots/, axe-core run inside the page, and HTTP API calls for a flow's setup.

import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, openSync, closeSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { X509Certificate, createHash } from "node:crypto";

export const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const require = createRequire(import.meta.url);

/** The flags Debian's chromium needs on this machine kind (closed network, root, no GPU). */
export const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The TLS the flows run under, when the cargo wrapper asks for it: `OD_UI_TLS_CERT` and
 * `OD_UI_TLS_KEY` (PEM files of a certificate for 127.0.0.1 made by the test's own CA, which it
 * also names in `NODE_EXTRA_CA_CERTS` for this process's fetches). Returns `{cert, key, spki}`,
 * `spki` being the base64 SHA-256 of the certificate's public key: chromium trusts exactly that
 * key (`--ignore-certificate-errors-spki-list`), no other certificate error is ignored. Null:
 * plain HTTP.
 */
export function tlsFromEnv() {
  const cert = process.env.OD_UI_TLS_CERT;
  const key = process.env.OD_UI_TLS_KEY;
  if (!cert || !key) return null;
  const spkiDer = new X509Certificate(readFileSync(cert)).publicKey.export({ type: "spki", format: "der" });
  return { cert, key, spki: createHash("sha256").update(spkiDer).digest("base64") };
}

/**
 * Polls `probe` until it returns a truthy value or `ms` pass; throws `what` (with the last error).
 * An error with `fatal: true` ends the wait at once.
 */
export async function until(what, probe, ms = 15000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
    } catch (e) {
      if (e?.fatal) throw e;
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${last.message}` : ""}`);
    await sleep(50);
  }
}

/**
 * Starts `$OD_BIN daemon start --foreground` on a fresh temporary data dir and a free port, and
 * waits until `/api/health` answers. Returns `{url, port, dataDir, token, stop(), restart()}`:
 * `restart()` stops the daemon and starts it again on the same port and data dir (a page's SSE
 * connections drop and must resume); `stop()` ends it and removes the data dir.
 * `env`: extra environment for the daemon (e.g. `{OD_ALLOW_HTTP_EXEC: "1"}`).
 */
export async function startDaemon({ env = {}, bin = process.env.OD_BIN, tls = tlsFromEnv() } = {}) {
  if (!bin || !existsSync(bin)) {
    throw new Error(`OD_BIN must name the od binary (got ${JSON.stringify(bin)}); cargo test --test ui_browser sets it`);
  }
  const dataDir = mkdtempSync(join(tmpdir(), "od-ui-"));
  const daemonEnv = { ...process.env, ...env, OD_DATA_DIR: dataDir, NO_COLOR: "1" };
  for (const k of ["OD_DAEMON_URL", "OD_API_TOKEN", "OD_PORT", "OD_BIND_HOST", "OD_TLS_CERT", "OD_TLS_KEY"]) if (!(k in env)) delete daemonEnv[k];
  if (tls) Object.assign(daemonEnv, { OD_TLS_CERT: tls.cert, OD_TLS_KEY: tls.key });
  const state = { child: null, port: 0, url: "", token: "", exited: null };

  const launch = async () => {
    const out = openSync(join(dataDir, "daemon.out"), "a");
    // --idle-exit-ms: a daemon whose runner died without stop() ends by itself once idle.
    const args = ["daemon", "start", "--foreground", "--port", String(state.port), "--data-dir", dataDir, "--idle-exit-ms", "300000"];
    const child = spawn(bin, args, { env: daemonEnv, stdio: ["ignore", out, out] });
    closeSync(out);
    state.child = child;
    state.exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
    let gone = null;
    state.exited.then((r) => (gone = r));
    const discovery = join(dataDir, "daemon.json");
    const info = await until(
      "the daemon's discovery file and /api/health",
      async () => {
        if (gone) throw Object.assign(new Error(`the daemon exited (${JSON.stringify(gone)}):\n${log()}`), { fatal: true });
        if (!existsSync(discovery)) return null;
        const d = JSON.parse(readFileSync(discovery, "utf8"));
        if (d.pid !== child.pid || !d.url) return null;
        const r = await fetch(`${d.url}/api/health`, { headers: { authorization: `Bearer ${d.token}` } });
        return r.ok ? d : null;
      },
      30000,
    ).catch((e) => {
      child.kill("SIGKILL");
      throw e;
    });
    state.url = info.url.replace(/\/$/, "");
    state.token = info.token;
    state.port = Number(new URL(state.url).port);
  };

  const log = () => {
    try {
      return readFileSync(join(dataDir, "daemon.out"), "utf8").slice(-4000);
    } catch {
      return "(no daemon output)";
    }
  };

  const halt = async () => {
    const child = state.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    const done = await Promise.race([state.exited, sleep(10000).then(() => null)]);
    if (!done) {
      child.kill("SIGKILL");
      await state.exited;
    }
  };

  await launch();
  const daemon = {
    dataDir,
    get url() {
      return state.url;
    },
    get port() {
      return state.port;
    },
    get token() {
      return state.token;
    },
    get pid() {
      return state.child?.pid;
    },
    log,
    async restart() {
      await halt();
      // The same port: a page's EventSource reconnects to the same origin.
      await until("the daemon to start again on its port", async () => (await launch(), true), 30000);
      return daemon;
    },
    async stop() {
      await halt();
      if (!process.env.OD_UI_KEEP) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return daemon;
}

/** The chromium to drive: `$CHROMIUM`, else Debian's /usr/bin/chromium. */
export function chromiumPath() {
  return process.env.CHROMIUM || "/usr/bin/chromium";
}

/**
 * Launches Debian's chromium headless through playwright-core. Playwright gives every launch a
 * fresh, empty profile directory (its own --user-data-dir, which the SPKI pin needs), removed on
 * close. Under `tls` (see tlsFromEnv) the test certificate's key is the one pinned.
 */
export async function launchBrowser({ tls = tlsFromEnv() } = {}) {
  const exe = chromiumPath();
  if (!existsSync(exe)) {
    throw new Error(`${exe} is missing: install Debian's browser with \`apt-get install -y chromium chromium-driver\` (.ci/run does)`);
  }
  const { chromium } = await import("playwright-core");
  const args = tls ? [...CHROMIUM_FLAGS, `--ignore-certificate-errors-spki-list=${tls.spki}`] : CHROMIUM_FLAGS;
  return chromium.launch({ executablePath: exe, headless: true, chromiumSandbox: false, args });
}

/**
 * Saves a full-page screenshot to `target/ui-screenshots/<name>.png` — `$OD_UI_SCREENSHOTS` when
 * set (.ci/run points it at the checkout's, since its tests run in a throwaway copy), else under
 * `$CARGO_TARGET_DIR` or `<repo>/target`; returns the path.
 */
export async function screenshot(page, name) {
  const dir = process.env.OD_UI_SCREENSHOTS || join(process.env.CARGO_TARGET_DIR || join(repo, "target"), "ui-screenshots");
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name.replace(/[^A-Za-z0-9_.-]/g, "_")}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/**
 * Runs axe-core in the page and throws on any `serious` or `critical` violation, listing each
 * rule with the elements it failed on. axe's source goes in through the DevTools protocol
 * (`page.evaluate`), which the page's Content-Security-Policy does not govern, so the app's CSP
 * stays exactly as served. Returns axe's result.
 */
export async function checkA11y(page, label) {
  const source = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
  const loaded = await page.evaluate(`${source};\ntypeof window.axe === "object"`);
  if (!loaded) throw new Error(`${label}: axe-core did not load into the page`);
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  const bad = result.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  if (bad.length) {
    const lines = bad.flatMap((v) => [
      `- [${v.impact}] ${v.id}: ${v.help} (${v.helpUrl})`,
      ...v.nodes.slice(0, 10).map((n) => `    at ${n.target.join(" ")}: ${n.failureSummary?.replace(/\s+/g, " ")}`),
    ]);
    throw new Error(`${label}: ${bad.length} serious/critical accessibility violation(s):\n${lines.join("\n")}`);
  }
  return result;
}

/**
 * One HTTP API call for a flow's setup: `api(daemon.url, "POST", "/api/projects", {...}, daemon.token)`.
 * Returns `{status, body}` (the JSON body, or the text when it is not JSON); never throws on a
 * status, so a flow can check refusals too.
 */
export async function api(url, method, path, body, token) {
  const headers = { accept: "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const r = await fetch(`${url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let parsed = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: r.status, body: parsed };
}

/**
 * Opens the app at `daemon.url + "/" + hash` and waits until it rendered its first view
 * (`document.body.dataset.ready === "1"`). Page errors and console errors (a CSP refusal among
 * them) are collected in `page.odErrors`.
 */
export async function openApp(page, daemon, hash = "") {
  if (!page.odErrors) {
    page.odErrors = [];
    page.on("pageerror", (e) => page.odErrors.push(`pageerror: ${e.message}`));
    page.on("console", (m) => {
      if (m.type() === "error") page.odErrors.push(`console: ${m.text()}`);
    });
  }
  // No response: only the hash changed (the same document, routed by the app).
  const res = await page.goto(`${daemon.url}/${hash}`);
  if (res && !res.ok()) throw new Error(`GET ${daemon.url}/ answered ${res.status()}: the daemon serves no UI there`);
  try {
    await page.waitForFunction(() => document.body && document.body.dataset.ready === "1", null, { timeout: 15000 });
  } catch (e) {
    const text = await page.evaluate(() => document.body?.innerText?.slice(0, 500)).catch(() => "");
    const errors = page.odErrors.length ? `\npage errors:\n${page.odErrors.join("\n")}` : "";
    throw new Error(`the app never set body[data-ready="1"] (${e.message}); the page shows: ${JSON.stringify(text)}${errors}`);
  }
  return page;
}

/**
 * Throws when the page reported errors (see openApp), leaving out those matching one of `allowed`
 * (regular expressions: e.g. `[/status of 422/]`, chromium's console line for a refusal the flow
 * provoked on purpose).
 */
export function assertNoPageErrors(page, label, allowed = []) {
  const errors = (page.odErrors ?? []).filter((e) => !allowed.some((re) => re.test(e)));
  if (errors.length) throw new Error(`${label}: the page reported errors:\n${errors.join("\n")}`);
}
