//! `od plugin export --snapshot-id S --as od|skill` (spec §8.2.1 step 3): exactly what a snapshot
//! used, as a reproducible tar — resolved from the immutable snapshot, never from the plugin as it
//! is installed now. `od` is a plugin folder (`open-design.json` = the snapshot's merged manifest,
//! `SKILL.md` = its frontmatter and the body the snapshot recorded, `.od-snapshot.json` = the
//! provenance and inputs); installing that folder and applying it with those inputs gives the same
//! `manifestSourceDigest`. `skill` is the agent skill alone (`SKILL.md`). Entries are sorted, with
//! fixed mode, owner and time, so the same snapshot always gives the same bytes.

use serde_json::{json, Value};

use super::{Engine, WorkError};

/// The export targets.
pub const TARGETS: [&str; 2] = ["od", "skill"];

fn yaml_scalar(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

/// The SKILL.md a snapshot used: frontmatter (name, description) and the recorded body.
fn skill_md(snap: &Value) -> String {
    let m = &snap["manifest"];
    let name = m["name"].as_str().or(snap["pluginId"].as_str()).unwrap_or("plugin");
    let description = match &m["description"] {
        Value::String(s) => s.clone(),
        _ => snap["pluginDescription"].as_str().unwrap_or("").to_string(),
    };
    format!(
        "---\nname: {}\ndescription: {}\n---\n{}\n",
        yaml_scalar(name),
        yaml_scalar(&description),
        snap["skillBody"].as_str().unwrap_or("").trim_end()
    )
}

fn append(b: &mut tar::Builder<Vec<u8>>, path: &str, bytes: &[u8]) -> Result<(), WorkError> {
    let mut h = tar::Header::new_ustar();
    h.set_size(bytes.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, path, bytes).map_err(|e| WorkError::io("writing the export", e))
}

impl Engine {
    /// The export of snapshot `id` as `target` (a tar; entries below `<pluginId>/`).
    pub fn export_snapshot(&self, id: &str, target: &str) -> Result<Vec<u8>, WorkError> {
        if !TARGETS.contains(&target) {
            return Err(WorkError::invalid("as", format!("{target:?} is not one of {}", TARGETS.join(", "))));
        }
        let snap = self.snapshot(id)?;
        let plugin = snap["pluginId"].as_str().unwrap_or("plugin").to_string();
        let dir: String =
            plugin.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '-' }).collect();
        let mut files: Vec<(String, Vec<u8>)> = vec![(format!("{dir}/SKILL.md"), skill_md(&snap).into_bytes())];
        if target == "od" {
            let manifest = serde_json::to_vec_pretty(&snap["manifest"]).expect("JSON");
            files.push((format!("{dir}/open-design.json"), manifest));
            let provenance = json!({
                "snapshotId": id,
                "pluginId": plugin,
                "pluginVersion": snap["pluginVersion"],
                "pluginSourceDigest": snap["pluginSourceDigest"],
                "manifestSourceDigest": snap["manifestSourceDigest"],
                "inputs": snap["inputs"],
                "capabilitiesGranted": snap["capabilitiesGranted"],
                "taskKind": snap["taskKind"],
            });
            files.push((format!("{dir}/.od-snapshot.json"), serde_json::to_vec_pretty(&provenance).expect("JSON")));
        }
        files.sort();
        let mut b = tar::Builder::new(Vec::new());
        b.mode(tar::HeaderMode::Deterministic);
        for (path, bytes) in &files {
            append(&mut b, path, bytes)?;
        }
        b.into_inner().map_err(|e| WorkError::io("writing the export", e))
    }
}
