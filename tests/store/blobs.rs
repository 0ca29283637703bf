//! Content-addressed artifact blobs (issue 16, first part): every artifact a run records is stored
//! by its blake3 digest in the shared dir's blob store before the event naming it, once for equal
//! bytes, and stays as it was when a later run overwrites the project's file.

use crate::common;

use common::harness::{of, Engine};
use serde_json::{json, Value};

const NOW: i64 = 1_800_000_000_000;

fn blob_path(data: &std::path::Path, digest: &str) -> std::path::PathBuf {
    data.join("blobs").join(&digest[..2]).join(&digest[2..])
}

#[test]
fn every_recorded_artifact_is_a_blob_named_by_its_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    let inputs = json!({ "topic": "tea shop", "audience": "tea lovers", "artifactKind": "landing-page" });
    let (first_run, ev) = e.run(json!({ "pluginId": "od-new-generation", "pluginInputs": inputs }));
    let arts: Vec<&Value> = of(&ev, "artifact");
    assert!(!arts.is_empty(), "the dry run records artifacts");
    let mut first = None;
    for a in &arts {
        let digest = a["digest"].as_str().or_else(|| a["artifact"]["digest"].as_str()).unwrap_or_else(|| panic!("{a}"));
        let bytes = std::fs::read(blob_path(tmp.path(), digest)).unwrap_or_else(|e| panic!("blob {digest}: {e}"));
        assert_eq!(blake3::hash(&bytes).to_hex().as_str(), digest);
        first.get_or_insert((digest.to_string(), bytes));
    }
    let (digest, bytes) = first.unwrap();
    // A second run in the same project writes the same bytes (its prompts name the same project, so
    // the dry run's stage files match): still one blob each.
    let count = || walk(&tmp.path().join("blobs")).len();
    let before = count();
    let project = e.get(&format!("/api/runs/{first_run}")).1["run"]["projectId"].as_str().unwrap().to_string();
    let (_, ev2) = e.run(json!({ "pluginId": "od-new-generation", "pluginInputs": inputs, "projectId": project }));
    assert!(!of(&ev2, "artifact").is_empty());
    assert_eq!(count(), before, "equal bytes are stored once");
    assert_eq!(std::fs::read(blob_path(tmp.path(), &digest)).unwrap(), bytes);
    assert!(walk(&tmp.path().join("blobs")).iter().all(|p| !p
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with(".tmp")));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn a_run_s_file_reads_back_as_recorded_after_the_project_s_copy_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(tmp.path(), NOW);
    let inputs = json!({ "topic": "tea shop", "audience": "tea lovers", "artifactKind": "landing-page" });
    let (run, ev) = e.run(json!({ "pluginId": "od-new-generation", "pluginInputs": inputs }));
    let art = of(&ev, "artifact")[0].clone();
    let (project, path) = (art["projectId"].as_str().unwrap().to_string(), art["path"].as_str().unwrap().to_string());
    let get_bytes = |url: &str| -> (u16, Vec<u8>) {
        match ureq::get(&format!("{}{url}", e.url)).set("Authorization", &format!("Bearer {}", e.token)).call() {
            Ok(r) => {
                let mut b = Vec::new();
                std::io::Read::read_to_end(&mut r.into_reader(), &mut b).unwrap();
                (200, b)
            }
            Err(ureq::Error::Status(c, _)) => (c, Vec::new()),
            Err(err) => panic!("{url}: {err}"),
        }
    };
    let enc = path.replace('/', "%2F");
    let (code, recorded) = get_bytes(&format!("/api/projects/{project}/files/{enc}"));
    assert_eq!(code, 200);
    // The project's copy is overwritten afterwards (a later run, or a person).
    let put = ureq::put(&format!("{}/api/projects/{project}/files/{enc}", e.url))
        .set("Authorization", &format!("Bearer {}", e.token))
        .set("Content-Type", "application/octet-stream")
        .send_bytes(b"overwritten");
    assert!(put.is_ok(), "{put:?}");
    assert_eq!(get_bytes(&format!("/api/projects/{project}/files/{enc}")).1, b"overwritten");
    // The run's file is what it recorded.
    let (code, as_run) = get_bytes(&format!("/api/runs/{run}/files/{enc}"));
    assert_eq!((code, as_run.as_slice()), (200, recorded.as_slice()));
    // At an event before the file was recorded there is none; at its event, there it is.
    let (_, page) = e.get(&format!("/api/log/events?stream=run:{run}&limit=1000"));
    let at = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["event"] == "artifact_recorded" && x["data"]["payload"]["path"] == path.as_str())
        .map(|x| x["data"]["version"].as_u64().unwrap())
        .unwrap();
    assert_eq!(get_bytes(&format!("/api/runs/{run}/files/{enc}?at={}", at - 1)).0, 404);
    assert_eq!(get_bytes(&format!("/api/runs/{run}/files/{enc}?at={at}")).1, recorded);
    assert_eq!(get_bytes(&format!("/api/runs/{run}/files/no-such-file")).0, 404);
    assert_eq!(get_bytes(&format!("/api/runs/{run}/files/..%2Fescape")).0, 400);
}
