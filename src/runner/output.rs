//! Bounding what one agent invocation records. [`fit`] shapes every event to fit one stored event
//! (long text split into pieces, an oversized structured payload cut down with a `truncated` note,
//! over-long names refused with a status); an [`OutputBudget`] caps the recorded bytes and events
//! of one invocation — past the cap output is dropped and counted, announced once when the cap is
//! hit (`output-limit-reached`) and summed up when the invocation ends (`output-truncated`, with
//! `droppedBytes` and `droppedEvents`). Pure apart from reading the environment's defaults.

use serde_json::{json, Map, Value};

use super::agent::{AgentEvent, ArtifactDraft};
use crate::limits::{
    AGENT_EVENT_PAYLOAD_BYTES, AGENT_OUTPUT_MAX_BYTES_CAP, AGENT_OUTPUT_MAX_EVENTS_CAP, MAX_AGENT_NAME_BYTES,
};

/// Bytes of a cut field's value kept as a preview.
const PREVIEW_BYTES: usize = 4096;
/// Room kept for the `truncated` note a cut payload gets.
const NOTE_ROOM: usize = 2048;

pub use crate::agents::options::OutputLimits;

impl OutputLimits {
    /// The defaults as the environment sets them (`OD_AGENT_OUTPUT_MAX_BYTES`,
    /// `OD_AGENT_OUTPUT_MAX_EVENTS`: positive integers, clamped to the caps; anything else is ignored).
    pub fn from_env() -> OutputLimits {
        let var = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok()).filter(|n| *n > 0);
        let d = OutputLimits::default();
        OutputLimits {
            max_bytes: var("OD_AGENT_OUTPUT_MAX_BYTES").unwrap_or(d.max_bytes).min(AGENT_OUTPUT_MAX_BYTES_CAP),
            max_events: var("OD_AGENT_OUTPUT_MAX_EVENTS").unwrap_or(d.max_events).min(AGENT_OUTPUT_MAX_EVENTS_CAP),
        }
    }
}

/// A status the agent did not send but the runner records about its output.
pub fn status(label: &str, detail: Value) -> AgentEvent {
    AgentEvent::Output {
        channel: "agent".into(),
        payload: json!({ "type": "status", "label": label, "detail": detail }),
    }
}

/// Length of `c` inside a JSON string, as serde_json writes it.
fn json_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// `s` cut into pieces whose JSON-escaped length is at most `budget`.
fn split_text(s: &str, budget: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut len) = (0, 0);
    for (i, c) in s.char_indices() {
        let l = json_len(c);
        if len + l > budget && i > start {
            out.push(&s[start..i]);
            (start, len) = (i, 0);
        }
        len += l;
    }
    if start < s.len() || out.is_empty() {
        out.push(&s[start..]);
    }
    out
}

/// The field of an output payload that holds free text (split rather than cut when too long).
fn text_field(channel: &str, payload: &Value) -> Option<&'static str> {
    let field = match (channel, payload["type"].as_str()) {
        ("stdout" | "stderr", _) => "chunk",
        (_, Some("text_delta" | "thinking_delta")) => "delta",
        (_, Some("raw")) => "line",
        _ => return None,
    };
    payload[field].is_string().then_some(field)
}

/// Cuts the biggest fields of an oversized object to previews until it fits, listing what was cut
/// under `truncated`; anything that still does not fit becomes a status saying so.
fn shrink(payload: Value, size: usize) -> Value {
    let kind = payload["type"].clone();
    let too_big = || {
        json!({ "type": "status", "label": "output-truncated",
        "detail": { "payloadType": kind, "droppedBytes": size, "reason": "one output item was larger than an event" } })
    };
    let Value::Object(mut map) = payload else { return too_big() };
    let mut sizes: Vec<(String, usize)> = map.iter().map(|(k, v)| (k.clone(), v.to_string().len())).collect();
    sizes.sort_by_key(|s| std::cmp::Reverse(s.1));
    let mut total = size;
    let mut cut = Vec::new();
    for (key, len) in sizes {
        if total + NOTE_ROOM <= AGENT_EVENT_PAYLOAD_BYTES || len <= PREVIEW_BYTES {
            break;
        }
        let text = match map.remove(&key) {
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
            None => continue,
        };
        let preview = Value::String(split_text(&text, PREVIEW_BYTES)[0].to_string());
        total = total - len + preview.to_string().len();
        cut.push(json!({ "field": key, "bytes": text.len() }));
        map.insert(key, preview);
    }
    map.insert("truncated".into(), Value::Array(cut));
    let v = Value::Object(map);
    if v.to_string().len() > AGENT_EVENT_PAYLOAD_BYTES {
        return too_big();
    }
    v
}

