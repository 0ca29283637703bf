//! Apply: turn an installed plugin plus inputs into the resolved, digested bundle a project or run
//! would be created with — without writing anything (no event, no file). The capability gate lives
//! here too: what the plugin requires (declared plus implied), what it holds (its trust tier's
//! defaults, grants persisted by `od plugin trust`, and per-call `--grant-caps`), and what is missing.

use od_events::vocab::Trust;
use od_projections::InstalledPlugin;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

pub use super::context_chips::{applied_manifest, chip_key};
use super::context_chips::{context_items, ref_of};
use super::plugins::PluginError;
use super::Engine;
use crate::plugins::canonical::canonical_json;

/// Why an apply was refused.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// Required inputs are blank and have no default.
    #[error("plugin {plugin_id} needs inputs: {}", missing.join(", "))]
    MissingInput { plugin_id: String, missing: Vec<String> },
    /// The plugin requires capabilities it has not been granted.
    #[error("Plugin {plugin_id} requires capabilities not yet granted.")]
    CapabilitiesRequired {
        plugin_id: String,
        plugin_version: String,
        required: Vec<String>,
        granted: Vec<String>,
        missing: Vec<String>,
    },
    /// A field of the request names something the plugin does not have.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

/// What the caller supplies.
#[derive(Debug, Default, Clone)]
pub struct ApplyRequest {
    pub inputs: Map<String, Value>,
    pub grant_caps: Vec<String>,
    pub locale: Option<String>,
    /// Hydrate a form being filled in: blank required inputs are listed in `missingInputs` (their
    /// `{{placeholder}}`s stay in `query`) instead of refused. A run never applies partially.
    pub partial: bool,
    /// Context chips the person removed (`excludeContext`: `<kind>:<ref>` as `contextItems` name
    /// them — `skill:`, `design-system:`, `craft:`, `asset:`, `mcp:`, `claude-plugin:`): the
    /// applied manifest, and so the snapshot, the prompt and the staged folder, go without them.
    pub exclude_context: Vec<String>,
}

/// Resolves localized text: the locale, its base language, `en`, then the first non-empty value.
pub fn localized(v: &Value, locale: Option<&str>) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) => super::locale::pick(m, locale, None),
        _ => None,
    }
}

/// `{{ name }}` placeholders replaced by inputs; missing or empty inputs keep the placeholder.
pub fn template(text: &str, inputs: &Map<String, Value>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = after[..end].trim();
        let valid = !name.is_empty()
            && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        match inputs.get(name).map(input_text).filter(|v| valid && !v.is_empty()) {
            Some(v) => out.push_str(&v),
            None => out.push_str(&rest[start..start + 2 + end + 2]),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// An input as text: arrays joined with ", ", objects as JSON.
fn input_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(input_text).collect::<Vec<_>>().join(", "),
        Value::Null => String::new(),
        Value::Object(_) => v.to_string(),
        Value::Bool(_) | Value::Number(_) => v.to_string(),
    }
}

/// `manifestSourceDigest`: blake3 hex over the canonical JSON of manifest, inputs and context refs.
pub fn manifest_source_digest(manifest: &Value, inputs: &Map<String, Value>, refs: &[String]) -> String {
    let doc = json!({ "manifest": manifest, "inputs": inputs, "resolvedContextRefs": refs });
    blake3::hash(canonical_json(&doc).as_bytes()).to_hex().to_string()
}

/// Validates inputs against `od.inputs`: fills defaults, reports blank required fields.
fn resolve_inputs(id: &str, od: &Value, given: &Map<String, Value>) -> Result<Map<String, Value>, ApplyError> {
    let (out, missing) = inputs_with_defaults(od, given);
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(ApplyError::MissingInput { plugin_id: id.to_string(), missing })
    }
}

/// An apply's inputs and, for a partial one, the required inputs left blank (refused otherwise).
fn applied_inputs(id: &str, od: &Value, req: &ApplyRequest) -> Result<(Map<String, Value>, Vec<String>), ApplyError> {
    match req.partial {
        true => Ok(inputs_with_defaults(od, &req.inputs)),
        false => Ok((resolve_inputs(id, od, &req.inputs)?, Vec::new())),
    }
}

