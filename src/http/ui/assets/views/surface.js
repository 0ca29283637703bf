// A waiting GenUI surface as a card: the surface's prompt and controls (genui.js renders them from
// the surface's declaration), answered with `POST /api/runs/:id/genui/:surface/respond`. A 422 from
// the daemon re-renders the form with what was typed and each message beside the field it names;
// an accepted answer removes the card (the run's stream then carries `genui_surface_response` and
// the run resumes, no reload).

import { get, post, enc, ApiError } from "../api.js";
import { h, fill, errorBox, say } from "../ui.js";
import { renderSurface, readSurface, errorsByField } from "../genui.js";

let serial = 0;

/** Where an oauth-prompt's Connect starts its authorization: a connector's, or a plugin MCP server's. */
function authorizer(spec) {
  const connector = spec.oauth?.route === "connector" ? spec.oauth?.connectorId : spec.connector?.id;
  if (connector) return { path: `/api/connectors/${enc(connector)}/connect/start`, body: {} };
  if (spec.oauth?.route === "mcp" && spec.oauth?.mcpServerId) return { path: "/api/mcp/oauth/start", body: { serverId: spec.oauth.mcpServerId } };
  return null;
}

const PERSIST = { run: "Asked once for this run.", conversation: "Remembered for this conversation.", project: "Remembered for this project." };

/**
 * The card of surface `surfaceId` waiting in run `runId`. `spec` is the surface's declaration (the
 * request event's `payload`); fetched when absent. `onAnswered(value)` runs after the daemon accepts.
 */
export async function surfaceCard(runId, surfaceId, { spec, onAnswered, heading = "h3" } = {}) {
  if (!spec) spec = (await get(`/api/runs/${enc(runId)}/genui/${enc(surfaceId)}`)).spec;
  const prefix = `sf${++serial}-`;
  const titleId = `${prefix}title`;
  const form = h("form", { class: "stack", novalidate: true, "aria-labelledby": titleId });
  const paint = (values, errors = {}) => {
    form.innerHTML = renderSurface(spec, { idPrefix: prefix, inner: true, values, errors });
  };
  paint(undefined);
  const out = h("div", {});
  const card = h("section", { class: "surface", "data-surface": surfaceId, "data-run": runId, "aria-labelledby": titleId },
    h(heading, { id: titleId }, spec.prompt || surfaceId),
    h("p", { class: "hint" }, PERSIST[spec.persist] || ""), form, out);

  // Connect on an oauth-prompt starts the real authorization (a connector's, or a plugin MCP
  // server's): the daemon makes the provider's URL (PKCE, single-use state, bound to this surface),
  // the provider's page opens in a new tab, and its callback to the daemon connects the account
  // and answers the surface — the run's stream then removes this card. Nothing is answered here.
  async function connect() {
    const buttons = [...form.querySelectorAll("button")];
    buttons.forEach((b) => (b.disabled = true));
    fill(out);
    try {
      const { path, body } = authorizer(spec);
      const r = await post(path, { ...body, runId, surfaceId });
      window.open(r.authorizeUrl, "_blank", "noopener");
      fill(out, h("p", { role: "status", class: "hint" }, "Finish connecting in the new tab: this card goes once the account is connected. ",
        h("a", { href: r.authorizeUrl, target: "_blank", rel: "noopener noreferrer" }, "Open the authorisation page again")));
      say(`Connecting ${surfaceId}: finish in the new tab`);
    } catch (e) {
      fill(out, errorBox(e));
    } finally {
      buttons.forEach((b) => (b.disabled = false));
    }
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    // The pressed button is part of the answer (a confirmation's yes/no, an oauth-prompt's choice).
    const data = new FormData(form, ev.submitter || undefined);
    if (spec.kind === "oauth-prompt" && data.get("/action") === "connect" && authorizer(spec)) {
      await connect();
      return;
    }
    const value = readSurface(data, spec);
    // "Not now" passes on the surface on purpose; nothing picked is no answer, which the daemon
    // refuses beside the field (a 422, shown below).
    const body = data.get("/action") === "decline" ? { skip: true } : { value };
    const buttons = [...form.querySelectorAll("button")];
    buttons.forEach((b) => (b.disabled = true));
    fill(out);
    try {
      await post(`/api/runs/${enc(runId)}/genui/${enc(surfaceId)}/respond`, body);
      say(`Answered ${surfaceId}`);
      card.remove();
      if (onAnswered) onAnswered(value);
    } catch (e) {
      if (e instanceof ApiError && e.status === 422) {
        paint(value, errorsByField({ error: { code: e.code, message: e.message, data: e.data } }, spec));
        const first = form.querySelector("[aria-invalid='true']");
        if (first) first.focus();
        say(`The answer to ${surfaceId} was refused: ${e.message}`);
      } else {
        buttons.forEach((b) => (b.disabled = false));
        fill(out, errorBox(e));
      }
    }
  });
  return card;
}
