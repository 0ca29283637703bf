//! The options of a `choice` surface that the agent proposes when it asks (the direction picker's
//! three to five directions are written at run time, not in the manifest): checked, then written
//! into the surface it raises — as the `oneOf` of the schema's open pick, or as `options` when the
//! surface has no schema — so the recorded request carries them, the renderers show them as cards
//! and the answer is checked against them like any declared option.

use serde_json::{json, Map, Value};

use crate::limits::{MAX_CHOICE_OPTIONS, MAX_CHOICE_OPTION_BYTES};

/// Whether `spec` is a choice with nothing declared to pick among: its options come from the
/// agent's request, so it is not raised at a stage's entry (there would be nothing to show).
pub fn awaits_agent_options(spec: &Value) -> bool {
    spec["kind"] == "choice" && spec.get("options").is_none_or(Value::is_null) && open_pick(spec).is_some()
}

/// Where a choice's proposed options go: `Some("")` for a root string schema or a surface with no
/// schema, `Some(name)` for the first required string property with no declared values, `None`
/// when the schema already fixes what may be picked.
fn open_pick(spec: &Value) -> Option<String> {
    let schema = match spec.get("schema") {
        None | Some(Value::Null) => return Some(String::new()),
        Some(s) => s,
    };
    if is_open_string(schema) {
        return Some(String::new());
    }
    let props = schema["properties"].as_object()?;
    schema["required"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .find(|name| props.get(*name).is_some_and(is_open_string))
        .map(String::from)
}

fn is_open_string(s: &Value) -> bool {
    s["type"] == "string" && ["enum", "oneOf", "anyOf", "const"].iter().all(|k| s.get(*k).is_none())
}

/// `spec` with the agent's `options` in place, or why they cannot be: only a `choice` takes them,
/// one whose manifest leaves its pick open; 2 to [`MAX_CHOICE_OPTIONS`] options, each a string or
/// `{value, label?, description?}` (value a string, number or boolean; no two alike), each under
/// [`MAX_CHOICE_OPTION_BYTES`]. Without options, a choice that awaits them is refused too.
pub fn with_options(spec: &Value, options: Option<&Value>) -> Result<Value, String> {
    let Some(options) = options.filter(|o| !o.is_null()) else {
        if awaits_agent_options(spec) {
            return Err("this choice declares nothing to pick among: the request must carry `options`".into());
        }
        return Ok(spec.clone());
    };
    if spec["kind"] != "choice" {
        return Err(format!("`options` are for a choice; this surface is a {}", spec["kind"].as_str().unwrap_or("?")));
    }
    let Some(at) = open_pick(spec).filter(|_| spec.get("options").is_none_or(Value::is_null)) else {
        return Err("this choice declares its options in the manifest; the request may not replace them".into());
    };
    let list = options.as_array().ok_or("`options` must be an array")?;
    if list.len() < 2 || list.len() > MAX_CHOICE_OPTIONS {
        return Err(format!("`options` needs 2 to {MAX_CHOICE_OPTIONS} options, got {}", list.len()));
    }
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (i, o) in list.iter().enumerate() {
        let opt = option(o).map_err(|e| format!("options[{i}]: {e}"))?;
        if o.to_string().len() > MAX_CHOICE_OPTION_BYTES {
            return Err(format!("options[{i}]: over the {MAX_CHOICE_OPTION_BYTES}-byte limit of an option"));
        }
        if seen.contains(&opt.0) {
            return Err(format!("options[{i}]: value {} is given twice", opt.0));
        }
        seen.push(opt.0.clone());
        out.push(opt);
    }
    let mut spec = spec.clone();
    if spec.get("schema").is_none_or(Value::is_null) {
        spec["options"] =
            out.into_iter().map(|(value, label, description)| option_json(value, label, description)).collect();
        return Ok(spec);
    }
    let one_of: Vec<Value> = out
        .into_iter()
        .map(|(value, label, description)| {
            let mut c = Map::new();
            c.insert("const".into(), value);
            if let Some(l) = label {
                c.insert("title".into(), l.into());
            }
            if let Some(d) = description {
                c.insert("description".into(), d.into());
            }
            Value::Object(c)
        })
        .collect();
    let target = if at.is_empty() { &mut spec["schema"] } else { &mut spec["schema"]["properties"][&at] };
    // The consts are strings: a number or boolean value would not fit the declared type.
    if one_of.iter().any(|c| !c["const"].is_string()) {
        return Err("this choice's pick is a string: each option's value must be a string".into());
    }
    target["oneOf"] = Value::Array(one_of);
    Ok(spec)
}

/// One option as (value, label, description).
fn option(o: &Value) -> Result<(Value, Option<String>, Option<String>), String> {
    let text = |v: &Value, field: &str| match v {
        Value::Null => Ok(None),
        Value::String(s) if !s.trim().is_empty() => Ok(Some(s.clone())),
        _ => Err(format!("`{field}` must be a non-empty string")),
    };
    match o {
        Value::String(s) if !s.trim().is_empty() => Ok((o.clone(), None, None)),
        Value::Object(m) => {
            if let Some(k) = m.keys().find(|k| !["value", "label", "description"].contains(&k.as_str())) {
                return Err(format!("unknown field `{k}` (an option has value, label, description)"));
            }
            let value = match m.get("value") {
                Some(v @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => v.clone(),
                _ => return Err("`value` must be a string, number or boolean".into()),
            };
            if value.as_str().is_some_and(|s| s.trim().is_empty()) {
                return Err("`value` must not be empty".into());
            }
            let field = |k: &str| m.get(k).unwrap_or(&Value::Null);
            Ok((value, text(field("label"), "label")?, text(field("description"), "description")?))
        }
        _ => Err("an option is a non-empty string or {value, label?, description?}".into()),
    }
}

fn option_json(value: Value, label: Option<String>, description: Option<String>) -> Value {
    let mut o = json!({ "value": value });
    if let Some(l) = label {
        o["label"] = l.into();
    }
    if let Some(d) = description {
        o["description"] = d.into();
    }
    o
}

/// For a choice with `options` and no schema: why `value` is not one of them (`None`: it is).
pub fn not_an_option(spec: &Value, value: &Value) -> Option<String> {
    let opts = spec["options"].as_array()?;
    let values: Vec<&Value> = opts.iter().map(|o| if o.is_object() { &o["value"] } else { o }).collect();
    (!values.contains(&value)).then(|| {
        let listed: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        format!("/: {value} is not one of the options ({})", listed.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picker() -> Value {
        json!({ "id": "direction-choice", "kind": "choice", "schema": { "type": "object", "required": ["direction"],
            "properties": { "direction": { "type": "string" }, "note": { "type": "string" } } } })
    }

    #[test]
    fn an_open_pick_takes_the_agents_options_as_the_fields_one_of() {
        assert!(awaits_agent_options(&picker()));
        let opts = json!([{ "value": "warm", "label": "Warm paper", "description": "cream and rust" }, "cool"]);
        let s = with_options(&picker(), Some(&opts)).unwrap();
        assert_eq!(
            s["schema"]["properties"]["direction"]["oneOf"],
            json!([{ "const": "warm", "title": "Warm paper", "description": "cream and rust" }, { "const": "cool" }])
        );
        assert!(!awaits_agent_options(&s));
    }

    #[test]
    fn a_choice_without_a_schema_takes_them_as_options_and_checks_answers_against_them() {
        let spec = json!({ "id": "c", "kind": "choice" });
        let s = with_options(&spec, Some(&json!(["a", { "value": 2, "label": "Two" }]))).unwrap();
        assert_eq!(s["options"], json!([{ "value": "a" }, { "value": 2, "label": "Two" }]));
        assert_eq!(not_an_option(&s, &json!(2)), None);
        assert!(not_an_option(&s, &json!("b")).unwrap().contains("not one of the options"));
    }

    #[test]
    fn bad_options_are_refused_by_what_is_wrong() {
        let p = picker();
        let refused = |o: Value| with_options(&p, Some(&o)).unwrap_err();
        assert!(with_options(&p, None).unwrap_err().contains("must carry `options`"));
        assert!(refused(json!(["one"])).contains("2 to"));
        assert!(refused(json!("a,b")).contains("must be an array"));
        assert!(refused(json!(["a", "a"])).contains("options[1]: value \"a\" is given twice"));
        assert!(refused(json!(["a", { "value": "b", "colour": "red" }])).contains("options[1]: unknown field `colour`"));
        assert!(refused(json!(["a", { "value": 3 }])).contains("must be a string"));
        assert!(refused(json!(["a", ""])).contains("options[1]"));
        let many: Vec<String> = (0..=MAX_CHOICE_OPTIONS).map(|i| i.to_string()).collect();
        assert!(refused(json!(many)).contains("2 to"));
        let form = json!({ "id": "f", "kind": "form" });
        assert!(with_options(&form, Some(&json!(["a", "b"]))).unwrap_err().contains("are for a choice"));
        let fixed = json!({ "id": "c", "kind": "choice", "options": ["x", "y"] });
        assert!(with_options(&fixed, Some(&json!(["a", "b"]))).unwrap_err().contains("declares its options"));
        assert_eq!(with_options(&fixed, None).unwrap(), fixed, "declared options need nothing from the agent");
    }
}
