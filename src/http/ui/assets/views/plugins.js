// Plugins: the installed plugins (trust tier, capabilities, source) and installing one from a folder
// path, an archive URL, `github:owner/repo[/path][@ref]` or `marketplace/plugin`, with the daemon's
// progress lines as they arrive and the new plugin's doctor report at the end.

import { get, ndjson, enc } from "../api.js";
import { h, fill, table, badge, errorBox, say } from "../ui.js";
import { doctorReport } from "./doctor.js";

export async function render(main) {
  const list = h("div", {}, h("p", {}, "Loading…"));
  const progress = h("ol", { class: "progress", role: "log", "aria-label": "Install progress" });
  const outcome = h("div", {});
  const source = h("input", { id: "install-source", name: "source", required: true, autocomplete: "off",
    placeholder: "/path/to/plugin, https://…/plugin.tgz, github:owner/repo, market/plugin", "aria-describedby": "install-hint" });
  const trust = h("select", { id: "install-trust", name: "trust" },
    h("option", { value: "" }, "default (trusted for a local folder)"),
    h("option", { value: "trusted" }, "trusted"),
    h("option", { value: "restricted" }, "restricted"));
  const button = h("button", { type: "submit", class: "primary" }, "Install");
  const form = h("form", { class: "stack", "aria-labelledby": "install-title", onsubmit: install },
    h("div", { class: "field" }, h("label", { for: "install-source" }, "Source"), source,
      h("span", { id: "install-hint", class: "hint" }, "A folder on the daemon's machine, an archive URL, github:owner/repo[/path][@ref], or marketplace/plugin.")),
    h("div", { class: "field" }, h("label", { for: "install-trust" }, "Trust"), trust),
    h("div", { class: "actions" }, button));

  fill(main,
    h("h1", {}, "Plugins"),
    h("section", { "aria-labelledby": "install-title" }, h("h2", { id: "install-title" }, "Install a plugin"), form, progress, outcome),
    h("section", { "aria-labelledby": "installed-title" }, h("h2", { id: "installed-title" }, "Installed"), list));

  // Scenarios and other runnable plugins first, then the atoms pipelines are built from, each
  // with its description (the list mixed 13 atoms and 7 scenarios with none).
  async function load() {
    const { plugins } = await get("/api/plugins?limit=200");
    const isAtom = (p) => ((p.manifest || {}).od || {}).kind === "atom";
    const columns = [
      { label: "Plugin", cell: (p) => h("a", { href: `#/plugins/${enc(p.id)}` }, p.title || p.id) },
      { label: "Description", cell: (p) => p.description || "—" },
      { label: "Version", cell: (p) => p.version },
      { label: "Trust", cell: (p) => badge(p.trust) },
      { label: "Capabilities", cell: (p) => (p.capabilitiesGranted || []).join(", ") },
      { label: "Source", cell: (p) => p.sourceKind },
    ];
    fill(list,
      h("h3", { id: "runnable-title" }, "Plugins you can run"),
      table("Plugins you can run", columns, plugins.filter((p) => !isAtom(p)), "No plugins installed."),
      h("h3", { id: "atoms-title" }, "Atoms"),
      h("p", { class: "hint" }, "The building blocks a plugin's pipeline names in its stages; not run on their own."),
      table("Atoms", columns, plugins.filter(isAtom), "No atoms."));
  }

  async function install(ev) {
    ev.preventDefault();
    button.disabled = true;
    fill(progress);
    fill(outcome);
    const body = { source: source.value.trim() };
    if (trust.value) body.trust = trust.value;
    try {
      const last = await ndjson("/api/plugins/install", body, (line) => {
        if (line.event === "progress") progress.append(h("li", {}, `${line.data.phase}: ${line.data.message}`));
      });
      if (!last || last.event !== "success") {
        const e = (last && last.data && last.data.error) || { code: "install-failed", message: "the install ended without a result" };
        fill(outcome, errorBox(e));
        return;
      }
      const p = last.data.plugin;
      say(`Installed ${p.id}`);
      const doctor = await get(`/api/plugins/${enc(p.id)}/doctor`);
      fill(outcome, h("div", { class: "panel", role: "status" },
        h("p", {}, "Installed ", h("a", { href: `#/plugins/${enc(p.id)}` }, p.title || p.id), ` ${p.version} (${p.trust}).`),
        doctorReport(doctor)));
      await load();
    } catch (e) {
      fill(outcome, errorBox(e));
    } finally {
      button.disabled = false;
    }
  }

  await load();
}
