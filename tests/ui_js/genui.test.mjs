// Unit tests of src/http/ui/assets/genui.js over the real surfaces of this repository's manifests
// (bundled/ and tests/fixtures/), plus the shapes od itself derives and sends. Run by
// tests/api/ui_genui.rs (`node --test tests/ui_js/genui.test.mjs`); reads nothing outside the clone.

import test from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { dirname, join, relative } from "node:path";
import { renderSurface, readSurface, errorsByField, renderErrors, fieldIds, specOf, esc } from "../../src/http/ui/assets/genui.js";
import { surfacesUnder, checkSurface, tags, labelFor, legendOf, formDataOf, stubForm } from "./genui_checks.mjs";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const found = [...surfacesUnder(join(repo, "bundled")), ...surfacesUnder(join(repo, "tests", "fixtures"))];

test("the repository's manifests declare the surfaces these tests cover", () => {
  const names = found.map(({ file, spec }) => `${relative(repo, dirname(file))}#${spec.id}`);
  for (const want of [
    "bundled/atoms/direction-picker#direction-choice",
    "bundled/atoms/discovery-question-form#discovery-questions",
    "tests/fixtures/terminal/survey#brief",
    "tests/fixtures/terminal/survey#go",
    "tests/fixtures/fuzz/plugin/genui-asker#brief",
    "tests/fixtures/fuzz/plugin/genui-asker#style",
    "tests/fixtures/fuzz/plugin/genui-asker#confirm",
  ]) {
    assert.ok(names.includes(want), `${want} not found among ${names.join(", ")}`);
  }
  assert.ok(new Set(found.map((f) => f.spec.kind)).size >= 3, "forms, choices and confirmations");
});

for (const { file, spec } of found) {
  const where = `${relative(repo, file)}#${spec.id}`;
  test(`renders ${where}: labelled controls of the schema's types, required, defaults, hints, round trip`, () => {
    checkSurface(spec, where);
  });
}

const survey = found.find((f) => f.file.includes("terminal/survey") && f.spec.id === "brief").spec;

test("the survey form: integer as a number input with min and step, enum as radios, default checked", () => {
  const html = renderSurface(survey, { idPrefix: "s-" });
  const pages = tags(html, "input").find((a) => a.name === "/pages");
  assert.deepEqual([pages.type, pages.min, pages.step, pages.value], ["number", "1", "1", "1"]);
  const tone = tags(html, "input").filter((a) => a.name === "/tone");
  assert.deepEqual(tone.map((a) => [a.type, labelFor(html, a.id), !!a.checked]), [["radio", "calm", true], ["radio", "bold", false]]);
  const audience = tags(html, "input").find((a) => a.name === "/audience");
  assert.equal(audience.required, true);
  assert.equal(labelFor(html, audience.id), "audience *");
  assert.match(html, /novalidate/, "the server's answer is the one that counts");
});

test("readSurface types what the browser submits: numbers, enum values, booleans, arrays; empty optional fields left out", () => {
  const spec = {
    id: "t", kind: "form",
    schema: {
      type: "object", required: ["name"],
      properties: {
        name: { type: "string" }, note: { type: "string" }, count: { type: "integer" }, ratio: { type: "number" },
        ok: { type: "boolean" }, size: { enum: [1, 2, 3] }, tags: { type: "array", items: { enum: ["a", "b", "c"] } },
        colour: { type: "string", enum: ["red", "green", "blue", "cyan", "magenta"] },
        words: { type: "array", items: { type: "string" } },
        address: { type: "object", properties: { city: { type: "string" }, zip: { type: "string" } } },
      },
    },
  };
  const got = readSurface(
    stubForm([["/name", "Ada"], ["/note", ""], ["/count", "3"], ["/ratio", "0.5"], ["/ok", "true"], ["/size", "1"],
      ["/tags", "0"], ["/tags", "2"], ["/colour", "4"], ["/words", "one\n\n two \n"], ["/address/city", "Paris"], ["/address/zip", ""]]),
    spec,
  );
  assert.deepEqual(got, { name: "Ada", count: 3, ratio: 0.5, ok: true, size: 2, tags: ["a", "c"], colour: "magenta", words: ["one", "two"], address: { city: "Paris" } });
  const empty = readSurface(stubForm([["/colour", ""]]), spec);
  assert.deepEqual(empty, { ok: false }, "an unchecked box is false; everything else empty is left out");
  // A number that is not one is sent as typed so the server names the field.
  assert.deepEqual(readSurface(stubForm([["/name", "x"], ["/count", "three"]]), spec).count, "three");
});

