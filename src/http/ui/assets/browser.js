// The page as a live browser session of a run (the agent-ready RFC's loop). While a run's page is
// open and the run is live, the page advertises the tools it mounts (`PUT /api/browser-sessions/:id`)
// and answers the run's `browser_action_request`s addressed to it, posting each result with its
// invocation id (`POST /api/runs/:id/actions/:invocationId/result`). Reading tools answer at once;
// a tool that changes what the person sees asks first, and a refusal is `USER_DENIED`. A request the
// daemon superseded or timed out closes its pending question.

import { api, post, enc } from "./api.js";
import { h, modal } from "./ui.js";

const NO_INPUT = { type: "object", properties: {}, additionalProperties: false };

export const PAGE_TOOLS = [
  {
    name: "page.read_artifact_text",
    description: "Read the text of the artifact open in the person's preview (its DOM text), with its path.",
    surface: "browser", viewStateOnly: true, view: "artifact-text", inputSchema: NO_INPUT,
  },
  {
    name: "page.read_selection",
    description: "Read the text the person has selected in the artifact preview.",
    surface: "browser", viewStateOnly: true, view: "selection", inputSchema: NO_INPUT,
  },
  {
    name: "page.highlight",
    description: "Highlight an element of the previewed artifact (by CSS selector, or the first element containing a text) and show a note beside it. Asks the person first.",
    surface: "browser", viewStateOnly: true, view: "annotation",
    inputSchema: {
      type: "object",
      properties: {
        selector: { type: "string", maxLength: 500 },
        text: { type: "string", maxLength: 500 },
        note: { type: "string", maxLength: 2000 },
      },
      additionalProperties: false,
    },
  },
];

const CHANGES_VIEW = new Set(["page.highlight"]);

// Elements that start a line in rendered text (an inert document has no layout, so no innerText).
const BLOCKS = new Set(["ADDRESS", "ARTICLE", "ASIDE", "BLOCKQUOTE", "BR", "DD", "DIV", "DL", "DT", "FIELDSET",
  "FIGCAPTION", "FIGURE", "FOOTER", "FORM", "H1", "H2", "H3", "H4", "H5", "H6", "HEADER", "HR", "LI", "MAIN", "NAV",
  "OL", "P", "PRE", "SECTION", "TABLE", "TD", "TH", "TR", "UL"]);
const UNSEEN = new Set(["SCRIPT", "STYLE", "TEMPLATE", "HEAD", "TITLE"]);

/** The text a person sees in `root` (an element of an inert document), a line per block. */
export function visibleText(root) {
  const out = [];
  const walk = (node) => {
    if (node.nodeType === 3) out.push(node.data.replace(/\s+/g, " "));
    if (node.nodeType !== 1 || UNSEEN.has(node.tagName)) return;
    const block = BLOCKS.has(node.tagName);
    if (block) out.push("\n");
    for (const c of node.childNodes) walk(c);
    if (block) out.push("\n");
  };
  walk(root);
  return out.join("").split("\n").map((l) => l.trim()).filter(Boolean).join("\n");
}

/**
 * Starts a session for `runId`. `preview()` returns `{path, doc}` for the artifact shown now (doc:
 * the preview frame's document) or null. `log(text)` reports to the person. Returns
 * `{id, handle(event), close()}`: feed it every event of the run's stream.
 */
