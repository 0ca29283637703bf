// The plugins rail under a composer (spec §11.6 `InlinePluginsRail`): the plugins a person starts
// from — scenarios, not atoms, nor those tagged `hidden` (od-default runs a bare brief) — filtered
// by task kind (facets with counts, derived from the manifests) and by text, ranked by recent use.
// Inside a project it opens on "What next": the plugins this project already ran and, once it holds
// artifacts, those that refine what is there (`tune-collab`), else those that make something new.

import { get, enc } from "../api.js";
import { h, fill, errorBox } from "../ui.js";

const KIND_LABELS = {
  "new-generation": "New designs",
  "tune-collab": "Refine & review",
  "code-migration": "From code",
  "figma-migration": "From Figma",
};

const odOf = (p) => (p.manifest || {}).od || {};
const tagsOf = (p) => [...((p.manifest || {}).tags || []), ...(p.tags || [])];

/** Plugins a person starts work from: not atoms (a pipeline's building blocks), not hidden ones. */
export const offered = (p) => odOf(p).kind !== "atom" && !tagsOf(p).includes("hidden");

/**
 * A rail: `{el, ready}`. `card(plugin, {recent})` makes one card; `project` (an id) seeds the
 * "What next" facet from that project's runs and artifacts.
 */
export function pluginsRail({ prefix, card, project = null }) {
  const facetsEl = h("div", { class: "facets", role: "group", "aria-label": "Plugin kinds" });
  const search = h("input", { type: "search", id: `${prefix}-rail-filter`, autocomplete: "off", placeholder: "title, tag or description" });
  const cards = h("div", { class: "cards" }, h("p", {}, "Loading…"));
  const count = h("p", { class: "hint", id: `${prefix}-rail-count`, role: "status" });
  const el = h("div", { class: "rail-box" },
    h("div", { class: "rail-filters" },
      facetsEl,
      h("div", { class: "field" }, h("label", { for: `${prefix}-rail-filter` }, "Filter plugins"), search)),
    count, cards);

  let all = [];
  let recent = []; // plugin ids, most recently run first
  let next = null; // the "What next" ids, or null outside a project
  let facet = "all";

  const ranked = (list) => {
    const at = (p) => { const i = recent.indexOf(p.id); return i === -1 ? Infinity : i; };
    return [...list].sort((a, b) => at(a) - at(b) || (a.title || a.id).localeCompare(b.title || b.id));
  };
  const inFacet = (p) => facet === "all" || (facet === "next" ? next.has(p.id) : odOf(p).taskKind === facet);
  const matches = (p) => {
    const q = search.value.trim().toLowerCase();
    if (!q) return true;
    return [p.id, p.title, p.description, ...tagsOf(p)].filter(Boolean).some((t) => String(t).toLowerCase().includes(q));
  };

  function paintFacets() {
    const kinds = [...new Set(all.map((p) => odOf(p).taskKind).filter(Boolean))];
    const facets = [
      ...(next ? [{ id: "next", label: "What next", n: all.filter((p) => next.has(p.id)).length }] : []),
      { id: "all", label: "All", n: all.length },
      ...kinds.map((k) => ({ id: k, label: KIND_LABELS[k] || k, n: all.filter((p) => odOf(p).taskKind === k).length })),
    ];
    fill(facetsEl, facets.map((f) => h("button", { type: "button", class: "facet", "aria-pressed": String(f.id === facet), dataset: { facet: f.id },
      onclick: () => { facet = f.id; paint(); } }, `${f.label} `, h("span", { class: "facet-count" }, `(${f.n})`))));
  }

  function paint() {
    paintFacets();
    const shown = ranked(all.filter((p) => inFacet(p) && matches(p)));
    const q = search.value.trim();
    fill(count, `${shown.length} of ${all.length} plugins${q ? ` matching "${q}"` : ""}`);
    fill(cards, shown.length ? shown.map((p) => card(p, { recent: recent.includes(p.id) }))
      : h("p", { class: "empty" }, all.length ? "No plugin matches: try All or another filter." : "No plugins to start from: install one on the Plugins page."));
  }
  search.addEventListener("input", paint);

  const ready = Promise.allSettled([
    get("/api/plugins?limit=200"),
    get(project ? `/api/runs?projectId=${enc(project)}&limit=50` : "/api/runs?limit=50"),
    project ? get(`/api/projects/${enc(project)}/artifacts?limit=1`) : Promise.resolve(null),
  ]).then(([plugins, runs, artifacts]) => {
    if (plugins.status !== "fulfilled") {
      fill(cards, errorBox(plugins.reason));
      return;
    }
    all = plugins.value.plugins.filter(offered);
    recent = runs.status === "fulfilled" ? [...new Set(runs.value.runs.map((r) => r.pluginId).filter(Boolean))] : [];
    if (project) {
      const made = artifacts.status === "fulfilled" && (artifacts.value?.artifacts || []).length > 0;
      const kind = made ? "tune-collab" : "new-generation";
      next = new Set([...recent, ...all.filter((p) => odOf(p).taskKind === kind).map((p) => p.id)]);
      facet = "next";
    }
    paint();
  });
  return { el, ready };
}
