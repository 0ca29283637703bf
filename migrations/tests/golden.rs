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
