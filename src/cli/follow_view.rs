//! The live progress view of a followed run on a terminal (`od run start --follow`, `od run watch`):
//! the current stage (n of m), its devloop iteration and the latest signals against the stage's
//! `until`, kept on a spinner line at the bottom; above it the agent's text as it streams, tool
//! calls one line each, artifacts written, questions asked; at the end a summary.
//!
//! [`ViewModel`] turns events into lines and the status line (pure, unit-tested); [`FollowView`]
//! draws them with `indicatif` on stdout.

use std::collections::BTreeMap;
use std::time::Duration;

use console::style;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

use super::s;
use crate::limits::{FOLLOW_LINE_CHARS, FOLLOW_TICK_MS};
use crate::plugins::until::{parse_until, CmpOp, Literal, UntilExpr};

/// A stage of the run's pipeline, as the snapshot declares it.
struct Stage {
    id: String,
    until: Option<(String, UntilExpr)>,
}

/// How a stage ended: its iterations and the devloop's termination.
struct Done {
    stage: String,
    iterations: u64,
    termination: String,
}

/// What the view knows of the run so far.
#[derive(Default)]
pub struct ViewModel {
    stages: Vec<Stage>,
    stage: Option<String>,
    iteration: u64,
    /// The latest value of each signal of the current stage.
    signals: BTreeMap<String, Value>,
    /// Agent text not yet ended by a newline.
    text: String,
    artifacts: Vec<String>,
    done: Vec<Done>,
}

fn op(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Eq => "=",
        CmpOp::Ne => "≠",
        CmpOp::Ge => "≥",
        CmpOp::Le => "≤",
        CmpOp::Gt => ">",
        CmpOp::Lt => "<",
    }
}

fn literal(l: &Literal) -> String {
    match l {
        Literal::Number(n) => Value::from(*n).to_string().trim_end_matches(".0").to_string(),
        Literal::Bool(b) => b.to_string(),
    }
}

