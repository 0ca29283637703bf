//! Prompt composition. A snapshot frozen with a versioned base prompt (`basePromptVersion`, see
//! [`BASE_PROMPT_VERSION`]) composes the full **prompt stack** ([`stack`]), in this order, each
//! part opened by its own `## …` marker and left out when empty:
//!
//! | # | part | marker | from |
//! |---|------|--------|------|
//! | 1 | od's base prompt | `## OpenDesign agent` | the snapshot's `basePrompt` |
//! | 2 | project metadata | `## Project` | the project's `project_created` (name, id, folder) |
//! | 3 | design system | `## Design system` | the staged DESIGN.md (the project's `designSystemId`, else the plugin's `context.designSystem` path or `ref`) |
//! | 4 | craft | `## Craft` | staged `context.craft` files |
//! | 5 | context skills | `## Context skills` | staged `context.skills` files and other plugins' SKILL.md (`{ref}`) |
//! | 6 | inherited content | `## Compatibility content` | staged `compat.agentSkills` / `compat.claudePlugins` / `context.claudePlugins` files |
//! | 7 | plugin block | `## Active plugin`, `## Plugin inputs`, `## Plugin atoms`, `## Plugin instructions` | the snapshot |
//! | 8 | staged context line | `## Staged context` | the run's `substrate_staged` |
//! | 9 | the active stage | `## Active stage: <id> (iteration n)` | the snapshot's atom bodies |
//! | 10 | connectors and MCP servers | `## Connectors` | the snapshot (names and status, never secrets) |
//! | 11 | answers | `## Answers` | the run's GenUI answers so far |
//! | 12 | the conversation | `## Conversation so far` | [`FollowUpContext`] (follow-ups only) |
//! | 13 | the brief | `## Brief` | the run's message, else the snapshot's templated query |
//!
//! Texts come from what the run recorded — the snapshot and the blobs its `substrate_staged` lists,
//! read by digest — never from the plugin folder at compose time, so `od run replay --verify`
//! recomposes the same bytes. **Token budget** ([`stack::budget_for`]): when the estimated total
//! ([`tokens`]) passes the agent's budget, parts are trimmed in this order until it fits:
//! (1) the conversation's messages, oldest first (its artifact summary stays); (2) compatibility
//! content, then context skills, the last listed first, whole; (3) craft files, the last first,
//! whole; (4) the design system's `##` sections not named in its `sections` hint (the hint prunes
//! only under budget pressure); (5) the design system's tail, cut at a line boundary (dropped when
//! not one line fits). The base prompt, project, plugin block, staged line, stage block,
//! connectors, answers and brief are never trimmed: when they alone pass the budget the prompt is
//! sent whole-but-trimmed anyway and `prompt_composed` shows `totalTokens` above `budgetTokens`.
//! What each part was, and what was kept of it, is recorded in `prompt_composed` (schema 2).
//!
//! A snapshot without `basePromptVersion` (frozen before the stack) composes the **legacy** layout
//! exactly as it did — base prompt, plugin block, staged line, stage block, answers, conversation,
//! brief — so replay of old runs stays byte-identical.

use serde_json::Value;

pub mod stack;
pub mod tokens;
mod trim;

/// The base prompt od froze into snapshots before the prompt stack (a snapshot with no
/// `basePrompt` at all composes with it).
pub const LEGACY_BASE_PROMPT: &str = "You are OpenDesign's design agent, driven by od one pipeline stage at a time.\n\
Work only inside the project directory you are started in. Ask before you assume: when the brief \n\
leaves a decision open, say what you would choose and why. Prefer small, reviewable steps; every \n\
file you write is recorded as an artifact of this run.\n\
Report progress as you go. When a stage asks for a judgement (a critique score, a passing build), \n\
report it as a signal so od can decide whether the stage's devloop has converged.";

/// The version of [`BASE_PROMPT`], frozen into new snapshots beside it as `basePromptVersion`.
/// Changing the text is a new version; old snapshots keep the text they froze.
pub const BASE_PROMPT_VERSION: &str = "od-base/2";

