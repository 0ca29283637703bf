//! The prompt stack (the order and the trimming rule are documented on [`super`]): assembling a
//! stage iteration's prompt from the snapshot, the run's staged context texts ([`StackContext`],
//! read back from blobs by `engine::prompt_context`) and the run's answers and conversation, then
//! fitting it to the agent's token budget and saying, per part, what was kept
//! ([`Composed::event`] is the `prompt_composed` record). Pure: the same inputs give the same bytes.

use od_events::runs::{PromptComposed, PromptSection};
use od_events::vocab::SectionStatus;
use serde_json::Value;

use super::tokens::{estimate, ESTIMATOR};
use super::trim::{prune_to_hint, truncate_lines};
use super::{canonical, digest, render_plugin_block, render_stage_block, staged_line, FollowUpContext, PromptInputs};
use crate::limits::{
    MAX_PROMPT_BUDGET_TOKENS, MIN_PROMPT_BUDGET_TOKENS, PROMPT_BUDGET_TOKENS_DRY_RUN, PROMPT_BUDGET_TOKENS_EXEC,
    PROMPT_ESTIMATE_MEMO_ENTRIES, PROMPT_ESTIMATE_MEMO_MIN_BYTES,
};

/// One text the stack includes, as the run recorded it: where it came from (its staged path, or
/// `plugin:<id>@<version>/<file>`), the digest of the blob it was read from, and the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc {
    pub source: String,
    pub digest: String,
    pub text: String,
}

/// What the log says of the run's project before the run (read back from a recorded
/// `prompt_composed`'s `projectJson` with [`ProjectFacts::from_json`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectFacts {
    pub id: String,
    pub name: String,
    /// The project's folder as recorded (relative to the data dir when od made it).
    pub folder: String,
    /// The project's own design system (`designSystemId`; empty when none).
    pub design_system: String,
}

impl ProjectFacts {
    /// Facts recorded as `{"id","name","folder"}` (None: empty or not that shape).
    pub fn from_json(json: &str) -> Option<ProjectFacts> {
        let v: Value = serde_json::from_str(json).ok()?;
        Some(ProjectFacts {
            id: v["id"].as_str()?.into(),
            name: v["name"].as_str()?.into(),
            folder: v["folder"].as_str()?.into(),
            design_system: v["designSystem"].as_str().unwrap_or_default().into(),
        })
    }
}

/// The recorded texts a stack is composed of beyond the snapshot, and the budget.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackContext {
    pub project: Option<ProjectFacts>,
    pub design_system: Option<Doc>,
    pub craft: Vec<Doc>,
    pub skills: Vec<Doc>,
    pub compat: Vec<Doc>,
    /// The agent's budget in tokens (0: none).
    pub budget: u64,
}

/// A composed prompt and its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Composed {
    pub text: String,
    pub sections: Vec<PromptSection>,
    /// The sum of the kept parts' estimates.
    pub total_tokens: u64,
    pub budget_tokens: u64,
    pub estimator: String,
    /// The project facts the `## Project` part named.
    pub project: Option<ProjectFacts>,
}

impl Composed {
    /// The `prompt_composed` event of this prompt.
    pub fn event(&self, run_id: &str, stage_id: &str, iteration: u32) -> PromptComposed {
        PromptComposed {
            run_id: run_id.into(),
            stage_id: stage_id.into(),
            iteration,
            digest: digest(&self.text),
            bytes: self.text.len() as u64,
            sections: self.sections.clone(),
            total_tokens: self.total_tokens,
            budget_tokens: self.budget_tokens,
            estimator: self.estimator.clone(),
            project_json: match &self.project {
                Some(p) => serde_json::json!({ "id": p.id, "name": p.name, "folder": p.folder, "designSystem": p.design_system })
                    .to_string(),
                None => String::new(),
            },
        }
    }
}

/// The prompt budget of a run's agent: its `promptBudgetTokens` option, else the default of its
/// agent id (`limits.rs`). The one place a per-agent context size is looked up.
pub fn budget_for(config: &Value) -> u64 {
    if let Some(n) = config["promptBudgetTokens"].as_u64() {
        return n;
    }
    match config["agent"].as_str().unwrap_or("dry-run") {
        "exec" => PROMPT_BUDGET_TOKENS_EXEC,
        _ => PROMPT_BUDGET_TOKENS_DRY_RUN,
    }
}

