// Projects: each with its runs and files (the project page has the detail).

import { get, post, enc } from "../api.js";
import { h, fill, table, when, short, errorBox } from "../ui.js";

export async function render(main) {
  const list = h("div", {}, h("p", {}, "Loading…"));
  const name = h("input", { id: "project-name", name: "name", required: true });
  const out = h("div", {});
  const form = h("form", { class: "stack", "aria-labelledby": "new-project-title", onsubmit: create },
    h("div", { class: "field" }, h("label", { for: "project-name" }, "Name"), name),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Create project")));
  fill(main, h("h1", {}, "Projects"), list,
    h("section", { "aria-labelledby": "new-project-title" }, h("h2", { id: "new-project-title" }, "New project"), form, out));

  async function create(ev) {
    ev.preventDefault();
    fill(out);
    try {
      const r = await post("/api/projects", { name: name.value.trim() });
      location.hash = `#/projects/${enc(r.projectId || r.id || (r.project && r.project.id))}`;
    } catch (e) {
      fill(out, errorBox(e));
    }
  }

  const { projects } = await get("/api/projects?limit=200");
  fill(list, table("Projects", [
    { label: "Project", cell: (p) => h("a", { href: `#/projects/${enc(p.id)}` }, p.name || short(p.id)) },
    { label: "Id", cell: (p) => h("code", {}, short(p.id)) },
    { label: "Created", cell: (p) => when(p.createdAt) },
  ], projects, "No projects yet: starting a run creates one."));
}
