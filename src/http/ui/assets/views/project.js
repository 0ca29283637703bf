// One project: its conversations (each one's messages on demand), runs, files, and the GenUI
// answers it remembers (persist `project`/`conversation`), each with a revoke button.

import { get, post, enc, fileText, runFileText } from "../api.js";
import { h, fill, table, facts, badge, when, short, errorBox, say } from "../ui.js";
import { conversationPanel } from "./conversation.js";
import { composer } from "./composer.js";

const LIVE = new Set(["queued", "running", "awaiting-input"]);

export async function render(main, [id]) {
  const p = await get(`/api/projects/${enc(id)}`);
  const project = p.project || p;
  const answers = h("div", {});
  const files = h("div", {});
  const runs = h("div", {});
  const convs = h("div", {});
  const convMessages = h("div", { id: "project-conversation-messages" });
  const viewer = h("div", {});
  const studio = h("div", {});
  fill(main,
    h("h1", {}, project.name || `Project ${short(id)}`),
    facts([["Id", h("code", {}, id)], ["Folder", project.dir || project.path || ""], ["Created", when(project.createdAt)]]),
    studio,
    h("section", { "aria-labelledby": "answers-title" }, h("h2", { id: "answers-title" }, "Remembered answers"), answers),
    h("section", { "aria-labelledby": "runs-title" }, h("h2", { id: "runs-title" }, "Runs"), runs),
    h("section", { "aria-labelledby": "convs-title" }, h("h2", { id: "convs-title" }, "Conversations"), convs, convMessages),
    h("section", { "aria-labelledby": "files-title" }, h("h2", { id: "files-title" }, "Files"), files, viewer));

  async function loadAnswers() {
    const { surfaces } = await get(`/api/projects/${enc(id)}/genui?limit=200`);
    // One row per surface: the latest answer is the one a new run reuses (revoke is per surface).
    const latest = new Map();
    for (const s of surfaces.filter((x) => x.status === "resolved" && x.persist !== "run")) {
      const seen = latest.get(s.surfaceId);
      if (!seen || (s.respondedAt || 0) >= (seen.respondedAt || 0)) latest.set(s.surfaceId, s);
    }
    const remembered = [...latest.values()];
    fill(answers, table("Remembered answers", [
      { label: "Surface", cell: (s) => h("code", {}, s.surfaceId) },
      { label: "Kept per", cell: (s) => s.persist },
      { label: "Answer", cell: (s) => h("code", {}, JSON.stringify(s.value)) },
      { label: "Answered", cell: (s) => `${when(s.respondedAt)} (${s.respondedBy || "user"})` },
      { label: "", cell: (s) => h("button", { type: "button", class: "danger", "aria-label": `Revoke ${s.surfaceId}`, onclick: (ev) => revoke(ev.currentTarget, s) }, "Revoke") },
    ], remembered, "No remembered answers."));
  }

  async function revoke(button, s) {
    button.disabled = true;
    try {
      await post(`/api/projects/${enc(id)}/genui/${enc(s.surfaceId)}/revoke`, {});
      say(`Revoked ${s.surfaceId}`);
      await loadAnswers();
    } catch (e) {
      answers.append(errorBox(e));
      button.disabled = false;
    }
  }

  const [r, c, f] = await Promise.all([
    get(`/api/runs?projectId=${enc(id)}&limit=50`).catch(() => ({ runs: [] })),
    get(`/api/projects/${enc(id)}/conversations?limit=100`).catch(() => ({ conversations: [] })),
    get(`/api/projects/${enc(id)}/files?limit=200`),
  ]);
  const mine = (r.runs || []).filter((x) => x.projectId === id);
  if (mine.length) fill(studio, await studioOf(mine[0]));
  fill(runs, table("Runs", [
    { label: "Run", cell: (x) => h("a", { href: `#/runs/${enc(x.id)}` }, h("code", {}, short(x.id))) },
    { label: "Status", cell: (x) => badge(x.status) },
    { label: "Plugin", cell: (x) => x.pluginId || "—" },
    { label: "Created", cell: (x) => when(x.createdAt) },
  ], mine, "No runs."));
  fill(convs, table("Conversations", [
    { label: "Conversation", cell: (x) => h("code", {}, short(x.id || x.conversationId)) },
    { label: "Title", cell: (x) => x.title || "" },
    { label: "Created", cell: (x) => when(x.createdAt) },
    { label: "", cell: (x) => h("button", { type: "button", class: "linklike", onclick: () => showMessages(x.id || x.conversationId) }, `Messages of ${short(x.id || x.conversationId)}`) },
  ], c.conversations || [], "No conversations."));

  // A conversation's messages, oldest first (each run's user message and the agent's reply).
  async function showMessages(cid) {
    try {
      const v = await get(`/api/projects/${enc(id)}/conversations/${enc(cid)}/messages`);
      const items = (v.messages || []).map((m) => h("li", { "data-role": m.role, "data-run": m.runId },
        h("strong", {}, m.role === "user" ? "You" : "Agent"), " ",
        h("a", { href: `#/runs/${enc(m.runId)}`, class: "hint" }, `run ${short(m.runId)}`), h("div", { class: "text" }, m.text)));
      fill(convMessages, h("h3", {}, `Conversation ${short(cid)}`),
        items.length ? h("ol", { class: "messages", "aria-label": `Messages of conversation ${short(cid)}` }, items) : h("p", { class: "empty" }, "No messages yet."));
    } catch (e) {
      fill(convMessages, errorBox(e));
    }
  }
  fill(files, table("Files", [
    { label: "Path", cell: (x) => h("button", { type: "button", class: "linklike", onclick: () => open(x.path) }, x.path) },
    { label: "Bytes", cell: (x) => String(x.size ?? x.bytes ?? "") },
  ], f.files || [], "No files."));

  // Chat beside canvas for the project's latest run: its conversation with the follow-up composer,
  // and the project's artifacts, each path at its latest recorded version (from the run that
  // recorded it, as that run recorded it).
  async function studioOf(latest) {
    const conversation = conversationPanel(latest);
    conversation.reload();
    conversation.setLive(LIVE.has(latest.status));
    const shown = h("div", { id: "project-preview" });
    const byPath = new Map();
    try {
      const { artifacts } = await get(`/api/projects/${enc(id)}/artifacts?limit=500`);
      for (const a of artifacts || []) byPath.set(a.path, a);
    } catch (e) {
      shown.append(errorBox(e));
    }
    const show = async (a) => {
      try {
        if ((a.renderKind || a.artifactKind) === "html") {
          const { url } = await get(`/api/runs/${enc(a.runId)}/preview-url?path=${enc(a.path)}`);
          fill(shown, h("h3", {}, a.title || a.path), h("p", { class: "hint" }, `as run ${short(a.runId)} recorded it`),
            h("iframe", { class: "preview", sandbox: "", src: url, title: `Preview of ${a.path}` }));
        } else {
          fill(shown, h("h3", {}, a.title || a.path), h("pre", { tabindex: "0" }, await runFileText(a.runId, a.path)));
        }
      } catch (e) {
        fill(shown, errorBox(e));
      }
    };
    const list = [...byPath.values()];
    const firstHtml = list.filter((a) => (a.renderKind || a.artifactKind) === "html").pop();
    if (firstHtml) show(firstHtml);
    // The next run in this conversation from a plugin (spec's ChatComposer): its rail, applied in
    // place in this project, Send in the same conversation.
    const next = composer({ prefix: "pc", label: "Next run with a plugin", briefLabel: "Brief for the next run", project: id, conversation: latest.conversationId });
    return h("div", { class: "studio" }, h("div", { class: "chat" }, conversation.el,
      h("section", { "aria-labelledby": "next-title" }, h("h2", { id: "next-title" }, "Use a plugin in this project"), next.form,
        h("details", { class: "rail" }, h("summary", {}, "Plugins"), next.rail))),
      h("section", { class: "canvas", "aria-labelledby": "canvas-title" }, h("h2", { id: "canvas-title" }, "Canvas"),
        list.length ? h("ul", { "aria-label": "Latest artifacts" }, list.map((a) => h("li", {},
          h("button", { type: "button", class: "linklike", onclick: () => show(a) }, a.title || a.path), " ", h("code", {}, a.path))))
          : h("p", { class: "empty" }, "No artifacts yet."),
        shown));
  }

  async function open(path) {
    try {
      fill(viewer, h("h3", {}, path), h("pre", { tabindex: "0" }, await fileText(id, path)));
    } catch (e) {
      fill(viewer, errorBox(e));
    }
  }
  await loadAnswers();
}
