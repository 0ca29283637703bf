//! Run bundles (issue 16): `od run export` writes one run — with the runs it was forked from —
//! as a self-contained, verifiable tar: its streams' frames exactly as the log holds them (each
//! with its own blake3 hash and its chain link), the snapshots they ran with, and every blob their
//! artifacts name. `od run import` (`run_import.rs`) checks everything before it writes anything.

use od_events::frame::FrameRef;
use od_events::Event;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

use super::snapshots::BODY_STREAM_PREFIX;
use super::{Engine, WorkError};
use crate::store::decode_frame;

/// The bundle format's name (in its manifest).
pub const FORMAT: &str = "od-run-bundle/1";

fn bad(message: impl Into<String>) -> WorkError {
    WorkError::invalid("bundle", message)
}

/// Frames as `u32 LE length, bytes` records.
fn pack(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    out
}

pub(super) fn unpack(mut bytes: &[u8]) -> Result<Vec<&[u8]>, WorkError> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        if bytes.len() < 4 {
            return Err(bad("frames.bin ends inside a length"));
        }
        let n = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
        if bytes.len() < 4 + n {
            return Err(bad("frames.bin ends inside a frame"));
        }
        out.push(&bytes[4..4 + n]);
        bytes = &bytes[4 + n..];
    }
    Ok(out)
}

impl Engine {
    /// Every frame of `stream`, as stored.
    fn stream_frames(&self, stream: &str) -> Result<Vec<Vec<u8>>, WorkError> {
        let mut out = Vec::new();
        loop {
            let frames = self.store.read_stream(stream, out.len() as u64, 4096)?;
            if frames.is_empty() {
                return Ok(out);
            }
            out.extend(frames.iter().map(|f| f.view().bytes().to_vec()));
        }
    }

    /// The bundle of run `id` (tar bytes).
    pub fn export_run(&self, id: &str) -> Result<Vec<u8>, WorkError> {
        self.run_info(id)?;
        let mut runs: Vec<String> = self.lineage(id)?.into_iter().map(|s| s.run_id).collect();
        runs.dedup();
        let mut streams: Vec<String> = Vec::new();
        let mut digests = BTreeSet::new();
        for r in &runs {
            let sid = self.run_info(r)?.snapshot_id;
            let snap_stream = format!("snapshot:{sid}");
            if !streams.contains(&snap_stream) {
                // A snapshot's body may live in its own stream, shared by equal snapshots.
                for f in self.stream_frames(&snap_stream)? {
                    let st = decode_frame(FrameRef::parse(&f).map_err(|e| bad(e.to_string()))?)?;
                    if let Event::SnapshotRecorded(e) = &st.event {
                        if let od_events::snapshots::SnapshotBody::Stored { digest } = &e.body {
                            let body = format!("{BODY_STREAM_PREFIX}:{digest}");
                            if !streams.contains(&body) {
                                streams.push(body);
                            }
                        }
                    }
                }
                streams.push(snap_stream);
            }
            streams.push(format!("run:{r}"));
        }
        let mut frames = Vec::new();
        for s in &streams {
            for f in self.stream_frames(s)? {
                // Only artifacts and staged files name blobs: the other frames are not decoded.
                let view = FrameRef::parse(&f).map_err(|e| bad(e.to_string()))?;
                if view.kind() == od_events::EventKind::ArtifactRecorded.code() {
                    if let Event::ArtifactRecorded(e) = decode_frame(view)?.event {
                        digests.insert(e.digest);
                    }
                } else if view.kind() == od_events::EventKind::SubstrateStaged.code() {
                    if let Event::SubstrateStaged(e) = decode_frame(view)?.event {
                        digests.extend(e.files.into_iter().map(|f| f.digest));
                    }
                }
                frames.push(f);
            }
        }
        frames.sort_by_key(|f| FrameRef::parse(f).map(|v| v.seq()).unwrap_or(0));
        let packed = pack(&frames);
        let blobs: Vec<Value> = digests
            .iter()
            .map(|d| {
                let bytes = std::fs::metadata(self.blobs.path(d).map_err(|e| bad(e.to_string()))?)
                    .map_err(|e| WorkError::io("reading an artifact blob", e))?
                    .len();
                Ok(json!({ "digest": d, "bytes": bytes }))
            })
            .collect::<Result<_, WorkError>>()?;
        let manifest = json!({ "format": FORMAT, "runId": id, "runs": runs, "streams": streams,
            "frames": frames.len(), "framesDigest": blake3::hash(&packed).to_hex().as_str(), "blobs": blobs });
        let blob_bytes = digests
            .iter()
            .map(|d| Ok((d.clone(), self.blobs.read(d).map_err(|e| WorkError::io("reading an artifact blob", e))?)))
            .collect::<Result<BTreeMap<_, _>, WorkError>>()?;
        build_tar(&serde_json::to_vec_pretty(&manifest).expect("JSON"), &packed, &blob_bytes)
    }
}

/// The bundle's bytes: a tar with fixed headers (mode 0644, time 0), in a fixed order.
pub(super) fn build_tar(
    manifest: &[u8],
    frames: &[u8],
    blobs: &BTreeMap<String, Vec<u8>>,
) -> Result<Vec<u8>, WorkError> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut add = |name: &str, data: &[u8]| -> Result<(), WorkError> {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_cksum();
        tar.append_data(&mut h, name, data).map_err(|e| WorkError::io("writing a bundle", e))
    };
    add("manifest.json", manifest)?;
    add("frames.bin", frames)?;
    for (d, b) in blobs {
        add(&format!("blobs/{d}"), b)?;
    }
    tar.into_inner().map_err(|e| WorkError::io("writing a bundle", e))
}
