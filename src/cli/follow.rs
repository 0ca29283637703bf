//! Following a run's event stream until it ends (`od run start --follow`, `od run watch`, and the
//! embedded `od run start` that stays until its run is over): resuming after a dropped connection,
//! showing the events (ND-JSON, the live view on a terminal, or nothing), and what happens when a
//! GenUI surface waits for an answer — ask it in the terminal, or exit 73 naming it at once.

use std::io::IsTerminal;

use serde_json::{json, Value};

use super::ask::{ask, Asked};
use super::conn::{path_segment, run_path, Conn};
use super::follow_view::FollowView;
use super::{s, CliError, CliResult};

/// How the events are shown.
pub enum Show {
    /// Not at all (the embedded `od run start` without `--follow`).
    Nothing,
    /// ND-JSON, one `{"event","data"}` per line (`--json`, or stdout not a terminal).
    Json,
    /// The live progress view.
    View(Box<FollowView>),
}

/// What to do when a surface waits for an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnWait {
    /// Exit 73 naming the surface (`--no-wait`, or no terminal to ask on).
    Exit73,
    /// Ask in the terminal.
    Ask,
}

/// `Ask` when stdin and stdout are terminals and `--no-wait` is not given; `Exit73` otherwise, so a
/// follow with nobody to answer never blocks silently.
pub fn on_wait(no_wait: bool) -> OnWait {
    match !no_wait && std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        true => OnWait::Ask,
        false => OnWait::Exit73,
    }
}

/// ND-JSON unless `json` is off and stdout is a terminal; then the live view (`None`: show nothing).
pub fn show_for(conn: &Conn, run_id: &str, json: bool, print: bool) -> Show {
    if !print {
        return Show::Nothing;
    }
    if json || !std::io::stdout().is_terminal() {
        return Show::Json;
    }
    let info = conn.get(&run_path(run_id, "")).unwrap_or(Value::Null);
    let run = &info["run"];
    let pipeline = match run["appliedPluginSnapshotId"].as_str() {
        Some(sid) => conn
            .get(&format!("/api/applied-plugins/{}", path_segment(sid)))
            .map(|v| v["snapshot"]["pipeline"].clone())
            .unwrap_or(Value::Null),
        None => Value::Null,
    };
    // The agent and why (a dry-run because nothing is configured says so).
    let agent = match run["agentNote"].as_str() {
        Some(note) => note.to_string(),
        None => format!("agent {} ({})", s(&run["agent"]), s(&run["agentSource"])),
    };
    let header = format!("run {run_id} · plugin {} · project {} · {agent}", s(&run["pluginId"]), s(&run["projectId"]));
    Show::View(Box::new(FollowView::start(&pipeline, &header)))
}

/// The exit-73 error naming a waiting surface (`row`: its surface row, `spec`: its spec).
fn awaiting_error(run_id: &str, row: &Value, spec: &Value) -> CliError {
    let sid = s(&row["surfaceId"]);
    let mut e = CliError::new(
        "genui-surface-awaiting",
        format!("run {run_id} waits for an answer to {sid}: `od ui respond {sid} --run {run_id} …`"),
    );
    e.data = json!({ "runId": run_id, "surfaceId": row["surfaceId"], "kind": row["kind"], "schema": spec["schema"],
        "prompt": spec["prompt"], "persist": row["persist"], "timeoutAt": row["timeoutAt"] });
    e
}

/// A request of a surface: its id and when it was asked (a surface can be asked again later).
fn request_key(row: &Value) -> String {
    format!("{}@{}", s(&row["surfaceId"]), row["requestedAt"])
}

