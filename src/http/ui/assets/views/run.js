// One run, live: its facts and controls (cancel, break loop, verify replay), the surfaces waiting
// for an answer, a stage timeline (stages, devloop iterations with their signals, the `until`
// condition and why each loop stopped), the agent's text as it streams, tool calls, artifacts with
// a preview, prompt digests, the page's browser session, and every event of the run in order.
// Everything comes from the run's SSE stream (resumed without gap or duplicate after a drop).

import { get, post, enc, runFileText, runFileBlob } from "../api.js";
import { h, fill, facts, badge, when, short, errorBox, say } from "../ui.js";
import { followRun } from "../sse.js";
import { surfaceCard } from "./surface.js";
import { conversationPanel } from "./conversation.js";
import { browserSession, PAGE_TOOLS } from "../browser.js";

const TERMINAL = new Set(["succeeded", "failed", "canceled"]);

/** A one-line summary of an event for the timeline. */
function summary(name, d) {
  switch (name) {
    case "pipeline_stage_started": return `stage ${d.stageId} started (iteration ${d.iteration + 1})`;
    case "pipeline_stage_completed": return `stage ${d.stageId} completed${d.converged ? "" : " (not converged)"}${d.diffSummary ? ` — ${d.diffSummary}` : ""}`;
    case "pipeline_stage_failed": return `stage ${d.stageId} failed: ${d.message || d.reason || ""}`;
    case "devloop_iteration": return `${d.stageId} iteration ${d.iteration}: ${JSON.stringify(d.signals || {})}${d.termination ? ` → ${d.termination}` : ""}`;
    case "devloop_broken": return `loop of ${d.stageId} broken by ${d.by || "the user"}`;
    case "prompt_composed": return `prompt for ${d.stageId} (${d.bytes} bytes${d.budgetTokens ? `, ~${d.totalTokens} of ${d.budgetTokens} tokens` : ""}, blake3 ${String(d.digest).slice(0, 16)})`;
    case "start": return `agent ${d.agentId} started on ${d.stageId}`;
    case "agent": return d.type === "text_delta" ? `text: ${d.delta}` : d.type === "tool_use" ? `tool ${d.name}` : `${d.type}${d.label ? `: ${d.label}` : ""}`;
    case "signal": return `signal ${d.name} = ${JSON.stringify(d.value)}`;
    case "artifact": return `artifact ${d.path}`;
    case "genui_surface_request": return `asks: ${(d.payload && d.payload.prompt) || d.surfaceId}`;
    case "genui_surface_response": return `answered ${d.surfaceId} (${d.respondedBy})`;
    case "browser_action_request": return `browser action ${d.tool} (${d.invocationId})`;
    case "browser_action_result": return `browser result ${d.invocationId}: ${d.ok ? "ok" : (d.error && d.error.code) || "error"}`;
    case "conversation_message": return `${d.role === "user" ? "you" : "agent"}: ${d.text}`;
    case "substrate_staged": return `staged ${(d.files || []).length} file(s) into ${d.contextDir ?? d.context_dir ?? "the folder"}${(d.missing || []).length ? `; missing: ${d.missing.join(", ")}` : ""}`;
    case "run_forked": return `forked from run ${String(d.parentRunId || "").slice(0, 8)} at event ${d.forkEventId}`;
    case "follow_up_planned": return `follow-up: runs ${(d.stages || []).join(", ")} (${d.rule}), builds on ${(d.buildsOn || []).length} run(s)`;
    case "end": return `end: ${d.status}${d.reason ? ` — ${d.reason}` : ""}`;
    default: return name;
  }
}

