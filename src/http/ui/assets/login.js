// The login page: sends the token to POST /api/auth/login (which keeps it in an HttpOnly cookie),
// then opens the app. If this browser is already logged in, or the daemon needs no token, it goes
// straight to the app.

const form = document.getElementById("login");
const field = document.getElementById("token");
const error = document.getElementById("token-error");
const button = form.querySelector("button");
// Where to go after logging in: the app's page the person was sent here from (a hash route
// only, never another URL: `?next=` is attacker-controlled).
const next = new URLSearchParams(location.search).get("next") || "";
const target = /^#\/[A-Za-z0-9_\-\/%.]*$/.test(next) ? `/${next}` : "/";

function showError(text) {
  error.textContent = text;
  error.hidden = false;
  field.setAttribute("aria-invalid", "true");
  field.focus();
}

function clearError() {
  error.textContent = "";
  error.hidden = true;
  field.removeAttribute("aria-invalid");
}

async function alreadyIn() {
  try {
    const r = await fetch("/api/auth/session", { credentials: "same-origin" });
    if (!r.ok) return false;
    const s = await r.json();
    return s.authenticated || !s.tokenRequired;
  } catch {
    return false;
  }
}

async function logIn(event) {
  event.preventDefault();
  clearError();
  const token = field.value.trim();
  if (!token) {
    showError("Enter the token.");
    return;
  }
  button.disabled = true;
  try {
    const r = await fetch("/api/auth/login", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token }),
      credentials: "same-origin",
    });
    if (r.ok) {
      location.replace(target);
      return;
    }
    let message = `The daemon refused the token (HTTP ${r.status}).`;
    try {
      const body = await r.json();
      if (body && body.error && body.error.message) message = body.error.message;
    } catch {
      // Not the JSON envelope: keep the status line.
    }
    showError(message);
  } catch (e) {
    showError(`The daemon did not answer: ${e.message}`);
  } finally {
    button.disabled = false;
  }
}

form.addEventListener("submit", logIn);
if (await alreadyIn()) {
  location.replace(target);
} else {
  document.body.dataset.ready = "1";
}
