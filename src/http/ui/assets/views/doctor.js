// A doctor report (`GET /api/plugins/:id/doctor`): ok or each diagnostic with its severity.

import { h } from "../ui.js";

export function doctorReport(d) {
  const diags = d.diagnostics || [];
  return h("section", { class: "doctor", "aria-label": "Doctor" },
    h("h3", {}, "Doctor"),
    diags.length === 0
      ? h("p", { "data-doctor": "ok" }, d.ok ? "✓ No problems found." : "No diagnostics.")
      : h("ul", { "data-doctor": d.ok ? "ok" : "failed" }, diags.map((x) =>
          h("li", {}, h("strong", {}, `${x.severity || "info"} `), h("code", {}, x.code || ""), " ", x.message || ""))));
}