/// The inputs with `od.inputs` defaults filled in, and the required ones still blank.
fn inputs_with_defaults(od: &Value, given: &Map<String, Value>) -> (Map<String, Value>, Vec<String>) {
    let mut out = given.clone();
    let mut missing = Vec::new();
    for field in od["inputs"].as_array().into_iter().flatten() {
        let Some(name) = field["name"].as_str() else { continue };
        let blank = out.get(name).is_none_or(|v| input_text(v).trim().is_empty());
        if blank {
            match field.get("default").filter(|d| !d.is_null()) {
                Some(d) => {
                    out.insert(name.to_string(), d.clone());
                }
                None if field["required"] == true => missing.push(name.to_string()),
                None => {}
            }
        }
    }
    (out, missing)
}

/// Capabilities the manifest requires: declared, plus the spec's implied ones.
pub fn required_capabilities(od: &Value) -> BTreeSet<String> {
    let mut req: BTreeSet<String> = BTreeSet::from(["prompt:inject".to_string()]);
    for server in od["context"]["mcp"].as_array().into_iter().flatten() {
        if let Some(name) = server["name"].as_str() {
            req.insert(format!("mcp:{name}"));
        }
        let command = server["command"].as_str().unwrap_or("");
        if !command.is_empty() {
            req.insert("subprocess".into());
        }
        let program = command.rsplit('/').next().unwrap_or("");
        if matches!(program, "npx" | "uvx" | "pnpx" | "bunx") || server["url"].as_str().is_some_and(|u| !u.is_empty()) {
            req.insert("network".into());
        }
    }
    for c in od["connectors"]["required"].as_array().into_iter().flatten() {
        if let Some(cid) = c["id"].as_str() {
            req.insert(format!("connector:{cid}"));
        }
    }
    for s in od["genui"]["surfaces"].as_array().into_iter().flatten() {
        if let Some(kind) = s["kind"].as_str() {
            req.insert(format!("genui:{kind}"));
        }
    }
    if od["pipeline"]["stages"].as_array().is_some_and(|s| !s.is_empty()) {
        req.insert("pipeline:*".into());
    }
    // The build-test atom runs the project's build and test commands: a subprocess.
    let stages = od["pipeline"]["stages"].as_array().into_iter().flatten();
    if stages.flat_map(|s| s["atoms"].as_array().into_iter().flatten()).any(|a| a == "build-test") {
        req.insert("subprocess".into());
    }
    for c in od["capabilities"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        req.insert(c.to_string());
    }
    req
}

/// What the plugin holds: trusted and bundled plugins hold what they require; restricted ones hold
/// `prompt:inject`; all hold their persisted grants and this call's `grant_caps`.
fn granted_capabilities(p: &InstalledPlugin, required: &BTreeSet<String>, per_call: &[String]) -> BTreeSet<String> {
    let mut g: BTreeSet<String> = p.capabilities_granted.iter().cloned().collect();
    g.insert("prompt:inject".into());
    if p.trust != Trust::Restricted {
        g.extend(required.iter().cloned());
    }
    g.extend(per_call.iter().cloned());
    g
}

/// Declared surfaces plus the automatic ones (explicit ids win, compared case-insensitively): an
/// `oauth-prompt` for each required connector not yet connected (spec §10.3.1), a decision for each
/// `diff-review` stage.
fn surfaces(od: &Value, connected: &dyn Fn(&str) -> bool) -> Vec<Value> {
    let mut out: Vec<Value> = od["genui"]["surfaces"].as_array().cloned().unwrap_or_default();
    let mut auto = Vec::new();
    for c in od["connectors"]["required"].as_array().into_iter().flatten() {
        if let Some(cid) = c["id"].as_str().filter(|cid| !connected(cid)) {
            auto.push(json!({ "id": format!("__auto_connector_{cid}"), "kind": "oauth-prompt", "persist": "project",
                "capabilitiesRequired": [format!("connector:{cid}")], "connector": { "id": cid },
                "oauth": { "route": "connector", "connectorId": cid },
                "prompt": format!("Connect your {cid} account") }));
        }
    }
    for st in od["pipeline"]["stages"].as_array().into_iter().flatten() {
        let has = st["atoms"].as_array().is_some_and(|a| a.iter().any(|x| x == "diff-review"));
        if let (true, Some(sid)) = (has, st["id"].as_str()) {
            auto.push(json!({ "id": format!("__auto_diff_review_{sid}"), "kind": "choice", "persist": "run",
                "trigger": { "stageId": sid }, "prompt": format!("Review the changes of stage {sid}"),
                "timeout": 86_400_000, "schema": { "type": "object", "properties": { "decision": { "enum": ["accept", "reject", "partial"] } }, "required": ["decision"] } }));
        }
    }
    for a in auto {
        let id = a["id"].as_str().unwrap_or("").to_lowercase();
        if !out.iter().any(|s| s["id"].as_str().is_some_and(|x| x.to_lowercase() == id)) {
            out.push(a);
        }
    }
    out
}

