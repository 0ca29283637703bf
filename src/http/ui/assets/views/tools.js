// Tools (`#/tools`): the catalog agents find tools in (spec 004, progressive disclosure) — od's own
// api tools, the plugins' MCP servers' once indexed, imported ones and the connectors' — searched
// by keyword as an agent would (`GET /api/tools/search?q=`), each with what it does, whether it
// only reads, how to call it from the CLI and, on demand, its input schema.

import { get, enc } from "../api.js";
import { h, fill, errorBox } from "../ui.js";

export async function render(main) {
  const q = h("input", { type: "search", id: "tools-q", autocomplete: "off", placeholder: "e.g. files, pull request, colour" });
  const count = h("p", { class: "hint", role: "status", id: "tools-count" });
  const list = h("ul", { class: "tool-list", "aria-label": "Tools" });
  fill(main, h("h1", {}, "Tools"),
    h("p", { class: "hint" }, "What agents can find and call during a run. Search works as theirs does: by name, description and parameters."),
    h("form", { role: "search", "aria-label": "Tools", onsubmit: (ev) => { ev.preventDefault(); search(); } },
      h("div", { class: "field" }, h("label", { for: "tools-q" }, "Search tools"), q)),
    count, list);

  let asked = 0;
  async function search() {
    const mine = ++asked;
    const query = q.value.trim();
    try {
      const r = await get(`/api/tools/search?limit=100${query ? `&q=${enc(query)}` : ""}`);
      if (mine !== asked) return;
      fill(count, `${r.tools.length}${r.truncated ? "+" : ""} of ${r.total} tools${query ? ` for "${query}"` : ""}`);
      fill(list, r.tools.length ? r.tools.map(item) : h("li", { class: "empty" }, "No tool matches."));
    } catch (e) {
      if (mine === asked) fill(list, h("li", {}, errorBox(e)));
    }
  }

  function item(t) {
    const how = t.cli && t.cli.subcommand ? h("code", {}, `od ${t.cli.subcommand}`) : t.api ? h("code", {}, `${t.api.method} ${t.api.route}`) : null;
    return h("li", { class: "tool", dataset: { tool: t.name } },
      h("strong", {}, h("code", {}, t.name)), " ",
      h("span", { class: "badge" }, t.surface || "api"), t.readOnly ? h("span", { class: "badge" }, "read-only") : null,
      h("p", {}, t.description || ""),
      how ? h("p", { class: "hint" }, "Call: ", how) : null,
      h("details", {}, h("summary", {}, `Input of ${t.name}`), h("pre", { tabindex: "0" }, JSON.stringify(t.inputSchema || {}, null, 2))));
  }

  q.addEventListener("input", search);
  await search();
}