/// od's own base prompt (designer and discovery), frozen into every new snapshot as `basePrompt`.
pub const BASE_PROMPT: &str = include_str!("prompt/base_prompt.md");

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The `## Active plugin` block of a snapshot (byte-stable: keys sorted, fixed layout).
pub fn render_plugin_block(snap: &Value) -> String {
    let id = s(&snap["pluginId"]);
    let title = match s(&snap["pluginTitle"]) {
        "" => id,
        t => t,
    };
    let mut out = format!("\n\n## Active plugin\n**{title}** (`{id}@{}`)\n", s(&snap["pluginVersion"]));
    if let Some(d) = snap["pluginDescription"].as_str().filter(|d| !d.is_empty()) {
        out.push_str(&format!("\n{d}\n"));
    }
    if let Some(q) = snap["query"].as_str().filter(|q| !q.is_empty()) {
        out.push_str(&format!("\n_{q}_\n"));
    }
    out.push_str("\n## Plugin inputs\n");
    match snap["inputs"].as_object().filter(|m| !m.is_empty()) {
        None => out.push_str("(empty)\n"),
        Some(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for k in keys {
                out.push_str(&format!("- {k}: {}\n", scalar(&m[k])));
            }
        }
    }
    out.push_str("\n## Plugin atoms\n");
    let stages = snap["pipeline"]["stages"].as_array().cloned().unwrap_or_default();
    if stages.is_empty() {
        out.push_str("(none)\n");
    }
    for st in &stages {
        let atoms: Vec<&str> = st["atoms"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        out.push_str(&format!("- {}: {}\n", s(&st["id"]), atoms.join(", ")));
    }
    if let Some(body) = snap["skillBody"].as_str().map(str::trim).filter(|b| !b.is_empty()) {
        out.push_str(&format!("\n## Plugin instructions\n{body}\n"));
    }
    out
}

/// The active stage's block: its id, the iteration, and each atom body once.
pub fn render_stage_block(snap: &Value, stage_id: &str, iteration: u32) -> String {
    let stage = snap["pipeline"]["stages"].as_array().into_iter().flatten().find(|st| st["id"] == stage_id);
    let mut out = format!("\n\n## Active stage: {stage_id} (iteration {})\n", iteration + 1);
    let Some(stage) = stage else { return out };
    if let Some(u) = stage["until"].as_str() {
        out.push_str(&format!("This stage repeats until `{u}`.\n"));
    }
    let mut seen = Vec::new();
    for a in stage["atoms"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        if seen.contains(&a) {
            continue;
        }
        seen.push(a);
        let body = snap["atomBodies"][a].as_str().unwrap_or("").trim();
        out.push_str(&format!("\n### Atom: {a}\n{body}\n"));
    }
    out
}

/// What a follow-up run knows of its conversation before it (issue 30 item 3): the earlier
/// messages (the users' and what the agent said) and the artifacts earlier runs recorded, oldest
/// first. Built from events that precede the follow-up run, so replay derives the same context.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FollowUpContext {
    pub messages: Vec<PriorMessage>,
    pub artifacts: Vec<PriorArtifact>,
}

/// One earlier message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct PriorMessage {
    pub run_id: String,
    /// `user` or `agent`.
    pub role: String,
    pub text: String,
}

/// One artifact an earlier run of the conversation recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct PriorArtifact {
    pub run_id: String,
    pub path: String,
    pub digest: String,
    pub bytes: u64,
}

/// Everything one stage iteration's prompt is made of. `answers` are the run's GenUI answers so
/// far (`(surfaceId, value)`, in the order given); `staged` the context folder the run staged (its
/// `substrate_staged`), named in one line after the plugin block — a run that staged nothing
/// (every run before staging existed) composes the same bytes as before; `follow_up` the
/// conversation before a follow-up run (`None` for a conversation's first run).
#[derive(Debug, Clone, Copy)]
pub struct PromptInputs<'a> {
    pub snap: &'a Value,
    pub stage_id: &'a str,
    pub iteration: u32,
    pub message: &'a str,
    pub answers: &'a [(String, Value)],
    pub staged: Option<&'a str>,
    pub follow_up: Option<&'a FollowUpContext>,
}