test("arrays of enums are checkboxes, more than four options a select, nested objects fieldsets; all prefilled from values", () => {
  const spec = {
    id: "n", kind: "form",
    schema: {
      type: "object",
      properties: {
        tags: { type: "array", title: "Tags", items: { enum: ["a", "b", "c"] } },
        colour: { enum: ["red", "green", "blue", "cyan", "magenta"], title: "Colour" },
        address: { type: "object", title: "Address", required: ["city"], properties: { city: { type: "string", title: "City" } } },
      },
    },
  };
  const value = { tags: ["b", "c"], colour: "cyan", address: { city: "Oslo" } };
  const html = renderSurface(spec, { values: value });
  const boxes = tags(html, "input").filter((a) => a.name === "/tags");
  assert.deepEqual(boxes.map((a) => [a.type, labelFor(html, a.id), !!a.checked]), [["checkbox", "a", false], ["checkbox", "b", true], ["checkbox", "c", true]]);
  const select = tags(html, "select").find((a) => a.name === "/colour");
  assert.equal(labelFor(html, select.id), "Colour");
  const group = tags(html, "fieldset").find((a) => a["data-name"] === "/address");
  assert.equal(legendOf(html, group.id), "Address");
  const city = tags(html, "input").find((a) => a.name === "/address/city");
  assert.deepEqual([city.required, city.value, labelFor(html, city.id)], [true, "Oslo", "City *"]);
  assert.deepEqual(readSurface(formDataOf(html), spec), value);
});

test("hostile titles, descriptions, prompts, enum values and values are escaped", () => {
  const evil = `<script>alert(1)</script>"'><img src=x onerror=alert(2)>`;
  const spec = {
    id: `x"><script>`, kind: "form", prompt: evil, persist: "project",
    schema: {
      type: "object",
      properties: { [evil]: { type: "string", title: evil, description: evil, default: evil }, pick: { enum: [evil, "b"], title: evil } },
    },
  };
  const html = renderSurface(spec, { idPrefix: `p"><b>` });
  assert.ok(!/<script|<img|<b>/i.test(html), html);
  assert.ok(html.includes("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&gt;"), "shown as text");
  assert.ok(!tags(html, "[a-z]+").some((a) => Object.keys(a).some((k) => k.startsWith("on"))), "no attribute injected");
  assert.deepEqual(readSurface(formDataOf(html), spec), { [evil]: evil }, "the key and value survive the round trip");
  assert.equal(esc(`<&>"'`), "&lt;&amp;&gt;&quot;&#39;");
});

test("two surfaces on one page share no id; ids come from idPrefix", () => {
  const a = renderSurface(survey, { idPrefix: "run1-" });
  const b = renderSurface(survey, { idPrefix: "run2-" });
  const ids = (h) => tags(h, "[a-z]+").map((x) => x.id).filter(Boolean);
  assert.ok(ids(a).every((id) => id.startsWith("run1-")));
  assert.equal(ids(a).filter((id) => ids(b).includes(id)).length, 0);
  assert.notEqual(renderSurface(survey).indexOf('id="genui-brief-form"'), -1, "default prefix from the surface id");
});

test("a remembered answer prefills the form (values win over schema defaults)", () => {
  const html = renderSurface(survey, { values: { audience: "designers", tone: "bold", pages: 4 } });
  assert.deepEqual(readSurface(formDataOf(html), survey), { audience: "designers", tone: "bold", pages: 4 });
});

test("the API's and the event's wrappings render the same surface", () => {
  const bare = renderSurface(survey);
  assert.equal(renderSurface({ runId: "r", surface: { surfaceId: "brief", status: "pending" }, spec: survey }), bare);
  const { id, kind, persist, ...payload } = survey;
  assert.equal(renderSurface({ surfaceId: id, kind, persist, runId: "r", payload: { id, kind, persist, ...payload } }), bare);
  assert.equal(specOf({ surfaceId: "go", kind: "confirmation", payload: { prompt: "Go?" } }).id, "go");
});

