//! The prompt stack (issue 30 item 1): a plugin (`tests/fixtures/prompt_stack/plugin`) with a
//! design system, a craft file, a context skill from ANOTHER installed plugin
//! (`tests/fixtures/prompt_stack/helper`), inherited Claude-plugin content, an asset and an MCP
//! server, run with an exec agent that saves its stdin, `ls -R -a` of its folder and its
//! `.mcp.json` per stage. Every stage's prompt holds each part's marker in the documented order
//! with the staged texts; the asset and the staged context are in the folder before the agent
//! starts; `.mcp.json` parses and the `od` server it names answers `initialize` and `tools/list`;
//! `prompt_composed` records each part. A design system too big for the budget is trimmed by the
//! documented rule and the record says which part was trimmed or dropped, with token counts;
//! replay --verify stays byte-identical. A project's own design system (`designSystemId`, another
//! installed plugin: `tests/fixtures/prompt_stack/brand`) comes before the plugin's. A bad
//! `promptBudgetTokens` is refused by name.

use crate::common;

use common::harness::{of, script, Engine, OD};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const NOW: i64 = 1_800_000_000_000;
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/prompt_stack");

/// Saves what the agent had — its prompt, its folder, its `.mcp.json` — per stage, then finishes.
const AGENT: &str = r#"
cat > "$OUT/stdin-$OD_STAGE_ID.txt"
ls -R -a . > "$OUT/ls-$OD_STAGE_ID.txt"
cat .mcp.json > "$OUT/mcp-$OD_STAGE_ID.json" 2>/dev/null
echo '{"type":"done"}'
"#;

/// The markers every stage's prompt holds, in the documented order (no answers and no
/// conversation in these runs).
const ORDER: [&str; 14] = [
    "## OpenDesign agent",
    "## Project",
    "## Design system: .od/context/design/DESIGN.md",
    "## Craft: .od/context/craft/layout.md",
    "## Context skill: .od/context/plugins/prompt-stack-helper/SKILL.md (plugin:prompt-stack-helper@2.1.0/SKILL.md)",
    "## Compatibility content: .od/context/.claude-plugin/plugin.json",
    "## Active plugin",
    "## Plugin inputs",
    "## Plugin atoms",
    "## Plugin instructions",
    "## Staged context",
    "## Active stage: ",
    "## Connectors",
    "## Brief",
];

struct Setup {
    e: Engine,
    out: PathBuf,
    agent: PathBuf,
}

fn setup(tmp: &Path) -> Setup {
    let e = Engine::start(&tmp.join("data"), NOW);
    for name in ["helper", "brand", "plugin"] {
        let dir = tmp.join(name);
        common::copy_dir(&Path::new(FIXTURES).join(name), &dir);
        e.install(&dir);
    }
    let out = tmp.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let agent = script(tmp, "agent.sh", AGENT);
    Setup { e, out, agent }
}

