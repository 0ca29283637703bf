// The log and the daemon: health, status, log statistics and the last verification, with a
// "Verify now" action (`GET /api/log/verify` reads the whole chain).

import { get } from "../api.js";
import { h, fill, facts, badge, when, errorBox } from "../ui.js";

export async function render(main) {
  const health = h("div", {});
  const stats = h("div", {});
  const verifyOut = h("div", { "aria-live": "polite" });
  const lastEl = h("div", { id: "last-verification" });
  const verify = h("button", { type: "button", onclick: runVerify }, "Verify the log now");
  fill(main, h("h1", {}, "Log and health"),
    h("section", { "aria-labelledby": "health-title" }, h("h2", { id: "health-title" }, "Daemon"), health),
    h("section", { "aria-labelledby": "stats-title" }, h("h2", { id: "stats-title" }, "Log"), stats),
    h("section", { "aria-labelledby": "verify-title" }, h("h2", { id: "verify-title" }, "Verification"),
      h("h3", {}, "Last verification"), lastEl, h("div", { class: "actions" }, verify), verifyOut));

  async function runVerify() {
    verify.disabled = true;
    fill(verifyOut, h("p", {}, "Verifying…"));
    try {
      const r = await get("/api/log/verify");
      const ok = r.firstBad === null || r.firstBad === undefined;
      fill(verifyOut, h("div", { class: ok ? "panel" : "error", role: "status", id: "verify-result" },
        ok ? `Chain intact: ${r.verified} events verified, head ${String(r.headHash).slice(0, 16)}.` : `The chain breaks at seq ${r.firstBad}.`,
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
    const st2 = ls.stats || {};
    fill(stats, facts([
      ["Events", String(st2.events ?? "")], ["Last seq", String(ls.lastSeq ?? st2.lastSeq ?? "")],
      ["Streams", String(st2.streams ?? "")], ["Daemon starts", String(st2.daemonStarts ?? "")],
      ["First event", when(st2.firstRecordedAt)], ["Last event", when(st2.lastRecordedAt)],
      ["On disk", ls.diskBytes !== undefined ? `${(ls.diskBytes / 1048576).toFixed(1)} MiB` : ""],
      ["Data dir", ls.dataDir || ""],
    ]),
    st2.byKind ? h("details", {}, h("summary", {}, "Events by kind"),
      h("ul", {}, Object.entries(st2.byKind).map(([k, n]) => h("li", {}, h("code", {}, k), ` ${n}`)))) : null);
  }
  // The last whole-log verification the daemon ran (in the background at start, or asked for).
  const last = hh.error ? null : hh.log;
  fill(lastEl, last
    ? facts([["Began", when(last.startedAt)], ["Result", badge(last.firstBad === undefined || last.firstBad === null ? "ok" : "failed")],
      ["Verified", `${last.verified ?? ""} events, through seq ${last.throughSeq ?? ""}`],
      ["First bad frame", last.firstBad !== undefined && last.firstBad !== null ? String(last.firstBad) : ""]])
    : h("p", { class: "empty" }, hh.logPass ? `A verification is running (through seq ${hh.logPass.throughSeq}).` : "The log has not been verified yet."));
}