fn fit_output(channel: String, mut payload: Value) -> Vec<AgentEvent> {
    let size = payload.to_string().len();
    if size <= AGENT_EVENT_PAYLOAD_BYTES {
        return vec![AgentEvent::Output { channel, payload }];
    }
    if let Some(field) = text_field(&channel, &payload) {
        let text = payload[field].take();
        payload[field] = json!("");
        let overhead = payload.to_string().len();
        if overhead + 64 <= AGENT_EVENT_PAYLOAD_BYTES {
            let text = text.as_str().unwrap_or("");
            return split_text(text, AGENT_EVENT_PAYLOAD_BYTES - overhead)
                .into_iter()
                .map(|piece| {
                    let mut p = payload.clone();
                    p[field] = json!(piece);
                    AgentEvent::Output { channel: channel.clone(), payload: p }
                })
                .collect();
        }
        payload[field] = text;
    }
    vec![AgentEvent::Output { channel, payload: shrink(payload, size) }]
}

fn draft_bytes(d: &ArtifactDraft) -> usize {
    [&d.path, &d.title, &d.artifact_kind, &d.render_kind, &d.handoff_kind, &d.parent_artifact_id]
        .iter()
        .map(|s| s.len())
        .sum::<usize>()
        + d.export_targets.iter().map(|t| t.len() + 3).sum::<usize>()
}

fn rejected(label: &str, what: &str, bytes: usize, limit: usize) -> AgentEvent {
    status(label, json!(format!("{what} of {bytes} bytes is over the {limit}-byte limit; not recorded")))
}

/// `ev` shaped to fit stored events: output split or cut, an over-long name or artifact refused.
pub fn fit(ev: AgentEvent) -> Vec<AgentEvent> {
    match ev {
        AgentEvent::Output { channel, payload } => fit_output(channel, payload),
        AgentEvent::Signal { name, .. } if name.len() > MAX_AGENT_NAME_BYTES => {
            vec![rejected("signal-rejected", "a signal name", name.len(), MAX_AGENT_NAME_BYTES)]
        }
        AgentEvent::SurfaceRequest { surface_id, kind, atom, .. }
            if [Some(&surface_id), kind.as_ref(), atom.as_ref()]
                .into_iter()
                .flatten()
                .any(|s| s.len() > MAX_AGENT_NAME_BYTES) =>
        {
            let n = surface_id.len().max(kind.map_or(0, |k| k.len())).max(atom.map_or(0, |a| a.len()));
            vec![rejected("surface-request-rejected", "a surface request field", n, MAX_AGENT_NAME_BYTES)]
        }
        AgentEvent::SurfaceRequest { options: Some(o), .. } if o.to_string().len() > AGENT_EVENT_PAYLOAD_BYTES / 2 => {
            let n = o.to_string().len();
            vec![rejected("surface-request-rejected", "a surface request's options", n, AGENT_EVENT_PAYLOAD_BYTES / 2)]
        }
        AgentEvent::Artifact(d) if draft_bytes(&d) > AGENT_EVENT_PAYLOAD_BYTES / 2 => {
            vec![rejected("artifact-rejected", "an artifact report", draft_bytes(&d), AGENT_EVENT_PAYLOAD_BYTES / 2)]
        }
        other => vec![other],
    }
}

/// Counts what one invocation records against its [`OutputLimits`].
#[derive(Debug)]
pub struct OutputBudget {
    limits: OutputLimits,
    bytes: u64,
    events: u64,
    dropped_bytes: u64,
    dropped_events: u64,
}

impl OutputBudget {
    pub fn new(limits: OutputLimits) -> OutputBudget {
        OutputBudget { limits, bytes: 0, events: 0, dropped_bytes: 0, dropped_events: 0 }
    }

    fn limits_json(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("limitBytes".into(), json!(self.limits.max_bytes));
        m.insert("limitEvents".into(), json!(self.limits.max_events));
        m
    }