fn body(s: &Setup, extra: Value) -> Value {
    let mut body = json!({ "pluginId": "prompt-stack", "agent": "exec", "agentCommand": [s.agent.to_str().unwrap()],
        "agentEnv": { "OD_BIN": OD, "OUT": s.out.to_str().unwrap() } });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn digest(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Where each marker first starts a line of `prompt` (panics naming a missing one).
fn positions(prompt: &str) -> Vec<usize> {
    ORDER
        .iter()
        .map(|m| {
            if prompt.starts_with(m) {
                return 0;
            }
            prompt.find(&format!("\n{m}")).unwrap_or_else(|| panic!("{m:?} missing from the prompt:\n{prompt}")) + 1
        })
        .collect()
}

/// The recorded section named `name` with `source` containing `src` (panics when none).
fn section<'a>(rec: &'a Value, name: &str, src: &str) -> &'a Value {
    rec["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name && s["source"].as_str().unwrap().contains(src))
        .unwrap_or_else(|| panic!("no {name} section from {src}: {rec:#}"))
}

#[test]
fn every_stage_prompt_holds_each_part_in_order_from_what_the_run_staged() {
    let tmp = tempfile::tempdir().unwrap();
    let s = setup(tmp.path());
    let (id, ev) = s.e.run(body(&s, json!({})));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:#?}");

    // Staged before the first agent start: the other plugin's SKILL.md with its source and digest,
    // the inherited file; the reference to a plugin that is not installed stays missing.
    let names: Vec<&str> = ev.iter().map(|v| v["event"].as_str().unwrap()).collect();
    let staged_at = names.iter().position(|n| *n == "substrate_staged").expect("substrate_staged");
    assert!(staged_at < names.iter().position(|n| *n == "start").unwrap(), "{names:?}");
    let staged = of(&ev, "substrate_staged")[0];
    let files = staged["files"].as_array().unwrap();
    let helper = files.iter().find(|f| f["path"] == ".od/context/plugins/prompt-stack-helper/SKILL.md").unwrap();
    assert_eq!(helper["source"], "plugin:prompt-stack-helper@2.1.0/SKILL.md");
    assert_eq!(helper["digest"], digest(&std::fs::read(Path::new(FIXTURES).join("helper/SKILL.md")).unwrap()));
    assert!(files.iter().any(|f| f["path"] == ".od/context/.claude-plugin/plugin.json"), "{files:?}");
    let missing = staged["missing"].as_array().unwrap();
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert!(missing[0].as_str().unwrap().starts_with("od.context.skills[1] not-installed-helper"), "{missing:?}");

    let records = of(&ev, "prompt_composed");
    assert_eq!(records.len(), 2);
    for (stage, rec) in ["draft", "polish"].iter().zip(&records) {
        // The prompt as the agent read it: each marker once in order, with the staged texts.
        let prompt = read(&s.out.join(format!("stdin-{stage}.txt")));
        let at = positions(&prompt);
        assert!(at.windows(2).all(|w| w[0] < w[1]), "markers out of order {at:?}:\n{prompt}");
        for needle in [
            "STACK-DS-PREAMBLE",
            "STACK-DS-MOTION",
            "STACK-CRAFT",
            "STACK-HELPER-SKILL",
            "STACK-CLAUDE-PLUGIN",
            "STACK-INSTRUCTIONS",
            &format!("## Active stage: {stage} (iteration 1)"),
            "- MCP servers (in your folder's MCP configuration): od, fixture-mcp",
            "## Brief\nMake a tea landing page\n",
        ] {
            assert!(prompt.contains(needle), "{needle:?} missing:\n{prompt}");
        }
        assert!(!prompt.contains("not-installed-helper"), "a missing ref is not in the prompt");
        let project = &rec["project"];
        assert!(prompt.contains(&format!("- id: {}\n", project["id"].as_str().unwrap())), "{rec}");

        // The record: what was sent, each part included whole under the exec default budget.
        assert_eq!(rec["digest"], digest(prompt.as_bytes()));
        assert_eq!(rec["bytes"], prompt.len() as u64);
        assert_eq!(rec["estimator"], "od-est/1");
        assert_eq!(rec["budgetTokens"], 64_000);
        let sections = rec["sections"].as_array().unwrap();
        assert!(sections.iter().all(|x| x["status"] == "included" && x["tokens"] == x["tokensKept"]), "{rec:#}");
        let sum: u64 = sections.iter().map(|x| x["tokensKept"].as_u64().unwrap()).sum();
        assert_eq!(rec["totalTokens"], sum);
        let ds = section(rec, "design-system", "DESIGN.md");
        let ds_file = files.iter().find(|f| f["path"] == ".od/context/design/DESIGN.md").unwrap();
        assert_eq!((&ds["digest"], &ds["bytes"]), (&ds_file["digest"], &ds_file["bytes"]));
        assert_eq!(section(rec, "skill", "prompt-stack-helper")["digest"], helper["digest"]);
        let order: Vec<&str> = sections.iter().map(|x| x["name"].as_str().unwrap()).collect();
        assert_eq!(
            order,
            [
                "base",
                "project",
                "design-system",
                "craft",
                "skill",
                "compat",
                "plugin",
                "staged-context",
                "stage",
                "connectors",
                "brief"
            ]
        );

        // The asset and the staged context were in the folder before the agent started.
        let ls = read(&s.out.join(format!("ls-{stage}.txt")));
        for needle in ["mark.svg", ".mcp.json", "./.od/context/design:", "./.od/context/plugins/prompt-stack-helper:"] {
            assert!(ls.contains(needle), "{needle} missing from the agent's listing:\n{ls}");
        }
        // `.mcp.json` parses and names od's server and the plugin's.
        let mcp: Value = serde_json::from_str(&read(&s.out.join(format!("mcp-{stage}.json")))).unwrap();
        let servers = mcp["mcpServers"].as_object().unwrap();
        assert_eq!(servers.keys().collect::<Vec<_>>(), ["od", "fixture-mcp"]);
    }

    // The `od` server of `.mcp.json`, spawned as written, answers MCP.
    let work = PathBuf::from(of(&ev, "start")[0]["cwd"].as_str().unwrap());
    let mcp: Value = serde_json::from_str(&read(&s.out.join("mcp-draft.json"))).unwrap();
    let (init, list) = crate::staging::drive_mcp(&mcp["mcpServers"]["od"], &work);
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    let tools: Vec<&str> =
        list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(tools.contains(&"od_list") && tools.contains(&"od_call"), "{list}");

    // Replay recomposes both prompts byte for byte, with the same sections.
    let (_, verify) = s.e.post(&format!("/api/runs/{id}/replay/verify"), json!({}));
    assert_eq!(verify["ok"], true, "{verify:#}");
    for p in verify["prompts"].as_array().unwrap() {
        assert_eq!((&p["identical"], &p["sectionsIdentical"]), (&json!(true), &json!(true)), "{p:#}");
    }
}

#[test]
fn a_design_system_too_big_for_the_budget_is_trimmed_by_the_documented_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let s = setup(tmp.path());
    // What the parts cost whole (the exec default budget holds them all).
    let (first, ev) = s.e.run(body(&s, json!({})));
    let whole = of(&ev, "prompt_composed")[0].clone();
    // Every run below goes into the same project, so the project section (its random id, twice)
    // costs what it cost here: a new project per run made `fixed` off by a few tokens either way.
    let project = s.e.get(&format!("/api/runs/{first}")).1["run"]["projectId"].clone();
    assert!(project.is_string(), "{project}");
    let cost = |name: &str| -> u64 {
        whole["sections"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x["name"] == name)
            .map(|x| x["tokens"].as_u64().unwrap())
            .sum()
    };
    let trimmable = ["design-system", "craft", "skill", "compat"];
    let fixed: u64 = whole["totalTokens"].as_u64().unwrap() - trimmable.iter().map(|n| cost(n)).sum::<u64>();
    let ds = cost("design-system");

    // Room for a fifth of the design system: compat, the skill and craft go whole, then the
    // design system keeps only its hinted sections (Colors, Type), which fit.
    let budget = fixed + ds / 5;
    let (id, ev) = s.e.run(body(&s, json!({ "promptBudgetTokens": budget, "projectId": project })));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:#?}");
    let rec = of(&ev, "prompt_composed")[0];
    assert_eq!(rec["budgetTokens"], budget);
    assert!(rec["totalTokens"].as_u64().unwrap() <= budget, "{rec:#}");
    for (name, src) in [("compat", "plugin.json"), ("skill", "prompt-stack-helper"), ("craft", "layout.md")] {
        let x = section(rec, name, src);
        assert_eq!((x["status"].as_str(), x["tokensKept"].as_u64()), (Some("dropped"), Some(0)), "{x}");
        assert!(x["tokens"].as_u64().unwrap() > 0);
    }
    let d = section(rec, "design-system", "DESIGN.md");
    assert_eq!(d["status"], "trimmed", "{d}");
    assert_eq!(d["tokens"].as_u64().unwrap(), ds);
    assert!(d["tokensKept"].as_u64().unwrap() < ds / 5, "{d}");
    let prompt = read(&s.out.join("stdin-draft.txt"));
    for kept in ["STACK-DS-PREAMBLE", "STACK-DS-COLORS", "STACK-DS-TYPE", "STACK-INSTRUCTIONS", "## Brief"] {
        assert!(prompt.contains(kept), "{kept} missing:\n{prompt}");
    }
    for gone in ["STACK-DS-MOTION", "STACK-DS-SPACING", "STACK-CRAFT", "STACK-HELPER-SKILL", "STACK-CLAUDE-PLUGIN"] {
        assert!(!prompt.contains(gone), "{gone} still there:\n{prompt}");
    }
    let (_, verify) = s.e.post(&format!("/api/runs/{id}/replay/verify"), json!({}));
    assert_eq!(verify["ok"], true, "{verify:#}");
    // `od run replay --verify` says which parts the budget trimmed.
    let out = std::process::Command::new(OD)
        .args(["run", "replay", &id, "--verify", "--data-dir"])
        .arg(&s.e.data)
        .env_remove("OD_DAEMON_URL")
        .env("OD_OUTPUT", "human")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("replay verified: 2 stage prompt(s)") && text.contains("design-system trimmed"), "{text}");
    assert!(text.contains(&format!("draft #1: ~{} of {budget} tokens; ", rec["totalTokens"])), "{text}");
    assert!(text.contains("craft dropped (0 of ") && text.contains("compat dropped (0 of "), "{text}");

    // Room for almost nothing of it: its tail is cut at a line boundary (the preamble stays).
    let budget = fixed + 60;
    let (id, ev) = s.e.run(body(&s, json!({ "promptBudgetTokens": budget, "projectId": project })));
    let rec = of(&ev, "prompt_composed")[0];
    let d = section(rec, "design-system", "DESIGN.md");
    assert_eq!(d["status"], "trimmed", "{d}");
    assert!(rec["totalTokens"].as_u64().unwrap() <= budget, "{rec:#}");
    let prompt = read(&s.out.join("stdin-draft.txt"));
    assert!(prompt.contains("STACK-DS-PREAMBLE") && !prompt.contains("STACK-DS-TYPE"), "{prompt}");
    assert!(prompt.contains("(design system cut here for the token budget"), "{prompt}");
    let (_, verify) = s.e.post(&format!("/api/runs/{id}/replay/verify"), json!({}));
    assert_eq!(verify["ok"], true, "{verify:#}");

    // Below what the never-trimmed parts need: everything trimmable is dropped, the run goes on,
    // and the record shows the total above the budget.
    let (_, ev) = s.e.run(body(&s, json!({ "promptBudgetTokens": 256, "projectId": project })));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:#?}");
    let rec = of(&ev, "prompt_composed")[0];
    assert_eq!(section(rec, "design-system", "DESIGN.md")["status"], "dropped");
    assert!(rec["totalTokens"].as_u64().unwrap() > 256, "{rec:#}");
}

