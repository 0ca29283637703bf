//! The `open-design.json` sidecar: parsing it into the first (winning) manifest layer. Syntax
//! only; its content is checked on the merged manifest by `schema` and `rules`.

use serde_json::Value;

use super::{Diagnostic, SIDECAR};

/// Parses the sidecar; `None` (with an error diagnostic) when it is not a JSON object.
pub(super) fn parse(bytes: &[u8], diags: &mut Vec<Diagnostic>) -> Option<Value> {
    let bytes = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes);
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value @ Value::Object(_)) => Some(value),
        Ok(other) => {
            let msg = format!("{SIDECAR} must hold a JSON object, found {}", kind(&other));
            diags.push(Diagnostic::error("manifest-not-object", SIDECAR, msg));
            None
        }
        Err(e) => {
            diags.push(Diagnostic::error("manifest-invalid-json", SIDECAR, format!("not valid JSON: {e}")));
            None
        }
    }
}

/// A JSON value's type, for messages.
pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
