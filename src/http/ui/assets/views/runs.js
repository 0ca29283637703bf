// Runs: a paged list (newest first) whose statuses refresh while any shown run is still live.

import { get, enc } from "../api.js";
import { h, fill, table, badge, when, short } from "../ui.js";

const LIVE = new Set(["queued", "running", "awaiting-input"]);

export async function render(main) {
  const list = h("div", {}, h("p", {}, "Loading…"));
  const status = h("select", { id: "runs-status", onchange: () => { cursors = [null]; load(); } },
    ["", "active", "queued", "running", "awaiting-input", "succeeded", "failed", "canceled"].map((s) =>
      h("option", { value: s }, s || "any status")));
  const pager = h("div", { class: "actions" });
  let cursors = [null];
  let timer = null;

  fill(main, h("h1", {}, "Runs"),
    h("div", { class: "field" }, h("label", { for: "runs-status" }, "Status"), status),
    list, pager);

  async function load() {
    clearTimeout(timer);
    const cursor = cursors[cursors.length - 1];
    const q = new URLSearchParams({ limit: "25" });
    if (status.value) q.set("status", status.value);
    if (cursor) q.set("cursor", cursor);
    const page = await get(`/api/runs?${q}`);
    fill(list, table("Runs", [
      { label: "Run", cell: (r) => h("a", { href: `#/runs/${enc(r.id)}` }, h("code", {}, short(r.id))) },
      { label: "Status", cell: (r) => badge(r.status) },
      { label: "Plugin", cell: (r) => r.pluginId || "—" },
      { label: "Stage", cell: (r) => r.stageId || "" },
      { label: "Artifacts", cell: (r) => String(r.artifactCount ?? 0) },
      { label: "Created", cell: (r) => when(r.createdAt) },
      { label: "Project", cell: (r) => h("a", { href: `#/projects/${enc(r.projectId)}` }, h("code", {}, short(r.projectId))) },
    ], page.runs, "No runs."));
    fill(pager,
      cursors.length > 1 ? h("button", { type: "button", onclick: () => { cursors.pop(); load(); } }, "Newer") : null,
      page.nextCursor ? h("button", { type: "button", onclick: () => { cursors.push(page.nextCursor); load(); } }, "Older") : null);
    if (page.runs.some((r) => LIVE.has(r.status))) timer = setTimeout(load, 2000);
  }

  await load();
  return () => clearTimeout(timer);
}
