//! Run bundles (issue 16): `od run export` writes one run — with the runs it was forked from —
//! as a self-contained, verifiable tar: its streams' frames exactly as the log holds them (each
//! with its own blake3 hash and its chain link), the snapshots they ran with, and every blob their
//! artifacts name. `od run import` checks everything before it writes anything: each frame's hash,
//! the chain between frames that follow each other, every stream complete from version 0, the
//! frames' digest in the manifest, every blob's digest, and that the runs are new here. Then the
//! blobs are stored and the events appended in one atomic append.

use od_events::frame::FrameRef;
use od_events::{Event, Stored, StreamId};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use super::snapshots::BODY_STREAM_PREFIX;
use super::{Engine, WorkError};
use crate::limits::MAX_RUN_BUNDLE_BYTES;
use crate::store::{decode_frame, Append, Expected};

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

fn unpack(mut bytes: &[u8]) -> Result<Vec<&[u8]>, WorkError> {
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
                // Only artifacts name blobs: the other frames are not decoded.
                let view = FrameRef::parse(&f).map_err(|e| bad(e.to_string()))?;
                if view.kind() == od_events::EventKind::ArtifactRecorded.code() {
                    if let Event::ArtifactRecorded(e) = decode_frame(view)?.event {
                        digests.insert(e.digest);
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

    /// Checks bundle `bytes` and, when every check passes, records it here: `{runId, runs,
    /// events, blobs, skippedStreams}`. A refusal writes nothing.
    pub fn import_run(&self, bytes: &[u8]) -> Result<Value, WorkError> {
        if bytes.len() as u64 > MAX_RUN_BUNDLE_BYTES {
            return Err(bad(format!("larger than MAX_RUN_BUNDLE_BYTES ({MAX_RUN_BUNDLE_BYTES})")));
        }
        let (raw_manifest, packed, blobs) = read_tar(bytes)?;
        // A bundle is written one way only: any byte changed anywhere — padding included — shows.
        if build_tar(&raw_manifest, &packed, &blobs)? != bytes {
            return Err(bad("the bundle is not as `od run export` writes it (a byte was altered)"));
        }
        let manifest: Value = serde_json::from_slice(&raw_manifest).map_err(|e| bad(format!("manifest.json: {e}")))?;
        if manifest["format"] != FORMAT {
            return Err(bad(format!("format {} is not {FORMAT}", manifest["format"])));
        }
        if blake3::hash(&packed).to_hex().as_str() != manifest["framesDigest"].as_str().unwrap_or("") {
            return Err(bad("frames.bin does not match the manifest's framesDigest (altered or truncated)"));
        }
        // Each frame's own hash, and the chain wherever two frames follow each other in the log.
        let raw = unpack(&packed)?;
        let mut stored: Vec<Stored> = Vec::with_capacity(raw.len());
        let mut prev: Option<(u64, [u8; 32])> = None;
        for (n, f) in raw.iter().enumerate() {
            let view = FrameRef::parse_verified(f).map_err(|e| bad(format!("frame {n}: {e}")))?;
            if let Some((seq, hash)) = prev {
                if view.seq() <= seq {
                    return Err(bad(format!("frame {n}: seq {} is not after {seq}", view.seq())));
                }
                if view.seq() == seq + 1 && *view.prev_hash() != hash {
                    return Err(bad(format!("frame {n}: seq {} does not chain to the frame before it", view.seq())));
                }
            }
            prev = Some((view.seq(), *view.hash()));
            stored.push(decode_frame(view).map_err(|e| bad(format!("frame {n}: {e}")))?);
        }
        if stored.len() as u64 != manifest["frames"].as_u64().unwrap_or(u64::MAX) {
            return Err(bad("the manifest's frame count does not match frames.bin"));
        }
        // Every stream complete from version 0, and only the streams the manifest lists.
        let listed: Vec<String> =
            serde_json::from_value(manifest["streams"].clone()).map_err(|e| bad(e.to_string()))?;
        let mut by_stream: BTreeMap<String, Vec<&Stored>> = BTreeMap::new();
        for s in &stored {
            by_stream.entry(s.envelope.stream.clone()).or_default().push(s);
        }
        for (name, events) in &by_stream {
            if !listed.contains(name) {
                return Err(bad(format!("stream {name} is not in the manifest")));
            }
            if events.iter().enumerate().any(|(i, s)| s.envelope.version != i as u64) {
                return Err(bad(format!("stream {name} is not complete from version 0")));
            }
        }
        // Every blob an artifact names is present and is what its name says.
        for s in &stored {
            if let Event::ArtifactRecorded(e) = &s.event {
                let b =
                    blobs.get(&e.digest).ok_or_else(|| bad(format!("blob {} of {} is missing", e.digest, e.path)))?;
                if blake3::hash(b).to_hex().as_str() != e.digest {
                    return Err(bad(format!("blob {} does not match its digest (altered)", e.digest)));
                }
            }
        }
        for (d, b) in &blobs {
            if blake3::hash(b).to_hex().as_str() != d {
                return Err(bad(format!("blob {d} does not match its digest (altered)")));
            }
        }
        let runs: Vec<String> = serde_json::from_value(manifest["runs"].clone()).map_err(|e| bad(e.to_string()))?;
        let run_id = manifest["runId"].as_str().unwrap_or("").to_string();
        if !runs.contains(&run_id) || !by_stream.contains_key(&format!("run:{run_id}")) {
            return Err(bad(format!("run {run_id:?} is not in the bundle")));
        }
        // Runs must be new here; a snapshot (or body) already here is the same one and is kept.
        let mut appends = Vec::new();
        let mut skipped = Vec::new();
        for (name, events) in &by_stream {
            let exists = !self.store.read_stream(name, 0, 1)?.is_empty();
            if exists && name.starts_with("run:") {
                return Err(WorkError::Exists { what: "run", id: name[4..].to_string() });
            }
            if exists {
                skipped.push(name.clone());
                continue;
            }
            let stream = StreamId::new(name.clone()).map_err(|e| bad(e.to_string()))?;
            let evs = events.iter().map(|s| s.event.clone()).collect();
            appends.push(Append::new(stream, evs).expect(Expected::NoStream));
        }
        for b in blobs.values() {
            self.blobs.put(&b[..]).map_err(|e| WorkError::io("storing a bundle's blob", e))?;
        }
        let n: usize = appends.iter().map(|a: &Append| a.events.len()).sum();
        self.store.append_all(appends)?;
        Ok(json!({ "runId": run_id, "runs": runs, "events": n, "blobs": blobs.len(), "skippedStreams": skipped }))
    }
}

/// The manifest (as bytes), frames.bin and blobs of a bundle.
type Parts = (Vec<u8>, Vec<u8>, BTreeMap<String, Vec<u8>>);

/// The bundle's bytes: a tar with fixed headers (mode 0644, time 0), in a fixed order.
fn build_tar(manifest: &[u8], frames: &[u8], blobs: &BTreeMap<String, Vec<u8>>) -> Result<Vec<u8>, WorkError> {
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

fn read_tar(bytes: &[u8]) -> Result<Parts, WorkError> {
    let mut ar = tar::Archive::new(bytes);
    let (mut manifest, mut frames, mut blobs) = (None, None, BTreeMap::new());
    for entry in ar.entries().map_err(|e| bad(e.to_string()))? {
        let mut entry = entry.map_err(|e| bad(e.to_string()))?;
        let name = entry.path().map_err(|e| bad(e.to_string()))?.to_string_lossy().to_string();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).map_err(|e| bad(format!("{name}: {e}")))?;
        match name.as_str() {
            "manifest.json" => manifest = Some(data),
            "frames.bin" => frames = Some(data),
            other => match other.strip_prefix("blobs/") {
                Some(d) if d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    blobs.insert(d.to_string(), data);
                }
                _ => return Err(bad(format!("unexpected entry {other:?}"))),
            },
        }
    }
    let manifest = manifest.ok_or_else(|| bad("no manifest.json"))?;
    let parsed: Value = serde_json::from_slice(&manifest).map_err(|e| bad(format!("manifest.json: {e}")))?;
    let listed: BTreeSet<String> = parsed["blobs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["digest"].as_str().map(String::from))
        .collect();
    if listed != blobs.keys().cloned().collect::<BTreeSet<_>>() {
        return Err(bad("the blobs do not match the manifest's list"));
    }
    Ok((manifest, frames.ok_or_else(|| bad("no frames.bin"))?, blobs))
}
