// Shared by genui.test.mjs and conformance_genui.test.mjs: finding the GenUI surfaces manifests
// declare, reading the renderer's HTML back (attributes, labels, what a browser would submit) and
// checking one surface's form against its own schema.

import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { renderSurface, readSurface, fieldsOf } from "../../src/http/ui/assets/genui.js";

/** Every surface declared in an `open-design.json` under `dir`: `[{file, spec}]`. */
export function surfacesUnder(dir) {
  const out = [];
  const visit = (d) => {
    for (const name of readdirSync(d).sort()) {
      if (name === "node_modules" || name === "target" || name === ".git") continue;
      const p = join(d, name);
      const st = statSync(p);
      if (st.isDirectory()) visit(p);
      else if (name === "open-design.json") {
        let manifest;
        try {
          manifest = JSON.parse(readFileSync(p, "utf8"));
        } catch {
          continue; // broken manifests are plugin-load fixtures, not surfaces
        }
        const surfaces = manifest?.od?.genui?.surfaces;
        if (Array.isArray(surfaces)) for (const spec of surfaces) if (spec && typeof spec === "object") out.push({ file: p, spec });
      }
    }
  };
  visit(dir);
  return out;
}

export function unescapeHtml(s) {
  return s.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, "&");
}

function attrs(text) {
  const out = {};
  for (const m of text.matchAll(/([\w:-]+)(?:="([^"]*)")?/g)) out[m[1]] = m[2] === undefined ? true : unescapeHtml(m[2]);
  return out;
}

/** The start tags of `tag` in `html`, as attribute maps. */
export function tags(html, tag) {
  return [...html.matchAll(new RegExp(`<${tag}\\b([^>]*)>`, "g"))].map((m) => attrs(m[1]));
}

/** Text of the `<label for=id>` (markup stripped). */
export function labelFor(html, id) {
  const m = new RegExp(`<label for="${id}">(.*?)</label>`, "s").exec(html);
  return m ? unescapeHtml(m[1].replace(/<[^>]*>/g, "")) : null;
}

/** The legend text of the fieldset with `id`. */
export function legendOf(html, id) {
  const m = new RegExp(`<fieldset[^>]*\\bid="${id}"[^>]*><legend>(.*?)</legend>`, "s").exec(html);
  return m ? unescapeHtml(m[1].replace(/<[^>]*>/g, "")) : null;
}

/** What a browser submits for the rendered form, as a FormData-like object. */
export function formDataOf(html) {
  const entries = [];
  for (const a of tags(html, "input")) {
    if (!a.name || a.type === "submit") continue;
    if ((a.type === "radio" || a.type === "checkbox") && !a.checked) continue;
    entries.push([a.name, typeof a.value === "string" ? a.value : a.type === "checkbox" ? "on" : ""]);
  }
  for (const m of html.matchAll(/<select\b([^>]*)>(.*?)<\/select>/gs)) {
    const a = attrs(m[1]);
    const options = [...m[2].matchAll(/<option\b([^>]*)>/g)].map((o) => attrs(o[1]));
    const chosen = options.find((o) => o.selected) ?? options[0];
    if (chosen) entries.push([a.name, chosen.value ?? ""]);
  }
  for (const m of html.matchAll(/<textarea\b([^>]*)>(.*?)<\/textarea>/gs)) entries.push([attrs(m[1]).name, unescapeHtml(m[2])]);
  return stubForm(entries);
}

/** A FormData stand-in over `[name, value]` pairs. */
export function stubForm(entries) {
  return {
    get: (n) => entries.find(([k]) => k === n)?.[1] ?? null,
    getAll: (n) => entries.filter(([k]) => k === n).map(([, v]) => v),
  };
}

function ptr(key) {
  return "/" + String(key).replace(/~/g, "~0").replace(/\//g, "~1");
}

/** A valid-looking answer for `schema` (defaults first), to render and read back. */
export function sampleValue(schema, name = "x") {
  if (!schema || typeof schema !== "object") return "sample";
  if ("default" in schema) return schema.default;
  if (Array.isArray(schema.enum)) return schema.enum[schema.enum.length - 1];
  const t = Array.isArray(schema.type) ? schema.type.find((x) => x !== "null") : schema.type;
  if (t === "object" || schema.properties) {
    const out = {};
    for (const [k, sub] of Object.entries(schema.properties ?? {})) out[k] = sampleValue(sub, k);
    return out;
  }
  if (t === "array") {
    const items = schema.items ?? {};
    return Array.isArray(items.enum) ? [items.enum[0]] : [sampleValue(items, name)];
  }
  if (t === "boolean") return true;
  if (t === "integer") return typeof schema.minimum === "number" ? schema.minimum + 1 : 2;
  if (t === "number") return 2.5;
  return `${name} <&> "it's" value`;
}

/**
 * Checks one surface: unique ids, every control labelled, each property's control of the right
 * type with its label, required mark, description hint and default, and the value read back from
 * what the browser would submit equals the value it was rendered with.
 */
export function checkSurface(spec, where) {
  const html = renderSurface(spec, { idPrefix: "t-" });
  const ids = tags(html, "[a-z]+").map((a) => a.id).filter(Boolean);
  assert.equal(new Set(ids).size, ids.length, `${where}: duplicate ids in ${html}`);
  for (const a of [...tags(html, "input"), ...tags(html, "select"), ...tags(html, "textarea")]) {
    if (a.type === "submit") continue;
    assert.ok(a.id && labelFor(html, a.id), `${where}: control ${a.name} has no label`);
  }
  for (const a of tags(html, "[a-z]+")) {
    for (const ref of String(a["aria-describedby"] ?? "").split(" ").filter(Boolean)) {
      assert.ok(ids.includes(ref), `${where}: aria-describedby ${ref} names no element`);
    }
  }
  assert.ok(/<button type="submit"[^>]*>(Send|Connect)<\/button>/.test(html), `${where}: no submit button`);
  const prompt = spec.prompt;
  if (prompt) assert.ok(html.includes(`>${prompt.replace(/&/g, "&amp;").replace(/</g, "&lt;")}</h2>`), `${where}: prompt not shown`);

  const schema = spec.schema;
  if (spec.kind === "confirmation" && !schema) {
    const radios = tags(html, "input").filter((a) => a.type === "radio" && a.name === "/");
    assert.deepEqual(radios.map((r) => labelFor(html, r.id)), ["Yes", "No"], `${where}: a confirmation is Yes/No`);
    for (const [want, idx] of [[true, "0"], [false, "1"]]) {
      assert.equal(readSurface(stubForm([["/", idx]]), spec), want, `${where}: confirmation reads ${want}`);
    }
    return html;
  }
  if (schema && Array.isArray(schema.enum)) {
    const radios = tags(html, "input").filter((a) => a.type === "radio" && a.name === "/");
    assert.deepEqual(radios.map((r) => labelFor(html, r.id)), schema.enum.map(String), `${where}: one radio per option`);
    if ("default" in spec) {
      const checked = radios.findIndex((r) => r.checked);
      assert.equal(checked, schema.enum.indexOf(spec.default), `${where}: the surface default is checked`);
    }
    for (const [i, v] of schema.enum.entries()) assert.deepEqual(readSurface(stubForm([["/", String(i)]]), spec), v);
    return html;
  }
  const props = schema?.properties ?? {};
  const required = new Set(schema?.required ?? []);
  const firstEnum = spec.kind === "choice" ? Object.keys(props).find((k) => Array.isArray(props[k].enum)) : undefined;
  for (const [key, sub] of Object.entries(props)) {
    const name = ptr(key);
    const label = sub.title ?? key;
    const inputs = tags(html, "input").filter((a) => a.name === name);
    const selects = tags(html, "select").filter((a) => a.name === name);
    const areas = tags(html, "textarea").filter((a) => a.name === name);
    let control; // the element whose attributes carry required/describedby
    if (Array.isArray(sub.enum)) {
      if (sub.enum.length <= 4 || key === firstEnum) {
        assert.equal(inputs.length, sub.enum.length, `${where}: ${key}: one radio per option`);
        assert.ok(inputs.every((a) => a.type === "radio"), `${where}: ${key}: radios`);
        assert.deepEqual(inputs.map((a) => labelFor(html, a.id)), sub.enum.map(String), `${where}: ${key}: option labels`);
        const group = tags(html, "fieldset").find((f) => f["data-name"] === name);
        assert.ok(group && group.role === "radiogroup", `${where}: ${key}: radios in a radiogroup fieldset`);
        assert.ok(legendOf(html, group.id).startsWith(label), `${where}: ${key}: legend`);
        control = group;
        if (required.has(key)) assert.equal(group["aria-required"], "true", `${where}: ${key}: required`);
        if ("default" in sub) assert.ok(inputs[sub.enum.indexOf(sub.default)].checked, `${where}: ${key}: default checked`);
      } else {
        assert.equal(selects.length, 1, `${where}: ${key}: a select`);
        control = selects[0];
        if (required.has(key)) assert.ok(control.required, `${where}: ${key}: required`);
      }
    } else {
      const t = sub.type;
      if (t === "integer" || t === "number") {
        assert.equal(inputs.length, 1, `${where}: ${key}: one input`);
        assert.equal(inputs[0].type, "number", `${where}: ${key}: a number input`);
        if (typeof sub.minimum === "number") assert.equal(inputs[0].min, String(sub.minimum), `${where}: ${key}: min`);
        if (typeof sub.maximum === "number") assert.equal(inputs[0].max, String(sub.maximum), `${where}: ${key}: max`);
        if (t === "integer") assert.equal(inputs[0].step, String(sub.multipleOf ?? 1), `${where}: ${key}: step`);
        if ("default" in sub) assert.equal(inputs[0].value, String(sub.default), `${where}: ${key}: default`);
        control = inputs[0];
      } else if (t === "boolean") {
        assert.equal(inputs.length, 1, `${where}: ${key}`);
        assert.equal(inputs[0].type, "checkbox", `${where}: ${key}: a checkbox`);
        control = inputs[0];
      } else if (t === "array" && Array.isArray(sub.items?.enum)) {
        assert.equal(inputs.length, sub.items.enum.length, `${where}: ${key}: one checkbox per option`);
        assert.ok(inputs.every((a) => a.type === "checkbox"), `${where}: ${key}: checkboxes`);
        control = tags(html, "fieldset").find((f) => f["data-name"] === name);
      } else {
        assert.equal(inputs.length + areas.length, 1, `${where}: ${key}: one text control`);
        control = inputs[0] ?? areas[0];
        if (inputs[0]) assert.ok(["text", "email", "url", "date", "time"].includes(inputs[0].type), `${where}: ${key}: text input`);
        if (typeof sub.minLength === "number" && inputs[0]) assert.equal(inputs[0].minlength, String(sub.minLength));
        if ("default" in sub && inputs[0]) assert.equal(inputs[0].value, String(sub.default), `${where}: ${key}: default`);
      }
      if (control.id && !control.role) {
        const text = labelFor(html, control.id) ?? legendOf(html, control.id);
        assert.ok(text && text.startsWith(label), `${where}: ${key}: labelled ${JSON.stringify(label)}, got ${text}`);
      }
      if (required.has(key) && t !== "array") assert.ok(control.required, `${where}: ${key}: required`);
    }
    if (required.has(key)) {
      const mark = new RegExp(`(for|id)="${control.id}"[^>]*>(<legend>)?[^<]*<span class="genui-required"`);
      assert.ok(mark.test(html), `${where}: ${key}: the required mark is shown`);
    }
    if (sub.description) {
      const hints = String(control["aria-describedby"] ?? "").split(" ");
      const hint = hints.map((h) => new RegExp(`id="${h}">(.*?)</p>`).exec(html)?.[1]).find(Boolean);
      assert.equal(hint && unescapeHtml(hint), sub.description, `${where}: ${key}: description linked by aria-describedby`);
    }
  }
  // Render a full answer, submit what the browser would, read it back: same typed value.
  if (schema) {
    const value = sampleValue(schema);
    const again = renderSurface(spec, { idPrefix: "t-", values: value });
    assert.deepEqual(readSurface(formDataOf(again), spec), value, `${where}: round trip`);
  }
  assert.ok(fieldsOf(spec).root, where);
  return html;
}
