//! Golden fixture of a schema-1 `note_recorded` frame, decoded on every test run.
//!
//! The fixture bytes were written once by `write_fixture` (ignored test) and committed; they must
//! never change. This test proves that a frame stored by an old build still verifies, parses and
//! upcasts to today's `NoteRecorded`.

use od_events::system::NoteRecorded;
use od_events::{Event, FrameHeader, FrameRef, GENESIS_HASH};
use od_migrations::{decode_any, v1::NoteRecordedV1};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/note_recorded_schema1.frame");

fn fixture_frame() -> Vec<u8> {
    let payload = rkyv::to_bytes::<rkyv::rancor::Error>(&NoteRecordedV1 { text: "hello from schema 1".into() })
        .unwrap()
        .into_vec();
    let h = FrameHeader {
        kind: 3,
        schema: 1,
        seq: 1,
        version: 0,
        recorded_at: 1_767_225_600_000,
        stream: "note:golden",
        op_id: Some("golden-op"),
    };
    od_events::Frame::encode(&h, &payload, &GENESIS_HASH)
}

#[test]
#[ignore = "writes the fixture; run once by hand when adding a schema"]
fn write_fixture() {
    std::fs::write(FIXTURE, fixture_frame()).unwrap();
}

#[test]
fn schema1_golden_bytes_decode_and_upcast() {
    let bytes = std::fs::read(FIXTURE).expect("golden fixture present");
    let f = FrameRef::parse_verified(&bytes).expect("golden frame verifies");
    assert_eq!((f.kind(), f.schema(), f.seq(), f.version()), (3, 1, 1, 0));
    assert_eq!(f.stream().unwrap(), "note:golden");
    let ev = decode_any(f.kind(), f.schema(), f.payload()).unwrap();
    assert_eq!(ev, Event::NoteRecorded(NoteRecorded { text: "hello from schema 1".into(), tags: vec![] }));
}

#[test]
fn encoding_of_frozen_shape_has_not_drifted() {
    let bytes = std::fs::read(FIXTURE).expect("golden fixture present");
    assert_eq!(bytes, fixture_frame(), "rkyv or frame encoding changed: stored data would break");
}

#[test]
fn future_schema_and_unknown_kind_are_errors() {
    assert!(decode_any(3, 9, b"").is_err());
    assert!(decode_any(4242, 1, b"").is_err());
    assert!(decode_any(3, 1, b"\x01\x02").is_err());
}

/// A real schema-1 `snapshot_recorded` frame, written by a dry-run run of `od-new-generation` before
/// snapshot bodies were stored once (the whole snapshot inline).
const SNAPSHOT_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/snapshot_recorded_schema1.frame");

#[test]
fn snapshot_recorded_schema1_golden_bytes_upcast_to_an_inline_body() {
    use od_events::snapshots::{SnapshotBody, SnapshotRecorded};
    use od_migrations::v1::SnapshotRecordedV1;
    let bytes = std::fs::read(SNAPSHOT_FIXTURE).expect("golden fixture present");
    let f = FrameRef::parse_verified(&bytes).expect("golden frame verifies");
    assert_eq!((f.kind(), f.schema()), (30, 1));
    let old = rkyv::from_bytes::<SnapshotRecordedV1, rkyv::rancor::Error>(f.payload()).expect("frozen shape reads");
    // The frozen shape has not drifted: it encodes the stored payload byte for byte.
    let again = rkyv::to_bytes::<rkyv::rancor::Error>(&old).unwrap();
    assert_eq!(again.as_slice(), f.payload(), "rkyv encoding of the frozen shape changed");
    assert!(old.snapshot_json.contains("\"snapshotId\""), "the fixture holds a whole snapshot");
    let Event::SnapshotRecorded(new) = decode_any(f.kind(), f.schema(), f.payload()).unwrap() else {
        panic!("a snapshot_recorded")
    };
    let expected = SnapshotRecorded {
        snapshot_id: old.snapshot_id.clone(),
        plugin_id: old.plugin_id.clone(),
        plugin_version: old.plugin_version.clone(),
        manifest_source_digest: old.manifest_source_digest.clone(),
        plugin_source_digest: old.plugin_source_digest.clone(),
        project_id: old.project_id.clone(),
        run_id: old.run_id.clone(),
        body: SnapshotBody::Inline { json: old.snapshot_json.clone() },
        applied_at: old.applied_at,
    };
    assert_eq!(new, expected);
}

/// A schema-1 `prompt_composed` frame (digest and size only), as a build before the prompt stack
/// was recorded wrote it.
const PROMPT_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/prompt_composed_schema1.frame");

fn prompt_v1() -> od_migrations::v1::PromptComposedV1 {
    od_migrations::v1::PromptComposedV1 {
        run_id: "run-golden".into(),
        stage_id: "generate".into(),
        iteration: 1,
        digest: "4f0c5d0e9a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5".into(),
        bytes: 2048,
    }
}

fn prompt_fixture_frame() -> Vec<u8> {
    let payload = rkyv::to_bytes::<rkyv::rancor::Error>(&prompt_v1()).unwrap().into_vec();
    let h = FrameHeader {
        kind: 53,
        schema: 1,
        seq: 7,
        version: 3,
        recorded_at: 1_767_225_600_000,
        stream: "run:run-golden",
        op_id: None,
    };
    od_events::Frame::encode(&h, &payload, &GENESIS_HASH)
}

#[test]
#[ignore = "writes the fixture; run once by hand when adding a schema"]
fn write_prompt_fixture() {
    std::fs::write(PROMPT_FIXTURE, prompt_fixture_frame()).unwrap();
}

#[test]
fn prompt_composed_schema1_golden_bytes_upcast_with_no_sections() {
    use od_events::runs::PromptComposed;
    let bytes = std::fs::read(PROMPT_FIXTURE).expect("golden fixture present");
    assert_eq!(bytes, prompt_fixture_frame(), "rkyv or frame encoding changed: stored data would break");
    let f = FrameRef::parse_verified(&bytes).expect("golden frame verifies");
    assert_eq!((f.kind(), f.schema()), (53, 1));
    let Event::PromptComposed(new) = decode_any(f.kind(), f.schema(), f.payload()).unwrap() else {
        panic!("a prompt_composed")
    };
    let old = prompt_v1();
    let expected = PromptComposed {
        run_id: old.run_id,
        stage_id: old.stage_id,
        iteration: old.iteration,
        digest: old.digest,
        bytes: old.bytes,
        sections: vec![],
        total_tokens: 0,
        budget_tokens: 0,
        estimator: String::new(),
        project_json: String::new(),
    };
    assert_eq!(new, expected);
}
