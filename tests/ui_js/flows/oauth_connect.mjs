// Issue 34: the oauth-prompt card's Connect starts the real authorization. A plugin needs the
// `slack` connector, whose catalog entry (OD_CONNECTORS_FILE) points at an OAuth 2.0 provider
// started here (loopback; it checks the PKCE S256 challenge against the verifier and issues a
// token only then). The run asks `__auto_connector_slack`; Connect asks the daemon for the
// provider's URL bound to this surface and opens it in a new tab; the provider approves and sends
// the browser to the daemon's callback, which exchanges the code, connects the account and
// answers the surface (`respondedBy: oauth`); the card goes and the run goes on to `succeeded`.
// Then the connectors page shows the account, disconnects it (asked first) and connects it again
// through the provider, following until the callback lands.

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { mkdtempSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ACCESS = `xoxp-${randomBytes(6).toString("hex")}`;
const codes = new Map(); // code -> {challenge, redirect}
const seen = { exchanged: 0, accountLookups: 0 };

const provider = createServer((req, res) => {
  const url = new URL(req.url, "http://provider");
  const json = (status, body) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  if (req.method === "GET" && url.pathname === "/oauth/authorize") {
    const q = url.searchParams;
    if (q.get("response_type") !== "code" || q.get("code_challenge_method") !== "S256" || q.get("client_id") !== "od-ui-client") {
      return json(400, { error: "invalid_request" });
    }
    const code = `code-${codes.size}`;
    codes.set(code, { challenge: q.get("code_challenge"), redirect: q.get("redirect_uri") });
    // The person approves: back to od.
    res.writeHead(302, { location: `${q.get("redirect_uri")}?code=${code}&state=${encodeURIComponent(q.get("state"))}` });
    return res.end();
  }
  if (req.method === "POST" && url.pathname === "/oauth/token") {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const f = new URLSearchParams(body);
      const issued = codes.get(f.get("code"));
      codes.delete(f.get("code"));
      const computed = createHash("sha256").update(f.get("code_verifier") || "").digest("base64url");
      if (!issued || computed !== issued.challenge || f.get("redirect_uri") !== issued.redirect) return json(400, { error: "invalid_grant" });
      seen.exchanged += 1;
      json(200, { access_token: ACCESS, token_type: "bearer", expires_in: 3600, scope: "channels:read chat:write" });
    });
    return;
  }
  if (url.pathname === "/api/auth.test") {
    if (req.headers.authorization !== `Bearer ${ACCESS}`) return json(401, { ok: false });
    seen.accountLookups += 1;
    return json(200, { ok: true, team: "Acme Team", user: "ada" });
  }
  json(404, { error: "not_found" });
});
await new Promise((resolve) => provider.listen(0, "127.0.0.1", resolve));
provider.unref();
const base = `http://127.0.0.1:${provider.address().port}`;

const dir = mkdtempSync(join(tmpdir(), "od-ui-oauth-"));
const catalog = join(dir, "connectors.json");
writeFileSync(catalog, JSON.stringify({ connectors: { slack: {
  clientId: "od-ui-client", authorizeUrl: `${base}/oauth/authorize`, tokenUrl: `${base}/oauth/token`, apiBaseUrl: `${base}/api` } } }));
const plugin = join(dir, "digest");
mkdirSync(plugin);
writeFileSync(join(plugin, "SKILL.md"), "---\nname: digest\ndescription: Summarises the team's channels.\n---\nSummarise the channels.\n");
writeFileSync(join(plugin, "open-design.json"), JSON.stringify({
  specVersion: "1.0.0", name: "digest", version: "1.0.0", title: "Digest",
  od: { kind: "scenario", taskKind: "new-generation", pipeline: { stages: [{ id: "digest", atoms: ["file-write"] }] },
    connectors: { required: [{ id: "slack", tools: ["channels.list"] }] } },
}));

export const daemonEnv = { OD_CONNECTORS_FILE: catalog };

export async function flow({ page, context, api, until, openApp, screenshot, checkA11y, assertNoPageErrors }) {
  const installed = await api("POST", "/api/plugins/install", { source: plugin });
  assert.equal(installed.status, 200, JSON.stringify(installed.body));
  const started = await api("POST", "/api/runs", { pluginId: "digest", agent: "dry-run", grantCaps: ["connector:slack"] });
  assert.equal(started.status, 202, JSON.stringify(started.body));
  const { runId } = started.body;
  const surfaceId = "__auto_connector_slack";
  await until("the connector surface to wait", async () =>
    (await api("GET", `/api/runs/${runId}/genui`)).body.surfaces?.some((s) => s.surfaceId === surfaceId && s.status === "pending"));

  await openApp(page, `#/runs/${runId}`);
  const card = page.locator(`[data-surface="${surfaceId}"]`);
  await card.waitFor();
  await checkA11y(page, "oauth-prompt card");
  await screenshot(page, "oauth-card");
  const [tab] = await Promise.all([context.waitForEvent("page"), card.getByRole("button", { name: "Connect" }).click()]);
  // The new tab went to the provider, which sent it back to the daemon's callback.
  await tab.waitForURL(/\/api\/connectors\/oauth\/callback\/slack/, { timeout: 15000 });
  await card.waitFor({ state: "detached", timeout: 15000 });
  await until("the run to succeed", async () => (await api("GET", `/api/runs/${runId}`)).body.run.status === "succeeded", 30000);

  assert.deepEqual(seen, { exchanged: 1, accountLookups: 1 });
  const slack = (await api("GET", "/api/connectors/slack")).body.connector;
  assert.equal(slack.status, "connected", JSON.stringify(slack));
  const row = (await api("GET", `/api/runs/${runId}/genui`)).body.surfaces.find((s) => s.surfaceId === surfaceId);
  assert.equal(row.respondedBy, "oauth", JSON.stringify(row));
  await tab.close();

  // The connectors page: connected with the account; Disconnect (asked first) forgets it; Connect
  // goes through the provider again and the page follows until the account is back.
  await openApp(page, "#/connectors");
  const slackCard = page.locator('article[data-connector="slack"]');
  await slackCard.waitFor();
  assert.equal(await slackCard.getAttribute("data-status"), "connected");
  assert.match(await slackCard.textContent(), /Connected as/);
  await slackCard.getByRole("button", { name: /^Disconnect / }).click();
  await page.getByRole("dialog", { name: /^Disconnect / }).getByRole("button", { name: "Disconnect" }).click();
  await page.locator('article[data-connector="slack"][data-status="pending"]').waitFor();
  assert.notEqual((await api("GET", "/api/connectors/slack")).body.connector.status, "connected");
  await checkA11y(page, "connectors, slack disconnected");
  const again = page.locator('article[data-connector="slack"]');
  const [tab2] = await Promise.all([context.waitForEvent("page"), again.getByRole("button", { name: /^Connect / }).click()]);
  await tab2.waitForURL(/\/api\/connectors\/oauth\/callback\/slack/, { timeout: 15000 });
  await page.locator('article[data-connector="slack"][data-status="connected"]').waitFor({ timeout: 15000 });
  assert.equal(seen.exchanged, 2, "a second real exchange");
  await screenshot(page, "connectors-connected");
  await tab2.close();
  assertNoPageErrors(page, "oauth connect");
}
