// DOM helpers for the views: elements built from data (never from HTML strings, so nothing the
// daemon or a plugin says is ever parsed as markup), times, status badges, and small widgets.

/** `h("a", {href: "#/runs"}, "Runs")`: attributes (`on*` → listeners, `class`, booleans) and children. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A local date-time for epoch milliseconds. */
export function when(ms) {
  if (!ms) return "";
  return new Date(ms).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}

/** `1.2 s`, `340 ms`. */
export function duration(ms) {
  if (ms === null || ms === undefined) return "";
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${ms} ms`;
}

export function short(id) {
  return id ? String(id).slice(0, 8) : "";
}

/** A status badge (text, never colour alone). */
export function badge(status) {
  return h("span", { class: `badge s-${String(status).replace(/[^a-z-]/g, "")}` }, status);
}

/** A table: columns `[{label, cell: row => node|string}]`. */
export function table(caption, columns, rows, empty = "Nothing yet.") {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      {},
      h("caption", { class: "sr-only" }, caption),
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c.label)))),
      h("tbody", {}, rows.map((r) => h("tr", {}, columns.map((c) => h("td", { "data-label": c.label }, c.cell(r)))))),
    ),
  );
}

/** A definition list of `[label, value]` pairs. */
export function facts(pairs) {
  return h(
    "dl",
    { class: "facts" },
    pairs.filter(([, v]) => v !== undefined && v !== null && v !== "").map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
  );
}

/** An error envelope shown to a person: message, code, and what the daemon suggests. */
export function errorBox(e) {
  const fix = e && e.data && Array.isArray(e.data.remediation) ? e.data.remediation : [];
  return h(
    "div",
    { class: "error", role: "alert" },
    h("strong", {}, e.code ? `${e.code}: ` : "Error: "),
    e.message || String(e),
    fix.length ? h("ul", {}, fix.map((f) => h("li", {}, h("code", {}, f)))) : null,
  );
}

/** Announces a message in the page's live region. */
export function say(text) {
  const live = document.getElementById("live");
  if (live) live.textContent = text;
}

/** Runs `work` with the button disabled; shows the error after `where` (or throws it). */
export async function busy(button, work, where) {
  button.disabled = true;
  const old = where && where.querySelector(":scope > .error");
  if (old) old.remove();
  try {
    return await work();
  } catch (e) {
    if (where) where.append(errorBox(e));
    else throw e;
  } finally {
    button.disabled = false;
  }
}

/** A modal dialog; resolves with the value of the button pressed (null on Escape or `.close()`). */
export function modal(title, body, buttons) {
  let close = null;
  const promise = new Promise((resolve) => {
    const titleId = `dlg-${Math.random().toString(36).slice(2)}`;
    const dlg = h(
      "dialog",
      { "aria-labelledby": titleId, class: "modal" },
      h("h2", { id: titleId }, title),
      body,
      h(
        "div",
        { class: "actions" },
        buttons.map((b) =>
          h("button", { type: "button", class: b.primary ? "primary" : "", onclick: () => done(b.value) }, b.label),
        ),
      ),
    );
    const done = (v) => {
      dlg.close();
      dlg.remove();
      resolve(v);
    };
    dlg.addEventListener("cancel", (ev) => {
      ev.preventDefault();
      done(null);
    });
    close = () => {
      if (dlg.isConnected) done(null);
    };
    document.body.append(dlg);
    dlg.showModal();
  });
  promise.close = close;
  return promise;
}