    /// The pieces of `ev` (see [`fit`]) the budget still admits, plus the `output-limit-reached`
    /// status the first time something is dropped. Markers are not counted.
    pub fn admit(&mut self, ev: AgentEvent) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        for piece in fit(ev) {
            let size = match &piece {
                AgentEvent::Output { payload, .. } => payload.to_string().len() as u64,
                _ => 0,
            };
            let over_bytes = matches!(piece, AgentEvent::Output { .. }) && self.bytes + size > self.limits.max_bytes;
            if self.events >= self.limits.max_events || over_bytes {
                if self.dropped_events == 0 {
                    let mut detail = self.limits_json();
                    detail.insert("note".into(), json!("further output of this invocation is dropped"));
                    out.push(status("output-limit-reached", Value::Object(detail)));
                }
                self.dropped_events += 1;
                self.dropped_bytes += size;
                continue;
            }
            self.events += 1;
            self.bytes += size;
            out.push(piece);
        }
        out
    }

    /// The closing `output-truncated` status, when anything was dropped.
    pub fn finish(&self) -> Option<AgentEvent> {
        if self.dropped_events == 0 {
            return None;
        }
        let mut detail = self.limits_json();
        detail.insert("droppedBytes".into(), json!(self.dropped_bytes));
        detail.insert("droppedEvents".into(), json!(self.dropped_events));
        Some(status("output-truncated", Value::Object(detail)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload_len(e: &AgentEvent) -> usize {
        match e {
            AgentEvent::Output { payload, .. } => payload.to_string().len(),
            _ => 0,
        }
    }

    #[test]
    fn long_text_is_split_into_pieces_that_fit_and_join_back() {
        let text: String = "a\"\\\u{1}é\n".repeat(40_000);
        let ev = AgentEvent::Output { channel: "agent".into(), payload: json!({"type": "text_delta", "delta": text}) };
        let pieces = fit(ev);
        assert!(pieces.len() > 1);
        assert!(pieces.iter().all(|p| payload_len(p) <= AGENT_EVENT_PAYLOAD_BYTES));
        let joined: String = pieces
            .iter()
            .map(|p| match p {
                AgentEvent::Output { payload, .. } => payload["delta"].as_str().unwrap().to_string(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(joined, text);
    }

    #[test]
    fn an_oversized_structured_payload_is_cut_and_says_so() {
        let big = "x".repeat(200_000);
        let ev = AgentEvent::Output {
            channel: "agent".into(),
            payload: json!({"type": "tool_result", "toolUseId": "t1", "content": big, "isError": false}),
        };
        let [AgentEvent::Output { payload, .. }] = &fit(ev)[..] else { panic!("one event") };
        assert!(payload.to_string().len() <= AGENT_EVENT_PAYLOAD_BYTES);
        assert_eq!((payload["type"].as_str(), payload["toolUseId"].as_str()), (Some("tool_result"), Some("t1")));
        assert_eq!(payload["truncated"], json!([{ "field": "content", "bytes": 200_000 }]));
        // Many big fields: still one storable event, a status naming what it was.
        let mut many = Map::new();
        many.insert("type".into(), json!("tool_use"));
        for i in 0..40 {
            many.insert(format!("f{i}"), json!("y".repeat(5000)));
        }
        let ev = AgentEvent::Output { channel: "agent".into(), payload: Value::Object(many) };
        let [AgentEvent::Output { payload, .. }] = &fit(ev)[..] else { panic!("one event") };
        assert_eq!(
            (payload["label"].as_str(), payload["detail"]["payloadType"].as_str()),
            (Some("output-truncated"), Some("tool_use"))
        );
    }

    #[test]
    fn the_budget_drops_past_its_limits_and_counts_what_it_dropped() {
        let mut b = OutputBudget::new(OutputLimits { max_bytes: 1_000_000, max_events: 3 });
        let line =
            |i: u32| AgentEvent::Output { channel: "stdout".into(), payload: json!({"chunk": format!("line {i}")}) };
        let mut kept = Vec::new();
        for i in 0..10 {
            kept.extend(b.admit(line(i)));
        }
        assert_eq!(kept.len(), 4, "three lines and the limit marker");
        assert!(matches!(&kept[3], AgentEvent::Output { payload, .. } if payload["label"] == "output-limit-reached"));
        let Some(AgentEvent::Output { payload, .. }) = b.finish() else { panic!("a closing marker") };
        assert_eq!(payload["detail"]["droppedEvents"], 7);
        assert_eq!(payload["detail"]["droppedBytes"], 7 * json!({"chunk": "line 0"}).to_string().len());
        let mut bytes = OutputBudget::new(OutputLimits { max_bytes: 20, max_events: 100 });
        assert_eq!(bytes.admit(line(1)).len(), 1);
        assert_eq!(bytes.admit(line(2)).len(), 1, "only the marker");
        assert!(
            bytes
                .admit(AgentEvent::Signal { name: "s".into(), value: json!(1) })
                .iter()
                .any(|e| matches!(e, AgentEvent::Signal { .. })),
            "a signal still counts only as an event"
        );
        assert!(OutputBudget::new(OutputLimits::default()).finish().is_none());
    }

    #[test]
    fn names_over_the_limit_are_refused() {
        let long = "n".repeat(MAX_AGENT_NAME_BYTES + 1);
        let [AgentEvent::Output { payload, .. }] = &fit(AgentEvent::Signal { name: long, value: json!(1) })[..] else {
            panic!()
        };
        assert_eq!(payload["label"], "signal-rejected");
    }
}
