// GenUI surfaces in the page: one waiting surface (form, choice, confirmation, oauth-prompt) as an
// HTML form string, the typed answer read back from the submitted form, and the server's 422
// violations mapped to the fields they name. Pure functions: no DOM globals are touched at import
// time or by the renderers, so node's test runner imports this file as it is.
//
// Field names are JSON pointers into the answer ("/audience", "/address/city"; "/" for a surface
// whose answer is a single value), the same pointers the server's violations start with
// ("/color: does not match ..."). Choice values are sent as option indices and mapped back, so an
// enum of numbers or booleans keeps its JSON type.

const MAX_RADIOS = 4;
const MAX_DEPTH = 8;
const LONG_TEXT = 200;

/** Escapes text for an HTML text node or a quoted attribute. */
export function esc(v) {
  return String(v ?? "")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

function slug(s) {
  return String(s ?? "").replace(/[^A-Za-z0-9_-]/g, "_");
}

function ptrEscape(key) {
  return String(key).replace(/~/g, "~0").replace(/\//g, "~1");
}

function child(pointer, key) {
  return (pointer === "/" ? "" : pointer) + "/" + ptrEscape(key);
}

/**
 * The surface's spec, whatever it came wrapped in: the bare spec (a snapshot's `genuiSurfaces`
 * entry), `GET /api/runs/:id/genui/:surface` (`{surface, spec}`) or the `genui_surface_request`
 * event's data (`{surfaceId, kind, payload}`).
 */
export function specOf(surface) {
  if (!surface || typeof surface !== "object") return {};
  if (surface.spec && typeof surface.spec === "object") return surface.spec;
  if (surface.payload && typeof surface.payload === "object") {
    return { id: surface.surfaceId, kind: surface.kind, persist: surface.persist, ...surface.payload };
  }
  return surface;
}

function humanize(name) {
  const s = String(name).replace(/^__auto_/, "").replace(/[_-]+/g, " ").trim();
  return s ? s[0].toUpperCase() + s.slice(1) : "Answer";
}

function deref(schema, root, depth = 0) {
  if (!schema || typeof schema !== "object") return {};
  const ref = schema.$ref;
  if (typeof ref === "string" && ref.startsWith("#/") && depth < MAX_DEPTH) {
    let target = root;
    for (const part of ref.slice(2).split("/")) {
      target = target?.[part.replace(/~1/g, "/").replace(/~0/g, "~")];
    }
    if (target && typeof target === "object") {
      const { $ref, ...rest } = schema;
      return deref({ ...target, ...rest }, root, depth + 1);
    }
  }
  return schema;
}

function typeOf(schema) {
  const t = schema.type;
  if (Array.isArray(t)) return t.find((x) => x !== "null") ?? "null";
  return t;
}

/** The options of an enum-like schema: `enum`, or `oneOf`/`anyOf` of `const`s (with titles). */
function optionsOf(schema) {
  if (Array.isArray(schema.enum)) return schema.enum.map((v) => ({ value: v, label: labelOf(v) }));
  const alts = schema.oneOf ?? schema.anyOf;
  if (Array.isArray(alts) && alts.length && alts.every((a) => a && typeof a === "object" && "const" in a)) {
    return alts.map((a) => ({ value: a.const, label: a.title ?? labelOf(a.const), description: a.description }));
  }
  return null;
}

function labelOf(v) {
  return typeof v === "string" ? v : JSON.stringify(v);
}

function sameJson(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The surface as a tree of fields, shared by the renderer and the reader. Each field:
 * `{name, control, label, description, required, options?, schema, fields?}`; `control` is one of
 * text, textarea, number, checkbox, select, radios, checkboxes, lines, json, group, yesno, oauth.
 */
export function fieldsOf(surface) {
  const spec = specOf(surface);
  const kind = spec.kind ?? "confirmation";
  const root = spec.schema && typeof spec.schema === "object" ? spec.schema : null;
  const prompt = spec.prompt ?? spec.title ?? humanize(spec.id ?? "");
  if (kind === "oauth-prompt" && !(root && root.properties)) {
    return { kind, root: { name: "/", control: "oauth", label: prompt, required: true } };
  }
  if (!root) {
    if (kind === "confirmation") {
      return { kind, root: { name: "/", control: "yesno", label: prompt, required: true, schema: { type: "boolean" } } };
    }
    if (kind === "choice" && Array.isArray(spec.options)) {
      const options = spec.options.map((o) =>
        o && typeof o === "object" && "value" in o ? { value: o.value, label: o.label ?? labelOf(o.value), description: o.description } : { value: o, label: labelOf(o) },
      );
      return { kind, root: { name: "/", control: "radios", label: prompt, required: true, options, schema: {}, cards: true } };
    }
    return { kind, root: { name: "/", control: "group", label: prompt, required: true, fields: [], schema: { type: "object" } } };
  }
  const top = field(root, root, "/", prompt, true, 0, kind);
  if (kind === "confirmation" && top.control === "checkbox") top.control = "yesno";
  return { kind, root: top };
}

function field(raw, root, name, fallbackLabel, required, depth, kind) {
  const schema = deref(raw, root);
  const label = schema.title ?? fallbackLabel;
  const base = { name, label, description: schema.description, required, schema };
  const options = optionsOf(schema);
  const type = typeOf(schema);
  if (options) {
    const radios = kind === "choice" || options.length <= MAX_RADIOS;
    // A choice's options are directions to pick among: shown as cards (with their descriptions).
    return { ...base, control: radios ? "radios" : "select", options, cards: kind === "choice" };
  }
  if ((type === "object" || schema.properties) && depth < MAX_DEPTH) {
    const req = new Set(Array.isArray(schema.required) ? schema.required : []);
    const props = schema.properties && typeof schema.properties === "object" ? schema.properties : {};
    const fields = Object.entries(props).map(([key, sub]) =>
      field(sub, root, child(name, key), key, req.has(key), depth + 1, "form"),
    );
    // A choice's first enum is its radio group; the rest render as in a form.
    if (kind === "choice") {
      const first = fields.find((f) => f.control === "select" || f.control === "radios");
      if (first) Object.assign(first, { control: "radios", cards: true });
    }
    return { ...base, control: "group", fields };
  }
  if (type === "array") {
    const items = deref(schema.items ?? {}, root);
    const itemOptions = optionsOf(items);
    if (itemOptions) return { ...base, control: "checkboxes", options: itemOptions };
    const itemType = typeOf(items);
    if (["string", "number", "integer"].includes(itemType)) return { ...base, control: "lines", itemType };
    return { ...base, control: "json" };
  }
  if (type === "boolean") return { ...base, control: "checkbox" };
  if (type === "number" || type === "integer") return { ...base, control: "number", integer: type === "integer" };
  if (type === "string") {
    const multiline =
      (typeof schema.maxLength === "number" && schema.maxLength > LONG_TEXT) ||
      ["textarea", "multiline"].includes(schema.format) ||
      (typeof schema.contentMediaType === "string" && schema.contentMediaType.startsWith("text/")) ||
      schema["x-multiline"] === true;
    return { ...base, control: multiline ? "textarea" : "text" };
  }
  return { ...base, control: "json" };
}

function walk(f, fn) {
  fn(f);
  for (const c of f.fields ?? []) walk(c, fn);
}

/** Control ids by field name, from the id prefix (the same ones renderSurface writes). */
export function fieldIds(surface, opts = {}) {
  const prefix = idPrefix(surface, opts);
  const ids = {};
  let n = 0;
  walk(fieldsOf(surface).root, (f) => {
    ids[f.name] = `${prefix}f${n++}`;
  });
  return ids;
}

function idPrefix(surface, opts) {
  return opts.idPrefix != null ? slug(opts.idPrefix) : `genui-${slug(specOf(surface).id ?? "surface")}-`;
}

function valueAt(values, name) {
  if (name === "/") return values;
  let v = values;
  for (const part of name.slice(1).split("/")) {
    if (v == null || typeof v !== "object") return undefined;
    v = v[part.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  return v;
}

const PERSIST_NOTE = {
  conversation: "Your answer is remembered for this conversation.",
  project: "Your answer is remembered for this project.",
};

/**
 * One waiting surface as an HTML string (every value escaped).
 * opts: `idPrefix` (ids never clash between two surfaces on a page), `values` (the answer to show,
 * e.g. a remembered one or what was just refused: a field it lacks is left empty, not defaulted),
 * `errors` (from errorsByField), `headingLevel`
 * (2 by default), `inner` (true: only what goes inside a `<form>` the caller made and titled: the
 * form's error region, the fields and the buttons; no `<form>`, heading or persistence note).
 * The form is `novalidate`: the server's answer is the one that counts.
 */
export function renderSurface(surface, opts = {}) {
  const spec = specOf(surface);
  const { kind, root } = fieldsOf(surface);
  const prefix = idPrefix(surface, opts);
  const ids = fieldIds(surface, opts);
  const errors = opts.errors ?? {};
  const h = Math.min(Math.max(Number(opts.headingLevel) || 2, 1), 6);
  const values = opts.values !== undefined ? opts.values : spec.default;
  const ctx = { ids, errors, values, hasValues: values !== undefined };
  const promptId = `${prefix}prompt`;
  const formErr = errors[""];
  const out = [];
  const inner = opts.inner === true;
  if (!inner) {
    out.push(
      `<form class="genui-surface" id="${prefix}form" data-surface-id="${esc(spec.id ?? "")}" data-kind="${esc(kind)}" ` +
        `aria-labelledby="${promptId}" novalidate>`,
    );
    out.push(`<h${h} class="genui-prompt" id="${promptId}">${esc(root.label)}</h${h}>`);
    if (PERSIST_NOTE[spec.persist]) out.push(`<p class="genui-persist">${esc(PERSIST_NOTE[spec.persist])}</p>`);
  }
  out.push(
    `<div class="genui-form-error" id="${prefix}form-error" role="alert">${formErr ? `<p>${esc(formErr)}</p>` : ""}</div>`,
  );
  if (root.control === "oauth") {
    out.push(renderOauth(spec, prefix));
    if (!inner) out.push(`</form>`);
    return out.join("\n");
  }
  if (root.control === "group") {
    for (const f of root.fields) out.push(renderField(f, ctx, false));
  } else {
    out.push(renderField(root, ctx, true));
  }
  out.push(`<div class="genui-actions"><button type="submit" class="genui-send">Send</button></div>`);
  if (!inner) out.push(`</form>`);
  return out.join("\n");
}

function renderOauth(spec, prefix) {
  const connector = spec.connector?.id ?? spec.oauth?.connectorId ?? spec.oauth?.mcpServerId;
  const caps = Array.isArray(spec.capabilitiesRequired) ? spec.capabilitiesRequired : [];
  const url = [spec.oauth?.url, spec.url, spec.oauth?.authorizeUrl].find((u) => typeof u === "string" && /^https?:\/\//i.test(u));
  const parts = [`<div class="genui-oauth" id="${prefix}f0">`];
  const what = connector ? `The run asks to connect to ${esc(connector)}` : "The run asks to connect an account";
  const route = spec.oauth?.route ? ` (through its ${esc(spec.oauth.route)})` : "";
  parts.push(`<p>${what}${route}. Connecting lets it act with that account on your behalf.</p>`);
  if (caps.length) {
    parts.push(`<p>It needs:</p><ul class="genui-caps">${caps.map((c) => `<li><code>${esc(c)}</code></li>`).join("")}</ul>`);
  }
  if (url) {
    parts.push(
      `<p><a class="genui-oauth-link" href="${esc(url)}" target="_blank" rel="noopener noreferrer">Open the authorisation page</a> (a new tab), then choose Connect.</p>`,
    );
  }
  parts.push(
    `<div class="genui-actions"><button type="submit" name="/action" value="connect" class="genui-send">Connect</button> ` +
      `<button type="submit" name="/action" value="decline" class="genui-decline">Not now</button></div>`,
  );
  parts.push(`</div>`);
  return parts.join("\n");
}

function marker(required) {
  return required ? `<span class="genui-required" aria-hidden="true"> *</span>` : "";
}

function describedBy(hintId, errId) {
  const ids = [hintId, errId].filter(Boolean).join(" ");
  return ids ? ` aria-describedby="${ids}"` : "";
}

function renderField(f, ctx, isRoot) {
  const id = ctx.ids[f.name];
  const hintId = f.description ? `${id}-hint` : null;
  const err = ctx.errors[f.name];
  const errId = err ? `${id}-error` : null;
  const hint = hintId ? `<p class="genui-hint" id="${hintId}">${esc(f.description)}</p>` : "";
  const errHtml = errId ? `<p class="genui-error" id="${errId}" role="alert">${esc(err)}</p>` : "";
  const invalid = err ? ` aria-invalid="true"` : "";
  const req = f.required ? " required" : "";
  const dataName = ` data-name="${esc(f.name)}"`;
  const v = valueAt(ctx.values, f.name);
  // A given answer is shown as it is (a field it lacks stays empty); defaults fill a fresh form.
  const value = v !== undefined || ctx.hasValues ? v : f.schema?.default;
  const s = f.schema ?? {};
  switch (f.control) {
    case "group": {
      const inner = f.fields.map((c) => renderField(c, ctx, false)).join("\n");
      return (
        `<fieldset class="genui-field genui-group" id="${id}"${dataName}${describedBy(hintId, errId)}>` +
        `<legend>${esc(f.label)}${marker(f.required)}</legend>${hint}${inner}${errHtml}</fieldset>`
      );
    }
    case "radios":
    case "yesno": {
      const opts = f.control === "yesno" ? [{ value: true, label: "Yes" }, { value: false, label: "No" }] : f.options;
      const checkedIdx = value === undefined ? -1 : opts.findIndex((o) => sameJson(o.value, value));
      const items = opts
        .map((o, i) => {
          const oid = `${id}-${i}`;
          const checked = i === checkedIdx ? " checked" : "";
          const about = o.description ? `<span class="genui-option-about">${esc(o.description)}</span>` : "";
          return `<div class="genui-option"><input type="radio" id="${oid}" name="${esc(f.name)}" value="${i}"${checked}${req}${invalid}><label for="${oid}">${esc(o.label)}${about}</label></div>`;
        })
        .join("");
      const reqAria = f.required ? ` aria-required="true"` : "";
      const cards = f.cards ? " genui-cards" : "";
      return (
        `<fieldset class="genui-field genui-radios${cards}" id="${id}" role="radiogroup"${reqAria}${dataName}${describedBy(hintId, errId)}${invalid}>` +
        `<legend>${esc(f.label)}${marker(f.required && !isRoot)}</legend>${hint}${items}${errHtml}</fieldset>`
      );
    }
    case "checkboxes": {
      const chosen = Array.isArray(value) ? value : [];
      const items = f.options
        .map((o, i) => {
          const oid = `${id}-${i}`;
          const checked = chosen.some((c) => sameJson(c, o.value)) ? " checked" : "";
          return `<div class="genui-option"><input type="checkbox" id="${oid}" name="${esc(f.name)}" value="${i}"${checked}${invalid}><label for="${oid}">${esc(o.label)}</label></div>`;
        })
        .join("");
      return (
        `<fieldset class="genui-field genui-checkboxes" id="${id}"${dataName}${describedBy(hintId, errId)}>` +
        `<legend>${esc(f.label)}${marker(f.required)}</legend>${hint}${items}${errHtml}</fieldset>`
      );
    }
    case "select": {
      const idx = value === undefined ? -1 : f.options.findIndex((o) => sameJson(o.value, value));
      const empty = `<option value=""${idx < 0 ? " selected" : ""}>Choose…</option>`;
      const items = f.options
        .map((o, i) => `<option value="${i}"${i === idx ? " selected" : ""}>${esc(o.label)}</option>`)
        .join("");
      return wrap(f, id, `<select id="${id}" name="${esc(f.name)}"${req}${invalid}${describedBy(hintId, errId)}>${empty}${items}</select>`, hint, errHtml, dataName);
    }
    case "checkbox": {
      const checked = value === true ? " checked" : "";
      return (
        `<div class="genui-field genui-check"${dataName}><input type="checkbox" id="${id}" name="${esc(f.name)}" value="true"${checked}${invalid}${describedBy(hintId, errId)}>` +
        `<label for="${id}">${esc(f.label)}${marker(f.required)}</label>${hint}${errHtml}</div>`
      );
    }
    case "number": {
      const attrs = [];
      const min = typeof s.minimum === "number" ? s.minimum : typeof s.exclusiveMinimum === "number" ? s.exclusiveMinimum : null;
      const max = typeof s.maximum === "number" ? s.maximum : typeof s.exclusiveMaximum === "number" ? s.exclusiveMaximum : null;
      if (min !== null) attrs.push(`min="${esc(min)}"`);
      if (max !== null) attrs.push(`max="${esc(max)}"`);
      attrs.push(`step="${typeof s.multipleOf === "number" ? esc(s.multipleOf) : f.integer ? "1" : "any"}"`);
      const val = typeof value === "number" ? ` value="${esc(value)}"` : "";
      const input = `<input type="number" id="${id}" name="${esc(f.name)}" ${attrs.join(" ")} inputmode="${f.integer ? "numeric" : "decimal"}"${val}${req}${invalid}${describedBy(hintId, errId)}>`;
      return wrap(f, id, input, hint, errHtml, dataName);
    }
    case "textarea":
    case "lines":
    case "json": {
      let text = "";
      if (f.control === "lines") text = Array.isArray(value) ? value.join("\n") : "";
      else if (f.control === "json") text = value === undefined ? "" : JSON.stringify(value, null, 2);
      else text = typeof value === "string" ? value : "";
      const len = f.control === "textarea" && typeof s.maxLength === "number" ? ` maxlength="${esc(s.maxLength)}"` : "";
      const note =
        f.control === "lines" ? `<p class="genui-hint" id="${id}-how">One per line.</p>` : f.control === "json" ? `<p class="genui-hint" id="${id}-how">A JSON value.</p>` : "";
      const how = note ? `${id}-how` : null;
      const described = [hintId, how, errId].filter(Boolean).join(" ");
      const input = `<textarea id="${id}" name="${esc(f.name)}" rows="${f.control === "textarea" ? 4 : 3}"${len}${req}${invalid}${described ? ` aria-describedby="${described}"` : ""}>${esc(text)}</textarea>`;
      return wrap(f, id, input, hint + note, errHtml, dataName);
    }
    default: {
      const type = { email: "email", uri: "url", date: "date", time: "time" }[s.format] ?? "text";
      const attrs = [];
      if (typeof s.minLength === "number") attrs.push(` minlength="${esc(s.minLength)}"`);
      if (typeof s.maxLength === "number") attrs.push(` maxlength="${esc(s.maxLength)}"`);
      const val = value !== undefined && value !== null && typeof value !== "object" ? ` value="${esc(value)}"` : "";
      const input = `<input type="${type}" id="${id}" name="${esc(f.name)}"${attrs.join("")}${val}${req}${invalid}${describedBy(hintId, errId)}>`;
      return wrap(f, id, input, hint, errHtml, dataName);
    }
  }
}

function wrap(f, id, control, hint, errHtml, dataName) {
  return `<div class="genui-field"${dataName}><label for="${id}">${esc(f.label)}${marker(f.required)}</label>${control}${hint}${errHtml}</div>`;
}

/**
 * The answer to POST as `{"value": …}` to `/api/runs/:id/genui/:surface/respond`, read from a
 * FormData (or anything with `get`/`getAll`). Numbers come back as numbers, booleans as booleans,
 * choices as their enum values, multi-selects as arrays; empty fields are left out. For an
 * oauth-prompt, build the FormData with the pressed button (`new FormData(form, event.submitter)`):
 * "Not now" gives `null`, the skip the server always accepts. A surface with a single value whose
 * control was left empty also gives `null`.
 */
export function readSurface(form, surface) {
  const spec = specOf(surface);
  const { root } = fieldsOf(surface);
  if (root.control === "oauth") {
    if (form.get("/action") === "decline") return null;
    const connector = spec.connector?.id ?? spec.oauth?.connectorId ?? spec.oauth?.mcpServerId;
    return connector ? { connected: true, connectorId: connector } : { connected: true };
  }
  const v = readField(root, form);
  if (root.control === "group") return v === undefined ? {} : v;
  return v === undefined ? null : v;
}

function readField(f, form) {
  switch (f.control) {
    case "group": {
      const out = {};
      for (const c of f.fields) {
        const v = readField(c, form);
        if (v !== undefined) out[c.name.slice(c.name.lastIndexOf("/") + 1).replace(/~1/g, "/").replace(/~0/g, "~")] = v;
      }
      return Object.keys(out).length || f.required ? out : undefined;
    }
    case "radios":
    case "yesno":
    case "select": {
      const raw = form.get(f.name);
      if (raw == null || raw === "") return undefined;
      const opts = f.control === "yesno" ? [{ value: true }, { value: false }] : f.options;
      const o = opts[Number(raw)];
      return o ? o.value : String(raw);
    }
    case "checkboxes": {
      const picked = form.getAll(f.name).map((raw) => f.options[Number(raw)]).filter(Boolean).map((o) => o.value);
      return picked.length || f.required ? picked : undefined;
    }
    case "checkbox":
      return form.get(f.name) != null;
    case "number": {
      const raw = String(form.get(f.name) ?? "").trim();
      if (raw === "") return undefined;
      const n = Number(raw);
      return Number.isFinite(n) ? n : raw;
    }
    case "lines": {
      const lines = String(form.get(f.name) ?? "").split("\n").map((l) => l.trim()).filter(Boolean);
      if (!lines.length) return f.required ? [] : undefined;
      if (f.itemType === "string") return lines;
      return lines.map((l) => (Number.isFinite(Number(l)) ? Number(l) : l));
    }
    case "json": {
      const raw = String(form.get(f.name) ?? "").trim();
      if (raw === "") return undefined;
      try {
        return JSON.parse(raw);
      } catch {
        return raw;
      }
    }
    default: {
      const raw = form.get(f.name);
      if (raw == null || raw === "") return undefined;
      return String(raw);
    }
  }
}

/**
 * The server's refusal as messages by field name: `{"/color": "does not match …", "": "…"}`.
 * `apiError` is the response body (`{"error":{"code","message","data":{"violations"}}}`) or its
 * `error`. A violation goes to the field its pointer names, else to the nearest enclosing field
 * (`/tags/0` → `/tags`); what names no field (and any other error) goes to `""`, the form's own
 * message.
 */
export function errorsByField(apiError, surface) {
  const err = apiError?.error ?? apiError ?? {};
  const names = new Set();
  walk(fieldsOf(surface).root, (f) => {
    if (f.control !== "group" || f.name !== "/") names.add(f.name);
  });
  const out = {};
  const add = (name, msg) => {
    out[name] = out[name] ? `${out[name]}; ${msg}` : msg;
  };
  const violations = Array.isArray(err.data?.violations) ? err.data.violations : [];
  if (!violations.length) {
    add("", String(err.message ?? "The answer was not accepted."));
    return out;
  }
  for (const v of violations) {
    const text = String(v);
    const m = /^(\/[^:]*): ?(.*)$/s.exec(text);
    if (!m) {
      add("", text);
      continue;
    }
    const [, pointer, message] = m;
    let target = "";
    if (pointer === "/") {
      target = names.has("/") ? "/" : "";
    } else {
      for (let p = pointer; p; p = p.slice(0, p.lastIndexOf("/"))) {
        if (names.has(p)) {
          target = p;
          break;
        }
      }
      if (!target && names.has("/")) target = "/";
    }
    add(target, target ? message : text);
  }
  return out;
}

/**
 * The error messages as HTML to put in place without re-rendering: `form` for the form's
 * `-form-error` region, and per field the element to append after the control, with the ids to
 * add to its `aria-describedby` (and set `aria-invalid="true"` on `controlId`).
 */
export function renderErrors(errors, surface, opts = {}) {
  const ids = fieldIds(surface, opts);
  const fields = [];
  for (const [name, message] of Object.entries(errors ?? {})) {
    if (name === "" || !ids[name]) continue;
    const errorId = `${ids[name]}-error`;
    fields.push({ name, controlId: ids[name], errorId, html: `<p class="genui-error" id="${errorId}" role="alert">${esc(message)}</p>` });
  }
  const form = errors?.[""] ? `<p>${esc(errors[""])}</p>` : "";
  return { form, formId: `${idPrefix(surface, opts)}form-error`, fields };
}