#[test]
fn a_projects_own_design_system_comes_before_the_plugins() {
    let tmp = tempfile::tempdir().unwrap();
    let s = setup(tmp.path());
    let (code, p) = s.e.post("/api/projects", json!({ "name": "Brand work", "designSystemId": "prompt-stack-brand" }));
    assert_eq!(code, 200, "{p}");
    let project = p["project"]["id"].as_str().unwrap().to_string();
    let (id, ev) = s.e.run(body(&s, json!({ "projectId": project })));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:#?}");
    let staged = of(&ev, "substrate_staged")[0];
    let brand = staged["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == ".od/context/plugins/prompt-stack-brand/DESIGN.md");
    assert_eq!(brand.unwrap()["source"], "plugin:prompt-stack-brand@3.0.0/DESIGN.md", "{staged}");
    let prompt = read(&s.out.join("stdin-draft.txt"));
    assert!(prompt.contains("\n## Design system: .od/context/plugins/prompt-stack-brand/DESIGN.md (plugin:prompt-stack-brand@3.0.0/DESIGN.md)\n"), "{prompt}");
    assert!(prompt.contains("STACK-BRAND-COLORS") && !prompt.contains("STACK-DS-PREAMBLE"), "{prompt}");
    assert!(
        prompt.contains("- name: Brand work\n") && prompt.contains("- design system: prompt-stack-brand\n"),
        "{prompt}"
    );
    let rec = of(&ev, "prompt_composed")[0];
    assert_eq!(rec["sections"].as_array().unwrap().iter().filter(|x| x["name"] == "design-system").count(), 1);
    let (_, verify) = s.e.post(&format!("/api/runs/{id}/replay/verify"), json!({}));
    assert_eq!(verify["ok"], true, "{verify:#}");
}

#[test]
fn a_bad_prompt_budget_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let s = setup(tmp.path());
    let (_, before) = s.e.get("/api/health");
    for bad in [json!(10), json!("many"), json!(-1), json!(3_000_000)] {
        let (code, v) = s.e.post("/api/runs", body(&s, json!({ "promptBudgetTokens": bad })));
        assert_eq!((code, v["error"]["data"]["field"].as_str()), (400, Some("promptBudgetTokens")), "{bad}: {v}");
    }
    let (_, after) = s.e.get("/api/health");
    assert_eq!(before["lastSeq"], after["lastSeq"], "nothing was written");
    // `od run start --prompt-budget-tokens` passes it on (refused by name the same way).
    let (code, v) = s.e.od_json(&["run", "start", "--plugin", "prompt-stack", "--prompt-budget-tokens", "10"]);
    assert_eq!(code, 2, "{v}");
    assert!(v.to_string().contains("promptBudgetTokens"), "{v}");
}

