// A waiting GenUI surface as a card: the surface's prompt and controls (genui.js renders them from
// the surface's declaration), answered with `POST /api/runs/:id/genui/:surface/respond`. A 422 from
// the daemon is shown next to the field it names; an accepted answer removes the card (the run's
// stream then carries `genui_surface_response` and the run resumes, no reload).

import { get, post, enc, ApiError } from "../api.js";
import { h, fill, errorBox, say } from "../ui.js";
import { renderSurface, readSurface, errorsByField } from "../genui.js";

let serial = 0;

/** Marks each field named in `errors` ({field: message}) and puts the message beside it. */
function showErrors(form, errors, prefix) {
  for (const el of form.querySelectorAll("[data-server-error]")) el.remove();
  for (const el of form.querySelectorAll("[aria-invalid='true']")) {
    el.removeAttribute("aria-invalid");
    const ids = (el.getAttribute("aria-describedby") || "").split(" ").filter((x) => x && !x.startsWith(`${prefix}-err-`));
    if (ids.length) el.setAttribute("aria-describedby", ids.join(" "));
    else el.removeAttribute("aria-describedby");
  }
  let first = null;
  for (const [field, message] of Object.entries(errors)) {
    const id = `${prefix}-err-${field.replace(/[^A-Za-z0-9_-]/g, "_") || "form"}`;
    const note = h("span", { id, role: "alert", class: "field-error", "data-server-error": field }, message);
    const controls = field ? [...form.querySelectorAll(`[name="${CSS.escape(field)}"]`)] : [];
    if (!controls.length) {
      form.prepend(note);
      continue;
    }
    for (const c of controls) {
      c.setAttribute("aria-invalid", "true");
      c.setAttribute("aria-describedby", `${c.getAttribute("aria-describedby") || ""} ${id}`.trim());
    }
    const holder = controls[0].closest(".field, fieldset") || controls[0].parentElement;
    holder.append(note);
    first = first || controls[0];
  }
  if (first) first.focus();
}

/**
 * The card of surface `surfaceId` waiting in run `runId`. `spec` is the surface's declaration (the
 * request event's `payload`); fetched when absent. `onAnswered(value)` runs after the daemon accepts.
 */
export async function surfaceCard(runId, surfaceId, { spec, onAnswered, heading = "h3" } = {}) {
  if (!spec) spec = (await get(`/api/runs/${enc(runId)}/genui/${enc(surfaceId)}`)).spec;
  const prefix = `sf${++serial}`;
  const form = h("form", { class: "stack", novalidate: true, "aria-labelledby": `${prefix}-title` });
  form.innerHTML = renderSurface(spec, { idPrefix: prefix });
  const out = h("div", {});
  const card = h("section", { class: "surface", "data-surface": surfaceId, "data-run": runId },
    h(heading, { id: `${prefix}-title` }, spec.prompt || surfaceId),
    h("p", { class: "hint" }, `${spec.kind} · remembered per ${spec.persist || "run"}`), form, out);

  // The submitter decides the answer of a confirmation / oauth-prompt (a button with a value).
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const fd = new FormData(form, ev.submitter || undefined);
    let value;
    try {
      value = readSurface(fd, spec);
    } catch (e) {
      showErrors(form, { "": e.message }, prefix);
      return;
    }
    const buttons = [...form.querySelectorAll("button")];
    buttons.forEach((b) => (b.disabled = true));
    fill(out);
    try {
      await post(`/api/runs/${enc(runId)}/genui/${enc(surfaceId)}/respond`, { value });
      say(`Answered ${surfaceId}`);
      card.remove();
      if (onAnswered) onAnswered(value);
    } catch (e) {
      if (e instanceof ApiError && e.status === 422) showErrors(form, errorsByField(e, spec), prefix);
      else fill(out, errorBox(e));
    } finally {
      buttons.forEach((b) => (b.disabled = false));
    }
  });
  return card;
}
