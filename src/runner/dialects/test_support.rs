//! Helpers for the dialects' unit tests: expected events, and the recorded streams of real CLIs
//! (`tests/fixtures/agent_streams/<cli>.jsonl`, from `tests/runs/real_agents.rs`).

use super::{agent, LineParser, Parsed, Protocol};
use crate::runner::agent::{AgentEvent, ArtifactDraft};
use serde_json::Value;

/// Every protocol, for tests that run them all.
pub const ALL: [Protocol; 8] = [
    Protocol::Auto,
    Protocol::Od,
    Protocol::ClaudeStreamJson,
    Protocol::CodexJson,
    Protocol::GeminiStreamJson,
    Protocol::OpencodeJson,
    Protocol::CopilotJson,
    Protocol::CursorStreamJson,
];

pub fn out(payload: Value) -> Parsed {
    agent(payload)
}

pub fn is_error(p: &[Parsed]) -> bool {
    matches!(p, [Parsed::Error(_)])
}

/// A recorded real stream, one line per stdout line.
pub fn recorded(cli: &str) -> String {
    let path = format!("{}/tests/fixtures/agent_streams/{cli}.jsonl", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Everything a whole stream parses into with `protocol`, `finish` included.
pub fn parse_all(protocol: Protocol, stream: &str) -> (Vec<Parsed>, LineParser) {
    let mut p = LineParser::new(protocol);
    let mut all: Vec<Parsed> = stream.lines().flat_map(|l| p.feed(l)).collect();
    all.extend(p.finish());
    (all, p)
}

/// The agent payloads of `type` `kind`.
pub fn payloads<'a>(parsed: &'a [Parsed], kind: &str) -> Vec<&'a Value> {
    parsed
        .iter()
        .filter_map(|p| match p {
            Parsed::Event(AgentEvent::Output { payload, .. }) if payload["type"] == kind => Some(payload),
            _ => None,
        })
        .collect()
}

/// The artifacts' paths.
pub fn artifacts(parsed: &[Parsed]) -> Vec<&ArtifactDraft> {
    parsed
        .iter()
        .filter_map(|p| match p {
            Parsed::Event(AgentEvent::Artifact(a)) => Some(a),
            _ => None,
        })
        .collect()
}

/// All text deltas joined.
pub fn text(parsed: &[Parsed]) -> String {
    payloads(parsed, "text_delta").iter().filter_map(|p| p["delta"].as_str()).collect()
}