/// `v` on one line, cut to `max` characters.
fn one_line(v: &str, max: usize) -> String {
    let flat: String = v.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    match flat.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl ViewModel {
    /// A model for a run whose snapshot declares `pipeline` (`{"stages": [...]}`; may be null).
    pub fn new(pipeline: &Value) -> Self {
        let stages = pipeline["stages"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|st| Stage {
                id: s(&st["id"]).to_string(),
                until: st["until"].as_str().and_then(|u| parse_until(u).ok().map(|e| (u.to_string(), e))),
            })
            .collect();
        Self { stages, ..Self::default() }
    }

    fn stage_index(&self, id: &str) -> Option<usize> {
        self.stages.iter().position(|st| st.id == id)
    }

    fn until(&self) -> Option<&(String, UntilExpr)> {
        let id = self.stage.as_deref()?;
        self.stages.iter().find(|st| st.id == id)?.until.as_ref()
    }

    /// The signals named by the stage's `until`, each against its condition
    /// (`critique.score 3 / until ≥ 4`); the bare expression while none arrived yet.
    fn progress(&self) -> Option<String> {
        let (source, expr) = self.until()?;
        let mut parts = Vec::new();
        for cmp in expr.any.iter().flatten() {
            if cmp.signal == "iterations" {
                continue;
            }
            if let Some(v) = self.signals.get(&cmp.signal) {
                parts.push(format!("{} {} / until {} {}", cmp.signal, compact(v), op(cmp.op), literal(&cmp.value)));
            }
        }
        if parts.is_empty() {
            Some(format!("until {source}"))
        } else {
            Some(parts.join(" · "))
        }
    }

    /// `stage 4/4 critique` (`stage critique` when the pipeline is unknown).
    fn stage_label(&self) -> String {
        let Some(stage) = self.stage.as_deref() else { return "starting".into() };
        match self.stage_index(stage) {
            Some(i) => format!("stage {}/{} {stage}", i + 1, self.stages.len()),
            None => format!("stage {stage}"),
        }
    }

    /// The status line: `stage 4/4 critique · iteration 2 · critique.score 3 / until ≥ 4`.
    pub fn status(&self) -> String {
        let mut out = self.stage_label();
        if self.stage.is_none() {
            return out;
        }
        if self.until().is_some() || self.iteration > 1 {
            out.push_str(&format!(" · iteration {}", self.iteration));
        }
        if let Some(p) = self.progress() {
            out.push_str(&format!(" · {p}"));
        }
        out
    }

    /// The agent text held back so far, as finished lines (all of it with `all`).
    fn text_lines(&mut self, all: bool) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(i) = self.text.find('\n') {
            let line: String = self.text.drain(..=i).collect();
            out.push(format!("  {}", cut(line.trim_end())));
        }
        if all && !self.text.trim().is_empty() {
            out.push(format!("  {}", cut(self.text.trim_end())));
            self.text.clear();
        }
        out
    }

    /// The lines an event prints above the status line.
    pub fn event(&mut self, name: &str, d: &Value) -> Vec<String> {
        if name == "agent" && d["type"] == "text_delta" {
            self.text.push_str(s(&d["delta"]));
            return self.text_lines(false);
        }
        let mut out = self.text_lines(true);
        match name {
            "pipeline_stage_started" => out.push(self.stage_started(d)),
            "artifact" => {
                let path = s(&d["path"]).to_string();
                out.push(row(style("+").green(), format!("{path} ({})", s(&d["artifactKind"]))));
                if !self.artifacts.contains(&path) {
                    self.artifacts.push(path);
                }
            }
            "signal" => out.push(self.signal(d)),
            "devloop_iteration" => out.extend(self.devloop_iteration(d)),
            _ => out.extend(note(name, d)),
        }
        out
    }

    /// A stage starts: its label (with its `until`) when it is a new stage, else its iteration.
    fn stage_started(&mut self, d: &Value) -> String {
        let stage = s(&d["stageId"]).to_string();
        self.iteration = d["iteration"].as_u64().unwrap_or(0) + 1;
        if self.stage.as_deref() == Some(&stage) {
            return format!("{} iteration {}", style("↻").cyan(), self.iteration);
        }
        self.signals.clear();
        self.stage = Some(stage);
        let mut head = self.stage_label();
        if let Some((u, _)) = self.until() {
            head = format!("{head} (until {u})");
        }
        format!("{} {}", style("▶").cyan(), cut(&head))
    }

    /// A signal: its value, and the `until` condition it is held against.
    fn signal(&mut self, d: &Value) -> String {
        let name = s(&d["name"]).to_string();
        self.signals.insert(name.clone(), d["value"].clone());
        let against = self
            .until()
            .into_iter()
            .flat_map(|(_, e)| e.any.iter().flatten())
            .find(|c| c.signal == name)
            .map(|c| format!(" / until {} {}", op(c.op), literal(&c.value)))
            .unwrap_or_default();
        row(style("·").cyan(), format!("{name} {}{against}", compact(&d["value"])))
    }

    /// A devloop iteration: again, met, or left its loop (a stage that ended is remembered for the
    /// summary).
    fn devloop_iteration(&mut self, d: &Value) -> Option<String> {
        let termination = s(&d["termination"]).to_string();
        let n = d["iteration"].as_u64().unwrap_or(0);
        let line = match termination.as_str() {
            "" => Some(row(style("·").cyan(), format!("iteration {n}: not yet, again"))),
            "no-loop" => None,
            "until-satisfied" => Some(row(style("✓").green(), format!("until met: {}", s(&d["matched"])))),
            other => Some(row(style("!").yellow(), format!("stage left its loop: {other}"))),
        };
        if !termination.is_empty() {
            self.done.push(Done { stage: s(&d["stageId"]).to_string(), iterations: n, termination });
        }
        line
    }

    /// The closing lines: status, duration, stages, artifacts.
    pub fn summary(&mut self, run_id: &str, end: &Value, duration_ms: Option<i64>) -> Vec<String> {
        let mut out = self.text_lines(true);
        let status = s(&end["status"]).to_string();
        let shown = match status.as_str() {
            "succeeded" => style(status.clone()).green().bold(),
            _ => style(status.clone()).red().bold(),
        };
        let took = match duration_ms {
            Some(ms) if ms < 1000 => format!(" in {ms} ms"),
            Some(ms) => format!(" in {:.1} s", ms as f64 / 1000.0),
            None => String::new(),
        };
        out.push(format!("run {} {shown}{took}", cut(run_id)));
        if let Some(cat) = end["failureCategory"].as_str() {
            out.push(cut(&format!("  {cat}: {}", s(&end["failureDetail"]))));
        }
        if !self.done.is_empty() {
            let stages: Vec<String> = self
                .done
                .iter()
                .map(|d| match d.termination.as_str() {
                    "no-loop" => d.stage.clone(),
                    t => format!("{} ({} iterations, {t})", d.stage, d.iterations),
                })
                .collect();
            out.push(cut(&format!("  stages: {}", stages.join(", "))));
        }
        let count = end["artifactCount"].as_u64().unwrap_or(self.artifacts.len() as u64);
        let names = if self.artifacts.is_empty() { String::new() } else { format!(": {}", self.artifacts.join(", ")) };
        out.push(cut(&format!("  artifacts ({count}){names}")));
        out
    }
}

