//! The plugin loader never panics: arbitrary bytes as SKILL.md and open-design.json, YAML-like
//! frontmatter, random JSON and manifest-shaped inputs, and `until` strings (proptest).

use od::plugins::{doctor, load_folder};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::fs;

const SKILL: &[u8] = b"---\nname: gen\ndescription: A generated skill.\n---\n# Gen\n";

fn folder(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, bytes) in files {
        let p = dir.path().join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(p, bytes).unwrap();
    }
    dir
}

// ---- no panics -----------------------------------------------------------------------------------

fn check_no_panic(files: &[(&str, &[u8])]) {
    let dir = folder(files);
    let report = doctor(dir.path());
    let loaded = load_folder(dir.path());
    assert_eq!(report.ok, loaded.is_ok());
    assert!(report.diagnostics.iter().all(|d| !d.file.is_empty() && !d.message.contains("parser failed")));
}

const KEYS: &[&str] = &[
    "name",
    "version",
    "specVersion",
    "od",
    "pipeline",
    "stages",
    "atoms",
    "repeat",
    "until",
    "genui",
    "surfaces",
    "oauth",
    "route",
    "connectorId",
    "mcpServerId",
    "kind",
    "id",
    "capabilities",
    "context",
    "mcp",
    "connectors",
    "required",
    "inputs",
    "type",
    "compat",
    "agentSkills",
    "path",
    "preview",
    "entry",
    "component",
    "useCase",
    "query",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        prop::sample::select(vec![
            "connector",
            "mcp",
            "oauth-prompt",
            "critique.score>=4",
            "../x",
            "a",
            "",
            "todo-write"
        ])
        .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

fn pick(options: &'static [&'static str]) -> impl Strategy<Value = Value> {
    prop::sample::select(options).prop_map(|s| json!(s))
}

fn maybe<S: Strategy<Value = Value>>(s: S) -> impl Strategy<Value = Value> {
    prop::option::of(s).prop_map(|v| v.unwrap_or(Value::Null))
}

/// Manifests shaped like real ones, so the semantic rules are reached, with random values mixed in.
fn manifest() -> impl Strategy<Value = Value> {
    let stage = (pick(&["a", "b", "a"]), prop::collection::vec(pick(&["todo-write", "teleport", "file-write"]), 0..3))
        .prop_flat_map(|(id, atoms)| {
            let until =
                pick(&["iterations>=3", "critique.score >> 4", "", "(preview.ok || user.confirmed) && iterations>1"]);
            (Just(id), Just(atoms), maybe(prop_oneof![any::<bool>().prop_map(Value::Bool), json_value()]), maybe(until))
        })
        .prop_map(|(id, atoms, repeat, until)| json!({"id": id, "atoms": atoms, "repeat": repeat, "until": until}));
    let oauth = (
        pick(&["connector", "mcp", "plugin", "x"]),
        maybe(pick(&["figma", "linear"])),
        maybe(pick(&["figma", "linear"])),
    )
        .prop_map(|(route, c, m)| json!({"route": route, "connectorId": c, "mcpServerId": m}));
    let surface = (pick(&["oauth-prompt", "form", "nope"]), maybe(oauth), maybe(Just(json!({"path": "../ui.tsx"}))))
        .prop_map(|(kind, oauth, component)| {
            json!({"id": "s", "kind": kind, "persist": "project", "oauth": oauth, "component": component})
        });
    (
        prop::collection::vec(stage, 0..4),
        prop::collection::vec(surface, 0..3),
        prop::collection::vec(pick(&["figma", "slack"]), 0..2),
        prop::collection::vec(pick(&["fs:read", "media:x", "genui:custom-component", "connector:"]), 0..3),
        pick(&["./index.html", "../x", "/abs", "https://x/y"]),
        json_value(),
    )
        .prop_map(|(stages, surfaces, connectors, caps, entry, noise)| {
            let required: Vec<Value> = connectors.iter().map(|c| json!({"id": c})).collect();
            let mut m = json!({"name": "p", "version": "1", "od": {
                "pipeline": {"stages": stages}, "genui": {"surfaces": surfaces},
                "connectors": {"required": required}, "context": {"mcp": [{"name": "linear"}]},
                "capabilities": caps, "preview": {"entry": entry}}});
            strip_nulls(&mut m);
            if let Value::Object(extra) = noise {
                m["od"].as_object_mut().unwrap().extend(extra);
            }
            m
        })
}

fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.retain(|_, v| !v.is_null());
            o.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(skill in prop::collection::vec(any::<u8>(), 0..512),
                                   manifest in prop::collection::vec(any::<u8>(), 0..512)) {
        check_no_panic(&[("SKILL.md", &skill), ("open-design.json", &manifest)]);
    }

    #[test]
    fn yaml_like_frontmatter_never_panics(yaml in "[a-z_: \\-\\[\\]{}\"'#&*!|>%@`,.\n\t]{0,300}", crlf in any::<bool>()) {
        let text = format!("---\n{yaml}\n---\nbody\n");
        let text = if crlf { text.replace('\n', "\r\n") } else { text };
        check_no_panic(&[("SKILL.md", text.as_bytes())]);
    }

    #[test]
    fn manifest_shaped_inputs_never_panic(m in manifest()) {
        let bytes = serde_json::to_vec(&m).unwrap();
        check_no_panic(&[("open-design.json", &bytes), ("SKILL.md", SKILL)]);
    }

    #[test]
    fn random_manifests_never_panic(value in json_value(), od in json_value()) {
        let mut manifest = json!({"name": "p", "version": "1", "od": od});
        if let Value::Object(extra) = value { manifest.as_object_mut().unwrap().extend(extra); }
        let bytes = serde_json::to_vec(&manifest).unwrap();
        check_no_panic(&[("open-design.json", &bytes), ("SKILL.md", SKILL)]);
    }

    #[test]
    fn until_parser_never_panics(src in "[a-z.()<>=!&| 0-9\\-e]{0,80}") {
        let _ = od::plugins::until::parse_until(&src);
    }
}
