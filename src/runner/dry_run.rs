//! The dry-run agent: no model, fully deterministic. For each stage iteration it reports a status
//! and a text summary of the prompt it was given, writes a stage artifact into the project
//! directory, and reports the signals a real agent would (a critique score that rises 2, 3, 4, 5 by
//! iteration in critique stages; `preview.ok` where a preview is produced). It exists so every
//! feature — pipelines, devloops, GenUI, artifacts, replay — runs offline and in tests.
//!
//! Scriptable through the run's agent options, `dryRun`: `critiqueScores` (per iteration, the last
//! repeats), `fail` (`{stage: n}`: the first n attempts of each iteration fail), `crash` (a stage
//! whose invocation crashes), `signals` (`{stage: {name: value}}` extra signals), `waitForCancel`
//! (a stage that works until the run is canceled).

use serde_json::{json, Value};

use super::agent::{AgentEvent, AgentFailure, ArtifactDraft, CancelFlag, EventSink, Invocation};

fn emit(sink: &EventSink, e: AgentEvent) {
    let _ = sink.send(e);
}

fn is_critique(inv: &Invocation) -> bool {
    inv.stage_id.contains("critique") || inv.atoms.iter().any(|a| a == "critique-theater")
}

fn writes_preview(inv: &Invocation) -> bool {
    inv.stage_id == "generate"
        || inv.atoms.iter().any(|a| a == "file-write" || a == "live-artifact" || a.starts_with("media-"))
}

/// The critique score of iteration `i`: scripted, else 2, 3, 4, 5, 5, …
fn critique_score(script: &Value, i: u32) -> Value {
    match script["critiqueScores"].as_array().filter(|a| !a.is_empty()) {
        Some(a) => a[(i as usize).min(a.len() - 1)].clone(),
        None => json!((2 + i).min(5)),
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The brief at the end of the composed prompt.
fn brief(prompt: &str) -> &str {
    prompt.rsplit_once("## Brief\n").map(|(_, b)| b.trim()).unwrap_or("")
}

/// Runs one stage iteration.
pub async fn invoke(inv: &Invocation, sink: &EventSink, mut cancel: CancelFlag) -> Result<(), AgentFailure> {
    let script = &inv.config["dryRun"];
    let stage = inv.stage_id.as_str();
    emit(
        sink,
        AgentEvent::Output {
            channel: "agent".into(),
            payload: json!({ "type": "status", "label": "dry-run", "detail": format!("stage {stage}, iteration {}, attempt {}", inv.iteration + 1, inv.attempt) }),
        },
    );
    scripted(inv, &mut cancel).await?;
    let digest = crate::engine::prompt::digest(&inv.prompt);
    let text = format!(
        "[dry-run] stage `{stage}` iteration {} read a {}-byte prompt (blake3 {}) with atoms [{}].",
        inv.iteration + 1,
        inv.prompt.len(),
        &digest[..16],
        inv.atoms.join(", ")
    );
    emit(sink, AgentEvent::Output { channel: "agent".into(), payload: json!({ "type": "text_delta", "delta": text }) });
    emit(sink, AgentEvent::Artifact(draft(inv, &text)?));
    if is_critique(inv) {
        emit(sink, AgentEvent::Signal { name: "critique.score".into(), value: critique_score(script, inv.iteration) });
    }
    if writes_preview(inv) {
        emit(sink, AgentEvent::Signal { name: "preview.ok".into(), value: json!(true) });
    }
    if let Some(extra) = script["signals"][stage].as_object() {
        for (name, value) in extra {
            emit(sink, AgentEvent::Signal { name: name.clone(), value: value.clone() });
        }
    }
    let tokens = (inv.prompt.len() / 4) as u64;
    emit(
        sink,
        AgentEvent::Output {
            channel: "agent".into(),
            payload: json!({ "type": "usage", "usage": { "input_tokens": tokens, "output_tokens": 64 }, "costUsd": 0.0 }),
        },
    );
    Ok(())
}

/// What the script makes of this stage: a crash, a failure of this attempt, or waiting to be
/// canceled.
async fn scripted(inv: &Invocation, cancel: &mut CancelFlag) -> Result<(), AgentFailure> {
    let script = &inv.config["dryRun"];
    let stage = inv.stage_id.as_str();
    if script["crash"].as_str() == Some(stage) {
        return Err(AgentFailure::Crashed {
            status: "exit code 1".into(),
            stderr_tail: "dry-run: scripted crash".into(),
        });
    }
    if script["fail"][stage].as_u64().is_some_and(|n| u64::from(inv.attempt) <= n) {
        return Err(AgentFailure::Reported(format!(
            "dry-run: scripted failure of stage {stage}, attempt {}",
            inv.attempt
        )));
    }
    if script["waitForCancel"].as_str() == Some(stage) {
        while !*cancel.borrow() {
            if cancel.changed().await.is_err() {
                break;
            }
        }
        return Err(AgentFailure::Canceled);
    }
    Ok(())
}

/// Writes the iteration's draft (the preview page, or a Markdown note) below the project.
fn draft(inv: &Invocation, text: &str) -> Result<ArtifactDraft, AgentFailure> {
    let stage = inv.stage_id.as_str();
    let (path, body, kind) = if writes_preview(inv) {
        let b = html_escape(brief(&inv.prompt));
        let html = format!(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{b}</title></head>\n<body><h1>{b}</h1>\n<p>Draft {} of stage {stage}, written by od's dry-run agent.</p></body></html>\n",
            inv.iteration + 1
        );
        ("index.html".to_string(), html, "html")
    } else {
        let md = format!("# {stage} (iteration {})\n\n{text}\n", inv.iteration + 1);
        (format!("dry-run/{stage}-{}.md", inv.iteration + 1), md, "markdown")
    };
    // Below the project without following links (a stage id is the plugin's, a link the agent's).
    // Not fsynced here: like any agent's file, od makes it durable before the run ends
    // (`pipeline::Ctx::sync_copies`), once per file and folder however often it was rewritten.
    let failed = |e: String| AgentFailure::Reported(format!("writing {path}: {e}"));
    let rel = crate::engine::files::clean_relative(&path).map_err(|e| failed(e.to_string()))?;
    let tag = crate::engine::safe_fs::temp_tag();
    crate::engine::safe_fs::Root::open(&inv.project_dir)
        .and_then(|root| root.write_atomic_unsynced(&rel, body.as_bytes(), &tag))
        .map_err(|e| failed(e.to_string()))?;
    Ok(ArtifactDraft {
        title: format!("{stage} draft {}", inv.iteration + 1),
        artifact_kind: kind.into(),
        render_kind: kind.into(),
        handoff_kind: if kind == "html" { "preview".into() } else { String::new() },
        path,
        ..Default::default()
    })
}