export async function render(main, [runId]) {
  let run = (await get(`/api/runs/${enc(runId)}`)).run;
  const status = h("span", { id: "run-status" });
  const conn = h("span", { class: "conn", id: "run-conn", role: "status" }, "connecting");
  const info = h("div", {});
  const out = h("div", {});
  const waiting = h("div", { id: "run-surfaces" });
  const stagesEl = h("ol", { class: "stages", "aria-label": "Stages" });
  const agentText = h("div", { class: "agent-text", id: "agent-text", role: "log", tabindex: "0", "aria-label": "Agent output" });
  const tools = h("ul", { class: "tools", "aria-label": "Tool calls" });
  const artifacts = h("ul", { "aria-label": "Artifacts" });
  const previewEl = h("div", { id: "artifact-preview" });
  const prompts = h("ul", { "aria-label": "Prompt digests" });
  const browserLog = h("ul", { "aria-label": "Browser actions", id: "browser-log" });
  const timeline = h("ol", { class: "timeline", id: "timeline", "aria-label": "Timeline", tabindex: "0" });
  const cancel = h("button", { type: "button", class: "danger", onclick: () => act(cancel, () => post(`/api/runs/${enc(runId)}/cancel`, {}), "Cancel requested") }, "Cancel run");
  const breakLoop = h("button", { type: "button", onclick: () => act(breakLoop, () => post(`/api/runs/${enc(runId)}/respond`, { action: "break-loop" }), "Loop break requested") }, "Break loop");
  const verify = h("button", { type: "button", onclick: verifyReplay }, "Verify replay");
  const verifyOut = h("div", { "aria-live": "polite" });

  // What waits for an answer comes in line, after the messages: the agent's next turn.
  const asking = h("section", { class: "asking", "aria-labelledby": "waiting-title" }, h("h3", { id: "waiting-title" }, "Waiting for you"), waiting);
  const conversation = conversationPanel(run, { inline: asking });
  const stageRows = new Map();
  // Critique theater: each devloop round's scores, what the `until` matched (or why the loop
  // stopped) and what the agent said in that round; shown once a loop has run a round.
  const rounds = h("tbody", {});
  const critique = h("section", { id: "critique-panel", "aria-labelledby": "critique-title", hidden: true },
    h("h2", { id: "critique-title" }, "Critique rounds"),
    h("div", { class: "scroll" }, h("table", {}, h("caption", { class: "sr-only" }, "Critique rounds"),
      h("thead", {}, h("tr", {}, ["Stage", "Round", "Scores", "Until", "What the agent said"].map((c) => h("th", { scope: "col" }, c)))),
      rounds)));
  let at = ""; // the stage iteration running now, `stage#round` (rounds count from 1)
  const said = new Map();
  let shown = null; // {path, doc}

  fill(main,
    h("h1", {}, "Run ", h("code", {}, short(runId)), " ", status),
    info,
    h("div", { class: "actions" }, cancel, breakLoop, verify, conn), out, verifyOut,
    // Chat beside canvas: what waits for an answer and the conversation on the left, the
    // artifacts and their preview on the right (one column on a narrow screen).
    h("div", { class: "studio" },
      h("div", { class: "chat" }, conversation.el),
      h("section", { class: "canvas", "aria-labelledby": "artifacts-title" }, h("h2", { id: "artifacts-title" }, "Artifacts"), artifacts, previewEl)),
    critique,
    h("div", { class: "cols" },
      h("section", { "aria-labelledby": "stages-title" }, h("h2", { id: "stages-title" }, "Stages"), stagesEl),
      h("section", { "aria-labelledby": "agent-title" }, h("h2", { id: "agent-title" }, "Agent"), agentText, h("h3", {}, "Tool calls"), tools)),
    h("div", { class: "cols" },
      h("section", { "aria-labelledby": "prompts-title" }, h("h2", { id: "prompts-title" }, "Prompts"), prompts),
      h("section", { "aria-labelledby": "browser-title" }, h("h2", { id: "browser-title" }, "Browser session"),
        h("p", { class: "hint" }, "While this page is open, the run's agent can call: ", PAGE_TOOLS.map((t) => t.name).join(", "), "."),
        browserLog)),
    h("section", { "aria-labelledby": "timeline-title" }, h("h2", { id: "timeline-title" }, "Events"), timeline));

  function paint() {
    fill(status, badge(run.status));
    fill(info, facts([
      ["Plugin", run.pluginId || "—"],
      ["Project", h("a", { href: `#/projects/${enc(run.projectId)}` }, h("code", {}, run.projectId))],
      ["Conversation", h("code", {}, run.conversationId)],
      ["Snapshot", run.appliedPluginSnapshotId ? h("code", {}, run.appliedPluginSnapshotId) : "—"],
      ["Agent", run.agentNote ? h("span", { id: "agent-note" }, run.agentNote) : `${run.agent}${run.agentSource ? ` (${run.agentSource === "request" ? "chosen for this run" : `from ${run.agentSource}`})` : ""}`],
      ["Created", when(run.createdAt)], ["Ended", when(run.endedAt)],
      ["Reason", run.reason || ""],
    ]));
    const live = !TERMINAL.has(run.status);
    conversation.setLive(live);
    cancel.disabled = !live;
    breakLoop.disabled = !live;
  }
  paint();
  conversation.reload();

  async function refresh() {
    try {
      run = (await get(`/api/runs/${enc(runId)}`)).run;
      paint();
    } catch {
      /* the stream goes on; the next event refreshes again */
    }
  }

  async function act(button, work, done) {
    button.disabled = true;
    fill(out);
    try {
      await work();
      say(done);
    } catch (e) {
      fill(out, errorBox(e));
    } finally {
      button.disabled = TERMINAL.has(run.status);
    }
  }

  async function verifyReplay() {
    verify.disabled = true;
    fill(verifyOut);
    try {
      const r = await post(`/api/runs/${enc(runId)}/replay/verify`, {});
      const prompts = r.prompts || [];
      const differing = prompts.filter((p) => !p.identical);
      const ok = r.ok !== false && differing.length === 0;
      fill(verifyOut, h("div", { class: ok ? "panel" : "error", role: "status", id: "verify-result" },
        ok ? `Replay verified: ${prompts.length} prompt digests match (snapshot ${r.snapshotStatus || "?"}).`
          : `Replay differs from the log at ${differing.map((p) => `${p.stageId} #${p.iteration + 1}`).join(", ") || "the run"}.`,
        h("details", {}, h("summary", {}, "Details"), h("pre", {}, JSON.stringify(r, null, 2)))));
    } catch (e) {
      fill(verifyOut, errorBox(e));
    } finally {
      verify.disabled = false;
    }
  }

  // Stages from the snapshot (with their `until`), then live from the stream.
  function stageRow(id, until) {
    let row = stageRows.get(id);
    if (!row) {
      const state = h("span", { class: "badge" }, "pending");
      const untilEl = h("div", { class: "hint" });
      const iters = h("ul", { class: "iters" });
      const note = h("div", { class: "hint" });
      stagesEl.append(h("li", { "data-stage": id }, h("strong", {}, id), " ", state, untilEl, iters, note));
      row = { state, untilEl, iters, note, set: (s) => { state.textContent = s; state.className = `badge s-${s}`; } };
      stageRows.set(id, row);
    }
    if (until && !row.untilEl.textContent) fill(row.untilEl, "until ", h("code", {}, until));
    return row;
  }
  // The snapshot's stages first (in pipeline order, with their `until`), then the stream.
  if (run.appliedPluginSnapshotId) {
    try {
      const snap = (await get(`/api/applied-plugins/${enc(run.appliedPluginSnapshotId)}`)).snapshot || {};
      for (const st of (snap.pipeline && snap.pipeline.stages) || []) stageRow(st.id, st.until);
    } catch {
      /* a pruned snapshot: the stream still names every stage it runs */
    }
  }

  let showing = 0; // the latest showArtifact call: an earlier one still loading gives way to it
  async function showArtifact(a) {
    const mine = ++showing;
    fill(previewEl, h("p", {}, "Loading ", a.path, "…"));
    shown = null;
    try {
      const kind = a.renderKind || a.artifactKind;
      // Every file is read as this run recorded it, never as the project's folder holds it now.
      if (kind === "html") {
        const text = await runFileText(runId, a.path);
        // The frame is fully sandboxed: an opaque origin (no allow-same-origin), no scripts, forms,
        // popups or top navigation. Whatever the artifact holds (a link's `ping`, a form, a fetch)
        // leaves as another origin's request, which the daemon refuses: it cannot act as the
        // person. It shows the run's own address (`/preview/runs/…`, under the artifact CSP), so
        // the page's inline and linked styles, images and fonts apply as the designer made them.
        // The page cannot reach into the frame either: its tools read and mark an inert copy
        // (DOMParser runs and loads nothing), made when a tool first reads the page (the copy is
        // parsed under the app's CSP, which reports the inline styles it never applies), and a
        // mark is shown by rendering the copy anew.
        const { url } = await get(`/api/runs/${enc(runId)}/preview-url?path=${enc(a.path)}`);
        if (mine !== showing) return;
        const frame = h("iframe", { class: "preview", title: `Preview of ${a.path}`, sandbox: "", src: url });
        let copy = null;
        const inert = () => (copy ??= new DOMParser().parseFromString(text, "text/html"));
        const render = () => { frame.removeAttribute("src"); frame.srcdoc = `<!doctype html>${inert().documentElement.outerHTML}`; };
        frame.addEventListener("load", () => { shown = { path: a.path, get doc() { return inert(); }, isolated: true, render }; }, { once: true });
        fill(previewEl, h("h3", {}, a.title || a.path), frame);
        compareControl(a).then((c) => { if (c && frame.isConnected) previewEl.append(c); });
      } else if (kind === "image") {
        const url = URL.createObjectURL(await runFileBlob(runId, a.path));
        if (mine !== showing) return;
        fill(previewEl, h("h3", {}, a.title || a.path), h("img", { class: "preview", src: url, alt: a.title || a.path }));
      } else {
        const text = await runFileText(runId, a.path);
        if (mine !== showing) return;
        const pre = h("pre", { tabindex: "0", "aria-label": `Contents of ${a.path}` }, text);
        fill(previewEl, h("h3", {}, a.title || a.path), pre);
        shown = { path: a.path, doc: { body: pre, textContent: text, getSelection: () => document.getSelection() } };
      }
    } catch (e) {
      fill(previewEl, errorBox(e));
    }
  }

  // Versions by run: the same page as another run of this project recorded it, side by side with
  // this run's (each from its own run's preview address, never the project's current file).
  async function compareControl(a) {
    let others;
    try {
      const { artifacts: all } = await get(`/api/projects/${enc(run.projectId)}/artifacts?limit=500`);
      const byRun = new Map();
      for (const x of all || []) if (x.path === a.path && x.runId !== runId) byRun.set(x.runId, x);
      others = [...byRun.keys()].reverse();
    } catch {
      return null;
    }
    if (!others.length) return null;
    const pick = h("select", { id: "compare-run" }, others.map((r) => h("option", { value: r }, `run ${short(r)}`)));
    const view = h("div", { id: "compare-view" });
    const compare = async () => {
      try {
        const [mine, theirs] = await Promise.all([runId, pick.value].map((r) => get(`/api/runs/${enc(r)}/preview-url?path=${enc(a.path)}`)));
        const figure = (r, url, caption) => h("figure", {}, h("figcaption", {}, caption),
          h("iframe", { class: "preview", sandbox: "", src: url, title: `${a.path} as run ${short(r)} recorded it` }));
        fill(view, h("div", { class: "compare" }, figure(runId, mine.url, `This run (${short(runId)})`), figure(pick.value, theirs.url, `Run ${short(pick.value)}`)));
      } catch (e) {
        fill(view, errorBox(e));
      }
    };
    return h("div", { class: "field compare-pick" }, h("label", { for: "compare-run" }, `Compare ${a.path} with`), pick,
      h("div", { class: "actions" }, h("button", { type: "button", onclick: compare }, "Compare versions")), view);
  }

  const session = TERMINAL.has(run.status) ? null : browserSession(runId, {
    preview: () => shown,
    log: (text) => browserLog.append(h("li", {}, text)),
  });

  const cards = new Map();
  // The preview follows the page as the run rewrites it (each round's version, live), until the
  // person opens an artifact themselves. Replayed events of an ended run show only the last.
  let pinned = false;
  let followed = null; // the path the preview follows
  let latest = null;
  let scheduled = false;
  function follow(a) {
    if (pinned || (followed !== null && followed !== a.path)) return;
    followed = a.path;
    latest = a;
    if (scheduled) return;
    scheduled = true;
    setTimeout(() => { scheduled = false; if (!pinned) showArtifact(latest); }, 30);
  }

  function onEvent({ id, event, data }) {
    const d = data || {};
    timeline.append(h("li", { "data-seq": id, "data-event": event, class: event.startsWith("pipeline_stage") ? "stage" : event === "end" ? "end" : "" },
      h("span", { class: "seq" }, String(id)), h("span", { class: "ev" }, event), h("span", {}, summary(event, d))));
    switch (event) {
      case "pipeline_stage_started":
        stageRow(d.stageId).set("running");
        at = `${d.stageId}#${(d.iteration ?? 0) + 1}`;
        break;
      case "pipeline_stage_completed": {
        const r = stageRow(d.stageId);
        r.set("succeeded");
        if (d.diffSummary) r.note.textContent = d.diffSummary;
        break;
      }
      case "pipeline_stage_failed": stageRow(d.stageId).set("failed"); break;
      case "devloop_iteration": {
        const r = stageRow(d.stageId);
        const signals = Object.entries(d.signals || {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ");
        r.iters.append(h("li", { "data-iteration": d.iteration }, `iteration ${d.iteration}: ${signals || "no signals"}`,
          d.matched ? h("span", {}, ` · matched ${d.matched}`) : null,
          d.termination ? h("span", {}, ` · stopped: ${d.termination}`) : null));
        // Rounds of a loop with an `until` (a critique), not a single pass's signals.
        if (r.untilEl.textContent) {
          critique.hidden = false;
          const text = (said.get(`${d.stageId}#${d.iteration}`) || "").trim();
          rounds.append(h("tr", { "data-loop": d.stageId, "data-round": d.iteration },
            h("td", {}, d.stageId), h("td", {}, String(d.iteration)), h("td", {}, signals),
            h("td", {}, d.matched ? `met: ${d.matched}` : d.termination ? `stopped: ${d.termination}` : "not yet"),
            h("td", {}, text.length > 600 ? `${text.slice(0, 600)}…` : text || "—")));
        }
        break;
      }
      case "devloop_broken": stageRow(d.stageId).note.textContent = "loop broken by the user"; break;
      case "agent":
        if (d.type === "text_delta" || d.type === "text") {
          agentText.append(document.createTextNode(`${d.delta ?? d.text ?? ""}\n`));
          conversation.say(d.delta ?? d.text ?? "");
          said.set(at, `${said.get(at) || ""}${d.delta ?? d.text ?? ""}\n`);
        }
        else if (d.type === "tool_use") tools.append(h("li", {}, h("code", {}, d.name), " ", h("span", { class: "hint" }, JSON.stringify(d.input || {}))));
        else if (d.type === "tool_result") tools.append(h("li", {}, "↳ ", d.isError ? "error: " : "", typeof d.content === "string" ? d.content.slice(0, 400) : JSON.stringify(d.content).slice(0, 400)));
        break;
      case "prompt_composed":
        {
          const cut = (d.sections || []).filter((x) => x.status !== "included").map((x) => `${x.name} ${x.status}`);
          const tokens = d.budgetTokens ? `, ~${d.totalTokens} of ${d.budgetTokens} tokens` : "";
          prompts.append(h("li", {}, `${d.stageId} #${d.iteration + 1}: `, h("code", {}, d.digest), ` (${d.bytes} bytes${tokens})`,
            cut.length ? h("span", { class: "hint" }, ` trimmed for the budget: ${cut.join(", ")}`) : ""));
        }
        break;
      case "artifact": {
        const a = d;
        artifacts.append(h("li", {}, h("button", { type: "button", class: "linklike", onclick: () => { pinned = true; showArtifact(a); } }, a.title || a.path),
          " ", h("code", {}, a.path), " ", h("span", { class: "hint" }, a.renderKind || a.artifactKind || "")));
        if (a.renderKind === "html" || a.artifactKind === "html") follow(a);
        break;
      }
      case "genui_surface_request":
        if (!cards.has(d.surfaceId)) {
          cards.set(d.surfaceId, null);
          surfaceCard(runId, d.surfaceId, { spec: d.payload, onAnswered: refresh }).then((card) => {
            if (!cards.has(d.surfaceId)) return; // answered elsewhere meanwhile
            cards.set(d.surfaceId, card);
            waiting.append(card);
          }, (e) => waiting.append(errorBox(e)));
        }
        refresh();
        break;
      case "genui_surface_response": case "genui_surface_timeout": case "genui_surface_refused": case "genui_surface_invalidated": {
        const card = cards.get(d.surfaceId);
        if (card) card.remove();
        cards.delete(d.surfaceId);
        refresh();
        break;
      }
      case "start": case "run_responded": refresh(); break;
      case "conversation_message": conversation.reload(); break;
      case "end":
        run = { ...run, status: d.status || run.status, endedAt: d.endedAt || run.endedAt };
        paint();
        conversation.reload();
        refresh();
        if (session) session.close();
        break;
      default: break;
    }
    if (session && event.startsWith("browser_action")) session.handle({ event, data: d });
  }

  const follower = followRun(runId, {
    onEvent,
    onState: (s) => {
      // Counts the drops a person would notice (a live stream that stopped being live).
      if (conn.dataset.state === "live" && s !== "live" && s !== "ended") conn.dataset.drops = String(Number(conn.dataset.drops || 0) + 1);
      conn.textContent = s === "live" ? "live" : s === "ended" ? "ended" : `${s}…`;
      conn.dataset.state = s;
    },
  });
  return () => {
    follower.stop();
    if (session) session.close();
  };
}
