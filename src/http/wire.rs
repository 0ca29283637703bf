//! JSON wire shapes of stored events: one `{"event": <kind>, "data": {...}}` object per event, the
//! same line `od log tail` prints and the streaming routes send.

use od_events::{Event, Stored};
use serde_json::{json, Value};

/// The wire object for a stored event.
pub fn event_line(s: &Stored) -> Value {
    let payload = match serde_json::to_value(&s.event) {
        Ok(Value::Object(mut m)) => m.remove("data").unwrap_or(Value::Null),
        _ => Value::Null,
    };
    let mut data = json!({
        "seq": s.envelope.seq,
        "stream": s.envelope.stream,
        "version": s.envelope.version,
        "recordedAt": s.envelope.recorded_at,
        "storedSchema": s.envelope.stored_schema,
        "payload": payload,
    });
    if let Some(op) = &s.envelope.op_id {
        data["opId"] = json!(op);
    }
    json!({ "event": kind_name(&s.event), "data": data })
}

fn kind_name(e: &Event) -> &'static str {
    e.kind().name()
}
