//! Answering a waiting GenUI surface in the terminal while a run is followed: a confirmation as
//! yes/no, a choice as a pick from its options, a form as one prompt per field of its JSON Schema
//! (strings, numbers, booleans, enums as a pick, arrays of enums as a multi-pick; required fields,
//! defaults, descriptions as help), an oauth-prompt as its URL to open. The answer goes through the
//! route `od ui respond` uses; when the daemon refuses it, its violations are shown and the fields
//! they name asked again.

use console::{style, Term};
use dialoguer::theme::ColorfulTheme;
use dialoguer::{Input, MultiSelect, Select};
use serde_json::{json, Map, Value};

use super::conn::{path_segment, Conn};
use super::ui_cmd::typed_answer;
use super::{s, CliResult};
use crate::limits::ASK_RETRIES;

/// What asking did.
pub enum Asked {
    /// The answer was recorded (or someone else answered first).
    Answered,
    /// An oauth-prompt: its URL is shown; the answer comes from the authorisation.
    Announced,
    /// The person left the prompt (Esc, Ctrl-C, or the terminal closed).
    Declined,
}

/// The person left the prompt.
struct Stop;

type Got<T> = Result<T, Stop>;

fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The surface's question: its prompt, else its title, else its id.
fn question(spec: &Value, surface_id: &str) -> String {
    [&spec["prompt"], &spec["title"]].into_iter().find_map(|v| v.as_str()).unwrap_or(surface_id).to_string()
}

/// The form fields of a schema (`type: object` with `properties`), if it is one.
fn fields(schema: &Value) -> Option<&Map<String, Value>> {
    schema["properties"].as_object().filter(|_| schema["type"].as_str().is_none_or(|t| t == "object"))
}

/// The top-level field a violation (`/field/...: message`) names.
fn violated_field(violation: &str) -> Option<String> {
    let pointer = violation.split(": ").next()?.strip_prefix('/')?;
    let first = pointer.split('/').next().filter(|f| !f.is_empty())?;
    Some(first.replace("~1", "/").replace("~0", "~"))
}

/// `y`/`yes`/`n`/`no` (any case, trimmed); empty is the default when there is one.
fn yes_no(raw: &str, default: Option<bool>) -> Option<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(true),
        "n" | "no" => Some(false),
        "" => default,
        _ => None,
    }
}

/// A yes/no question answered with a whole line (a key alone answers nothing: `maybe` is not a
/// `y` followed by text that leaks into the shell), asked again until it is yes or no.
fn ask_yes_no(theme: &ColorfulTheme, label: &str, default: Option<bool>) -> Got<bool> {
    let hint = match default {
        Some(true) => "Y/n",
        Some(false) => "y/N",
        None => "y/n",
    };
    let raw = Input::<String>::with_theme(theme)
        .with_prompt(format!("{label} ({hint})"))
        .allow_empty(default.is_some())
        .validate_with(move |s: &String| yes_no(s, default).map(|_| ()).ok_or("answer yes or no (y/n)"))
        .interact_text();
    match raw {
        Ok(s) => yes_no(&s, default).ok_or(Stop),
        Err(_) => Err(Stop),
    }
}

/// One line of text for `label` (with `hint` shown as an example), required; None when the person
/// leaves the prompt (Esc, Ctrl-C, the terminal closed).
pub fn ask_line(label: &str, hint: Option<&str>) -> Option<String> {
    let theme = ColorfulTheme::default();
    let prompt = match hint {
        Some(h) if !h.is_empty() => format!("{label} (e.g. {h})"),
        _ => label.to_string(),
    };
    Input::<String>::with_theme(&theme).with_prompt(prompt).interact_text().ok().filter(|s| !s.trim().is_empty())
}

/// The values to pick among and how each is shown: an `enum`, or a `oneOf`/`anyOf` of `const`s
/// (a choice's directions: "Title — description").
fn picks(schema: &Value) -> Option<Vec<(Value, String)>> {
    if let Some(options) = schema["enum"].as_array() {
        return Some(options.iter().map(|o| (o.clone(), compact(o))).collect());
    }
    let alts = schema["oneOf"].as_array().or(schema["anyOf"].as_array())?;
    alts.iter()
        .map(|a| {
            let value = a.get("const")?.clone();
            let title = a["title"].as_str().map_or_else(|| compact(&value), str::to_string);
            Some(match a["description"].as_str() {
                Some(d) => (value, format!("{title} — {d}")),
                None => (value, title),
            })
        })
        .collect::<Option<Vec<_>>>()
        .filter(|v| !v.is_empty())
}

