//! Golden frames of the events whose closed-set fields became enums (issue 32): written once by
//! `write_vocab_fixtures` (ignored) with the build that still held those fields as `String`s, and
//! committed. The typed vocabulary archives each enum as the string it names, so these old frames
//! must decode to the typed events, re-encode to the very same payload bytes (no new schema was
//! needed) and serialise to the very same JSON (no wire change) — known values and unknown ones
//! (kept as `Other`) alike.

use od_events::{Event, FrameHeader, FrameRef, GENESIS_HASH};
use od_migrations::decode_any;

/// (fixture name, stream, the event as wire JSON).
const CASES: &[(&str, &str, &str)] = &[
    (
        "run_ended_succeeded",
        "run:r1",
        r###"{"kind":"run_ended","data":{"runId":"r1","status":"succeeded","code":0,"reason":"","failureCategory":"","artifactCount":2,"endedAt":1767225600000}}"###,
    ),
    (
        "run_ended_failed",
        "run:r2",
        r###"{"kind":"run_ended","data":{"runId":"r2","status":"failed","code":1,"reason":"the agent crashed","failureCategory":"agent-crashed","artifactCount":0,"endedAt":1767225600001}}"###,
    ),
    (
        "run_ended_unknown",
        "run:r3",
        r###"{"kind":"run_ended","data":{"runId":"r3","status":"evaporated","code":9,"reason":"cosmic ray","failureCategory":"cosmic-ray","artifactCount":0,"endedAt":1767225600002}}"###,
    ),
    (
        "run_created",
        "run:r1",
        r###"{"kind":"run_created","data":{"runId":"r1","projectId":"p1","conversationId":"c1","clientRequestId":"","snapshotId":"s1","pluginId":"od-new-generation","message":"make a page","agent":"dry-run","agentConfigJson":"{\"agent\":\"dry-run\"}","createdAt":1767225600000}}"###,
    ),
    (
        "run_created_exec",
        "run:r4",
        r###"{"kind":"run_created","data":{"runId":"r4","projectId":"p1","conversationId":"c1","clientRequestId":"k","snapshotId":"s1","pluginId":"od-new-generation","message":"","agent":"claude","agentConfigJson":"{\"agent\":\"claude\"}","createdAt":1767225600000}}"###,
    ),
    (
        "agent_output_agent",
        "run:r1",
        r###"{"kind":"agent_output","data":{"runId":"r1","stageId":"generate","iteration":0,"channel":"agent","payloadJson":"{\"type\":\"text_delta\",\"delta\":\"hi\"}"}}"###,
    ),
    (
        "agent_output_stderr",
        "run:r1",
        r###"{"kind":"agent_output","data":{"runId":"r1","stageId":"generate","iteration":0,"channel":"stderr","payloadJson":"{\"chunk\":\"oops\"}"}}"###,
    ),
    (
        "agent_output_unknown",
        "run:r1",
        r###"{"kind":"agent_output","data":{"runId":"r1","stageId":"generate","iteration":0,"channel":"telepathy","payloadJson":"{}"}}"###,
    ),
    (
        "devloop_iteration_looping",
        "run:r1",
        r###"{"kind":"devloop_iteration","data":{"runId":"r1","stageId":"critique","iteration":1,"artifactDiffSummary":"","critiqueSummary":"ok","tokensUsed":10,"endedAt":1767225600000,"signalsJson":"{}","matched":"","termination":""}}"###,
    ),
    (
        "devloop_iteration_cap",
        "run:r1",
        r###"{"kind":"devloop_iteration","data":{"runId":"r1","stageId":"critique","iteration":3,"artifactDiffSummary":"","critiqueSummary":"ok","tokensUsed":10,"endedAt":1767225600000,"signalsJson":"{}","matched":"","termination":"iteration-cap"}}"###,
    ),
    (
        "run_responded",
        "run:r1",
        r###"{"kind":"run_responded","data":{"runId":"r1","action":"break-loop","payloadJson":"{\"action\":\"break-loop\"}","receivedAt":1767225600000}}"###,
    ),
    (
        "stage_failed",
        "run:r1",
        r###"{"kind":"stage_failed","data":{"runId":"r1","snapshotId":"s1","stageId":"build","iteration":0,"message":"boom","action":"retry","attempt":1}}"###,
    ),
    (
        "prompt_composed",
        "run:r1",
        r###"{"kind":"prompt_composed","data":{"runId":"r1","stageId":"generate","iteration":0,"digest":"d","bytes":10,"sections":[{"name":"base","marker":"## Base","source":"snapshot:basePrompt","digest":"d1","bytes":5,"tokens":2,"status":"included","tokensKept":2},{"name":"craft","marker":"## Craft","source":"x","digest":"d2","bytes":5,"tokens":2,"status":"dropped","tokensKept":0}],"totalTokens":2,"budgetTokens":100,"estimator":"od-est/1","projectJson":""}}"###,
    ),
    (
        "conversation_message",
        "run:r1",
        r###"{"kind":"conversation_message","data":{"conversationId":"c1","projectId":"p1","messageId":"r1:agent","role":"agent","runId":"r1","text":"done","at":1767225600000}}"###,
    ),
    (
        "follow_up_planned",
        "run:r5",
        r###"{"kind":"follow_up_planned","data":{"runId":"r5","conversationId":"c1","stages":["generate"],"rule":"last-stage","buildsOn":["r1"],"plannedAt":1767225600000}}"###,
    ),
    (
        "substrate_staged",
        "run:r1",
        r###"{"kind":"substrate_staged","data":{"runId":"r1","projectId":"p1","contextDir":".od/context","mcpConfig":".mcp.json","mcpConfigMode":"merged","files":[{"path":"a.css","kind":"asset","source":"assets/a.css","digest":"d","bytes":3},{"path":".mcp.json","kind":"mcp-config","source":"","digest":"e","bytes":4}],"missing":[],"stagedAt":1767225600000}}"###,
    ),
    (
        "blob_expired",
        "blob:d",
        r###"{"kind":"blob_expired","data":{"digest":"d","bytes":3,"unreferencedSince":1767225600000,"reason":"prune"}}"###,
    ),
    (
        "marketplace_added",
        "marketplace:m1",
        r###"{"kind":"marketplace_added","data":{"id":"m1","url":"https://example.test/index.json","trust":"official","manifestJson":"{}"}}"###,
    ),
    (
        "marketplace_trusted",
        "marketplace:m1",
        r###"{"kind":"marketplace_trusted","data":{"id":"m1","trust":"restricted"}}"###,
    ),
    (
        "plugin_installed",
        "plugin:p",
        r###"{"kind":"plugin_installed","data":{"id":"p","version":"1.0.0","title":"P","sourceKind":"marketplace","source":"m1/p","trust":"trusted","manifestJson":"{}","sourceDigest":"d","fsPath":"plugins/p","capabilitiesGranted":["fs:read"],"warningsJson":"[]"}}"###,
    ),
    (
        "surface_requested",
        "run:r1",
        r###"{"kind":"surface_requested","data":{"runId":"r1","projectId":"p1","conversationId":"c1","snapshotId":"s1","surfaceId":"brief","kind":"form","persist":"conversation","stageId":"generate","specJson":"{}","schemaDigest":"","requestedAt":1,"timeoutAt":2,"onTimeout":"default","requestedBy":"pipeline"}}"###,
    ),
    (
        "surface_responded",
        "run:r1",
        r###"{"kind":"surface_responded","data":{"runId":"r1","projectId":"p1","conversationId":"c1","snapshotId":"s1","surfaceId":"brief","kind":"choice","persist":"project","schemaDigest":"","valueJson":"\"a\"","respondedBy":"cache","respondedAt":3,"expiresAt":0}}"###,
    ),
    (
        "surface_timed_out",
        "run:r1",
        r###"{"kind":"surface_timed_out","data":{"runId":"r1","surfaceId":"brief","resolution":"abort","timedOutAt":4}}"###,
    ),
    (
        "surface_invalidated",
        "project:p1",
        r###"{"kind":"surface_invalidated","data":{"projectId":"p1","conversationId":"c1","runId":"r1","surfaceId":"brief","persist":"project","reason":"schema-drift"}}"###,
    ),
    ("snapshot_expired", "snapshot:s1", r###"{"kind":"snapshot_expired","data":{"snapshotId":"s1","reason":"ttl"}}"###),
    (
        "tool_registered",
        "tools",
        r###"{"kind":"tool_registered","data":{"name":"od.browser.click","surface":"browser","description":"d","descriptorJson":"{}","keywords":"","digest":"d","replacesDigest":"","source":"builtin","registeredAt":1}}"###,
    ),
    (
        "tool_removed",
        "tools",
        r###"{"kind":"tool_removed","data":{"name":"x","source":"builtin","reason":"builtin-retired","removedAt":1}}"###,
    ),
    (
        "browser_action_resulted",
        "run:r1",
        r###"{"kind":"browser_action_resulted","data":{"runId":"r1","invocationId":"i","tool":"od.browser.click","ok":false,"resultJson":"null","errorCode":"TIMEOUT","errorMessage":"m","errorDetailsJson":"","resolvedBy":"timeout","supersededBy":"","resultedAt":1}}"###,
    ),
];

fn fixture_path(name: &str) -> String {
    format!("{}/fixtures/vocab/{name}.frame", env!("CARGO_MANIFEST_DIR"))
}

fn frame_of(stream: &str, json: &str) -> Vec<u8> {
    let ev: Event = serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"));
    let h = FrameHeader {
        kind: ev.kind().code(),
        schema: ev.kind().current_schema(),
        seq: 1,
        version: 0,
        recorded_at: 1_767_225_600_000,
        stream,
        op_id: None,
    };
    od_events::Frame::encode(&h, &ev.encode_payload(), &GENESIS_HASH)
}

#[test]
#[ignore = "writes the fixtures; run once by hand, with the build that held these fields as strings"]
fn write_vocab_fixtures() {
    for (name, stream, json) in CASES {
        std::fs::write(fixture_path(name), frame_of(stream, json)).unwrap();
    }
}

#[test]
fn string_era_frames_decode_typed_and_keep_their_bytes_and_wire_json() {
    for (name, stream, json) in CASES {
        let bytes = std::fs::read(fixture_path(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let f = FrameRef::parse_verified(&bytes).expect("golden frame verifies");
        assert_eq!(f.stream().unwrap(), *stream);
        let ev = decode_any(f.kind(), f.schema(), f.payload()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(f.schema(), ev.kind().current_schema(), "{name}: typing the fields needed no new schema");
        assert_eq!(ev.encode_payload(), f.payload(), "{name}: archived bytes changed");
        assert_eq!(serde_json::to_string(&ev).unwrap(), *json, "{name}: wire JSON changed");
        assert_eq!(frame_of(stream, json), bytes, "{name}: a frame written today differs");
    }
}

#[test]
fn string_era_values_read_as_the_variants_they_name() {
    use od_events::vocab::*;
    let read = |name: &str| {
        let bytes = std::fs::read(fixture_path(name)).unwrap();
        let f = FrameRef::parse_verified(&bytes).unwrap();
        decode_any(f.kind(), f.schema(), f.payload()).unwrap()
    };
    let Event::RunEnded(ok) = read("run_ended_succeeded") else { panic!("run_ended") };
    assert_eq!((ok.status, ok.failure_category), (RunStatus::Succeeded, FailureCategory::None));
    let Event::RunEnded(failed) = read("run_ended_failed") else { panic!("run_ended") };
    assert_eq!((failed.status, failed.failure_category), (RunStatus::Failed, FailureCategory::AgentCrashed));
    // Values this build does not know are kept, not refused and not mapped to a default.
    let Event::RunEnded(odd) = read("run_ended_unknown") else { panic!("run_ended") };
    assert_eq!(odd.status, RunStatus::Other("evaporated".into()));
    assert_eq!(odd.failure_category, FailureCategory::Other("cosmic-ray".into()));
    let Event::RunCreated(c) = read("run_created") else { panic!("run_created") };
    assert_eq!(c.agent, AgentKind::DryRun);
    let Event::RunCreated(c) = read("run_created_exec") else { panic!("run_created") };
    assert_eq!(c.agent, AgentKind::Other("claude".into()), "a catalog agent's id stays open");
    let Event::AgentOutput(o) = read("agent_output_stderr") else { panic!("agent_output") };
    assert_eq!(o.channel, Channel::Stderr);
    let Event::DevloopIteration(d) = read("devloop_iteration_looping") else { panic!("devloop_iteration") };
    assert_eq!(d.termination, Termination::Continuing);
    let Event::DevloopIteration(d) = read("devloop_iteration_cap") else { panic!("devloop_iteration") };
    assert_eq!(d.termination, Termination::IterationCap);
    let Event::MarketplaceAdded(m) = read("marketplace_added") else { panic!("marketplace_added") };
    assert_eq!(m.trust, Trust::Official);
    let Event::PluginInstalled(p) = read("plugin_installed") else { panic!("plugin_installed") };
    assert_eq!((p.source_kind, p.trust), (SourceKind::Marketplace, Trust::Trusted));
    let Event::PromptComposed(p) = read("prompt_composed") else { panic!("prompt_composed") };
    let statuses: Vec<_> = p.sections.iter().map(|s| s.status.clone()).collect();
    assert_eq!(statuses, [SectionStatus::Included, SectionStatus::Dropped]);
    let Event::SurfaceResponded(r) = read("surface_responded") else { panic!("surface_responded") };
    assert_eq!((r.kind, r.persist, r.responded_by), (SurfaceKind::Choice, Persist::Project, RespondedBy::Cache));
}
