//! Run bundles from elsewhere are verified, never trusted (issue 36): a forged export whose artifact
//! path leaves the run's folder (frames rehashed) is refused (finding 1); frames spliced in — a
//! trusted plugin or an official marketplace, on a stream of their own or re-encoded inside the
//! run's — are refused (finding 2); an imported run that was waiting for an answer does not say
//! `running` forever once answered: it was ended at import with the way to go on (finding 11);
//! an imported exec run's command is never run again by a fork; and an import's peak memory stays
//! within 1.5× the bundle (finding 14).

use crate::common;

use common::harness::{od_cli, Engine};
use od_events::frame::{Frame, FrameRef, Hash};
use od_events::{Event, EventKind};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;

/// A bundle taken apart: what an attacker edits before sealing it again.
struct Bundle {
    manifest: Value,
    frames: Vec<Vec<u8>>,
    blobs: BTreeMap<String, Vec<u8>>,
}

fn open_bundle(bytes: &[u8]) -> Bundle {
    let mut ar = tar::Archive::new(bytes);
    let (mut manifest, mut packed, mut blobs) = (Value::Null, Vec::new(), BTreeMap::new());
    for entry in ar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().to_string();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        match name.as_str() {
            "manifest.json" => manifest = serde_json::from_slice(&data).unwrap(),
            "frames.bin" => packed = data,
            other => {
                blobs.insert(other.trim_start_matches("blobs/").to_string(), data);
            }
        }
    }
    let mut frames = Vec::new();
    let mut rest = &packed[..];
    while !rest.is_empty() {
        let n = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
        frames.push(rest[4..4 + n].to_vec());
        rest = &rest[4 + n..];
    }
    Bundle { manifest, frames, blobs }
}

/// The bundle as `od run export` would write it: digests, counts and the tar all made consistent.
fn seal(b: &mut Bundle) -> Vec<u8> {
    let mut packed = Vec::new();
    for f in &b.frames {
        packed.extend_from_slice(&(f.len() as u32).to_le_bytes());
        packed.extend_from_slice(f);
    }
    b.manifest["frames"] = json!(b.frames.len());
    b.manifest["framesDigest"] = json!(blake3::hash(&packed).to_hex().to_string());
    b.manifest["blobs"] =
        b.blobs.iter().map(|(d, v)| json!({ "digest": d, "bytes": v.len() })).collect::<Vec<_>>().into();
    let mut tar = tar::Builder::new(Vec::new());
    let mut add = |name: &str, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_cksum();
        tar.append_data(&mut h, name, data).unwrap();
    };
    add("manifest.json", &serde_json::to_vec_pretty(&b.manifest).unwrap());
    add("frames.bin", &packed);
    for (d, v) in &b.blobs {
        add(&format!("blobs/{d}"), v);
    }
    tar.into_inner().unwrap()
}

fn decode(frame: &[u8]) -> Event {
    od::store::decode_frame(FrameRef::parse(frame).unwrap()).unwrap().event
}

/// `frame` carrying `event` instead, at `stream`/`seq`/`version`, chained after `prev`.
fn encode_as(frame: &[u8], event: &Event, stream: &str, seq: u64, version: u64, prev: &Hash) -> Vec<u8> {
    let mut h = FrameRef::parse(frame).unwrap().header().unwrap();
    h.kind = event.kind().code();
    h.schema = event.kind().current_schema();
    (h.stream, h.seq, h.version) = (stream, seq, version);
    Frame::encode(&h, &event.encode_payload(), prev)
}

/// Rehashes the chain: every frame that follows another in the log links to its new hash.
fn rechain(frames: &mut [Vec<u8>]) {
    for i in 1..frames.len() {
        let (prev_seq, prev_hash) = {
            let p = FrameRef::parse(&frames[i - 1]).unwrap();
            (p.seq(), *p.hash())
        };
        let cur = FrameRef::parse(&frames[i]).unwrap();
        if cur.seq() == prev_seq + 1 && *cur.prev_hash() != prev_hash {
            let h = cur.header().unwrap();
            frames[i] = Frame::encode(&h, cur.payload(), &prev_hash);
        }
    }
}

