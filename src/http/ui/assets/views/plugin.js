// One plugin: what it is, its doctor report, its declared inputs as a form, an apply preview (the
// composed brief, the manifest digest, the capabilities it needs) and "Start run" in a chosen
// project (an existing one, or a new one) with a chosen agent (`GET /api/agents`, the daemon's
// default preselected; left at the default, the request names none and the daemon's rule applies). A missing
// capability (409 `capabilities-required`) becomes a grant dialog: grant for this run only
// (`grantCaps`) or remember the grant on the plugin (`POST /api/plugins/:id/trust`).

import { get, post, enc, ApiError } from "../api.js";
import { h, fill, facts, badge, errorBox, modal, say } from "../ui.js";
import { doctorReport } from "./doctor.js";

/** The value of one declared input control. */
export function inputValue(field, el) {
  if (field.type === "boolean") return el.checked;
  if (field.type === "number") return el.value === "" ? undefined : Number(el.value);
  return el.value === "" ? undefined : el.value;
}

export function inputControl(field, i, prefix = "in") {
  const id = `${prefix}-${i}`;
  const label = field.label || field.name;
  const hint = field.placeholder ? `${id}-hint` : null;
  let control;
  if (field.type === "select" && Array.isArray(field.options)) {
    control = h("select", { id, name: field.name, required: !!field.required },
      field.required ? null : h("option", { value: "" }, "—"),
      field.options.map((o) => h("option", { value: o, selected: field.default === o }, o)));
  } else if (field.type === "boolean") {
    control = h("input", { id, name: field.name, type: "checkbox", checked: field.default === true });
    return h("div", { class: "field check" }, h("label", { for: id }, control, " ", label));
  } else if (field.type === "text") {
    control = h("textarea", { id, name: field.name, rows: 3, required: !!field.required, "aria-describedby": hint });
    if (field.default !== undefined) control.value = String(field.default);
  } else {
    control = h("input", { id, name: field.name, type: field.type === "number" ? "number" : "text",
      required: !!field.required, placeholder: field.placeholder, "aria-describedby": hint,
      value: field.default !== undefined ? String(field.default) : undefined });
  }
  return h("div", { class: "field" },
    h("label", { for: id }, label, field.required ? h("span", { "aria-hidden": "true" }, " *") : null),
    control, hint ? h("span", { id: hint, class: "hint" }, `e.g. ${field.placeholder}`) : null);
}

/** Calls `attempt(grantCaps)`; on `capabilities-required` asks the person and retries. */
export async function withGrants(pluginId, attempt) {
  let grants = [];
  for (let round = 0; round < 3; round += 1) {
    try {
      return await attempt(grants);
    } catch (e) {
      if (!(e instanceof ApiError) || e.code !== "capabilities-required") throw e;
      const missing = (e.data && e.data.missing) || [];
      const choice = await modal("Grant capabilities",
        h("div", {},
          h("p", {}, `${pluginId} needs capabilities it has not been granted:`),
          h("ul", { class: "caps" }, missing.map((c) => h("li", {}, h("code", {}, c)))),
          h("p", { class: "hint" }, "Grant them for this run only, or remember the grant for every run of this plugin.")),
        [
          { label: "Grant once", value: "once", primary: true },
          { label: "Grant and remember", value: "remember" },
          { label: "Cancel", value: null },
        ]);
      if (!choice) throw new ApiError(409, "capabilities-required", "Not started: the capabilities were not granted.", e.data);
      if (choice === "remember") await post(`/api/plugins/${enc(pluginId)}/trust`, { capabilities: missing });
      else grants = [...new Set([...grants, ...missing])];
    }
  }
  throw new ApiError(409, "capabilities-required", "the capabilities are still missing");
}