/// Checks a `promptBudgetTokens` agent option: a whole number of tokens within
/// [`MIN_PROMPT_BUDGET_TOKENS`]..=[`MAX_PROMPT_BUDGET_TOKENS`].
pub fn check_budget(v: &Value) -> Result<(), String> {
    match v.as_u64() {
        Some(n) if (MIN_PROMPT_BUDGET_TOKENS..=MAX_PROMPT_BUDGET_TOKENS).contains(&n) => Ok(()),
        _ => Err(format!(
            "must be a whole number of tokens from {MIN_PROMPT_BUDGET_TOKENS} to {MAX_PROMPT_BUDGET_TOKENS}, not {v}"
        )),
    }
}

/// Whether the snapshot composes the stack (it froze a versioned base prompt).
pub fn is_stack(snap: &Value) -> bool {
    snap["basePromptVersion"].as_str().is_some_and(|v| !v.is_empty())
}

/// How a part may be trimmed, in the order the budget reaches for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Fixed,
    Conversation,
    Compat,
    Skill,
    Craft,
    DesignSystem,
}

/// One part: its record fields, its full rendering and what the prompt holds of it now.
struct Part {
    name: &'static str,
    marker: String,
    source: String,
    digest: String,
    bytes: u64,
    kind: Kind,
    full: String,
    /// Estimated tokens of `full`.
    tokens: u64,
    now: String,
    /// Estimated tokens of `now` (kept in step with it by [`Part::set`]).
    kept: u64,
}

/// [`estimate`] of a part's text, remembered by the text's blake3 hash: the same skill, design
/// system and plugin block go into every stage iteration of every run of a plugin, and counting
/// them again was ~4% of a dry run's CPU (issue 33). Short texts are counted, not looked up. The
/// memo is bounded ([`PROMPT_ESTIMATE_MEMO_ENTRIES`]: emptied when full); the count is the same
/// either way, so composing stays pure.
fn estimate_part(text: &str) -> u64 {
    type Memo = std::sync::Mutex<std::collections::HashMap<[u8; 32], u64>>;
    static MEMO: std::sync::LazyLock<Memo> = std::sync::LazyLock::new(Default::default);
    if text.len() < PROMPT_ESTIMATE_MEMO_MIN_BYTES {
        return estimate(text);
    }
    let key = *blake3::hash(text.as_bytes()).as_bytes();
    if let Some(n) = MEMO.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return *n;
    }
    let n = estimate(text);
    let mut memo = MEMO.lock().unwrap_or_else(|e| e.into_inner());
    if memo.len() >= PROMPT_ESTIMATE_MEMO_ENTRIES {
        memo.clear();
    }
    memo.insert(key, n);
    n
}

impl Part {
    fn fixed(name: &'static str, marker: &str, source: &str, text: String) -> Part {
        let tokens = estimate_part(&text);
        Part {
            name,
            marker: marker.into(),
            source: source.into(),
            digest: digest(&text),
            bytes: text.len() as u64,
            kind: Kind::Fixed,
            tokens,
            kept: tokens,
            now: text.clone(),
            full: text,
        }
    }

    fn doc(name: &'static str, marker: &str, kind: Kind, d: &Doc) -> Part {
        let text = format!("\n\n{marker}: {}\n{}\n", d.source, body_of(&d.text).trim());
        let tokens = estimate_part(&text);
        Part {
            name,
            marker: marker.into(),
            source: d.source.clone(),
            digest: d.digest.clone(),
            bytes: d.text.len() as u64,
            kind,
            tokens,
            kept: tokens,
            now: text.clone(),
            full: text,
        }
    }

    /// What the prompt holds of this part now.
    fn set(&mut self, now: String) {
        self.kept = estimate_part(&now);
        self.now = now;
    }
}

/// A markdown file's body (its YAML front matter, if any, left out).
fn body_of(text: &str) -> &str {
    crate::plugins::frontmatter::split(text).map(|s| s.body).unwrap_or(text)
}

/// The design system's `sections` hint from the snapshot's manifest.
fn hint(snap: &Value) -> Vec<String> {
    snap["manifest"]["od"]["context"]["designSystem"]["sections"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(String::from))
        .collect()
}