/// `od.context.assets[]` as `PluginAssetRef`s: the path, where the preview endpoint serves it,
/// its type, and that it is staged when the run starts.
fn asset_refs(plugin_id: &str, od: &Value) -> Vec<Value> {
    od["context"]["assets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(ref_of)
        .map(|path| {
            let rel = path.trim_start_matches("./").to_string();
            let src = format!("/api/plugins/{}/asset/{rel}", crate::net::percent_encode(plugin_id));
            json!({ "path": path, "src": src, "mime": crate::mime::of(&rel), "stageAt": "run-start" })
        })
        .collect()
}

/// The default scenario for a task kind: `od-<taskKind>` when bundled, else `od-default`.
fn scenario_for(task_kind: &str) -> String {
    format!("od-{task_kind}")
}

/// Core quality stages (new-generation only): a `generate` stage that writes files or live
/// artifacts gets `plan{todo-write}` before it and a repeating `critique{critique-theater}` after
/// it, each only when missing.
pub fn ensure_core_quality_stages(pipeline: &mut Value) {
    let Some(stages) = pipeline["stages"].as_array_mut() else { return };
    let Some(gen) = stages.iter().position(|s| {
        s["id"] == "generate"
            && s["atoms"].as_array().is_some_and(|a| a.iter().any(|x| x == "file-write" || x == "live-artifact"))
    }) else {
        return;
    };
    let has = |stages: &[Value], id: &str| stages.iter().any(|s| s["id"] == id);
    if !has(stages, "critique") {
        stages.insert(
            gen + 1,
            json!({ "id": "critique", "atoms": ["critique-theater"], "repeat": true,
            "until": "critique.score>=4 || iterations>=3" }),
        );
    }
    if !has(stages, "plan") {
        stages.insert(gen, json!({ "id": "plan", "atoms": ["todo-write"] }));
    }
}

impl Engine {
    /// The plugin's own pipeline, or — for a non-scenario plugin without one — its task kind's
    /// bundled scenario (media modes keep only the generate stage); core quality stages added for
    /// new-generation. Returns the pipeline and where it came from.
    fn resolve_pipeline(&self, od: &Value) -> (Option<Value>, Value) {
        let task_kind = od["taskKind"].as_str().unwrap_or("new-generation");
        let own = od.get("pipeline").cloned().filter(|p| p["stages"].as_array().is_some_and(|s| !s.is_empty()));
        let (mut pipeline, source) = match own {
            Some(p) => (p, json!("plugin")),
            None if od["kind"] == "scenario" => return (None, Value::Null),
            None => {
                let id = [scenario_for(task_kind), "od-default".to_string()]
                    .into_iter()
                    .find(|id| self.bundled.contains_key(id));
                let Some(id) = id else { return (None, Value::Null) };
                let m: Value = serde_json::from_str(&self.bundled[&id].manifest_json).unwrap_or(Value::Null);
                let mut p = m["od"]["pipeline"].clone();
                if matches!(od["mode"].as_str(), Some("image" | "video" | "audio")) {
                    let gen: Vec<Value> = p["stages"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|s| s["id"] == "generate")
                        .cloned()
                        .collect();
                    p["stages"] = Value::Array(gen);
                }
                (p, json!({ "scenario": id }))
            }
        };
        if task_kind == "new-generation" {
            ensure_core_quality_stages(&mut pipeline);
        }
        (Some(pipeline), source)
    }

    /// Context skills and design systems that name an installed plugin (a bundle's member
    /// `my-bundle/deck`, or any other plugin) resolve to it: the chip gets `pluginId` and
    /// `pluginVersion`, and the plugin's content digest joins the snapshot's refs, so a change to
    /// it makes snapshots that used it stale.
    fn resolve_context_plugins(&self, own: &str, items: &mut [Value], refs: &mut Vec<String>) {
        for item in items.iter_mut().filter(|i| i["kind"] == "skill" || i["kind"] == "design-system") {
            let Some(id) = item["id"].as_str().filter(|id| *id != own).map(str::to_string) else { continue };
            if let Ok(found) = self.plugin(&id) {
                item["pluginId"] = json!(found.id);
                item["pluginVersion"] = json!(found.version);
                let d = &found.source_digest[..16.min(found.source_digest.len())];
                refs.push(format!("{}: {}@{}#{d}", item["kind"].as_str().unwrap_or(""), found.id, found.version));
            }
        }
    }

    /// The context references of `od` that name neither an installed plugin nor a file of the
    /// plugin's folder `dir` (doctor's `context.unresolved`).
    pub fn unresolved_context(&self, od: &Value, dir: &std::path::Path) -> Vec<String> {
        let mut out = Vec::new();
        let c = &od["context"];
        let entries = c["skills"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| ("skill", s))
            .chain((!c["designSystem"].is_null()).then_some(("design system", &c["designSystem"])));
        for (kind, v) in entries {
            let by_path = v["path"].as_str();
            let Some(r) = by_path.map(str::to_string).or_else(|| ref_of(v)) else { continue };
            let found = match by_path {
                Some(p) => dir.join(p.trim_start_matches("./")).exists(),
                None => self.plugin(&r).is_ok() || dir.join(&r).exists(),
            };
            if !found {
                out.push(format!("{kind} {r:?} resolves to no installed plugin and no file of the plugin"));
            }
        }
        out
    }

    /// Applies installed plugin `id`. Pure: reads the registry, writes nothing.
    pub fn apply(&self, id: &str, req: &ApplyRequest) -> Result<Value, ApplyError> {
        let p = self.plugin(id)?;
        let manifest = applied_manifest(&p, &req.exclude_context)?;
        let od = &manifest["od"];
        // The policy may have changed since the install (a deny entry, a hosted daemon).
        super::plugin_urls::check_manifest(&manifest)?;
        let (inputs, missing_inputs) = applied_inputs(id, od, req)?;
        let required = required_capabilities(od);
        let granted = granted_capabilities(&p, &required, &req.grant_caps);
        let missing: Vec<String> = required.difference(&granted).cloned().collect();
        if !missing.is_empty() {
            return Err(ApplyError::CapabilitiesRequired {
                plugin_id: p.id.clone(),
                plugin_version: p.version.clone(),
                required: required.into_iter().collect(),
                granted: granted.into_iter().collect(),
                missing,
            });
        }
        let raw_query = localized(&od["useCase"]["query"], req.locale.as_deref()).unwrap_or_default();
        let (pipeline, pipeline_source) = self.resolve_pipeline(od);
        let mut refs: Vec<String> = Vec::new();
        for st in pipeline.as_ref().and_then(|p| p["stages"].as_array().cloned()).unwrap_or_default() {
            for a in st["atoms"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                refs.push(format!("pipeline-atom: {}:{a}", st["id"].as_str().unwrap_or("")));
            }
        }
        let trust = if p.trust == Trust::Restricted { "restricted" } else { "trusted" };
        let locale = req.locale.as_deref();
        let mut texts = json!({ "title": manifest["title"], "title_i18n": manifest["title_i18n"],
                                "description": manifest["description"], "description_i18n": manifest["description_i18n"] });
        super::locale::localize(&mut texts, locale);
        let title = texts["title"].as_str().map_or_else(|| p.title.clone(), str::to_string);
        let mut genui_surfaces = Value::Array(surfaces(od, &|cid| self.connector_connected(cid)));
        let mut items = context_items(&p.id, &title, od, pipeline.as_ref());
        self.resolve_context_plugins(&p.id, &mut items, &mut refs);
        let digest = manifest_source_digest(&manifest, &inputs, &refs);
        super::locale::localize(&mut genui_surfaces, locale);
        let mut applied = json!({
            "ok": true,
            "query": template(&raw_query, &inputs),
            "inputs": inputs,
            "mcpServers": od["context"]["mcp"].as_array().cloned().unwrap_or_default(),
            "pipeline": pipeline,
            "pipelineSource": pipeline_source,
            "genuiSurfaces": genui_surfaces,
            "contextItems": items,
            "assets": asset_refs(&p.id, od),
            "resolvedContext": { "items": items, "refs": refs, "atoms": items.iter().filter(|i| i["kind"] == "atom").map(|i| i["id"].clone()).collect::<Vec<_>>() },
            "projectMetadata": { "name": title, "skillId": p.id, "designSystemId": ref_of(&od["context"]["designSystem"]),
                "craftRequires": od["context"]["craft"].as_array().cloned().unwrap_or_default(),
                "taskKind": od["taskKind"].as_str().unwrap_or("new-generation") },
            "locale": locale,
            "pluginDescription": texts["description"],
            "connectorsRequired": od["connectors"]["required"].as_array().cloned().unwrap_or_default(),
            "connectorsResolved": self.connectors_resolved(od),
            "trust": trust,
            "capabilitiesRequired": required,
            "capabilitiesGranted": granted,
            "resolvedContextRefs": refs,
            "manifestSourceDigest": digest,
            "appliedPlugin": {
                "snapshotId": "", "pluginId": p.id, "pluginVersion": p.version, "pluginTitle": title,
                "manifestSourceDigest": digest, "taskKind": od["taskKind"].as_str().unwrap_or("new-generation"),
                "query": raw_query, "status": "fresh",
            },
            "warnings": serde_json::from_str::<Value>(&p.warnings_json).unwrap_or(json!([])),
        });
        if req.partial {
            applied["missingInputs"] = json!(missing_inputs);
        }
        Ok(applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templating_keeps_missing_and_empty_placeholders() {
        let mut m = Map::new();
        m.insert("topic".into(), json!("tea"));
        m.insert("empty".into(), json!(""));
        m.insert("list".into(), json!(["a", "b"]));
        assert_eq!(template("A {{ topic }} {{empty}} {{nope}} {{list}} {{", &m), "A tea {{empty}} {{nope}} a, b {{");
    }

    #[test]
    fn localized_text_falls_back_locale_base_en_first() {
        let v = json!({ "zh-CN": "", "fr": "bonjour", "en": "hello", "de": "hallo" });
        assert_eq!(localized(&v, Some("fr-CA")).as_deref(), Some("bonjour"));
        assert_eq!(localized(&v, Some("zh-CN")).as_deref(), Some("hello"));
        assert_eq!(localized(&json!({ "de": "hallo" }), Some("ja")).as_deref(), Some("hallo"));
    }

    /// Pinned vectors: a change here changes every recorded snapshot's digest.
    #[test]
    fn digest_vectors() {
        assert_eq!(
            canonical_json(&json!({ "b": [2, { "d": 1, "c": "é" }], "a": null })),
            r#"{"a":null,"b":[2,{"c":"é","d":1}]}"#
        );
        let empty = manifest_source_digest(&json!({}), &Map::new(), &[]);
        assert_eq!(
            empty,
            blake3::hash(br#"{"inputs":{},"manifest":{},"resolvedContextRefs":[]}"#).to_hex().to_string()
        );
        assert_eq!(empty, "e516f6c0858f238a3a3621182413dbb534cb109202755207e746e71e5c72a557");
        let mut inputs = Map::new();
        inputs.insert("topic".into(), json!("tea"));
        let m = json!({ "name": "p", "version": "1.0.0", "od": { "kind": "scenario" } });
        let refs = ["pipeline-atom: plan:todo-write".to_string(), "pipeline-atom: generate:file-write".to_string()];
        assert_eq!(
            manifest_source_digest(&m, &inputs, &refs),
            "e66118c39c9558e5d4924b35206e7f12abe467adcc0dcd78ab9d091bb4edabc0"
        );
    }

    #[test]
    fn core_quality_stages_wrap_a_writing_generate_stage_once() {
        let mut p = json!({ "stages": [ { "id": "discovery", "atoms": ["discovery-question-form"] }, { "id": "generate", "atoms": ["file-write"] } ] });
        ensure_core_quality_stages(&mut p);
        let ids: Vec<&str> = p["stages"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["discovery", "plan", "generate", "critique"]);
        assert_eq!(p["stages"][3]["until"], "critique.score>=4 || iterations>=3");
        let before = p.clone();
        ensure_core_quality_stages(&mut p);
        assert_eq!(p, before, "idempotent");
        let mut quiet = json!({ "stages": [ { "id": "generate", "atoms": ["todo-write"] } ] });
        ensure_core_quality_stages(&mut quiet);
        assert_eq!(quiet["stages"].as_array().unwrap().len(), 1, "only writing generate stages get them");
    }

    #[test]
    fn implied_capabilities() {
        let od = json!({ "context": { "mcp": [ { "name": "figma", "command": "npx", "args": ["figma-mcp"] }, { "name": "web", "url": "https://x" } ] },
            "connectors": { "required": [ { "id": "github" } ] }, "genui": { "surfaces": [ { "id": "s", "kind": "form" } ] },
            "pipeline": { "stages": [ { "id": "a", "atoms": ["todo-write"] } ] }, "capabilities": ["fs:write"] });
        let r: Vec<String> = required_capabilities(&od).into_iter().collect();
        assert_eq!(
            r,
            [
                "connector:github",
                "fs:write",
                "genui:form",
                "mcp:figma",
                "mcp:web",
                "network",
                "pipeline:*",
                "prompt:inject",
                "subprocess"
            ]
        );
    }
}
