// od's web UI: a hash router over the views. Each view is a module under views/ exporting
// `render(main, params)`, which may return a cleanup function (closing streams, ending a browser
// session) that runs when the person navigates away. Everything a view does goes through api.js.

import { h, fill, errorBox } from "./ui.js";
import { get, post } from "./api.js";
import { refreshInboxCount } from "./views/inbox.js";

const routes = [
  [/^#?\/?$/, () => import("./views/home.js"), "Home"],
  [/^#\/plugins$/, () => import("./views/plugins.js"), "Plugins"],
  [/^#\/plugins\/([^/]+)$/, () => import("./views/plugin.js"), "Plugin"],
  [/^#\/runs$/, () => import("./views/runs.js"), "Runs"],
  [/^#\/runs\/([^/]+)$/, () => import("./views/run.js"), "Run"],
  [/^#\/inbox$/, () => import("./views/inbox.js"), "Inbox"],
  [/^#\/projects$/, () => import("./views/projects.js"), "Projects"],
  [/^#\/projects\/([^/]+)$/, () => import("./views/project.js"), "Project"],
  [/^#\/marketplaces$/, () => import("./views/marketplaces.js"), "Marketplaces"],
  [/^#\/connectors$/, () => import("./views/connectors.js"), "Connectors"],
  [/^#\/tools$/, () => import("./views/tools.js"), "Tools"],
  [/^#\/log$/, () => import("./views/log.js"), "Log"],
];

let cleanup = null;
let generation = 0;

// Pages of one run or project take the short ids the CLI prints (`#/runs/6b794556`): a prefix is
// resolved to its full id (`GET /api/resolve/…`) and the address replaced, so links stay whole.
const SHORT_ID = [[/^#\/runs\/([^/]+)$/, "run", "#/runs/"], [/^#\/projects\/([^/]+)$/, "project", "#/projects/"]];
const FULL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The hash with a short id made whole, or null when it is whole already or resolves to nothing. */
async function wholeId(hash) {
  for (const [re, kind, base] of SHORT_ID) {
    const m = hash.match(re);
    if (!m) continue;
    const given = decodeURIComponent(m[1]);
    if (FULL_ID.test(given)) return null;
    try {
      const { id } = await get(`/api/resolve/${kind}/${encodeURIComponent(given)}`);
      return id && id !== given ? `${base}${encodeURIComponent(id)}` : null;
    } catch {
      return null; // unknown or ambiguous: the view shows the API's own error for it
    }
  }
  return null;
}

function markNav(hash) {
  for (const a of document.querySelectorAll("nav a")) {
    const target = a.getAttribute("href");
    const on = hash === target || hash.startsWith(`${target}/`);
    if (on) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

async function route() {
  const hash = location.hash || "#/";
  const gen = ++generation;
  if (cleanup) {
    try {
      cleanup();
    } catch {
      /* a view's cleanup never blocks navigation */
    }
    cleanup = null;
  }
  markNav(hash);
  const whole = await wholeId(hash);
  if (gen !== generation) return;
  if (whole) {
    location.replace(whole);
    return;
  }
  const main = document.getElementById("main");
  const found = routes.find(([re]) => re.test(hash));
  if (!found) {
    fill(main, h("h1", {}, "Not found"), h("p", {}, "No page at ", h("code", {}, hash), "."));
    return;
  }
  const [re, load, title] = found;
  const params = hash.match(re).slice(1).map(decodeURIComponent);
  document.title = `${title} · od`;
  try {
    const view = await load();
    if (gen !== generation) return;
    fill(main);
    const c = await view.render(main, params);
    if (gen !== generation) {
      if (typeof c === "function") c();
      return;
    }
    cleanup = typeof c === "function" ? c : null;
  } catch (e) {
    if (gen === generation) fill(main, h("h1", {}, title), errorBox(e));
  }
  if (gen === generation) {
    document.body.dataset.ready = "1";
    if (document.activeElement === document.body || !main.contains(document.activeElement)) main.focus();
  }
}

// The skip link moves focus to the content without touching the hash (the hash is the route).
document.querySelector("a.skip").addEventListener("click", (ev) => {
  ev.preventDefault();
  document.getElementById("main").focus();
});
// A daemon that requires a token: the session cookie can be dropped from here.
get("/api/auth/session").then((s) => {
  if (!s.tokenRequired || !s.authenticated) return;
  const out = h("button", { type: "button", class: "logout", onclick: async () => {
    await post("/api/auth/logout", {});
    location.assign("/login");
  } }, "Log out");
  document.querySelector("header.top").append(out);
}, () => {});
window.addEventListener("hashchange", route);
route();
refreshInboxCount();
setInterval(refreshInboxCount, 5000);