/// The `## Connectors` block: connectors (id, required or optional, status, tool names) and MCP
/// servers by name. Never an account or a secret.
fn connectors_block(snap: &Value, staged: bool) -> Option<String> {
    let mut lines = Vec::new();
    for c in snap["connectorsResolved"].as_array().into_iter().flatten() {
        let Some(id) = c["id"].as_str() else { continue };
        let need = if c["required"].as_bool().unwrap_or(false) { "required" } else { "optional" };
        let tools: Vec<&str> = c["tools"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let status = c["status"].as_str().unwrap_or("unknown");
        let tools = if tools.is_empty() { String::new() } else { format!("; tools: {}", tools.join(", ")) };
        lines.push(format!("- connector {id} ({need}): {status}{tools}"));
    }
    let mut servers: Vec<&str> = Vec::new();
    if staged {
        servers.push("od");
    }
    servers.extend(snap["mcpServers"].as_array().into_iter().flatten().filter_map(|m| m["name"].as_str()));
    if !servers.is_empty() {
        lines.push(format!("- MCP servers (in your folder's MCP configuration): {}", servers.join(", ")));
    }
    (!lines.is_empty()).then(|| format!("\n\n## Connectors\n{}\n", lines.join("\n")))
}

/// The `## Conversation so far` block without its `dropped` oldest messages.
pub(super) fn conversation_block(f: &FollowUpContext, dropped: usize) -> String {
    let mut out = String::from("\n\n## Conversation so far\n");
    if dropped > 0 {
        out.push_str(&format!("- ({dropped} earlier messages left out for the token budget)\n"));
    }
    for m in f.messages.iter().skip(dropped) {
        out.push_str(&format!("- {} ({}): {}\n", m.role, m.run_id, m.text.trim()));
    }
    if !f.artifacts.is_empty() {
        out.push_str("\nArtifacts so far:\n");
        for a in &f.artifacts {
            out.push_str(&format!(
                "- {} ({} bytes, {}, run {})\n",
                a.path,
                a.bytes,
                &a.digest[..a.digest.len().min(12)],
                a.run_id
            ));
        }
    }
    out
}

/// The prompt of one stage iteration: the legacy layout for a snapshot frozen before the stack
/// (or when no context was read), else the stack fitted to `cx.budget`.
pub fn compose(inp: &PromptInputs, cx: Option<&StackContext>) -> Composed {
    let Some(cx) = cx.filter(|_| is_stack(inp.snap)) else {
        let text = super::compose(inp);
        let total_tokens = estimate(&text);
        let estimator = ESTIMATOR.into();
        return Composed { text, sections: Vec::new(), total_tokens, budget_tokens: 0, estimator, project: None };
    };
    let snap = inp.snap;
    let mut parts = Vec::new();
    let base = snap["basePrompt"].as_str().unwrap_or(super::BASE_PROMPT);
    let base_marker = base.lines().next().filter(|l| l.starts_with("## ")).unwrap_or("(base prompt)");
    parts.push(Part::fixed("base", base_marker, "snapshot:basePrompt", base.trim_end().to_string()));
    if let Some(p) = &cx.project {
        let mut text = format!("\n\n## Project\n- name: {}\n- id: {}\n- folder: {}\n", p.name, p.id, p.folder);
        if !p.design_system.is_empty() {
            text.push_str(&format!("- design system: {}\n", p.design_system));
        }
        parts.push(Part::fixed("project", "## Project", "log:project_created", text));
    }
    if let Some(d) = &cx.design_system {
        parts.push(Part::doc("design-system", "## Design system", Kind::DesignSystem, d));
    }
    parts.extend(cx.craft.iter().map(|d| Part::doc("craft", "## Craft", Kind::Craft, d)));
    parts.extend(cx.skills.iter().map(|d| Part::doc("skill", "## Context skill", Kind::Skill, d)));
    parts.extend(cx.compat.iter().map(|d| Part::doc("compat", "## Compatibility content", Kind::Compat, d)));
    parts.push(Part::fixed("plugin", "## Active plugin", "snapshot", render_plugin_block(snap)));
    if let Some(dir) = inp.staged {
        parts.push(Part::fixed("staged-context", "## Staged context", "substrate_staged", staged_line(dir)));
    }
    let stage = render_stage_block(snap, inp.stage_id, inp.iteration);
    parts.push(Part::fixed("stage", "## Active stage", "snapshot:atomBodies", stage));
    if let Some(c) = connectors_block(snap, inp.staged.is_some()) {
        parts.push(Part::fixed("connectors", "## Connectors", "snapshot:connectorsResolved", c));
    }
    if !inp.answers.is_empty() {
        let mut a = String::from("\n\n## Answers\n");
        for (id, v) in inp.answers {
            a.push_str(&format!("- {id}: {}\n", canonical(v)));
        }
        parts.push(Part::fixed("answers", "## Answers", "run:answers", a));
    }
    if let Some(f) = inp.follow_up {
        let mut p = Part::fixed("conversation", "## Conversation so far", "conversation", conversation_block(f, 0));
        p.kind = Kind::Conversation;
        parts.push(p);
    }
    let (brief, source) = match inp.message {
        "" => (snap["templatedQuery"].as_str().unwrap_or(""), "snapshot:templatedQuery"),
        m => (m, "run:message"),
    };
    let brief = if brief.is_empty() { "(no brief given)" } else { brief };
    parts.push(Part::fixed("brief", "## Brief", source, format!("\n\n## Brief\n{brief}\n")));
    fit(&mut parts, cx.budget, inp.follow_up, &hint(snap));
    let text: String = parts.iter().map(|p| p.now.as_str()).collect();
    let sections: Vec<PromptSection> = parts.iter().map(record).collect();
    let total_tokens = sections.iter().map(|s| s.tokens_kept).sum();
    let project = cx.project.clone();
    Composed { text, sections, total_tokens, budget_tokens: cx.budget, estimator: ESTIMATOR.into(), project }
}

fn record(p: &Part) -> PromptSection {
    let status = match (p.now.is_empty(), p.now == p.full) {
        (true, _) => SectionStatus::Dropped,
        (false, true) => SectionStatus::Included,
        (false, false) => SectionStatus::Trimmed,
    };
    PromptSection {
        name: p.name.into(),
        marker: p.marker.clone(),
        source: p.source.clone(),
        digest: p.digest.clone(),
        bytes: p.bytes,
        tokens: p.tokens,
        status,
        tokens_kept: p.kept,
    }
}

fn total(parts: &[Part]) -> u64 {
    parts.iter().map(|p| p.kept).sum()
}

/// The line after a design system cut at a line boundary.
pub(super) const CUT_NOTE: &str =
    "(design system cut here for the token budget; the whole file is in the staged context)\n";

/// Trims `parts` to `budget` by the documented order (0: no budget).
fn fit(parts: &mut [Part], budget: u64, follow_up: Option<&FollowUpContext>, hint: &[String]) {
    if budget == 0 || total(parts) <= budget {
        return;
    }
    // (1) The conversation's messages, oldest first.
    if let (Some(f), Some(i)) = (follow_up, parts.iter().position(|p| p.kind == Kind::Conversation)) {
        for dropped in 1..=f.messages.len() {
            parts[i].set(conversation_block(f, dropped));
            if total(parts) <= budget {
                return;
            }
        }
    }
    // (2) Compatibility content, then context skills, (3) craft: whole, the last listed first.
    for kind in [Kind::Compat, Kind::Skill, Kind::Craft] {
        let of_kind: Vec<usize> = (0..parts.len()).rev().filter(|i| parts[*i].kind == kind).collect();
        for i in of_kind {
            parts[i].set(String::new());
            if total(parts) <= budget {
                return;
            }
        }
    }
    let Some(i) = parts.iter().position(|p| p.kind == Kind::DesignSystem) else { return };
    // (4) The design system's sections outside the hint.
    let head = format!("\n\n{}: {}\n", parts[i].marker, parts[i].source);
    let mut body = parts[i].full.strip_prefix(head.as_str()).unwrap_or(&parts[i].full).to_string();
    if let Some(pruned) = prune_to_hint(&body, hint) {
        body = pruned;
        parts[i].set(format!("{head}{body}"));
        if total(parts) <= budget {
            return;
        }
    }
    // (5) Its tail, at a line boundary.
    parts[i].set(String::new());
    let rest = total(parts);
    let fits = |prefix: &str| rest + estimate(&format!("{head}{prefix}{CUT_NOTE}")) <= budget;
    let cut = match truncate_lines(&body, fits) {
        Some(kept) => format!("{head}{kept}{CUT_NOTE}"),
        None => String::new(),
    };
    parts[i].set(cut);
}

#[cfg(test)]
#[path = "stack_tests.rs"]
mod tests;
