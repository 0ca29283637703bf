// Connectors (`#/connectors`): each connector od knows, its status (connected with the account, or
// why it cannot connect yet), its scopes and the tools it allows. *Connect* starts the real
// authorization (`POST /api/connectors/:id/connect/start`: PKCE, a single-use state) and opens the
// provider's page in a new tab; the provider's callback to the daemon connects the account, and
// the page follows until it does. *Disconnect* forgets the account after asking.

import { get, post, del, enc } from "../api.js";
import { h, fill, badge, when, errorBox, modal, say } from "../ui.js";

/** The status as a person reads it: `pending` is a connector ready to connect. */
function status(s) {
  const b = badge(s);
  if (s === "pending") b.textContent = "not connected";
  return b;
}

export async function render(main) {
  const list = h("div", { class: "cards" }, h("p", {}, "Loading…"));
  const out = h("div", { "aria-live": "polite" });
  fill(main, h("h1", {}, "Connectors"),
    h("p", { class: "hint" }, "Accounts your plugins' tools use. Tokens stay with the daemon: plugins and agents never see them."),
    out, list);
  let watching = null;

  async function load() {
    const { connectors } = await get("/api/connectors");
    fill(list, connectors.length ? connectors.map(card) : h("p", { class: "empty" }, "No connectors are configured."));
    return connectors;
  }

  function card(c) {
    const titleId = `conn-${c.id}`;
    const connected = c.status === "connected";
    return h("article", { class: "card", "aria-labelledby": titleId, dataset: { connector: c.id, status: c.status } },
      h("h2", { id: titleId }, c.name || c.id, " ", status(c.status)),
      connected
        ? h("p", {}, "Connected as ", h("strong", {}, c.accountLabel || "an account"), c.connectedAt ? ` · ${when(c.connectedAt)}` : "")
        : c.reason ? h("p", { class: "hint" }, c.reason) : null,
      c.lastError ? h("p", { class: "field-error" }, c.lastError) : null,
      (c.scopes || []).length ? h("p", { class: "hint" }, "Scopes: ", c.scopes.join(", ")) : null,
      h("details", {}, h("summary", {}, `${(c.tools || []).length} tools`),
        h("ul", {}, (c.tools || []).map((t) => h("li", {}, h("code", {}, t.name), " ", h("span", { class: "hint" }, `${t.method || ""} ${t.description || ""}`))))),
      h("div", { class: "actions" },
        connected
          ? h("button", { type: "button", class: "danger", "aria-label": `Disconnect ${c.name || c.id}`, onclick: () => disconnect(c) }, "Disconnect")
          : h("button", { type: "button", class: "primary", "aria-label": `Connect ${c.name || c.id}`, disabled: c.status === "unavailable", onclick: () => connect(c) }, "Connect")));
  }

  async function connect(c) {
    fill(out);
    try {
      const r = await post(`/api/connectors/${enc(c.id)}/connect/start`, {});
      window.open(r.authorizeUrl, "_blank", "noopener");
      fill(out, h("p", { role: "status", class: "panel" }, `Finish connecting ${c.name || c.id} in the new tab; this page follows. `,
        h("a", { href: r.authorizeUrl, target: "_blank", rel: "noopener noreferrer" }, "Open the authorisation page again")));
      follow(c.id);
    } catch (e) {
      fill(out, errorBox(e));
    }
  }

  // Until the account is connected (the callback lands in the daemon, not here), or ten minutes.
  function follow(id) {
    clearInterval(watching);
    const until = Date.now() + 600000;
    watching = setInterval(async () => {
      if (!list.isConnected || Date.now() > until) return clearInterval(watching);
      try {
        const { connector } = await get(`/api/connectors/${enc(id)}`);
        if (connector.status === "connected") {
          clearInterval(watching);
          await load();
          fill(out, h("p", { role: "status", class: "panel" }, `${connector.name || id} is connected as ${connector.accountLabel || "an account"}.`));
          say(`${connector.name || id} connected`);
        }
      } catch {
        /* the next tick tries again */
      }
    }, 500);
  }

  async function disconnect(c) {
    const ok = await modal(`Disconnect ${c.name || c.id}?`, h("p", {}, "od forgets the account and its token; plugins that need it will ask to connect again."),
      [{ label: "Disconnect", value: true, primary: true }, { label: "Keep it", value: false }]);
    if (!ok) return;
    fill(out);
    try {
      await del(`/api/connectors/${enc(c.id)}/connection`);
      await load();
      say(`${c.name || c.id} disconnected`);
    } catch (e) {
      fill(out, errorBox(e));
    }
  }

  try {
    await load();
  } catch (e) {
    fill(list, errorBox(e));
  }
  return () => clearInterval(watching);
}
