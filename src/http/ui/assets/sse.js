// Follows a run over the daemon's SSE route (`GET /api/runs/:id/events`). Each event carries the
// run's event id; the follower remembers the last one it delivered and, when the connection drops,
// reconnects with `?after=<last>` (the browser also sends `Last-Event-ID`), delivering only ids
// above it: no gap, no duplicate. It stops after `end`.

// Every named event a run stream carries (EventSource delivers named events only to listeners).
export const EVENT_NAMES = [
  "start", "agent", "iteration", "prompt_composed", "signal", "pipeline_stage_started",
  "pipeline_stage_completed", "pipeline_stage_failed", "devloop_iteration", "devloop_broken", "run_responded",
  "artifact", "end", "genui_surface_request", "genui_surface_response", "genui_surface_timeout",
  "genui_surface_refused", "genui_surface_invalidated", "browser_action_request", "browser_action_result",
  "stdout", "stderr", "conversation_message", "follow_up_planned", "substrate_staged", "run_forked",
];

export function followRun(runId, { onEvent, onState }) {
  let last = 0;
  let source = null;
  let stopped = false;
  let retryTimer = null;
  let attempts = 0;

  const state = (s) => onState && onState(s);

  const handle = (ev) => {
    const id = Number(ev.lastEventId);
    if (!Number.isFinite(id) || id <= last) return;
    last = id;
    let data = null;
    try {
      data = JSON.parse(ev.data);
    } catch {
      data = ev.data;
    }
    onEvent({ id, event: ev.type, data });
    if (ev.type === "end") stop("ended");
  };

  const connect = () => {
    if (stopped) return;
    const url = `/api/runs/${encodeURIComponent(runId)}/events${last ? `?after=${last}` : ""}`;
    source = new EventSource(url, { withCredentials: true });
    state(last ? "reconnecting" : "connecting");
    source.onopen = () => {
      attempts = 0;
      state("live");
    };
    source.onmessage = handle;
    for (const name of EVENT_NAMES) source.addEventListener(name, handle);
    source.onerror = () => {
      if (stopped) return;
      // While the stream is CONNECTING the browser retries by itself (with Last-Event-ID); a
      // CLOSED stream (an HTTP error, a 204 after the end) is retried here from the last id.
      if (source.readyState === EventSource.CLOSED) {
        source.close();
        state("disconnected");
        attempts += 1;
        retryTimer = setTimeout(connect, Math.min(500 * 2 ** Math.min(attempts, 4), 8000));
      } else {
        state("reconnecting");
      }
    };
  };

  function stop(why = "closed") {
    stopped = true;
    clearTimeout(retryTimer);
    if (source) source.close();
    state(why);
  }

  connect();
  return { stop, lastId: () => last };
}
