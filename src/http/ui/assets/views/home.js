// Home (spec §11.6): what to design — the composer (views/composer.js: the brief with its context
// chips, a plugin's inputs in place, Send starting the first run of a new project) above the
// plugins rail — and the latest runs, so a new daemon's home says what to do rather than "No runs".

import { get, enc } from "../api.js";
import { h, fill, table, badge, when, short, errorBox } from "../ui.js";
import { composer } from "./composer.js";

export async function render(main) {
  const c = composer({ prefix: "home", label: "New design" });
  const recent = h("div", {});
  fill(main,
    h("h1", {}, "What are we designing?"),
    c.form,
    h("section", { "aria-labelledby": "rail-title" }, h("h2", { id: "rail-title" }, "Start from a plugin"), c.rail),
    h("section", { "aria-labelledby": "recent-title" }, h("h2", { id: "recent-title" }, "Recent runs"), recent));
  const [runs] = await Promise.allSettled([get("/api/runs?limit=5"), c.ready]);
  if (runs.status === "fulfilled") {
    fill(recent, table("Recent runs", [
      { label: "Run", cell: (r) => h("a", { href: `#/runs/${enc(r.id)}` }, h("code", {}, short(r.id))) },
      { label: "Status", cell: (r) => badge(r.status) },
      { label: "Plugin", cell: (r) => r.pluginId || "—" },
      { label: "Created", cell: (r) => when(r.createdAt) },
    ], runs.value.runs, "Nothing yet: your first run will show here."),
    runs.value.runs.length ? h("p", {}, h("a", { href: "#/runs" }, "All runs")) : null);
  } else fill(recent, errorBox(runs.reason));
}