/// The first surface of the run that waits for an answer, skipping the requests in `handled`,
/// with its spec; None unless the run really waits (a replayed request may have been answered
/// since). `handled` covers the read model's lag just after an answer is posted.
fn pending(conn: &Conn, run_id: &str, handled: &[String]) -> CliResult<Option<(Value, Value)>> {
    let info = conn.get(&run_path(run_id, ""))?;
    if info["run"]["status"] != "awaiting-input" {
        return Ok(None);
    }
    let rows = conn.get(&run_path(run_id, "/genui"))?;
    let row = rows["surfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["status"] == "pending" && !handled.contains(&request_key(r)))
        .cloned();
    let Some(row) = row else { return Ok(None) };
    let one = conn.get(&run_path(run_id, &format!("/genui/{}", path_segment(s(&row["surfaceId"])))))?;
    Ok(Some((row, one["spec"].clone())))
}

/// Answers (or names, per `on_wait`) every surface the run waits for now.
fn handle_waiting(conn: &Conn, run_id: &str, show: &Show, on_wait: OnWait, handled: &mut Vec<String>) -> CliResult<()> {
    while let Some((row, spec)) = pending(conn, run_id, handled)? {
        if on_wait == OnWait::Exit73 {
            return Err(awaiting_error(run_id, &row, &spec));
        }
        let sid = s(&row["surfaceId"]).to_string();
        super::interrupt::asking(run_id, &sid);
        let asked = match show {
            Show::View(v) => v.suspend(|| ask(conn, run_id, &sid, &spec))?,
            _ => ask(conn, run_id, &sid, &spec)?,
        };
        super::interrupt::following(run_id);
        match asked {
            Asked::Answered | Asked::Announced => handled.push(request_key(&row)),
            Asked::Declined => return Err(awaiting_error(run_id, &row, &spec)),
        }
    }
    Ok(())
}

/// Streams a run's events from after `after` and returns the `end` data.
pub fn follow(conn: &Conn, run_id: &str, after: Option<u64>, show: Show, on_wait: OnWait) -> CliResult<Value> {
    follow_with(conn, run_id, after, show, on_wait, false)
}

/// [`follow`]; with `derived`, the reference daemon's derived lines (`message_chunk`,
/// `genui_state_synced`, `critique.round_end`) are printed too.
pub fn follow_with(
    conn: &Conn,
    run_id: &str,
    after: Option<u64>,
    show: Show,
    on_wait: OnWait,
    derived: bool,
) -> CliResult<Value> {
    let mut st = Following { last: after, end: Value::Null, waiting: Vec::new(), handled: Vec::new(), stopped: None };
    let mut show = show;
    if matches!(show, Show::View(_)) {
        // On a terminal, Ctrl-C says where the run stands (`interrupt.rs`).
        super::interrupt::following(run_id);
        super::interrupt::install();
    }
    // A dropped connection resumes after the last event seen (`ids=true` gives each line its id;
    // the printed line stays exactly `{"event","data"}`).
    let mut attempts = 0;
    loop {
        let mut q = st.last.map(|a| format!("&after={a}")).unwrap_or_default();
        if derived {
            q.push_str("&derived=true");
        }
        let res = conn.lines(&run_path(run_id, &format!("/watch?ids=true{q}")), |line| {
            Ok(st.line(conn, run_id, &mut show, on_wait, line))
        });
        match res {
            Ok(()) if !st.end.is_null() || st.stopped.is_some() => break,
            Err(e) if e.code != "daemon-unreachable" => {
                st.stopped = Some(e);
                break;
            }
            _ if attempts < crate::limits::WATCH_RECONNECTS => attempts += 1,
            Ok(()) => break,
            Err(e) => {
                st.stopped = Some(e);
                break;
            }
        }
    }
    st.finish(conn, run_id, show)
}

/// What following a run has seen so far.
struct Following {
    /// The last event id seen (a reconnect resumes after it).
    last: Option<u64>,
    /// The `end` event's data, once seen.
    end: Value,
    /// Surfaces requested and not yet answered or timed out.
    waiting: Vec<Value>,
    /// The requests already asked or announced.
    handled: Vec<String>,
    /// Why following stopped before the end.
    stopped: Option<CliError>,
}

impl Following {
    /// One `/watch` line: shown, then remembered; false stops the stream (the end, a torn line,
    /// or a waiting surface that ends the command).
    fn line(&mut self, conn: &Conn, run_id: &str, show: &mut Show, on_wait: OnWait, line: &str) -> bool {
        let v: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        let Some(name) = v["event"].as_str() else {
            // A line torn by a dropped connection: nothing shown, resume after the last id.
            return false;
        };
        if let Some(id) = v["id"].as_u64() {
            self.last = Some(id);
        }
        match show {
            Show::Nothing => {}
            Show::Json => {
                // A reader that has gone (`| head`) ends the follow quietly.
                if !super::paging::emit(&json!({ "event": v["event"], "data": v["data"] }).to_string()) {
                    return false;
                }
            }
            Show::View(view) => view.event(name, &v["data"]),
        }
        match name {
            "end" => {
                self.end = v["data"].clone();
                return false;
            }
            "genui_surface_request" => self.waiting.push(v["data"].clone()),
            "genui_surface_response" | "genui_surface_timeout" => {
                self.waiting.retain(|w| w["surfaceId"] != v["data"]["surfaceId"]);
            }
            _ => {}
        }
        if !self.waiting.is_empty() {
            if let Err(e) = handle_waiting(conn, run_id, show, on_wait, &mut self.handled) {
                self.stopped = Some(e);
                return false;
            }
        }
        true
    }

    /// Closes the view (its summary when the run ended, else abandoned) and returns the end.
    fn finish(self, conn: &Conn, run_id: &str, show: Show) -> CliResult<Value> {
        if let Show::View(view) = show {
            match (&self.stopped, self.end.is_null()) {
                (None, false) => {
                    let took = conn
                        .get(&run_path(run_id, ""))
                        .ok()
                        .and_then(|i| Some(i["run"]["endedAt"].as_i64()? - i["run"]["startedAt"].as_i64()?));
                    view.finish(run_id, &self.end, took);
                }
                _ => view.abandon(),
            }
        }
        match self.stopped {
            Some(e) => Err(e),
            None => Ok(self.end),
        }
    }
}

/// A run's end as the command's result: `succeeded` is success, any other end `run-failed`
/// (with the end event as its data), a stream that ended first `daemon-unreachable`.
pub fn end_result(end: &Value) -> CliResult {
    match end["status"].as_str() {
        Some("succeeded") => Ok(()),
        Some(other) => {
            let mut e = CliError::new("run-failed", format!("the run ended {other}: {}", s(&end["failureDetail"])));
            e.data = end.clone();
            Err(e)
        }
        None => Err(CliError::new("daemon-unreachable", "the event stream ended before the run did")),
    }
}
