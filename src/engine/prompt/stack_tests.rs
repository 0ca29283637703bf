//! Unit tests of the prompt stack: the order, legacy bytes, the trimming order, pruning by the
//! design system's `sections` hint, the budget option and the estimator near o200k.

use super::super::{PriorArtifact, PriorMessage};
use super::*;
use serde_json::json;

fn snap() -> Value {
    json!({
        "pluginId": "p", "pluginVersion": "1.0.0", "pluginTitle": "P", "query": "make {{topic}}",
        "templatedQuery": "make tea", "inputs": { "topic": "tea" }, "skillBody": "INSTRUCTIONS",
        "pipeline": { "stages": [ { "id": "gen", "atoms": ["file-write"] } ] },
        "atomBodies": { "file-write": "WRITE" }, "basePrompt": "## OpenDesign agent\nBASE",
        "basePromptVersion": "od-base/2",
        "connectorsResolved": [ { "id": "slack", "required": true, "status": "connected", "tools": ["post"], "accountLabel": "SECRET-LABEL" } ],
        "mcpServers": [ { "name": "figma", "command": "figma-mcp", "env": { "TOKEN": "SECRET-ENV" } } ],
        "manifest": { "od": { "context": { "designSystem": { "path": "DESIGN.md", "sections": ["Colors"] } } } }
    })
}

fn doc(source: &str, text: &str) -> Doc {
    Doc { source: source.into(), digest: format!("d-{source}"), text: text.into() }
}

fn design() -> String {
    let colors = "Accent green marks actions only; every text colour passes contrast on paper.\n".repeat(4);
    let filler = "Spacing follows an eight point grid with generous margins around every block.\n".repeat(30);
    format!(
        "# DS\nPREAMBLE\n## Colors\nCOLORS ink and paper\n{colors}## Motion\nMOTION\n{filler}## Voice\nVOICE\n{filler}"
    )
}

fn cx(budget: u64) -> StackContext {
    StackContext {
        project: Some(ProjectFacts {
            id: "prj".into(),
            name: "Tea".into(),
            folder: "projects/prj".into(),
            design_system: String::new(),
        }),
        design_system: Some(doc(".od/context/DESIGN.md", &design())),
        craft: vec![
            doc("craft/a.md", &"CRAFT-A words words words\n".repeat(8)),
            doc("craft/b.md", &"CRAFT-B words\n".repeat(8)),
        ],
        skills: vec![doc("skills/s.md", &"SKILL-S words words\n".repeat(8))],
        compat: vec![doc(".claude-plugin/plugin.json", &"{\"COMPAT\": true}\n".repeat(8))],
        budget,
    }
}

fn follow_up() -> FollowUpContext {
    let m = |i: usize| PriorMessage {
        run_id: format!("r{i}"),
        role: "user".into(),
        text: format!("MESSAGE-{i} {}", "more words ".repeat(20)),
    };
    FollowUpContext {
        messages: (0..4).map(m).collect(),
        artifacts: vec![PriorArtifact {
            run_id: "r0".into(),
            path: "index.html".into(),
            digest: "abcdef0123456789".into(),
            bytes: 10,
        }],
    }
}

fn composed(snap: &Value, budget: u64, f: Option<&FollowUpContext>) -> Composed {
    let answers = [("tone".to_string(), json!("calm"))];
    let inp = PromptInputs {
        snap,
        stage_id: "gen",
        iteration: 0,
        message: "",
        answers: &answers,
        staged: Some(".od/context"),
        follow_up: f,
    };
    compose(&inp, Some(&cx(budget)))
}

fn status<'a>(c: &'a Composed, source: &str) -> (&'a str, u64) {
    let s = c.sections.iter().find(|s| s.source == source || s.name == source).unwrap();
    (s.status.as_str(), s.tokens_kept)
}

#[test]
fn every_part_is_in_the_documented_order_and_connectors_name_no_secret() {
    let f = follow_up();
    let c = composed(&snap(), 0, Some(&f));
    let markers = [
        "## OpenDesign agent",
        "## Project",
        "## Design system: ",
        "## Craft: craft/a.md",
        "## Craft: craft/b.md",
        "## Context skill: ",
        "## Compatibility content: ",
        "## Active plugin",
        "## Plugin inputs",
        "## Plugin instructions",
        "## Staged context",
        "## Active stage: gen",
        "## Connectors",
        "## Answers",
        "## Conversation so far",
        "## Brief",
    ];
    let at: Vec<usize> =
        markers.iter().map(|m| c.text.find(m).unwrap_or_else(|| panic!("{m} missing:\n{}", c.text))).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}\n{}", c.text);
    assert!(c.text.contains("- connector slack (required): connected; tools: post"));
    assert!(c.text.contains("MCP servers (in your folder's MCP configuration): od, figma"));
    assert!(!c.text.contains("SECRET"), "{}", c.text);
    assert!(c.text.ends_with("## Brief\nmake tea\n"));
    assert!(c.sections.iter().all(|s| s.status == od_events::vocab::SectionStatus::Included));
    assert_eq!(c.total_tokens, c.sections.iter().map(|s| s.tokens_kept).sum::<u64>());
    // The same inputs give the same bytes and record.
    assert_eq!(c, composed(&snap(), 0, Some(&f)));
}

#[test]
fn a_snapshot_frozen_before_the_stack_composes_the_legacy_bytes() {
    let mut old = snap();
    old.as_object_mut().unwrap().remove("basePromptVersion");
    let inp = PromptInputs {
        snap: &old,
        stage_id: "gen",
        iteration: 0,
        message: "",
        answers: &[],
        staged: None,
        follow_up: None,
    };
    let c = compose(&inp, Some(&cx(0)));
    assert_eq!(c.text, super::super::compose(&inp));
    assert!(c.sections.is_empty() && !c.text.contains("## Design system"));
}