fn import(e: &Engine, bytes: &[u8]) -> (u16, Value) {
    let r = ureq::post(&format!("{}/api/runs/import", e.url))
        .set("Authorization", &format!("Bearer {}", e.token))
        .set("Content-Type", "application/octet-stream")
        .send_bytes(bytes);
    match r {
        Ok(r) => (r.status(), r.into_json().unwrap()),
        Err(ureq::Error::Status(c, r)) => (c, r.into_json().unwrap_or(Value::Null)),
        Err(err) => panic!("{err}"),
    }
}

fn export(e: &Engine, run: &str) -> Vec<u8> {
    let r = ureq::get(&format!("{}/api/runs/{run}/export", e.url))
        .set("Authorization", &format!("Bearer {}", e.token))
        .call()
        .unwrap();
    let mut out = Vec::new();
    r.into_reader().read_to_end(&mut out).unwrap();
    out
}

fn generated_run(e: &Engine) -> String {
    let inputs = json!({ "topic": "tea shop", "audience": "tea lovers", "artifactKind": "landing-page" });
    let (id, ev) = e.run(json!({ "pluginId": "od-new-generation", "pluginInputs": inputs }));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded");
    id
}

#[test]
fn a_forged_artifact_path_is_refused_at_import() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Engine::start(&tmp.path().join("a"), NOW);
    let run = generated_run(&a);
    let bytes = export(&a, &run);
    a.stop();
    let mut b = open_bundle(&bytes);
    let at = b.frames.iter().position(|f| FrameRef::parse(f).unwrap().kind() == EventKind::ArtifactRecorded.code());
    let at = at.expect("the run recorded an artifact");
    let Event::ArtifactRecorded(mut art) = decode(&b.frames[at]) else { unreachable!() };
    art.path = "../../../X".into();
    let v = FrameRef::parse(&b.frames[at]).unwrap();
    let (stream, seq, version, prev) = (v.stream().unwrap().to_string(), v.seq(), v.version(), *v.prev_hash());
    b.frames[at] = encode_as(&b.frames[at].clone(), &Event::ArtifactRecorded(art), &stream, seq, version, &prev);
    rechain(&mut b.frames);
    let forged = seal(&mut b);

    let c = Engine::start(&tmp.path().join("c"), NOW);
    let (code, v) = import(&c, &forged);
    assert_eq!(code, 400, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("leaves the run's folder"), "{v}");
    assert_eq!(c.get(&format!("/api/runs/{run}")).0, 404, "nothing was written");
    assert!(!tmp.path().join("X").exists() && !tmp.path().parent().unwrap().join("X").exists());
    // The bundle as exported (resealed by the same hand) imports: only the forgery is refused.
    let (code, v) = import(&c, &seal(&mut open_bundle(&bytes)));
    assert_eq!(code, 200, "{v}");
}

