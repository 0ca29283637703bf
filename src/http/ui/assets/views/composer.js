// The composer (spec §11.6 "inline apply"), shared by Home and a project's page: a brief input
// with the context chips above it, the applied plugin's inputs between it and Send, and the
// plugins rail. "Use" on a card applies the plugin in place (`POST /api/plugins/:id/apply`, pure,
// `partial`: a blank required input keeps its placeholder): the brief fills with its query, the
// chips with its `contextItems`, its inputs appear; changing an input applies again, so the
// brief's `{{var}}`s follow until the person edits the brief themselves; replacing a brief they
// wrote asks first. × on a chip removes it (`excludeContext`: the apply, and the run's snapshot,
// prompt and folder, go without it). Send starts a run (`POST /api/runs`) with the chosen agent —
// and, for a catalog agent, its model — on Home the first run of a new project, on a project's
// page the next run in its conversation — with a plugin, its inputs, and an edited brief as the
// run's message; without one, the brief alone. The rail under it is views/rail.js.

import { get, post, enc } from "../api.js";
import { h, fill, errorBox, modal, say } from "../ui.js";
import { inputControl, inputValue, withGrants } from "./plugin.js";
import { pluginsRail } from "./rail.js";

/** A chip's key, as `excludeContext` takes it: `<kind>:<ref>` (`design-system:DESIGN.md`). */
const chipKey = (item) => `${item.kind}:${item.id ?? item.path ?? item.name ?? ""}`;

/** Chips a person may remove: the plugin's context, not the plugin itself nor its atoms. */
const removable = (item) => item.kind !== "plugin" && item.kind !== "atom";

/** One context chip: its kind and label, what it names in its title; × removes a removable one. */
function chip(item, remove) {
  const names = item.path || item.id || item.name || "";
  const label = item.label || names;
  return h("li", { class: "chip", dataset: { kind: item.kind, key: chipKey(item) }, title: names },
    h("span", { class: "chip-kind" }, item.kind), " ", label,
    remove && removable(item)
      ? h("button", { type: "button", class: "chip-remove", "aria-label": `Remove ${item.kind} ${label}`, onclick: () => remove(item) }, "×")
      : null);
}

/**
 * A composer: `{form, rail, ready}` — the form and the plugins rail to place, and a promise that
 * settles once the rail and the agents are loaded. `prefix` keeps ids apart; `project` and
 * `conversation` make Send continue that project's conversation instead of starting a new one.
 */