/// The parts' full costs, and the budget that leaves `room` tokens beyond the never-trimmed.
fn budget_with_room(f: Option<&FollowUpContext>, room: u64) -> u64 {
    let whole = composed(&snap(), 0, f);
    let fixed: u64 = whole
        .sections
        .iter()
        .filter(|s| !matches!(s.name.as_str(), "design-system" | "craft" | "skill" | "compat" | "conversation"))
        .map(|s| s.tokens)
        .sum();
    fixed + room
}

#[test]
fn trimming_takes_oldest_messages_then_compat_skills_craft_then_the_design_system() {
    let f = follow_up();
    let whole = composed(&snap(), 0, Some(&f));
    let cost = |n: &str| whole.sections.iter().filter(|s| s.name == n).map(|s| s.tokens).sum::<u64>();
    let all_but_conversation = budget_with_room(Some(&f), 0)
        + ["design-system", "craft", "skill", "compat"].iter().map(|n| cost(n)).sum::<u64>();
    // Room for the conversation less about two messages: the two oldest go, nothing else.
    let c = composed(&snap(), all_but_conversation + cost("conversation") - 40, Some(&f));
    assert_eq!(status(&c, "conversation").0, "trimmed");
    assert!(
        !c.text.contains("MESSAGE-0") && !c.text.contains("MESSAGE-1") && c.text.contains("MESSAGE-3"),
        "{}",
        c.text
    );
    assert!(c.text.contains("earlier messages left out") && c.text.contains("index.html (10 bytes"));
    assert_eq!(status(&c, ".claude-plugin/plugin.json").0, "included");
    // Less: every message, then compat, the skill and the last craft file go; the first stays.
    let c = composed(&snap(), all_but_conversation + 30 - cost("compat") - cost("skill") - 10, Some(&f));
    assert!(!c.text.contains("MESSAGE-3") && c.text.contains("index.html"));
    assert_eq!(status(&c, ".claude-plugin/plugin.json"), ("dropped", 0));
    assert_eq!(status(&c, "skills/s.md"), ("dropped", 0));
    assert_eq!(status(&c, "craft/b.md"), ("dropped", 0));
    assert_eq!(status(&c, "craft/a.md").0, "included");
    assert_eq!(status(&c, "design-system").0, "included");
    assert!(c.total_tokens <= c.budget_tokens);
}

#[test]
fn the_design_system_is_pruned_to_its_hinted_sections_then_cut_at_a_line() {
    // Room for the hinted section: the others go, the preamble and Colors stay.
    let c = composed(&snap(), budget_with_room(None, 60), None);
    assert_eq!(status(&c, "craft/a.md").0, "dropped");
    assert_eq!(status(&c, "design-system").0, "trimmed");
    assert!(c.text.contains("PREAMBLE") && c.text.contains("COLORS ink"), "{}", c.text);
    assert!(!c.text.contains("MOTION") && !c.text.contains("VOICE"), "{}", c.text);
    assert!(c.total_tokens <= c.budget_tokens);
    // Room for less: the tail is cut at a line boundary, with a note.
    let room = estimate(&format!("\n\n## Design system: .od/context/DESIGN.md\n# DS\nPREAMBLE\n{CUT_NOTE}"));
    let c = composed(&snap(), budget_with_room(None, room), None);
    assert_eq!(status(&c, "design-system").0, "trimmed");
    assert!(c.text.contains("PREAMBLE\n") && !c.text.contains("COLORS"), "{}", c.text);
    assert!(c.text.contains(&format!("PREAMBLE\n{CUT_NOTE}")), "{}", c.text);
    // No room: dropped; the never-trimmed parts are sent whole, over the budget.
    let c = composed(&snap(), 50, Some(&follow_up()));
    assert_eq!(status(&c, "design-system"), ("dropped", 0));
    assert!(c.text.contains("## OpenDesign agent") && c.text.contains("INSTRUCTIONS") && c.text.contains("## Answers"));
    assert!(c.total_tokens > 50);
}

#[test]
fn the_budget_is_the_option_else_the_agents_default() {
    assert_eq!(budget_for(&json!({ "agent": "exec" })), PROMPT_BUDGET_TOKENS_EXEC);
    assert_eq!(budget_for(&json!({})), PROMPT_BUDGET_TOKENS_DRY_RUN);
    assert_eq!(budget_for(&json!({ "agent": "exec", "promptBudgetTokens": 9000 })), 9000);
    assert!(check_budget(&json!(9000)).is_ok());
    for bad in
        [json!(0), json!(MIN_PROMPT_BUDGET_TOKENS - 1), json!(MAX_PROMPT_BUDGET_TOKENS + 1), json!("9000"), json!(1.5)]
    {
        assert!(check_budget(&bad).is_err(), "{bad}");
    }
}

#[test]
fn the_estimator_stays_near_o200k_on_the_base_prompt_and_a_design_system() {
    let bpe = tiktoken_rs::o200k_base().unwrap();
    for text in [super::super::BASE_PROMPT, &design(), &super::super::render_plugin_block(&snap())] {
        let real = bpe.encode_with_special_tokens(text).len() as f64;
        let est = estimate(text) as f64;
        let err = (est - real) / real * 100.0;
        assert!(err.abs() <= crate::limits::PROMPT_ESTIMATOR_MAX_ERROR_PCT, "{err:+.1}% on {text:?}");
    }
}
