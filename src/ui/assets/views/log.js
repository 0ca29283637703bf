// The log and the daemon: health, status, log statistics and the last verification, with a
// "Verify now" action (`GET /api/log/verify` reads the whole chain).

import { get } from "../api.js";
import { h, fill, facts, badge, when, errorBox, duration } from "../ui.js";

export async function render(main) {
  const health = h("div", {});
  const stats = h("div", {});
  const verifyOut = h("div", { "aria-live": "polite" });
  const verify = h("button", { type: "button", onclick: runVerify }, "Verify the log now");
  fill(main, h("h1", {}, "Log and health"),
    h("section", { "aria-labelledby": "health-title" }, h("h2", { id: "health-title" }, "Daemon"), health),
    h("section", { "aria-labelledby": "stats-title" }, h("h2", { id: "stats-title" }, "Log"), stats),
    h("section", { "aria-labelledby": "verify-title" }, h("h2", { id: "verify-title" }, "Verification"), h("div", { class: "actions" }, verify), verifyOut));

  async function runVerify() {
    verify.disabled = true;
    fill(verifyOut, h("p", {}, "Verifying…"));
    try {
      const r = await get("/api/log/verify");
      fill(verifyOut, h("div", { class: r.ok ? "panel" : "error", role: "status" },
        r.ok ? `Chain intact: ${r.events ?? r.checked ?? r.lastSeq ?? ""} events verified.` : "The chain is broken.",
        h("details", {}, h("summary", {}, "Details"), h("pre", {}, JSON.stringify(r, null, 2)))));
    } catch (e) {
      fill(verifyOut, errorBox(e));
    } finally {
      verify.disabled = false;
    }
  }

  const [hh, st, ls] = await Promise.all([
    get("/api/health").catch((e) => ({ error: e })),
    get("/api/daemon/status").catch((e) => ({ error: e })),
    get("/api/log/stats").catch((e) => ({ error: e })),
  ]);
  fill(health, hh.error ? errorBox(hh.error) : facts([
    ["Health", badge(hh.status || (hh.ok ? "ok" : "error"))],
    ["Store", hh.store ? badge(hh.store.state) : ""],
    ["Last seq", String(hh.lastSeq ?? "")],
    ["Pid", String(st.pid ?? "")], ["Listening", st.listen || st.url || ""],
    ["Started", when(st.startedAt)], ["Version", st.version || ""],
  ]));
  if (ls.error) fill(stats, errorBox(ls.error));
  else {
    const last = ls.lastVerification || ls.lastVerified || null;
    const pairs = Object.entries(ls).filter(([k, v]) => typeof v !== "object" && k !== "lastVerification").map(([k, v]) => [k, String(v)]);
    fill(stats, facts(pairs),
      h("h3", {}, "Last verification"),
      last ? facts([["When", when(last.at || last.verifiedAt)], ["Result", badge(last.ok ? "ok" : "failed")],
        ["Events", String(last.events ?? last.lastSeq ?? "")], ["Took", duration(last.tookMs ?? last.durationMs)]])
        : h("p", { class: "empty" }, "The log has not been verified yet."));
  }
}