export async function render(main, [id]) {
  const p = await get(`/api/plugins/${enc(id)}`);
  const plugin = p.plugin || p;
  const manifest = plugin.manifest || {};
  const od = manifest.od || {};
  const fields = Array.isArray(od.inputs) ? od.inputs : [];
  const requested = od.capabilities || [];
  const preview = h("div", { "aria-live": "polite" });
  const doctor = h("div", {}, h("p", {}, "Checking…"));
  const startOut = h("div", {});
  const message = h("textarea", { id: "run-message", name: "message", rows: 3 });
  const project = h("select", { id: "run-project", name: "projectId" }, h("option", { value: "" }, "New project"));
  const agent = h("select", { id: "run-agent", name: "agent", "aria-describedby": "run-agent-hint" });
  const agentHint = h("span", { id: "run-agent-hint", class: "hint" });
  // A catalog agent's model (its own list offered) and permission mode (issue 31).
  const modelOptions = h("datalist", { id: "run-model-options" });
  const model = h("input", { id: "run-model", name: "model", list: "run-model-options", autocomplete: "off", "aria-describedby": "run-model-hint" });
  const modelHint = h("span", { id: "run-model-hint", class: "hint" });
  const permission = h("select", { id: "run-permission", name: "permissionMode", "aria-describedby": "run-permission-hint" });
  const permissionHint = h("span", { id: "run-permission-hint", class: "hint" });
  const catalogFields = h("div", { hidden: true },
    h("div", { class: "field" }, h("label", { for: "run-model" }, "Model (optional)"), model, modelOptions, modelHint),
    h("div", { class: "field" }, h("label", { for: "run-permission" }, "Permission mode"), permission, permissionHint));
  let defaultAgent = "";
  let defaultHint = "";
  let agents = [];
  const form = h("form", { class: "stack", "aria-labelledby": "inputs-title", onsubmit: (ev) => { ev.preventDefault(); start(); } },
    fields.map((f, i) => inputControl(f, i)),
    h("div", { class: "field" }, h("label", { for: "run-message" }, "Message (optional)"), message),
    h("div", { class: "field" }, h("label", { for: "run-project" }, "Project"), project),
    h("div", { class: "field" }, h("label", { for: "run-agent" }, "Agent"), agent, agentHint),
    catalogFields,
    h("div", { class: "actions" },
      h("button", { type: "button", onclick: applyPreview }, "Preview"),
      h("button", { type: "submit", class: "primary" }, "Start run")));

  fill(main,
    h("h1", {}, plugin.title || plugin.id),
    manifest.description ? h("p", {}, manifest.description) : null,
    facts([
      ["Id", h("code", {}, plugin.id)], ["Version", plugin.version], ["Trust", badge(plugin.trust)],
      ["Source", `${plugin.sourceKind}: ${plugin.source}`], ["Kind", od.kind],
      ["Requests", requested.join(", ") || "—"], ["Granted", (plugin.capabilitiesGranted || []).join(", ") || "—"],
    ]),
    h("section", { "aria-labelledby": "inputs-title" }, h("h2", { id: "inputs-title" }, "Inputs"),
      fields.length ? null : h("p", { class: "hint" }, "This plugin declares no inputs."), form, preview, startOut),
    h("section", { "aria-labelledby": "doctor-title" }, h("h2", { id: "doctor-title" }, "Checks"), doctor),
    // A bundled plugin ships in od itself: there is nothing to uninstall (the daemon says 409).
    plugin.trust === "bundled"
      ? h("p", { class: "hint" }, "Bundled with od: it cannot be uninstalled.")
      : h("div", { class: "actions" }, h("button", { type: "button", class: "danger", onclick: uninstall }, "Uninstall")));

  get("/api/projects?limit=200").then(({ projects }) =>
    project.append(...projects.map((p) => h("option", { value: p.id }, `${p.name || p.id} (${p.id.slice(0, 8)})`))),
  (e) => fill(startOut, errorBox(e)));
  get("/api/agents").then((a) => {
    defaultAgent = a.default;
    agents = a.agents;
    fill(agent, a.agents.map((x) => h("option", { value: x.id, selected: x.default, disabled: !x.available },
      `${x.name}${x.default ? " (default)" : ""}${x.version ? ` ${x.version}` : ""}${x.available ? "" : " — unavailable"}`)));
    defaultHint = a.note || (a.agents.find((x) => x.default) || {}).command || "";
    agentChanged();
  }, (e) => fill(agentHint, errorBox(e)));
  agent.addEventListener("change", agentChanged);

  // Shows the model and permission fields for a catalog agent, filled from what detection found.
  function agentChanged() {
    const x = agents.find((a) => a.id === agent.value);
    const catalog = !!(x && x.permissionModes);
    catalogFields.hidden = !catalog;
    if (!catalog) {
      fill(agentHint, agent.value === defaultAgent ? defaultHint : "");
      return;
    }
    // Where it was found, and what detection warns about (a sign-in missing) with the fix.
    const warn = (x.diagnostics || []).map((d) => `${d.message} — ${d.fix}`).join("; ");
    fill(agentHint, [x.path, warn].filter(Boolean).join(" · "));
    fill(modelOptions, (x.models || []).map((m) => h("option", { value: m.id }, m.label)));
    fill(modelHint, x.modelsSource === "live" ? "One of the models the CLI lists." : "Blank: the CLI's own default.");
    fill(permission, x.permissionModes.map((m) => h("option", { value: m, selected: m === x.defaultPermissionMode }, m)));
    fill(permissionHint, "accept-edits: the agent edits files in the project; bypass: it may also run any command.");
  }
  get(`/api/plugins/${enc(plugin.id)}/doctor`).then((d) => fill(doctor, doctorReport(d)), (e) => fill(doctor, errorBox(e)));

  function inputs() {
    const out = {};
    fields.forEach((f, i) => {
      const v = inputValue(f, form.querySelector(`#in-${i}`));
      if (v !== undefined) out[f.name] = v;
    });
    return out;
  }

  async function applyPreview() {
    fill(preview);
    try {
      const r = await withGrants(plugin.id, (grantCaps) => post(`/api/plugins/${enc(plugin.id)}/apply`, { inputs: inputs(), grantCaps }));
      const stages = (r.pipeline && r.pipeline.stages) || [];
      fill(preview, h("section", { class: "panel", "aria-label": "Apply preview" },
        h("h3", {}, "Apply preview"),
        facts([
          ["Manifest digest", h("code", {}, r.manifestSourceDigest)],
          ["Capabilities needed", (r.capabilitiesRequired || []).join(", ") || "—"],
          ["Granted", (r.capabilitiesGranted || []).join(", ") || "—"],
          ["Stages", stages.map((s) => s.id + (s.until ? ` (until ${s.until})` : "")).join(" → ") || "—"],
          ["Surfaces", (r.genuiSurfaces || []).map((s) => `${s.id} (${s.kind})`).join(", ") || "—"],
        ]),
        h("h4", {}, "Brief"), h("pre", {}, r.query || ""),
        (r.warnings || []).length ? h("ul", {}, r.warnings.map((w) => h("li", {}, typeof w === "string" ? w : JSON.stringify(w)))) : null));
    } catch (e) {
      fill(preview, errorBox(e));
    }
  }

  async function start() {
    fill(startOut);
    try {
      const body = { pluginId: plugin.id, pluginInputs: inputs() };
      if (message.value.trim()) body.message = message.value.trim();
      if (project.value) body.projectId = project.value;
      if (agent.value && agent.value !== defaultAgent) body.agent = agent.value;
      if (!catalogFields.hidden) {
        if (model.value.trim()) body.model = model.value.trim();
        if (permission.value) body.permissionMode = permission.value;
      }
      const r = await withGrants(plugin.id, (grantCaps) => post("/api/runs", { ...body, grantCaps }));
      say(`Run ${r.runId} started`);
      location.hash = `#/runs/${enc(r.runId)}`;
    } catch (e) {
      fill(startOut, errorBox(e));
    }
  }

  async function uninstall() {
    const ok = await modal(`Uninstall ${plugin.id}?`, h("p", {}, "Runs keep their snapshots; new runs cannot use it."),
      [{ label: "Uninstall", value: true, primary: true }, { label: "Cancel", value: false }]);
    if (!ok) return;
    try {
      await post(`/api/plugins/${enc(plugin.id)}/uninstall`, {});
      location.hash = "#/plugins";
    } catch (e) {
      fill(startOut, errorBox(e));
    }
  }
}