export function composer({ prefix, label, briefLabel = "Brief", project = null, conversation = null }) {
  const brief = h("textarea", { id: `${prefix}-brief`, name: "brief", rows: 4, required: false,
    placeholder: "Describe what to design, or use a plugin below", "aria-describedby": `${prefix}-brief-hint` });
  const briefHint = h("span", { id: `${prefix}-brief-hint`, class: "hint" }, "Write a brief, or pick a plugin and edit the brief it fills in.");
  const chips = h("ul", { class: "chips", "aria-label": "Context" });
  const applied = h("div", { id: `${prefix}-applied` });
  const inputsBox = h("div", { class: "stack" });
  const agent = h("select", { id: `${prefix}-agent`, name: "agent" });
  // A catalog agent's model, from the models its CLI lists (blank: the CLI's own default).
  const modelOptions = h("datalist", { id: `${prefix}-model-options` });
  const model = h("input", { id: `${prefix}-model`, name: "model", list: `${prefix}-model-options`, autocomplete: "off", "aria-describedby": `${prefix}-model-hint` });
  const modelHint = h("span", { id: `${prefix}-model-hint`, class: "hint" });
  const modelField = h("div", { class: "field", hidden: true }, h("label", { for: `${prefix}-model` }, "Model (optional)"), model, modelOptions, modelHint);
  let agentList = [];
  const send = h("button", { type: "submit", class: "primary" }, "Send");
  const out = h("div", { "aria-live": "polite" });
  // The applied plugin, its declared inputs, the brief it filled in, and grants given on Use.
  let plugin = null;
  let fields = [];
  let hydrated = "";
  let grants = [];
  let removed = []; // chip keys the person removed: the run goes without them
  // Inputs last typed per plugin: using the same plugin again fills them in, until "Stop using it".
  const lastInputs = new Map();
  let defaultAgent = "";
  let applying = 0;

  const form = h("form", { class: "stack composer", "aria-label": label, onsubmit: (ev) => { ev.preventDefault(); start(); } },
    applied, chips,
    h("div", { class: "field" }, h("label", { for: `${prefix}-brief` }, briefLabel), brief, briefHint),
    inputsBox,
    h("div", { class: "field" }, h("label", { for: `${prefix}-agent` }, "Agent"), agent), modelField,
    h("div", { class: "actions" }, send), out);

  const inputs = () => {
    const v = {};
    fields.forEach((f, i) => {
      const x = inputValue(f, inputsBox.querySelector(`#${prefix}-in-${i}`));
      if (x !== undefined) v[f.name] = x;
    });
    return v;
  };

  /** Applies the current plugin with the current inputs; the brief follows unless it was edited. */
  async function reapply() {
    if (!plugin) return;
    const mine = ++applying;
    try {
      const body = { inputs: inputs(), partial: true, excludeContext: removed };
      lastInputs.set(plugin.id, body.inputs);
      if (project) body.projectId = project; // surfaces this project already answered show as remembered
      const r = await withGrants(plugin.id, (g) => { grants = g; return post(`/api/plugins/${enc(plugin.id)}/apply`, { ...body, grantCaps: g }); });
      if (mine !== applying) return;
      if (brief.value === hydrated) brief.value = r.query || "";
      hydrated = r.query || "";
      fill(chips, (r.contextItems || []).filter((c) => c.kind !== "plugin").map((c) => chip(c, removeChip)),
        removed.length ? h("li", {}, h("button", { type: "button", class: "linklike", onclick: restoreChips }, `Restore ${removed.length} removed`)) : null);
      fill(out);
    } catch (e) {
      if (mine === applying) fill(out, errorBox(e));
    }
  }

  async function removeChip(item) {
    removed = [...removed, chipKey(item)];
    await reapply();
    say(`Removed ${item.kind} ${item.label || chipKey(item)}: the run goes without it`);
  }

  async function restoreChips() {
    removed = [];
    await reapply();
  }

  async function use(p) {
    if (brief.value.trim() && brief.value !== hydrated) {
      const ok = await modal("Replace your brief?", h("p", {}, `${p.title || p.id} fills the brief with its own text; what you wrote is replaced.`),
        [{ label: "Replace", value: true, primary: true }, { label: "Keep mine", value: false }]);
      if (!ok) return;
    }
    plugin = p;
    removed = [];
    fields = Array.isArray(((p.manifest || {}).od || {}).inputs) ? p.manifest.od.inputs : [];
    hydrated = brief.value; // replaced by the apply below
    fill(applied, h("p", { class: "applied" }, "Using ", h("strong", {}, p.title || p.id), " ",
      h("button", { type: "button", class: "linklike", onclick: clear }, "Stop using it")));
    const last = lastInputs.get(p.id) || {};
    const withLast = (f) => (f.name in last ? { ...f, default: last[f.name] } : f);
    fill(inputsBox, fields.length ? h("fieldset", {}, h("legend", {}, "Inputs"), fields.map((f, i) => inputControl(withLast(f), i, `${prefix}-in`))) : null);
    await reapply();
    say(`Using ${p.title || p.id}`);
    brief.focus();
  }

  function clear() {
    if (plugin) lastInputs.delete(plugin.id);
    if (brief.value === hydrated) brief.value = "";
    plugin = null;
    fields = [];
    hydrated = "";
    grants = [];
    removed = [];
    fill(applied);
    fill(chips);
    fill(inputsBox);
  }

  async function start() {
    fill(out);
    const text = brief.value.trim();
    if (!plugin && !text) {
      brief.setAttribute("aria-invalid", "true");
      fill(out, h("p", { class: "field-error", role: "alert" }, "Write a brief or use a plugin."));
      brief.focus();
      return;
    }
    brief.removeAttribute("aria-invalid");
    const body = project ? { projectId: project, conversationId: conversation } : {};
    if (plugin) {
      body.pluginId = plugin.id;
      body.pluginInputs = inputs();
      if (removed.length) body.excludeContext = removed;
      if (text && brief.value !== hydrated) body.message = text;
    } else body.message = text;
    if (agent.value && agent.value !== defaultAgent) body.agent = agent.value;
    if (!modelField.hidden && model.value.trim()) body.model = model.value.trim();
    send.disabled = true;
    try {
      const r = plugin
        ? await withGrants(plugin.id, (g) => post("/api/runs", { ...body, grantCaps: [...new Set([...grants, ...g])] }))
        : await post("/api/runs", body);
      say(`Run ${r.runId} started`);
      location.hash = `#/runs/${enc(r.runId)}`;
    } catch (e) {
      fill(out, errorBox(e));
    } finally {
      send.disabled = false;
    }
  }

  inputsBox.addEventListener("change", reapply);
  inputsBox.addEventListener("input", reapply);

  const card = (p, { recent }) => {
    const od = (p.manifest || {}).od || {};
    const title = p.title || p.id;
    return h("article", { class: "card", "aria-labelledby": `${prefix}-card-${p.id}`, dataset: { plugin: p.id } },
      h("h3", { id: `${prefix}-card-${p.id}` }, title, recent ? h("span", { class: "badge recent" }, "used recently") : null),
      p.description ? h("p", {}, p.description) : h("p", { class: "hint" }, "No description."),
      h("p", { class: "hint" }, [od.taskKind, p.trust].filter(Boolean).join(" · ")),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", "aria-label": `Use ${title}`, onclick: () => use(p) }, "Use"),
        od.preview && od.preview.entry
          ? h("a", { class: "button", href: `/api/plugins/${enc(p.id)}/preview`, target: "_blank", rel: "noopener", "aria-label": `Preview ${title}` }, "Preview")
          : null,
        h("a", { class: "button", href: `#/plugins/${enc(p.id)}`, "aria-label": `Details of ${title}` }, "Details")));
  };

  const rail = pluginsRail({ prefix, card, project });
  const agents = get("/api/agents").then((a) => {
    defaultAgent = a.default;
    agentList = a.agents;
    fill(agent, a.agents.map((x) => h("option", { value: x.id, selected: x.default, disabled: !x.available },
      `${x.name}${x.default ? " (default)" : ""}${x.available ? "" : " — unavailable"}`)));
    agentChanged();
  }, (e) => fill(out, errorBox(e)));
  // The model field shows for a catalog agent (one with permission modes), with its models.
  function agentChanged() {
    const x = agentList.find((a) => a.id === agent.value);
    modelField.hidden = !(x && x.permissionModes);
    if (modelField.hidden) return;
    fill(modelOptions, (x.models || []).map((m) => h("option", { value: m.id }, m.label)));
    fill(modelHint, x.modelsSource === "live" ? "One of the models the CLI lists." : "Blank: the CLI's own default.");
  }
  agent.addEventListener("change", agentChanged);
  const ready = Promise.allSettled([rail.ready, agents]);
  return { form, rail: rail.el, ready };
}