#[test]
fn a_removed_context_chip_is_gone_from_the_snapshot_the_prompt_and_the_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let s = setup(tmp.path());
    // The chips as apply names them, and the two the person removes.
    let (code, applied) = s.e.post("/api/plugins/prompt-stack/apply", json!({}));
    assert_eq!(code, 200, "{applied}");
    let keys: Vec<String> =
        applied["contextItems"].as_array().unwrap().iter().map(od::engine::apply::chip_key).collect();
    for k in ["design-system:design/DESIGN.md", "asset:assets/mark.svg", "craft:craft/layout.md", "mcp:fixture-mcp"] {
        assert!(keys.contains(&k.to_string()), "{k} among {keys:?}");
    }
    let without = json!(["design-system:design/DESIGN.md", "asset:assets/mark.svg"]);
    let (code, less) = s.e.post("/api/plugins/prompt-stack/apply", json!({ "excludeContext": without }));
    assert_eq!(code, 200, "{less}");
    let kept: Vec<String> = less["contextItems"].as_array().unwrap().iter().map(od::engine::apply::chip_key).collect();
    assert!(
        !kept.contains(&"design-system:design/DESIGN.md".to_string()) && kept.contains(&"craft:craft/layout.md".into())
    );
    assert_ne!(
        less["manifestSourceDigest"], applied["manifestSourceDigest"],
        "another applied context, another digest"
    );

    let (id, ev) = s.e.run(body(&s, json!({ "excludeContext": without })));
    assert_eq!(ev.last().unwrap()["data"]["status"], "succeeded", "{ev:#?}");
    let prompt = read(&s.out.join("stdin-draft.txt"));
    assert!(!prompt.contains("## Design system:"), "no design system part:\n{prompt}");
    assert!(prompt.contains("## Craft: .od/context/craft/layout.md"), "the rest stays:\n{prompt}");
    let listed = read(&s.out.join("ls-draft.txt"));
    assert!(!listed.contains("mark.svg") && !listed.contains("DESIGN.md"), "nothing staged for them:\n{listed}");
    let (_, run) = s.e.get(&format!("/api/runs/{id}"));
    let (_, snap) =
        s.e.get(&format!("/api/applied-plugins/{}", run["run"]["appliedPluginSnapshotId"].as_str().unwrap()));
    assert_eq!(snap["snapshot"]["excludedContext"], without, "{snap:#}");
    let (_, verify) = s.e.post(&format!("/api/runs/{id}/replay/verify"), json!({}));
    assert_eq!(verify["ok"], true, "{verify:#}");

    // A chip the plugin does not have, or one that cannot go (the plugin, an atom): refused by
    // name, nothing written.
    let before = s.e.get("/api/log/stats").1["lastSeq"].clone();
    for (bad, field) in [("skill:nope", "excludeContext/1"), ("plugin:prompt-stack", "excludeContext/1")] {
        let (code, err) = s.e.post("/api/runs", body(&s, json!({ "excludeContext": ["craft:craft/layout.md", bad] })));
        assert_eq!(
            (code, err["error"]["code"].as_str(), err["error"]["data"]["field"].as_str()),
            (400, Some("invalid-input"), Some(field)),
            "{err}"
        );
    }
    assert_eq!(s.e.get("/api/log/stats").1["lastSeq"], before, "nothing written");

    // The CLI: `--without`, and a bad one named with its field.
    let cli = |args: &[&str]| {
        std::process::Command::new(OD)
            .args(args)
            .args(["--json", "--daemon-url", &s.e.url])
            .env("OD_API_TOKEN", &s.e.token)
            .output()
            .unwrap()
    };
    let out = cli(&["plugin", "apply", "prompt-stack", "--without", "mcp:fixture-mcp"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["contextItems"].as_array().unwrap().iter().all(|c| c["kind"] != "mcp"), "{v}");
    assert_eq!(v["mcpServers"], json!([]), "{v}");
    let out = cli(&["plugin", "apply", "prompt-stack", "--without", "mcp:nope"]);
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(
        (err["error"]["code"].as_str(), err["error"]["data"]["field"].as_str()),
        (Some("invalid-input"), Some("excludeContext/0"))
    );
    assert!(!out.status.success());
}
