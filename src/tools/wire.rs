//! Wire shapes of agent tools: the contract's `BrowserActionRequest` / `BrowserActionResult`
//! (with od's extra fields: session, view, times, who resolved it), as `od run watch` and SSE carry
//! them (`browser_action_request` / `browser_action_result`) and as a tool call returns them.

use od_events::tools::{BrowserActionRequested, BrowserActionResulted};
use od_projections::Invocation;
use serde_json::{json, Value};

use super::PROTOCOL_VERSION;

fn parsed(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or(Value::Null)
}

/// The contract's error codes of a browser action.
pub const ERROR_CODES: &[&str] =
    &["TOOL_NOT_AVAILABLE", "INVALID_INPUT", "EXECUTION_FAILED", "TIMEOUT", "SUPERSEDED", "USER_DENIED"];

/// `BrowserActionRequest` of a recorded request.
pub fn request_json(e: &BrowserActionRequested) -> Value {
    json!({ "protocolVersion": PROTOCOL_VERSION, "invocationId": e.invocation_id, "runId": e.run_id, "tool": e.tool,
            "input": parsed(&e.input_json), "sessionId": e.session_id, "view": e.view,
            "requestedAt": e.requested_at, "timeoutAt": e.timeout_at })
}

/// `BrowserActionResult` of a recorded result.
pub fn result_json(e: &BrowserActionResulted) -> Value {
    let mut v = json!({ "protocolVersion": PROTOCOL_VERSION, "invocationId": e.invocation_id, "runId": e.run_id,
                        "tool": e.tool, "ok": e.ok, "resolvedBy": e.resolved_by, "resultedAt": e.resulted_at });
    if e.ok {
        v["result"] = parsed(&e.result_json);
    } else {
        let mut err = json!({ "code": e.error_code, "message": e.error_message });
        if !e.error_details_json.is_empty() {
            err["details"] = parsed(&e.error_details_json);
        }
        v["error"] = err;
    }
    if !e.superseded_by.is_empty() {
        v["supersededBy"] = json!(e.superseded_by);
    }
    v
}

/// A failed `BrowserActionResult` that was never recorded (refused before dispatch).
pub fn refused(invocation_id: &str, run_id: &str, tool: &str, code: &str, message: &str, details: Value) -> Value {
    let mut err = json!({ "code": code, "message": message });
    if !details.is_null() {
        err["details"] = details;
    }
    json!({ "protocolVersion": PROTOCOL_VERSION, "invocationId": invocation_id, "runId": run_id, "tool": tool,
            "ok": false, "error": err, "resolvedBy": "daemon", "recorded": false })
}

/// One invocation row (`GET /api/runs/:id/actions`).
pub fn invocation_json(i: &Invocation) -> Value {
    json!({ "invocationId": i.invocation_id, "runId": i.run_id, "sessionId": i.session_id, "tool": i.tool,
            "view": i.view, "input": parsed(&i.input_json), "status": i.status,
            "errorCode": if i.error_code.is_empty() { Value::Null } else { json!(i.error_code) },
            "resolvedBy": if i.resolved_by.is_empty() { Value::Null } else { json!(i.resolved_by) },
            "requestedAt": i.requested_at, "timeoutAt": i.timeout_at, "resultedAt": i.resulted_at })
}