export function browserSession(runId, { preview, log }) {
  const id = `page-${crypto.randomUUID()}`;
  const pending = new Map(); // invocationId → {close()}
  let open = true;

  const advertised = api("PUT", `/api/browser-sessions/${enc(id)}`, { runId, tools: PAGE_TOOLS });

  const respond = (invocationId, body) =>
    post(`/api/runs/${enc(runId)}/actions/${enc(invocationId)}/result`, { invocationId, ...body }).catch((e) =>
      log(`Result for ${invocationId} not recorded: ${e.message}`));

  const fail = (code, message) => ({ ok: false, error: { code, message } });

  function run(tool, input) {
    const shown = preview();
    if (tool === "page.read_artifact_text") {
      if (!shown) return fail("TOOL_NOT_AVAILABLE", "no artifact is open in the preview");
      const text = shown.isolated
        ? visibleText(shown.doc.body || shown.doc.documentElement)
        : (shown.doc.body ? shown.doc.body.innerText || shown.doc.body.textContent : shown.doc.textContent) || "";
      return { ok: true, result: { path: shown.path, text: text.trim() } };
    }
    if (tool === "page.read_selection") {
      if (!shown) return fail("TOOL_NOT_AVAILABLE", "no artifact is open in the preview");
      // An HTML artifact's frame is an opaque origin: the page cannot read a selection in it.
      if (shown.isolated) return fail("TOOL_NOT_AVAILABLE", "the HTML preview is an isolated frame; its selection cannot be read");
      const sel = shown.doc.getSelection ? shown.doc.getSelection() : null;
      return { ok: true, result: { path: shown.path, text: sel ? sel.toString() : "" } };
    }
    if (tool === "page.highlight") {
      if (!shown) return fail("TOOL_NOT_AVAILABLE", "no artifact is open in the preview");
      let el = null;
      try {
        if (input.selector) el = shown.doc.querySelector(input.selector);
      } catch {
        return fail("INVALID_INPUT", `not a CSS selector: ${input.selector}`);
      }
      if (!el && input.text) {
        el = [...shown.doc.body.querySelectorAll("*")].reverse().find((e) => (e.textContent || "").includes(input.text)) || null;
      }
      if (!el) return fail("EXECUTION_FAILED", "no element matches");
      el.style.outline = "3px solid #f0a400";
      el.style.outlineOffset = "2px";
      if (input.note) {
        const note = shown.doc.createElement("aside");
        note.textContent = input.note;
        note.style.background = "#fff3c4";
        note.style.border = "1px solid #b07800";
        note.style.padding = "4px 6px";
        note.style.margin = "4px 0";
        note.setAttribute("data-od-note", "");
        el.after(note);
      }
      if (shown.render) shown.render(); // the frame shows the marked copy (it cannot be scrolled from here)
      else el.scrollIntoView({ block: "center" });
      return { ok: true, result: { path: shown.path, highlighted: el.tagName.toLowerCase() } };
    }
    return fail("TOOL_NOT_AVAILABLE", `${tool} is not mounted by this page`);
  }

  async function onRequest(d) {
    let input = d.input;
    if (typeof input === "string") {
      try {
        input = JSON.parse(input);
      } catch {
        input = {};
      }
    }
    input = input || {};
    if (CHANGES_VIEW.has(d.tool)) {
      const asked = modal("The agent asks to change the preview",
        h("div", {},
          h("p", {}, `Allow ${d.tool}?`),
          h("pre", {}, JSON.stringify(input, null, 2))),
        [{ label: "Allow", value: true, primary: true }, { label: "Deny", value: false }]);
      pending.set(d.invocationId, { close: asked.close });
      const allowed = await asked;
      if (!pending.has(d.invocationId)) return; // superseded or timed out meanwhile
      pending.delete(d.invocationId);
      if (!allowed) {
        log(`Denied ${d.tool}`);
        return respond(d.invocationId, fail("USER_DENIED", "the person declined"));
      }
    }
    const out = run(d.tool, input);
    log(`${d.tool}: ${out.ok ? "answered" : out.error.code}`);
    return respond(d.invocationId, out);
  }

  return {
    id,
    ready: advertised,
    handle(ev) {
      if (!open) return;
      const d = ev.data || {};
      if (ev.event === "browser_action_request" && d.sessionId === id) onRequest(d);
      if (ev.event === "browser_action_result" && pending.has(d.invocationId)) {
        const p = pending.get(d.invocationId);
        pending.delete(d.invocationId);
        log(`${d.invocationId}: ${d.error ? d.error.code : "resolved"} elsewhere`);
        p.close();
      }
    },
    close() {
      open = false;
      api("DELETE", `/api/browser-sessions/${enc(id)}`).catch(() => {});
    },
  };
}