/// The line of an event the view keeps no state for (tools, failures, the conversation, GenUI
/// surfaces), if it shows one.
fn note(name: &str, d: &Value) -> Option<String> {
    let (mark, text) = match name {
        "agent" => match d["type"].as_str() {
            Some("tool_use") => (style("⚙").yellow(), format!("{} {}", s(&d["name"]), compact(&d["input"]))),
            Some("tool_result") if d["isError"] == true => {
                (style("✗").red(), format!("tool failed: {}", compact(&d["content"])))
            }
            _ => return None,
        },
        "pipeline_stage_failed" => {
            (style("✗").red(), format!("stage {} failed: {} ({})", s(&d["stageId"]), s(&d["message"]), s(&d["action"])))
        }
        "devloop_broken" => (style("!").yellow(), format!("loop broken by {}", s(&d["requestedBy"]))),
        // The conversation: the user's message, the agent's reply (its text streamed above
        // already; this is the recorded reply), and a follow-up's plan.
        "conversation_message" => match s(&d["role"]) {
            "user" => (style("›").cyan(), format!("you: {}", s(&d["text"]))),
            _ => (style("‹").green(), format!("agent: {}", s(&d["text"]))),
        },
        "follow_up_planned" => {
            let stages: Vec<&str> = d["stages"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let on = d["buildsOn"].as_array().map_or(0, Vec::len);
            let text =
                format!("follow-up: runs {} ({}), builds on {on} earlier run(s)", stages.join(", "), s(&d["rule"]));
            (style("↪").cyan(), text)
        }
        // The question itself is printed once, by the prompt that asks it (or the exit-73 error).
        "genui_surface_request" => (style("?").magenta(), format!("{} waits for an answer", s(&d["surfaceId"]))),
        "genui_surface_response" => {
            (style("✓").green(), format!("{} answered ({})", s(&d["surfaceId"]), s(&d["respondedBy"])))
        }
        "genui_surface_timeout" => {
            (style("!").yellow(), format!("{} timed out: {}", s(&d["surfaceId"]), s(&d["resolution"])))
        }
        "genui_surface_refused" => (style("✗").red(), format!("{} refused: {}", s(&d["surfaceId"]), s(&d["reason"]))),
        _ => return None,
    };
    Some(row(mark, text))
}

/// `t` on one line without control characters (an agent's text cannot move the cursor), cut to
/// [`FOLLOW_LINE_CHARS`].
fn cut(t: &str) -> String {
    one_line(t, FOLLOW_LINE_CHARS)
}

/// An indented line: a styled mark, then `text` cut to one line.
fn row(mark: console::StyledObject<&str>, text: String) -> String {
    format!("  {mark} {}", cut(&text))
}

/// The view on the terminal: lines printed above a spinner that shows the status line.
pub struct FollowView {
    model: ViewModel,
    bar: ProgressBar,
}

impl FollowView {
    /// Starts the view on stdout with `header` (run, plugin, project) as its first line.
    pub fn start(pipeline: &Value, header: &str) -> Self {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stdout());
        bar.set_style(
            ProgressStyle::with_template("{spinner:.cyan} {wide_msg}").unwrap_or(ProgressStyle::default_spinner()),
        );
        let model = ViewModel::new(pipeline);
        bar.set_message(model.status());
        bar.println(header);
        bar.enable_steady_tick(Duration::from_millis(FOLLOW_TICK_MS));
        Self { model, bar }
    }

    /// Shows one event.
    pub fn event(&mut self, name: &str, data: &Value) {
        for l in self.model.event(name, data) {
            self.bar.println(l);
        }
        self.bar.set_message(self.model.status());
    }

    /// Runs `f` (a prompt) with the spinner out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Clears the spinner and prints the summary.
    pub fn finish(mut self, run_id: &str, end: &Value, duration_ms: Option<i64>) {
        self.bar.finish_and_clear();
        for l in self.model.summary(run_id, end, duration_ms) {
            if !super::paging::emit(&l) {
                break;
            }
        }
    }

    /// Clears the spinner (the follow stopped before the run ended).
    pub fn abandon(self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plain(lines: Vec<String>) -> Vec<String> {
        lines.into_iter().map(|l| console::strip_ansi_codes(&l).to_string()).collect()
    }

    fn pipeline() -> Value {
        json!({ "stages": [ { "id": "plan" },
            { "id": "critique", "repeat": true, "until": "critique.score>=4 || iterations>=3" } ] })
    }

    #[test]
    fn the_status_line_shows_stage_iteration_and_the_score_against_the_until() {
        let mut m = ViewModel::new(&pipeline());
        assert_eq!(m.status(), "starting");
        m.event("pipeline_stage_started", &json!({ "stageId": "plan", "iteration": 0 }));
        assert_eq!(m.status(), "stage 1/2 plan");
        let head = plain(m.event("pipeline_stage_started", &json!({ "stageId": "critique", "iteration": 0 })));
        assert_eq!(head, ["▶ stage 2/2 critique (until critique.score>=4 || iterations>=3)"]);
        assert_eq!(m.status(), "stage 2/2 critique · iteration 1 · until critique.score>=4 || iterations>=3");
        let sig = plain(m.event("signal", &json!({ "name": "critique.score", "value": 3.5 })));
        assert_eq!(sig, ["  · critique.score 3.5 / until ≥ 4"]);
        m.event("devloop_iteration", &json!({ "stageId": "critique", "iteration": 1, "termination": "" }));
        let again = plain(m.event("pipeline_stage_started", &json!({ "stageId": "critique", "iteration": 1 })));
        assert_eq!(again, ["↻ iteration 2"]);
        assert_eq!(m.status(), "stage 2/2 critique · iteration 2 · critique.score 3.5 / until ≥ 4");
    }

    #[test]
    fn text_streams_by_line_tools_take_one_line_and_the_summary_lists_stages_and_artifacts() {
        let mut m = ViewModel::new(&pipeline());
        m.event("pipeline_stage_started", &json!({ "stageId": "plan", "iteration": 0 }));
        assert!(m.event("agent", &json!({ "type": "text_delta", "delta": "Hello, " })).is_empty());
        assert_eq!(
            plain(m.event("agent", &json!({ "type": "text_delta", "delta": "world\nand " }))),
            ["  Hello, world"]
        );
        let tool = json!({ "type": "tool_use", "name": "Write", "input": { "path": "index.html", "content": "a\nb" } });
        let lines = plain(m.event("agent", &tool));
        assert_eq!(lines[0], "  and", "held text is flushed before the next line");
        assert_eq!(lines[1], r#"  ⚙ Write {"path":"index.html","content":"a\nb"}"#);
        m.event("artifact", &json!({ "path": "index.html", "artifactKind": "html" }));
        m.event("devloop_iteration", &json!({ "stageId": "plan", "iteration": 1, "termination": "no-loop" }));
        m.event(
            "devloop_iteration",
            &json!({ "stageId": "critique", "iteration": 3, "termination": "until-satisfied" }),
        );
        let end = json!({ "status": "succeeded", "artifactCount": 1 });
        let sum = plain(m.summary("r1", &end, Some(1500)));
        assert_eq!(
            sum,
            [
                "run r1 succeeded in 1.5 s",
                "  stages: plan, critique (3 iterations, until-satisfied)",
                "  artifacts (1): index.html"
            ]
        );
    }

    #[test]
    fn the_conversation_shows_the_users_message_the_plan_and_the_agents_reply() {
        let mut m = ViewModel::new(&pipeline());
        let user = plain(m.event("conversation_message", &json!({ "role": "user", "text": "make it blue" })));
        assert_eq!(user, ["  › you: make it blue"]);
        let plan = json!({ "stages": ["critique"], "rule": "last-stage", "buildsOn": ["r1"] });
        let plan = plain(m.event("follow_up_planned", &plan));
        assert_eq!(plan, ["  ↪ follow-up: runs critique (last-stage), builds on 1 earlier run(s)"]);
        let reply = plain(m.event("conversation_message", &json!({ "role": "agent", "text": "done:\nblue" })));
        assert_eq!(reply, ["  ‹ agent: done: blue"]);
    }

    #[test]
    fn long_lines_are_cut_to_one_line() {
        let long = "x".repeat(FOLLOW_LINE_CHARS + 10);
        let cut = one_line(&format!("a\n{long}"), FOLLOW_LINE_CHARS);
        assert_eq!(cut.chars().count(), FOLLOW_LINE_CHARS + 1);
        assert!(cut.starts_with("a x") && cut.ends_with('…'));
    }
}