/// The whole prompt of one stage iteration in the legacy layout (snapshots frozen before the
/// prompt stack; [`stack::compose`] picks the layout).
pub fn compose(inp: &PromptInputs) -> String {
    let snap = inp.snap;
    let base = snap["basePrompt"].as_str().unwrap_or(LEGACY_BASE_PROMPT);
    let brief = if inp.message.is_empty() { s(&snap["templatedQuery"]) } else { inp.message };
    let mut out = String::with_capacity(base.len() + 4096);
    out.push_str(base);
    out.push_str(&render_plugin_block(snap));
    if let Some(dir) = inp.staged {
        out.push_str(&staged_line(dir));
    }
    out.push_str(&render_stage_block(snap, inp.stage_id, inp.iteration));
    if !inp.answers.is_empty() {
        out.push_str("\n\n## Answers\n");
        for (id, v) in inp.answers {
            out.push_str(&format!("- {id}: {}\n", canonical(v)));
        }
    }
    if let Some(f) = inp.follow_up {
        out.push_str(&render_follow_up(f));
    }
    out.push_str("\n\n## Brief\n");
    out.push_str(if brief.is_empty() { "(no brief given)" } else { brief });
    out.push('\n');
    out
}

/// The `## Conversation so far` block of a follow-up (nothing left out).
pub fn render_follow_up(f: &FollowUpContext) -> String {
    stack::conversation_block(f, 0)
}

/// The line naming the staged context folder.
pub fn staged_line(dir: &str) -> String {
    format!(
        "\n\n## Staged context\nThe plugin's context (SKILL.md, design system, craft, skills) is staged in `{dir}/` in your folder: read it before you start.\n"
    )
}

/// Compact JSON with sorted keys: the same answer always renders the same bytes.
fn canonical(v: &Value) -> String {
    crate::plugins::canonical::canonical_json(v)
}

/// blake3 hex of a prompt.
pub fn digest(prompt: &str) -> String {
    blake3::hash(prompt.as_bytes()).to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn inputs<'a>(snap: &'a Value, iteration: u32, staged: Option<&'static str>) -> PromptInputs<'a> {
        PromptInputs { snap, stage_id: "gen", iteration, message: "", answers: &[], staged, follow_up: None }
    }

    fn snap() -> Value {
        json!({
            "pluginId": "p", "pluginVersion": "1.0.0", "pluginTitle": "P", "query": "make {{topic}}",
            "templatedQuery": "make tea", "inputs": { "b": 2, "a": "x" },
            "pipeline": { "stages": [ { "id": "gen", "atoms": ["file-write", "file-write", "todo-write"] } ] },
            "atomBodies": { "file-write": "WRITE", "todo-write": "TODO" }, "basePrompt": "BASE"
        })
    }

    #[test]
    fn block_is_byte_stable_and_sorted() {
        let b = render_plugin_block(&snap());
        assert_eq!(
            b,
            "\n\n## Active plugin\n**P** (`p@1.0.0`)\n\n_make {{topic}}_\n\n## Plugin inputs\n- a: x\n- b: 2\n\n## Plugin atoms\n- gen: file-write, file-write, todo-write\n"
        );
    }

    #[test]
    fn stage_block_inlines_each_atom_once_and_brief_falls_back_to_query() {
        let p = compose(&inputs(&snap(), 1, None));
        assert!(p.starts_with("BASE\n\n## Active plugin"));
        assert_eq!(p.matches("WRITE").count(), 1);
        assert!(p.contains("## Active stage: gen (iteration 2)"));
        assert!(p.ends_with("## Brief\nmake tea\n"));
        assert_eq!(digest(&p), digest(&compose(&inputs(&snap(), 1, None))));
        assert_ne!(digest(&p), digest(&compose(&inputs(&snap(), 0, None))));
    }

    #[test]
    fn only_a_run_that_staged_names_the_context_folder() {
        let plain = compose(&inputs(&snap(), 0, None));
        assert!(!plain.contains("## Staged context"));
        let staged = compose(&inputs(&snap(), 0, Some(".od/context")));
        assert!(staged.contains("## Staged context\n") && staged.contains("`.od/context/`"));
        assert_eq!(staged.replace(&staged_line(".od/context"), ""), plain);
    }
}
