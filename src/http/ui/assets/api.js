// The one way the page talks to od: the daemon's JSON HTTP API (the same routes the CLI uses).
// Errors come back as od's envelope `{error: {code, message, data}}` and are thrown as ApiError.
// A 401 means a token is required and the cookie is missing or stale: the login page takes it.

export class ApiError extends Error {
  constructor(status, code, message, data) {
    super(message);
    this.status = status;
    this.code = code;
    this.data = data || null;
  }
}

function toLogin() {
  const next = encodeURIComponent(location.hash || "#/");
  location.assign(`/login?next=${next}`);
}

async function failure(res) {
  let body = null;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  const e = body && body.error;
  if (res.status === 401) toLogin();
  return new ApiError(res.status, e ? e.code : `http-${res.status}`, e ? e.message : res.statusText, e ? e.data : null);
}

/** `api("GET", "/api/plugins")` → the parsed JSON body; throws ApiError. */
export async function api(method, path, body) {
  const init = { method, headers: { accept: "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  if (!res.ok) throw await failure(res);
  if (res.status === 204) return null;
  const type = res.headers.get("content-type") || "";
  return type.includes("json") ? res.json() : res.text();
}

export const get = (path) => api("GET", path);
export const post = (path, body = {}) => api("POST", path, body);
export const del = (path) => api("DELETE", path);

/** A file's bytes as text (`GET /api/projects/:id/files/:path`). */
export async function fileText(projectId, path) {
  const res = await fetch(`/api/projects/${enc(projectId)}/files/${path.split("/").map(enc).join("/")}`, {
    credentials: "same-origin",
  });
  if (!res.ok) throw await failure(res);
  return res.text();
}

/** A file's bytes as a Blob (images). */
export async function fileBlob(projectId, path) {
  const res = await fetch(`/api/projects/${enc(projectId)}/files/${path.split("/").map(enc).join("/")}`, {
    credentials: "same-origin",
  });
  if (!res.ok) throw await failure(res);
  return res.blob();
}

/** A run's file as that run recorded it (`GET /api/runs/:id/files/:path`), as a Response. */
async function runFile(runId, path) {
  const res = await fetch(`/api/runs/${enc(runId)}/files/${path.split("/").map(enc).join("/")}`, {
    credentials: "same-origin",
  });
  if (!res.ok) throw await failure(res);
  return res;
}

/** A run's file as it recorded it, as text. */
export const runFileText = async (runId, path) => (await runFile(runId, path)).text();

/** A run's file as it recorded it, as a Blob (images). */
export const runFileBlob = async (runId, path) => (await runFile(runId, path)).blob();

/** POST a JSON body to a route that answers ND-JSON lines (`{event, data}`), each given to `onLine`. */
export async function ndjson(path, body, onLine) {
  const res = await fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/x-ndjson" },
    credentials: "same-origin",
    body: JSON.stringify(body),
  });
  if (!res.ok) throw await failure(res);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let last = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buf += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) {
        last = JSON.parse(line);
        onLine(last);
      }
    }
    if (done) break;
  }
  if (buf.trim()) {
    last = JSON.parse(buf);
    onLine(last);
  }
  return last;
}

export const enc = encodeURIComponent;
