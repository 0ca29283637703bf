// The inbox: every surface waiting for an answer, across runs (runs `awaiting-input`, then each
// one's pending surfaces), answerable in place. `refreshInboxCount` keeps the nav's badge current.

import { get, enc } from "../api.js";
import { h, fill, short } from "../ui.js";
import { surfaceCard } from "./surface.js";

async function pending() {
  const { runs } = await get("/api/runs?status=awaiting-input&limit=100");
  const out = [];
  for (const r of runs) {
    const { surfaces } = await get(`/api/runs/${enc(r.id)}/genui?limit=100`);
    for (const s of surfaces) if (s.status === "pending") out.push({ run: r, surface: s });
  }
  return out;
}

export async function refreshInboxCount() {
  if (document.visibilityState === "hidden") return;
  try {
    const { runs } = await get("/api/runs?status=awaiting-input&limit=100");
    const badge = document.getElementById("inbox-count");
    if (badge) {
      badge.textContent = runs.length ? String(runs.length) : "";
      badge.setAttribute("aria-label", runs.length ? `${runs.length} runs waiting` : "");
    }
  } catch {
    /* the badge is a hint; the inbox page shows errors */
  }
}

export async function render(main) {
  const list = h("div", {}, h("p", {}, "Loading…"));
  fill(main, h("h1", {}, "Inbox"), h("p", { class: "hint" }, "Questions runs are waiting on. Answering resumes the run."), list);
  let timer = null;
  let shownKeys = "";

  async function load() {
    const items = await pending();
    const keys = items.map((i) => `${i.run.id}/${i.surface.surfaceId}`).join(",");
    if (keys !== shownKeys) {
      shownKeys = keys;
      if (!items.length) fill(list, h("p", { class: "empty" }, "Nothing is waiting."));
      else {
        const cards = await Promise.all(items.map(async ({ run, surface }) => {
          const card = await surfaceCard(run.id, surface.surfaceId, { heading: "h2", onAnswered: () => { refreshInboxCount(); load(); } });
          card.prepend(h("p", { class: "hint" }, "Run ", h("a", { href: `#/runs/${enc(run.id)}` }, h("code", {}, short(run.id))),
            run.pluginId ? ` · ${run.pluginId}` : "", ` · stage ${surface.stageId || "?"}`));
          return card;
        }));
        fill(list, cards);
      }
    }
    timer = setTimeout(load, 3000);
  }
  await load();
  return () => clearTimeout(timer);
}
