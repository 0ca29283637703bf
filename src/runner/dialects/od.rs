//! od's own agent protocol: one JSON object per stdout line (ND-JSON), tagged by `type`.
//!
//! | line | meaning |
//! |---|---|
//! | `{"type":"text","text":"…"}` | assistant text (streamed: each line is a delta) |
//! | `{"type":"thinking","text":"…"}` | reasoning text (a delta) |
//! | `{"type":"status","label":"…","detail":…}` | a progress status; `detail` is optional, any JSON |
//! | `{"type":"tool_use","id":"…","name":"…","input":{…}}` | the agent called a tool (`input` defaults to `{}`) |
//! | `{"type":"tool_result","toolUseId":"…","content":…,"isError":false}` | a tool's result (`isError` defaults to false) |
//! | `{"type":"usage","inputTokens":1,"outputTokens":2,"costUsd":0.01,"durationMs":1200}` | token usage and cost; every field optional |
//! | `{"type":"signal","name":"critique.score","value":4}` | a devloop signal; `value` is a number or a boolean |
//! | `{"type":"artifact","path":"index.html","title":"…","artifactKind":"…","renderKind":"…","handoffKind":"…","parentArtifactId":"…","exportTargets":["…"]}` | a file the agent wrote, relative to the project directory; only `path` is required |
//! | `{"type":"error","message":"…"}` | the agent failed; the invocation ends as an agent error |
//! | `{"type":"done"}` | the agent finished (optional: a zero exit status is enough) |
//!
//! An artifact's `title` defaults to its path; `artifactKind`/`renderKind` default from the
//! extension: `.html` → `html`/`html`, `.md` → `markdown`/`markdown`, `.png`/`.jpg`/`.jpeg`/`.gif`/
//! `.webp`/`.svg` → `image`/`image`, anything else `file`/`text`. A known `type` with a missing or
//! ill-typed required field (a signal value that is neither number nor boolean, an artifact without
//! a path, …) is a protocol error and fails the invocation. Lines with an unknown `type` and lines
//! that are not JSON are kept as raw output; blank lines are ignored. Anything printed on stderr is
//! recorded as the agent's stderr. Signals can also be sent from outside stdout with
//! `od run signal` (the agent gets `OD_RUN_ID`, `OD_DAEMON_URL` and `OD_DATA_DIR`).

use super::{agent, kinds_for, raw, Parsed};
use crate::runner::agent::{AgentEvent, ArtifactDraft};
use serde_json::{json, Map, Value};

/// What one line of od's protocol means.
pub(super) fn line(obj: &Map<String, Value>, line: &str) -> Parsed {
    let Some(kind) = obj.get("type").and_then(Value::as_str) else { return raw(line) };
    let parsed = match kind {
        "text" | "thinking" => req_str(obj, kind, "text").map(|t| agent(super::delta(kind == "thinking", t))),
        "status" => req_str(obj, kind, "label")
            .map(|label| agent(super::status(label, obj.get("detail").filter(|d| !d.is_null()).cloned()))),
        "tool_use" => req_str(obj, kind, "id").and_then(|id| {
            let name = req_str(obj, kind, "name")?;
            let input = obj.get("input").filter(|i| !i.is_null()).cloned().unwrap_or_else(|| json!({}));
            Ok(agent(super::tool_use(id, name, input)))
        }),
        "tool_result" => req_str(obj, kind, "toolUseId").and_then(|id| {
            let is_error = match obj.get("isError") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err("od protocol: a `tool_result` line's `isError` must be a boolean".to_string()),
            };
            let content = obj.get("content").cloned().unwrap_or_else(|| json!(""));
            Ok(agent(super::tool_result(id, content, is_error)))
        }),
        "usage" => usage(obj),
        "signal" => req_str(obj, kind, "name").and_then(|name| match obj.get("value") {
            Some(v @ (Value::Number(_) | Value::Bool(_))) => {
                Ok(Parsed::Event(AgentEvent::Signal { name: name.to_string(), value: v.clone() }))
            }
            other => Err(format!(
                "od protocol: signal `{name}` needs a number or boolean `value`, got {}",
                other.map_or_else(|| "nothing".to_string(), |v| v.to_string())
            )),
        }),
        "artifact" => artifact(obj).map(|a| Parsed::Event(AgentEvent::Artifact(a))),
        "genui_request" => req_str(obj, kind, "surfaceId").and_then(|sid| {
            Ok(Parsed::Event(AgentEvent::SurfaceRequest {
                surface_id: sid.to_string(),
                kind: opt_str(obj, "kind")?,
                atom: opt_str(obj, "atom")?,
                options: obj.get("options").filter(|o| !o.is_null()).cloned(),
            }))
        }),
        "error" => Ok(Parsed::Error(
            obj.get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.trim().is_empty())
                .unwrap_or("the agent reported an error without a message")
                .to_string(),
        )),
        "done" => Ok(Parsed::Done),
        _ => Ok(raw(line)),
    };
    parsed.unwrap_or_else(Parsed::Error)
}