/// Asks for one value of `schema` labelled `label`; `Ok(None)` when an optional one is left empty.
fn ask_one(theme: &ColorfulTheme, label: &str, schema: &Value, required: bool, default: &Value) -> Got<Option<Value>> {
    if let Some(options) = picks(schema) {
        let mut items: Vec<String> = options.iter().map(|(_, label)| label.clone()).collect();
        if !required {
            items.push("(none)".into());
        }
        let at = options.iter().position(|(o, _)| o == default).unwrap_or(0);
        let pick = Select::with_theme(theme).with_prompt(label).items(&items).default(at).interact_opt();
        return match pick {
            Ok(Some(i)) => Ok(options.get(i).map(|(v, _)| v.clone())),
            _ => Err(Stop),
        };
    }
    if schema["type"] == "boolean" {
        return ask_yes_no(theme, label, default.as_bool()).map(|b| Some(Value::Bool(b)));
    }
    if let (Some("array"), Some(options)) = (schema["type"].as_str(), schema["items"]["enum"].as_array()) {
        let items: Vec<String> = options.iter().map(compact).collect();
        let chosen = default.as_array();
        let checked: Vec<bool> = options.iter().map(|o| chosen.is_some_and(|c| c.contains(o))).collect();
        let label = format!("{label} (space to pick, enter when done)");
        let picks = MultiSelect::with_theme(theme).with_prompt(label).items(&items).defaults(&checked).interact_opt();
        return match picks {
            Ok(Some(ix)) => Ok(Some(Value::Array(ix.into_iter().filter_map(|i| options.get(i).cloned()).collect()))),
            _ => Err(Stop),
        };
    }
    // Text: strings and numbers typed like `od ui respond --value`; other shapes as JSON.
    let scalar = matches!(schema["type"].as_str(), None | Some("string" | "number" | "integer"));
    let convert = move |raw: &str| -> Result<Value, String> {
        if scalar {
            typed_answer(schema, false, raw).map_err(|w| format!("takes {w}"))
        } else {
            serde_json::from_str(raw).map_err(|e| format!("takes JSON: {e}"))
        }
    };
    let mut input = Input::<String>::with_theme(theme).with_prompt(label).allow_empty(!required);
    if !default.is_null() {
        input = input.default(compact(default));
    }
    let raw = input
        .validate_with(|raw: &String| match raw.is_empty() && !required {
            true => Ok(()),
            false => convert(raw).map(|_| ()),
        })
        .interact_text()
        .map_err(|_| Stop)?;
    if raw.is_empty() && !required {
        return Ok(None);
    }
    convert(&raw).map(Some).map_err(|_| Stop)
}

/// Asks the form's fields (only `only`, when given), keeping the other answers of `current`.
fn ask_form(
    theme: &ColorfulTheme,
    term: &Term,
    schema: &Value,
    props: &Map<String, Value>,
    current: &mut Map<String, Value>,
    only: Option<&[String]>,
) -> Got<()> {
    let required: Vec<&str> = schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    for (name, field) in props {
        if only.is_some_and(|o| !o.contains(name)) {
            continue;
        }
        if let Some(help) = field["description"].as_str() {
            let _ = term.write_line(&format!("  {}", style(help).dim()));
        }
        let req = required.contains(&name.as_str());
        let label = format!("{}{}", field["title"].as_str().unwrap_or(name), if req { " *" } else { "" });
        let default = current.get(name).unwrap_or(&field["default"]).clone();
        match ask_one(theme, &label, field, req, &default)? {
            Some(v) => current.insert(name.clone(), v),
            None => current.remove(name),
        };
    }
    Ok(())
}

/// Asks the whole answer of a surface (`only`: the form fields to ask again).
fn ask_value(
    theme: &ColorfulTheme,
    term: &Term,
    spec: &Value,
    label: &str,
    current: &Value,
    only: Option<&[String]>,
) -> Got<Value> {
    let schema = &spec["schema"];
    if let Some(props) = fields(schema) {
        let mut map = current.as_object().cloned().unwrap_or_default();
        ask_form(theme, term, schema, props, &mut map, only)?;
        return Ok(Value::Object(map));
    }
    let default = if current.is_null() { &spec["default"] } else { current };
    if !schema.is_null() {
        return Ok(ask_one(theme, label, schema, true, default)?.unwrap_or(Value::Null));
    }
    let implied = match (spec["kind"].as_str(), spec["options"].as_array()) {
        (Some("confirmation"), _) => json!({ "type": "boolean" }),
        (Some("choice"), Some(options)) => json!({ "oneOf": options.iter().map(|o| match o {
            Value::Object(m) => json!({ "const": m.get("value"), "title": m.get("label"), "description": m.get("description") }),
            v => json!({ "const": v }),
        }).collect::<Vec<_>>() }),
        (Some("form"), _) => json!({ "type": "object" }),
        _ => json!({ "type": "string" }),
    };
    Ok(ask_one(theme, label, &implied, true, default)?.unwrap_or(Value::Null))
}