#[test]
fn spliced_plugin_and_marketplace_frames_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Engine::start(&tmp.path().join("a"), NOW);
    let run = generated_run(&a);
    let bytes = export(&a, &run);
    a.stop();
    let evil = Event::PluginInstalled(od_events::plugins::PluginInstalled {
        id: "evil".into(),
        version: "1.0.0".into(),
        title: "Evil".into(),
        source_kind: "local".into(),
        source: "/tmp/evil".into(),
        trust: "trusted".into(),
        manifest_json: json!({ "name": "evil", "version": "1.0.0" }).to_string(),
        source_digest: "0".repeat(64),
        fs_path: "/tmp/evil".into(),
        capabilities_granted: vec!["subprocess".into(), "fs:write".into()],
        warnings_json: "[]".into(),
    });
    let official = Event::MarketplaceAdded(od_events::marketplaces::MarketplaceAdded {
        id: "official".into(),
        url: "http://evil.example/index.json".into(),
        trust: "official".into(),
        manifest_json: "{}".into(),
    });
    let c = Engine::start(&tmp.path().join("c"), NOW);
    let run_stream = format!("run:{run}");
    for (event, own_stream) in
        [(&evil, "plugin:evil"), (&official, "marketplace:official"), (&evil, ""), (&official, "")]
    {
        let mut b = open_bundle(&bytes);
        let last = b.frames.last().unwrap().clone();
        let last_seq = FrameRef::parse(&last).unwrap().seq();
        // On a stream of its own (listed in the manifest too), or re-encoded as the run's next event;
        // either way with a seq past the run's, where no chain links it.
        let (stream, version) = match own_stream {
            "" => {
                let n = b.frames.iter().filter(|f| FrameRef::parse(f).unwrap().stream().unwrap() == run_stream).count();
                (run_stream.clone(), n as u64)
            }
            s => {
                b.manifest["streams"].as_array_mut().unwrap().push(json!(s));
                (s.to_string(), 0)
            }
        };
        b.frames.push(encode_as(&last, event, &stream, last_seq + 7, version, &[9u8; 32]));
        let (code, v) = import(&c, &seal(&mut b));
        assert_eq!(code, 400, "{stream}: {v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains("does not belong") || msg.contains("not a stream a run bundle carries"), "{msg}");
        assert_eq!(c.get(&format!("/api/runs/{run}")).0, 404, "nothing was written");
    }
    assert_eq!(c.get("/api/plugins/evil").0, 404);
    let (_, m) = c.get("/api/marketplaces");
    assert!(!m.to_string().contains("evil.example"), "{m}");
}

/// A plugin whose first stage asks a question (`brief`) before it goes on.
fn asker(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), "---\nname: asker\ndescription: Asks first.\n---\nAsk.\n").unwrap();
    let manifest = json!({
        "specVersion": "1.0.0", "name": "asker", "version": "1.0.0", "title": "Asker",
        "od": { "kind": "scenario", "taskKind": "new-generation",
                "pipeline": { "stages": [ { "id": "ask", "atoms": ["todo-write"] }, { "id": "make", "atoms": ["file-write"] } ] },
                "genui": { "surfaces": [ { "id": "brief", "kind": "form", "persist": "run", "trigger": { "stageId": "ask" },
                    "schema": { "type": "object", "properties": { "audience": { "type": "string" } }, "required": ["audience"] } } ] } }
    });
    std::fs::write(dir.join("open-design.json"), manifest.to_string()).unwrap();
}

#[test]
fn an_imported_run_that_was_waiting_ends_at_import_and_goes_on_as_a_fork() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Engine::start(&tmp.path().join("a"), NOW);
    asker(&tmp.path().join("asker"));
    a.install(&tmp.path().join("asker"));
    let run = a.start_run(json!({ "pluginId": "asker" }));
    a.watch_until(&run, "genui_surface_request");
    assert_eq!(a.get(&format!("/api/runs/{run}")).1["run"]["status"], "awaiting-input");
    let bytes = export(&a, &run);
    let project = a.get(&format!("/api/runs/{run}")).1["run"]["projectId"].as_str().unwrap().to_string();
    a.stop();

    // The run's project exists here too (a fork works in its project).
    let b = Engine::start(&tmp.path().join("b"), NOW);
    assert_eq!(b.post("/api/projects", json!({ "id": project })).0, 200);
    let (code, v) = import(&b, &bytes);
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["endedAtImport"], json!([run]));
    let (_, shown) = b.get(&format!("/api/runs/{run}"));
    assert_eq!(shown["run"]["status"], "canceled", "{shown}");
    // An answer does not bring it back to `running` (nothing executes it here): it stays ended.
    let (code, v) =
        b.post(&format!("/api/runs/{run}/genui/brief/respond"), json!({ "value": { "audience": "tea lovers" } }));
    assert!(code == 200 || code == 409, "{v}");
    assert_eq!(b.get(&format!("/api/runs/{run}")).1["run"]["status"], "canceled");
    let ended = b.watch(&run);
    let reason = ended.last().unwrap()["data"].to_string();
    assert!(reason.contains("imported") && reason.contains("fork"), "{reason}");
    // Going on: a fork with the answer, executed here with the forker's agent and rights.
    let (code, f) =
        b.post(&format!("/api/runs/{run}/fork"), json!({ "at": "end", "answers": { "brief": { "audience": "x" } } }));
    assert_eq!(code, 202, "{f}");
    let fork = f["runId"].as_str().unwrap().to_string();
    let end = b.watch(&fork).last().unwrap()["data"].clone();
    assert_eq!(end["status"], "succeeded", "{end}");
}

