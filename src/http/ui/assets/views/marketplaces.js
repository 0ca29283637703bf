// Marketplaces: add (a folder, an index URL or github:), refresh, remove, browse a marketplace's
// plugins and install one (`POST /api/plugins/install` with `marketplace/plugin`).

import { get, post, del, ndjson, enc } from "../api.js";
import { h, fill, table, badge, when, errorBox, say } from "../ui.js";

export async function render(main) {
  const list = h("div", {}, h("p", {}, "Loading…"));
  const browse = h("div", {});
  const out = h("div", {});
  const source = h("input", { id: "mp-source", name: "source", required: true, autocomplete: "off" });
  const trust = h("select", { id: "mp-trust", name: "trust" },
    ["restricted", "trusted", "official"].map((t) => h("option", { value: t }, t)));
  const form = h("form", { class: "stack", "aria-labelledby": "mp-add-title", onsubmit: add },
    h("div", { class: "field" }, h("label", { for: "mp-source" }, "Marketplace source"), source,
      h("span", { class: "hint" }, "A folder or file with a marketplace index, its URL, or github:owner/repo.")),
    h("div", { class: "field" }, h("label", { for: "mp-trust" }, "Trust"), trust),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Add marketplace")));
  fill(main, h("h1", {}, "Marketplaces"), list, out, browse,
    h("section", { "aria-labelledby": "mp-add-title" }, h("h2", { id: "mp-add-title" }, "Add a marketplace"), form));

  async function load() {
    const { marketplaces } = await get("/api/marketplaces?limit=200");
    fill(list, table("Marketplaces", [
      { label: "Marketplace", cell: (m) => m.name || m.id },
      { label: "Id", cell: (m) => h("code", {}, m.id) },
      { label: "Trust", cell: (m) => badge(m.trust || "restricted") },
      { label: "Plugins", cell: (m) => String(m.pluginCount ?? (m.plugins || []).length ?? "") },
      { label: "Refreshed", cell: (m) => when(m.refreshedAt || m.addedAt) },
      { label: "Actions", cell: (m) => h("div", { class: "actions" },
        h("button", { type: "button", onclick: () => show(m) }, `Browse ${m.id}`),
        h("button", { type: "button", onclick: () => run(() => post(`/api/marketplaces/${enc(m.id)}/refresh`, {}), `Refreshed ${m.id}`) }, "Refresh"),
        h("button", { type: "button", class: "danger", onclick: () => run(() => del(`/api/marketplaces/${enc(m.id)}`), `Removed ${m.id}`) }, "Remove")) },
    ], marketplaces, "No marketplaces."));
  }

  async function run(work, done) {
    fill(out);
    try {
      await work();
      say(done);
      fill(out, h("p", { role: "status" }, done));
      await load();
    } catch (e) {
      fill(out, errorBox(e));
    }
  }

  async function add(ev) {
    ev.preventDefault();
    await run(() => post("/api/marketplaces", { url: source.value.trim(), trust: trust.value }), "Marketplace added");
  }

  // A marketplace's plugins as cards (title, description, tags, version, Install), with a filter
  // over title, name, description and tags; an installed one links to its page instead.
  async function show(m) {
    fill(browse, h("p", {}, "Loading…"));
    try {
      const [{ plugins }, installed] = await Promise.all([
        get(`/api/marketplaces/${enc(m.id)}/plugins?limit=200`),
        get("/api/plugins?limit=1000").then((r) => r.plugins, () => []),
      ]);
      const ids = new Set(installed.map((p) => p.id));
      const filter = h("input", { id: "mp-filter", type: "search", autocomplete: "off" });
      const cards = h("div", { class: "cards" });
      const count = h("p", { class: "hint", role: "status" });
      const card = (p) => {
        const short = String(p.name || "").split("/").pop();
        const title = p.title || p.name;
        return h("article", { class: "card", "aria-label": title },
          h("h3", {}, title),
          p.description ? h("p", {}, p.description) : h("p", { class: "hint" }, "No description."),
          (p.tags || []).length ? h("ul", { class: "chips", "aria-label": `Tags of ${title}` }, p.tags.map((t) => h("li", { class: "chip" }, t))) : null,
          h("p", { class: "hint" }, [p.name, p.version].filter(Boolean).join(" · ")),
          h("div", { class: "actions" }, ids.has(short)
            ? h("a", { class: "button", href: `#/plugins/${enc(short)}` }, `Installed: open ${short}`)
            : h("button", { type: "button", class: "primary", onclick: (ev) => install(ev.currentTarget, p.name) }, `Install ${p.name}`)));
      };
      const paint = () => {
        const q = filter.value.trim().toLowerCase();
        const shown = plugins.filter((p) => !q || [p.title, p.name, p.description, ...(p.tags || [])].some((x) => String(x || "").toLowerCase().includes(q)));
        fill(cards, shown.length ? shown.map(card) : h("p", { class: "empty" }, plugins.length ? "No plugin matches." : "This marketplace lists no plugins."));
        fill(count, `${shown.length} of ${plugins.length} plugins`);
      };
      filter.addEventListener("input", paint);
      fill(browse, h("section", { "aria-label": `Plugins of ${m.id}` }, h("h2", {}, `Plugins of ${m.name || m.id}`),
        h("div", { class: "field" }, h("label", { for: "mp-filter" }, "Filter"), filter), count, cards));
      paint();
    } catch (e) {
      fill(browse, errorBox(e));
    }
  }

  async function install(button, spec) {
    button.disabled = true;
    fill(out, h("p", { role: "status" }, `Installing ${spec}…`));
    try {
      const last = await ndjson("/api/plugins/install", { source: spec }, (line) => {
        if (line.event === "progress") fill(out, h("p", { role: "status" }, `${line.data.phase}: ${line.data.message}`));
      });
      if (last && last.event === "success") fill(out, h("p", { role: "status" }, "Installed ", h("a", { href: `#/plugins/${enc(last.data.plugin.id)}` }, last.data.plugin.id), "."));
      else fill(out, errorBox((last && last.data && last.data.error) || { message: "the install ended without a result" }));
    } catch (e) {
      fill(out, errorBox(e));
    } finally {
      button.disabled = false;
    }
  }

  await load();
}