fn req_str<'a>(obj: &'a Map<String, Value>, kind: &str, field: &str) -> Result<&'a str, String> {
    match obj.get(field) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(format!("od protocol: a `{kind}` line needs a string `{field}`")),
    }
}

fn opt_str(obj: &Map<String, Value>, field: &str) -> Result<Option<String>, String> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("od protocol: `{field}` must be a string")),
    }
}

fn usage(obj: &Map<String, Value>) -> Result<Parsed, String> {
    let tokens = |field: &str| match obj.get(field) {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v.as_u64().ok_or(format!("od protocol: a `usage` line's `{field}` must be a whole number")),
    };
    let mut payload = json!({"type": "usage", "usage": {
        "input_tokens": tokens("inputTokens")?,
        "output_tokens": tokens("outputTokens")?,
    }});
    for field in ["costUsd", "durationMs"] {
        match obj.get(field) {
            None | Some(Value::Null) => {}
            Some(v @ Value::Number(_)) => payload[field] = v.clone(),
            Some(_) => return Err(format!("od protocol: a `usage` line's `{field}` must be a number")),
        }
    }
    Ok(agent(payload))
}

fn artifact(obj: &Map<String, Value>) -> Result<ArtifactDraft, String> {
    let path = opt_str(obj, "path")?.filter(|p| !p.trim().is_empty());
    let Some(path) = path else { return Err("od protocol: an `artifact` line needs a non-empty `path`".to_string()) };
    let (guessed_kind, guessed_render) = kinds_for(&path);
    let export_targets = match obj.get("exportTargets") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            items
                .iter()
                .map(|t| t.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or("od protocol: an `artifact` line's `exportTargets` must be an array of strings")?
        }
        Some(_) => return Err("od protocol: an `artifact` line's `exportTargets` must be an array of strings".into()),
    };
    Ok(ArtifactDraft {
        title: opt_str(obj, "title")?.filter(|t| !t.is_empty()).unwrap_or_else(|| path.clone()),
        artifact_kind: opt_str(obj, "artifactKind")?.filter(|k| !k.is_empty()).unwrap_or(guessed_kind.to_string()),
        render_kind: opt_str(obj, "renderKind")?.filter(|k| !k.is_empty()).unwrap_or(guessed_render.to_string()),
        handoff_kind: opt_str(obj, "handoffKind")?.unwrap_or_default(),
        parent_artifact_id: opt_str(obj, "parentArtifactId")?.unwrap_or_default(),
        export_targets,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{LineParser, Protocol};
    use super::*;

    fn od(line: &str) -> Vec<Parsed> {
        LineParser::new(Protocol::Od).feed(line)
    }

    #[test]
    fn od_text_thinking_status() {
        assert_eq!(od(r#"{"type":"text","text":"hi"}"#), vec![out(json!({"type":"text_delta","delta":"hi"}))]);
        assert_eq!(od(r#"{"type":"thinking","text":"hm"}"#), vec![out(json!({"type":"thinking_delta","delta":"hm"}))]);
        assert_eq!(
            od(r#"{"type":"status","label":"building"}"#),
            vec![out(json!({"type":"status","label":"building"}))]
        );
        assert_eq!(
            od(r#"{"type":"status","label":"b","detail":{"n":1}}"#),
            vec![out(json!({"type":"status","label":"b","detail":{"n":1}}))]
        );
        assert!(is_error(&od(r#"{"type":"text","text":3}"#)));
        assert!(is_error(&od(r#"{"type":"status"}"#)));
    }

    #[test]
    fn od_tools_and_usage() {
        assert_eq!(
            od(r#"{"type":"tool_use","id":"t1","name":"write","input":{"path":"a"}}"#),
            vec![out(json!({"type":"tool_use","id":"t1","name":"write","input":{"path":"a"}}))]
        );
        assert_eq!(
            od(r#"{"type":"tool_use","id":"t1","name":"ls"}"#),
            vec![out(json!({"type":"tool_use","id":"t1","name":"ls","input":{}}))]
        );
        assert_eq!(
            od(r#"{"type":"tool_result","toolUseId":"t1","content":"ok"}"#),
            vec![out(json!({"type":"tool_result","toolUseId":"t1","content":"ok","isError":false}))]
        );
        assert_eq!(
            od(r#"{"type":"tool_result","toolUseId":"t1","content":[1],"isError":true}"#),
            vec![out(json!({"type":"tool_result","toolUseId":"t1","content":[1],"isError":true}))]
        );
        assert!(is_error(&od(r#"{"type":"tool_result","content":"x"}"#)));
        assert!(is_error(&od(r#"{"type":"tool_result","toolUseId":"t","isError":"yes"}"#)));
        assert_eq!(
            od(r#"{"type":"usage","inputTokens":10,"outputTokens":5,"costUsd":0.5,"durationMs":1200}"#),
            vec![out(
                json!({"type":"usage","usage":{"input_tokens":10,"output_tokens":5},"costUsd":0.5,"durationMs":1200})
            )]
        );
        assert_eq!(
            od(r#"{"type":"usage"}"#),
            vec![out(json!({"type":"usage","usage":{"input_tokens":0,"output_tokens":0}}))]
        );
        assert!(is_error(&od(r#"{"type":"usage","inputTokens":-1}"#)));
        assert!(is_error(&od(r#"{"type":"usage","costUsd":"1"}"#)));
    }

    #[test]
    fn od_signals() {
        assert_eq!(
            od(r#"{"type":"signal","name":"critique.score","value":4}"#),
            vec![Parsed::Event(AgentEvent::Signal { name: "critique.score".into(), value: json!(4) })]
        );
        assert_eq!(
            od(r#"{"type":"signal","name":"build.passing","value":true}"#),
            vec![Parsed::Event(AgentEvent::Signal { name: "build.passing".into(), value: json!(true) })]
        );
        for bad in [
            r#"{"type":"signal","name":"x","value":"4"}"#,
            r#"{"type":"signal","name":"x"}"#,
            r#"{"type":"signal","name":"x","value":null}"#,
            r#"{"type":"signal","value":1}"#,
        ] {
            let p = od(bad);
            assert!(is_error(&p), "{bad}: {p:?}");
        }
        let [Parsed::Error(msg)] = &od(r#"{"type":"signal","name":"x","value":"4"}"#)[..] else { panic!() };
        assert!(msg.contains("`x`") && msg.contains("\"4\""), "{msg}");
    }

    #[test]
    fn od_artifacts() {
        let a = |line: &str| match &od(line)[..] {
            [Parsed::Event(AgentEvent::Artifact(a))] => a.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            a(r#"{"type":"artifact","path":"index.html"}"#),
            ArtifactDraft {
                path: "index.html".into(),
                title: "index.html".into(),
                artifact_kind: "html".into(),
                render_kind: "html".into(),
                ..Default::default()
            }
        );
        let md = a(r#"{"type":"artifact","path":"docs/README.md","title":"Readme"}"#);
        assert_eq!(
            (md.title.as_str(), md.artifact_kind.as_str(), md.render_kind.as_str()),
            ("Readme", "markdown", "markdown")
        );
        for img in ["a.png", "a.JPG", "a.jpeg", "a.gif", "a.webp", "a.svg"] {
            let d = a(&format!(r#"{{"type":"artifact","path":"{img}"}}"#));
            assert_eq!((d.artifact_kind.as_str(), d.render_kind.as_str()), ("image", "image"), "{img}");
        }
        let f = a(r#"{"type":"artifact","path":"data.csv"}"#);
        assert_eq!((f.artifact_kind.as_str(), f.render_kind.as_str()), ("file", "text"));
        let full =
            a(r#"{"type":"artifact","path":"deck.html","title":"Deck","artifactKind":"deck","renderKind":"html",
            "handoffKind":"figma","parentArtifactId":"art_1","exportTargets":["pdf","pptx"]}"#
                .replace('\n', "")
                .as_str());
        assert_eq!(
            full,
            ArtifactDraft {
                path: "deck.html".into(),
                title: "Deck".into(),
                artifact_kind: "deck".into(),
                render_kind: "html".into(),
                handoff_kind: "figma".into(),
                parent_artifact_id: "art_1".into(),
                export_targets: vec!["pdf".into(), "pptx".into()],
            }
        );
        assert!(is_error(&od(r#"{"type":"artifact"}"#)));
        assert!(is_error(&od(r#"{"type":"artifact","path":"  "}"#)));
        assert!(is_error(&od(r#"{"type":"artifact","path":5}"#)));
        assert!(is_error(&od(r#"{"type":"artifact","path":"a","exportTargets":[1]}"#)));
        assert!(is_error(&od(r#"{"type":"artifact","path":"a","exportTargets":"pdf"}"#)));
        assert!(is_error(&od(r#"{"type":"artifact","path":"a","title":{}}"#)));
    }

    #[test]
    fn od_error_done_raw_blank() {
        assert_eq!(od(r#"{"type":"error","message":"boom"}"#), vec![Parsed::Error("boom".into())]);
        assert!(is_error(&od(r#"{"type":"error"}"#)));
        assert_eq!(od(r#"{"type":"done"}"#), vec![Parsed::Done]);
        assert_eq!(od(r#"{"type":"mystery","x":1}"#), vec![raw(r#"{"type":"mystery","x":1}"#)]);
        assert_eq!(od(r#"{"no":"type"}"#), vec![raw(r#"{"no":"type"}"#)]);
        assert_eq!(od("plain words"), vec![out(json!({"type":"raw","line":"plain words"}))]);
        assert_eq!(od("[1,2]"), vec![raw("[1,2]")]);
        assert_eq!(od(""), vec![]);
        assert_eq!(od("   \t"), vec![]);
    }
}