test("choice: a root enum is a radio group read back as the enum's value; options without a schema too", () => {
  const style = found.find((f) => f.spec.id === "style").spec;
  const html = renderSurface(style);
  const radios = tags(html, "input").filter((a) => a.name === "/");
  assert.deepEqual(radios.map((r) => [labelFor(html, r.id), !!r.checked]), [["bold", false], ["calm", true]], "surface default checked");
  const g = tags(html, "fieldset")[0];
  assert.ok(legendOf(html, g.id), "the group has a legend");
  const options = { id: "o", kind: "choice", prompt: "Pick", options: ["x", 2, { value: true, label: "Yes please" }] };
  const h2 = renderSurface(options);
  assert.deepEqual(tags(h2, "input").filter((a) => a.type === "radio").map((r) => labelFor(h2, r.id)), ["x", "2", "Yes please"]);
  assert.deepEqual([0, 1, 2].map((i) => readSurface(stubForm([["/", String(i)]]), options)), ["x", 2, true]);
  assert.equal(readSurface(stubForm([]), options), null, "nothing chosen: null, the skip");
});

test("choice: directions are cards, each option with its description; a form's enum is not", () => {
  const pick = { id: "direction", kind: "choice", prompt: "Which direction?", schema: { oneOf: [
    { const: "editorial", title: "Editorial", description: "Serif headlines, generous white space" },
    { const: "brutal", title: "Brutalist", description: "Raw grid, <b>loud</b> type" }] } };
  const html = renderSurface(pick);
  assert.match(tags(html, "fieldset")[0].class, /\bgenui-cards\b/);
  assert.match(html, /<span class="genui-option-about">Serif headlines, generous white space<\/span>/);
  assert.match(html, /Raw grid, &lt;b&gt;loud&lt;\/b&gt; type/, "escaped");
  assert.equal(readSurface(stubForm([["/", "1"]]), pick), "brutal");
  const listed = renderSurface({ id: "o", kind: "choice", prompt: "Pick", options: [{ value: "a", label: "A", description: "first" }, "b"] });
  assert.match(listed, /genui-cards/);
  assert.match(listed, /genui-option-about">first</);
  const survey = found.find((f) => f.spec.id === "brief" && f.spec.schema?.properties?.tone).spec;
  assert.doesNotMatch(renderSurface(survey), /genui-cards/, "a form's enum stays a plain radio group");
});

test("the bundled direction picker as od records it with the agent's options: the pick is cards, the note a text field", () => {
  const declared = found.find((f) => f.file.includes("atoms/direction-picker") && f.spec.id === "direction-choice").spec;
  // What src/engine/choice_options.rs writes into the request: the open pick's oneOf.
  const asked = structuredClone(declared);
  asked.schema.properties.direction.oneOf = [
    { const: "warm", title: "Warm paper", description: "Cream, rust and a serif" },
    { const: "cool", title: "Cool glass" }];
  const html = renderSurface(asked);
  const sets = tags(html, "fieldset");
  assert.ok(sets.some((f) => /\bgenui-cards\b/.test(f.class ?? "")), "the directions are cards");
  assert.match(html, /genui-option-about">Cream, rust and a serif</);
  assert.deepEqual(readSurface(stubForm([["/direction", "1"], ["/note", "darker"]]), asked), { direction: "cool", note: "darker" });
  assert.doesNotMatch(renderSurface(declared), /genui-cards/, "without options nothing is a card");
});

test("choice with an object schema (od's diff review): its first enum is the radio group", () => {
  const diff = { id: "__auto_diff_review_make", kind: "choice", persist: "run", timeout: 86400000,
    schema: { type: "object", properties: { decision: { enum: ["accept", "reject", "partial"] } }, required: ["decision"] } };
  checkSurface(diff, "diff review");
  assert.deepEqual(readSurface(stubForm([["/decision", "1"]]), diff), { decision: "reject" });
  assert.match(renderSurface(diff), /<h2 class="genui-prompt" id="[^"]+">Diff review make<\/h2>/, "a prompt from the id when none is declared");
});

test("oauth-prompt (as od derives it for a required connector): what is asked, Connect and Not now", () => {
  const spec = { id: "__auto_connector_github", kind: "oauth-prompt", persist: "project", capabilitiesRequired: ["connector:github"], connector: { id: "github" } };
  const html = renderSurface(spec);
  assert.match(html, /connect to github/);
  assert.match(html, /<code>connector:github<\/code>/);
  assert.match(html, /remembered for this project/);
  const buttons = tags(html, "button");
  assert.deepEqual(buttons.map((b) => [b.type, b.name, b.value]), [["submit", "/action", "connect"], ["submit", "/action", "decline"]]);
  assert.match(html, />Connect<\/button>/);
  assert.match(html, />Not now<\/button>/);
  assert.deepEqual(readSurface(stubForm([["/action", "connect"]]), spec), { connected: true, connectorId: "github" });
  assert.equal(readSurface(stubForm([["/action", "decline"]]), spec), null);
  const withUrl = renderSurface({ ...spec, oauth: { route: "connector", url: "https://example.test/auth?a=1&b=2" } });
  assert.match(withUrl, /href="https:\/\/example.test\/auth\?a=1&amp;b=2" target="_blank" rel="noopener noreferrer"/);
  assert.ok(!renderSurface({ ...spec, oauth: { url: "javascript:alert(1)" } }).includes("javascript:"), "only http(s) links");
});

test("confirmation: Yes/No radios under the prompt, read as booleans", () => {
  const go = found.find((f) => f.spec.id === "go").spec;
  const html = renderSurface(go, { values: true });
  assert.match(html, />Build it now\?<\/h2>/);
  const radios = tags(html, "input").filter((a) => a.name === "/");
  assert.deepEqual(radios.map((r) => [labelFor(html, r.id), !!r.checked]), [["Yes", true], ["No", false]]);
  assert.equal(readSurface(formDataOf(html), go), true);
});

// The 422 envelope od returns for a refused answer (src/http/error.rs + work_error.rs), with
// violations as src/plugins/validator.rs words them (tests/plugins/genui_schema.rs checks the pointers).
const refused = {
  error: {
    code: "invalid-answer",
    message: "answer to surface brief is invalid: /audience: length must be >=3, but got 2",
    data: { field: "value", surfaceId: "brief", violations: ["/audience: length must be >=3, but got 2", "/pages: must be >=1, but got 0", "/: additional properties 'x' not allowed", "/nope/0: unknown"] },
  },
};

test("errorsByField maps a 422's violations to their fields; the rest to the form", () => {
  const errors = errorsByField(refused, survey);
  assert.deepEqual(errors, {
    "/audience": "length must be >=3, but got 2",
    "/pages": "must be >=1, but got 0",
    "": "/: additional properties 'x' not allowed; /nope/0: unknown",
  });
  assert.deepEqual(errorsByField(refused.error, survey), errors, "the body or its error");
  assert.deepEqual(errorsByField({ error: { code: "genui-surface-not-pending", message: "no request waits" } }, survey), { "": "no request waits" });
  const nested = { id: "n", kind: "form", schema: { type: "object", properties: { tags: { type: "array", items: { enum: ["a"] } }, a: { type: "object", properties: { b: { type: "string" } } } } } };
  assert.deepEqual(errorsByField({ error: { data: { violations: ["/tags/1: bad", "/a/b: short", "/a/c: extra"] } } }, nested), { "/tags": "bad", "/a/b": "short", "/a": "extra" });
  const style = found.find((f) => f.spec.id === "style").spec;
  assert.deepEqual(errorsByField({ error: { data: { violations: ["/: must be one of"] } } }, style), { "/": "must be one of" }, "a single-value surface's root error is its field's");
});

test("errors render next to their field: role=alert, aria-describedby, aria-invalid; values kept", () => {
  const errors = errorsByField(refused, survey);
  const html = renderSurface(survey, { idPrefix: "e-", errors, values: { audience: "ab", tone: "calm", pages: 0 } });
  const ids = fieldIds(survey, { idPrefix: "e-" });
  const audience = tags(html, "input").find((a) => a.name === "/audience");
  assert.equal(audience["aria-invalid"], "true");
  assert.ok(audience["aria-describedby"].split(" ").includes(`${ids["/audience"]}-error`));
  assert.match(html, new RegExp(`<p class="genui-error" id="${ids["/audience"]}-error" role="alert">length must be &gt;=3, but got 2</p>`));
  assert.equal(audience.value, "ab");
  assert.match(html, /<div class="genui-form-error" id="e-form-error" role="alert"><p>\/: additional properties &#39;x&#39; not allowed; \/nope\/0: unknown<\/p><\/div>/);
  const patch = renderErrors(errors, survey, { idPrefix: "e-" });
  assert.equal(patch.formId, "e-form-error");
  assert.deepEqual(patch.fields.map((f) => [f.name, f.controlId, f.errorId]), [
    ["/audience", ids["/audience"], `${ids["/audience"]}-error`],
    ["/pages", ids["/pages"], `${ids["/pages"]}-error`],
  ]);
  assert.match(patch.fields[0].html, /role="alert">length must be &gt;=3/);
  assert.match(patch.form, /additional properties/);
});

test("inner: only the contents, for a <form> the caller made and titled", () => {
  const html = renderSurface(survey, { idPrefix: "i-", inner: true });
  assert.ok(!/<form|<\/form>|<h2/.test(html), html);
  assert.match(html, /^<div class="genui-form-error" id="i-form-error" role="alert"><\/div>/);
  assert.match(html, /<button type="submit" class="genui-send">Send<\/button>/);
  assert.deepEqual(readSurface(formDataOf(html), survey), { tone: "calm", pages: 1 });
  const oauth = renderSurface({ id: "o", kind: "oauth-prompt", connector: { id: "figma" } }, { inner: true });
  assert.ok(!/<form|<\/form>/.test(oauth) && />Not now<\/button>/.test(oauth));
});

test("errorsByField on the 422 od answered for tests/fixtures/ui/plugins/brief (captured from a live daemon)", () => {
  // POST /api/runs/:id/genui/project-brief/respond {"value":{"audience":"ab","pages":9,"channels":["web","fax"]}}
  const body = {
    error: {
      code: "invalid-answer",
      message: "the answer to project-brief is invalid: /tone: required property \"tone\" is missing; /audience: length must be >=3, but got 2; /pages: must be <=5, but got 9; /channels/1: value must be one of 'web', 'print', 'social'",
      data: { field: "value", surfaceId: "project-brief", violations: ["/tone: required property \"tone\" is missing", "/audience: length must be >=3, but got 2", "/pages: must be <=5, but got 9", "/channels/1: value must be one of 'web', 'print', 'social'"] },
    },
  };
  const brief = found.find((f) => f.file.includes("ui/plugins/brief")).spec;
  assert.deepEqual(errorsByField(body, brief), {
    "/tone": "required property \"tone\" is missing",
    "/audience": "length must be >=3, but got 2",
    "/pages": "must be <=5, but got 9",
    "/channels": "value must be one of 'web', 'print', 'social'",
  });
  const html = renderSurface(brief, { errors: errorsByField(body, brief), values: { audience: "ab", pages: 9, channels: ["web"] } });
  for (const name of ["/tone", "/audience", "/pages", "/channels"]) {
    const el = tags(html, "[a-z]+").find((a) => a["data-name"] === name);
    assert.ok(el, name);
  }
  assert.equal((html.match(/role="alert">[^<]+<\/p>/g) ?? []).length, 4, "four messages, each beside its field");
});

test("a given answer is shown as it is: a field it lacks stays empty instead of taking the schema default", () => {
  const html = renderSurface(survey, { values: { audience: "ab" } });
  assert.ok(!tags(html, "input").some((a) => a.checked), "tone: no default checked");
  assert.equal(tags(html, "input").find((a) => a.name === "/pages").value, undefined, "pages: no default");
  assert.deepEqual(readSurface(formDataOf(html), survey), { audience: "ab" });
  assert.ok(tags(renderSurface(survey), "input").find((a) => a.name === "/tone" && a.checked), "a fresh form takes the default");
});