#[test]
fn a_fork_of_an_imported_exec_run_does_not_run_the_bundle_authors_command() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Engine::start(&tmp.path().join("a"), NOW);
    let tally = tmp.path().join("tally");
    let agent =
        common::harness::script(tmp.path(), "agent.sh", &format!("cat >/dev/null; echo x >> {}", tally.display()));
    let (run, ev) = a.run(json!({ "agent": "exec", "agentCommand": agent.to_str().unwrap(), "agentProtocol": "od" }));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{:?}", ev.last());
    let bytes = export(&a, &run);
    let project = a.get(&format!("/api/runs/{run}")).1["run"]["projectId"].as_str().unwrap().to_string();
    a.stop();
    let ran = std::fs::read_to_string(&tally).unwrap();

    let b = Engine::start(&tmp.path().join("b"), NOW);
    assert_eq!(b.post("/api/projects", json!({ "id": project })).0, 200);
    assert_eq!(import(&b, &bytes).0, 200);
    // Even the token holder's fork does not run the bundle's command again unasked …
    let (code, v) = b.post(&format!("/api/runs/{run}/fork"), json!({ "at": "end" }));
    assert_eq!((code, v["error"]["data"]["field"].as_str()), (400, Some("agentCommand")), "{v}");
    assert_eq!(std::fs::read_to_string(&tally).unwrap(), ran, "the bundle's command did not run");
    // … it names its own agent.
    let (code, f) = b.post(&format!("/api/runs/{run}/fork"), json!({ "at": "end", "agent": "dry-run" }));
    assert_eq!(code, 202, "{f}");
    assert_eq!(b.watch(f["runId"].as_str().unwrap()).last().unwrap()["data"]["status"], "succeeded");
    assert_eq!(std::fs::read_to_string(&tally).unwrap(), ran);
}

fn status_kib(pid: u32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = s.lines().find(|l| l.starts_with(key)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn an_import_holds_at_most_one_and_a_half_times_the_bundle_in_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Engine::start(&tmp.path().join("a"), NOW);
    // An agent that writes three 2 MiB files of random bytes per invocation and reports them as
    // artifacts (the default scenario invokes it once per stage).
    let mut script = String::new();
    for i in 0..3 {
        script.push_str(&format!("head -c 2097152 /dev/urandom > big{i}.bin\n"));
        script.push_str(&format!("echo '{{\"type\":\"artifact\",\"path\":\"big{i}.bin\"}}'\n"));
    }
    let agent = common::harness::script(tmp.path(), "agent.sh", &script);
    let (run, ev) = a.run(json!({ "agent": "exec", "agentCommand": agent.to_str().unwrap(), "agentProtocol": "od" }));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{:?}", ev.last());
    let bundle = tmp.path().join("big.tar");
    std::fs::write(&bundle, export(&a, &run)).unwrap();
    a.stop();
    let size = std::fs::metadata(&bundle).unwrap().len();
    assert!(size > 16 * 1024 * 1024, "{size}");

    let data = tmp.path().join("b");
    std::fs::create_dir_all(&data).unwrap();
    let d = common::daemon_proc::start(&data, &[], &[]);
    let pid = d.child.id();
    // The peak is measured from here: reset it, note what the daemon holds now.
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let base = status_kib(pid, "VmRSS:");
    let out = od_cli(&data, &["run", "import", bundle.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let peak = status_kib(pid, "VmHWM:");
    let grew = (peak.saturating_sub(base) * 1024) as f64;
    let ratio = grew / size as f64;
    eprintln!(
        "import peak memory: bundle {size} bytes, daemon RSS {base} KiB before, peak {peak} KiB: +{:.1} MiB = {ratio:.3}x the bundle",
        grew / 1048576.0
    );
    assert!(ratio <= 1.5, "the import grew the daemon by {ratio:.2}x the bundle");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["blobs"].as_u64().unwrap() >= 3, "{v}");
}
