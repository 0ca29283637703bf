//! Helpers shared by integration tests.
#![allow(dead_code)]

pub mod daemon_proc;
pub mod fake_model;
pub mod faults;
pub mod harness;
pub mod mcp;
pub mod pg;
pub mod power;
pub mod raw;
pub mod real_cli;
pub mod tls;
pub mod ui_node;

use od::store::{Append, SledLog, Store, StoreConfig};
use od_events::system::NoteRecorded;
use od_events::{Event, StreamId};
use std::path::Path;

pub fn note(text: &str) -> Event {
    Event::NoteRecorded(NoteRecorded { text: text.to_string(), tags: vec![] })
}

pub fn sid(s: &str) -> StreamId {
    StreamId::new(s).unwrap()
}

pub fn open(dir: &Path) -> Store {
    let mut cfg = StoreConfig::new(dir);
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    SledLog::open(cfg).expect("open store")
}

pub fn append_note(store: &Store, stream: &str, text: &str) -> od::store::AppendResult {
    store.append(Append::new(sid(stream), vec![note(text)])).expect("append")
}

pub fn texts(store: &Store, stream: &str) -> Vec<String> {
    store
        .read_stream(stream, 0, usize::MAX)
        .unwrap()
        .iter()
        .map(|f| match f.decode().unwrap().event {
            Event::NoteRecorded(n) => n.text,
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

/// Recursive copy of a data dir.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}
