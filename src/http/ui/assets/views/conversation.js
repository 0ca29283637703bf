// A run's conversation (issue 30 item 3): its messages, oldest first (each run's user message and
// the agent's reply, from GET /api/projects/:id/conversations/:cid/messages), and a composer that
// sends a follow-up to the same conversation (POST /api/runs with the conversation; the daemon runs
// the plugin's follow-up stages, else the last stage only) and opens the new run.

import { get, post, enc } from "../api.js";
import { h, fill, short, errorBox } from "../ui.js";

/**
 * The panel for `run` (`{projectId, conversationId}`): `{el, reload(), setLive(live), say(text)}`.
 * `inline`: what goes between the messages and the composer (the run's waiting GenUI cards), so a
 * question reads as the agent's next turn; `say` shows the agent's text as it streams, until the
 * run ends and its reply is a message.
 */
export function conversationPanel(run, { inline = null } = {}) {
  const list = h("ol", { class: "messages", id: "conversation-messages", "aria-label": "Conversation messages" });
  const liveText = h("div", { class: "text" });
  const live = h("div", { class: "msg msg-agent msg-live", id: "conversation-live", hidden: true, "aria-live": "polite" },
    h("strong", {}, "Agent"), " ", h("span", { class: "hint" }, "working…"), liveText);
  const text = h("textarea", { id: "follow-up-text", rows: "3", required: true });
  const send = h("button", { type: "submit", id: "follow-up-send" }, "Send follow-up");
  const hint = h("p", { class: "hint", id: "follow-up-hint" });
  const out = h("div", { "aria-live": "polite" });
  const form = h("form", { "aria-label": "Follow-up", onsubmit: submit },
    h("label", { for: "follow-up-text" }, "Follow-up message"), text, h("div", { class: "actions" }, send), hint, out);
  const base = `/api/projects/${enc(run.projectId)}/conversations/${enc(run.conversationId)}/messages`;

  async function reload() {
    try {
      const v = await get(base);
      const msgs = v.messages || [];
      if (!msgs.length) return fill(list, h("li", { class: "empty" }, "No messages yet."));
      fill(list, msgs.map((m) => h("li", { class: `msg msg-${m.role === "user" ? "user" : "agent"}`, "data-role": m.role, "data-run": m.runId },
        h("strong", {}, m.role === "user" ? "You" : "Agent"), " ",
        h("a", { href: `#/runs/${enc(m.runId)}`, class: "hint" }, `run ${short(m.runId)}`), h("div", { class: "text" }, m.text))));
    } catch (e) {
      fill(list, h("li", {}, errorBox(e)));
    }
  }

  async function submit(ev) {
    ev.preventDefault();
    const message = text.value.trim();
    if (!message) return;
    send.disabled = true;
    fill(out);
    try {
      const r = await post("/api/runs", { projectId: run.projectId, conversationId: run.conversationId, message });
      location.hash = `#/runs/${enc(r.runId)}`;
    } catch (e) {
      fill(out, errorBox(e));
      send.disabled = false;
    }
  }

  function say(t) {
    if (!t) return;
    live.hidden = false;
    liveText.append(document.createTextNode(t.endsWith("\n") ? t : `${t}\n`));
  }

  function setLive(on) {
    if (!on) {
      live.hidden = true;
      liveText.replaceChildren();
    }
    send.disabled = on;
    hint.textContent = on ? "A follow-up can be sent once this run has ended." : "Runs the plugin's follow-up stages (else its last stage) with this conversation's messages and artifacts.";
  }

  const el = h("section", { "aria-labelledby": "conversation-title" }, h("h2", { id: "conversation-title" }, "Conversation"), list, live, inline, form);
  return { el, reload, setLive, say };
}