/// Asks `surface_id` (spec `spec`) of `run_id` on the terminal and records the answer.
pub fn ask(conn: &Conn, run_id: &str, surface_id: &str, spec: &Value) -> CliResult<Asked> {
    let term = Term::stderr();
    let theme = ColorfulTheme::default();
    let label = question(spec, surface_id);
    if spec["kind"] == "oauth-prompt" {
        let url =
            [&spec["oauth"]["url"], &spec["url"], &spec["oauth"]["authorizeUrl"]].into_iter().find_map(|v| v.as_str());
        let _ = term.write_line(&format!("{} {}", style("?").magenta().bold(), style(&label).bold()));
        let _ = match url {
            Some(u) => {
                term.write_line(&format!("  open {} to authorise; waiting for it to finish", style(u).underlined()))
            }
            None => term.write_line(&format!(
                "  authorise it in OpenDesign (or `od ui respond {surface_id} --run {run_id} --value-json …`); waiting"
            )),
        };
        return Ok(Asked::Announced);
    }
    if fields(&spec["schema"]).is_some() {
        let _ = term.write_line(&format!("{} {}", style("?").magenta().bold(), style(&label).bold()));
    }
    let path = format!("/api/runs/{}/genui/{}/respond", path_segment(run_id), path_segment(surface_id));
    let mut value = Value::Null;
    let mut only: Option<Vec<String>> = None;
    let mut refusals = 0;
    loop {
        value = match ask_value(&theme, &term, spec, &label, &value, only.as_deref()) {
            Ok(v) => v,
            Err(Stop) => return Ok(Asked::Declined),
        };
        match conn.post(&path, &json!({ "value": value, "respondedBy": "user" })) {
            Ok(_) => return Ok(Asked::Answered),
            Err(e) if e.code == "genui-surface-not-pending" => return Ok(Asked::Answered),
            Err(e) if e.code == "invalid-answer" && refusals < ASK_RETRIES => {
                refusals += 1;
                let violations: Vec<String> =
                    e.data["violations"].as_array().into_iter().flatten().map(|v| s(v).to_string()).collect();
                let _ = term.write_line(&format!("{} {}", style("✗").red().bold(), e.message));
                for v in &violations {
                    let _ = term.write_line(&format!("  {}", style(v).red()));
                }
                let named: Vec<String> = violations.iter().filter_map(|v| violated_field(v)).collect();
                let known = fields(&spec["schema"]).is_some_and(|p| named.iter().all(|n| p.contains_key(n)));
                only = (known && !named.is_empty()).then_some(named);
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_violation_names_its_top_level_field() {
        assert_eq!(violated_field("/audience: shorter than 3").as_deref(), Some("audience"));
        assert_eq!(violated_field("/tags/1: not one of the options").as_deref(), Some("tags"));
        assert_eq!(violated_field("/a~1b: x").as_deref(), Some("a/b"));
        assert_eq!(violated_field("/: expected an object"), None);
    }

    #[test]
    fn only_object_schemas_with_properties_are_forms() {
        assert!(fields(&json!({ "type": "object", "properties": { "a": {} } })).is_some());
        assert!(fields(&json!({ "properties": { "a": {} } })).is_some());
        assert!(fields(&json!({ "type": "string", "enum": ["a"] })).is_none());
        assert!(fields(&Value::Null).is_none());
    }

    #[test]
    fn a_choices_directions_are_picked_by_title_and_description_and_answer_their_value() {
        let s = json!({ "oneOf": [{ "const": "warm", "title": "Warm paper", "description": "cream and rust" }, { "const": "mono" }] });
        assert_eq!(
            picks(&s).unwrap(),
            vec![(json!("warm"), "Warm paper — cream and rust".to_string()), (json!("mono"), "mono".to_string())]
        );
        assert_eq!(
            picks(&json!({ "enum": [1, "b"] })).unwrap(),
            vec![(json!(1), "1".to_string()), (json!("b"), "b".to_string())]
        );
        assert!(picks(&json!({ "oneOf": [{ "type": "string" }] })).is_none(), "not a list of values");
        assert!(picks(&json!({ "type": "string" })).is_none());
    }
}
