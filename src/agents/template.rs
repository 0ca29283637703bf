//! An agent's argument template and how its prompt is delivered: the words after the binary, built
//! from the catalog entry and one run's options at invocation time.
//!
//! A template is a list of parts: a word (`"-p"`, `"{cwd}"`), a group taken only when its condition
//! holds (`{"if": "model", "args": ["--model", "{model}"]}`; conditions are the slots `model`,
//! `reasoning`, `resume`, `mcpConfig`, or `cap:<name>`, a capability its `--help` showed), or a slot
//! expanded in place (`{"slot": "permission"}`: the flags of the run's permission mode;
//! `{"slot": "prompt"}`: the words that carry the prompt). A placeholder is `{name}`; values are
//! put in as they are (never split by a shell, never substituted again).

use serde::Deserialize;
use std::collections::BTreeSet;

use super::catalog::{AgentDef, PromptDelivery, PromptVia};

/// One part of a template.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ArgPart {
    Word(String),
    If(IfPart),
    Slot(SlotPart),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IfPart {
    #[serde(rename = "if")]
    pub cond: String,
    pub args: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlotPart {
    pub slot: String,
}

/// Slots a group may be conditioned on (and whose placeholder it may then use).
const OPTIONAL: [&str; 4] = ["model", "reasoning", "resume", "mcpConfig"];
/// Placeholders that always have a value.
const ALWAYS: [&str; 2] = ["cwd", "promptFile"];

/// One invocation's values.
#[derive(Debug, Clone, Default)]
pub struct Slots {
    pub model: Option<String>,
    pub reasoning: Option<String>,
    pub resume: Option<String>,
    pub mcp_config: Option<String>,
    /// The working folder.
    pub cwd: String,
    pub prompt: String,
    /// Where the prompt is also written (always; `file` delivery names it).
    pub prompt_file: String,
    /// The permission mode whose flags `{"slot": "permission"}` expands to.
    pub permission_mode: String,
    /// Capabilities the binary's `--help` showed.
    pub caps: BTreeSet<String>,
    /// Largest prompt put in argv (`limits::MAX_PROMPT_ARGV_BYTES` outside tests).
    pub argv_budget: usize,
}

/// The words after the binary and how the prompt goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Built {
    pub args: Vec<String>,
    /// `stdin`: the exec agent writes the prompt to stdin; otherwise stdin is closed at once.
    pub via: PromptVia,
}

/// Builds the words for `def` with `s`; an error names what is missing.
pub fn build(def: &AgentDef, s: &Slots) -> Result<Built, String> {
    let via = prompt_way(&def.prompt, s)?;
    let get = |name: &str| -> Option<String> {
        match name {
            "model" => s.model.clone(),
            "reasoning" => s.reasoning.clone(),
            "resume" => s.resume.clone(),
            "mcpConfig" => s.mcp_config.clone(),
            "cwd" => Some(s.cwd.clone()),
            "promptFile" => Some(s.prompt_file.clone()),
            "prompt" => Some(s.prompt.clone()),
            _ => None,
        }
    };
    let mut out = Vec::new();
    for part in &def.args {
        match part {
            ArgPart::Word(w) => out.push(fill(w, &get)),
            ArgPart::If(g) => {
                let on = match g.cond.strip_prefix("cap:") {
                    Some(cap) => s.caps.contains(cap),
                    None => get(&g.cond).is_some_and(|v| !v.is_empty()),
                };
                if on {
                    out.extend(g.args.iter().map(|w| fill(w, &get)));
                }
            }
            ArgPart::Slot(slot) if slot.slot == "permission" => {
                let flags = def
                    .permission_modes
                    .get(&s.permission_mode)
                    .ok_or_else(|| format!("{} has no permission mode {:?}", def.id, s.permission_mode))?;
                out.extend(flags.iter().cloned());
            }
            ArgPart::Slot(_) => {
                let words = match via {
                    PromptVia::Argv => &def.prompt.argv_args,
                    PromptVia::File => &def.prompt.file_args,
                    PromptVia::Stdin => &def.prompt.stdin_args,
                };
                out.extend(words.iter().map(|w| fill(w, &get)));
            }
        }
    }
    Ok(Built { args: out, via })
}

/// The way the prompt goes: as declared, or for `argv` past the budget the declared fallback.
fn prompt_way(p: &PromptDelivery, s: &Slots) -> Result<PromptVia, String> {
    match (p.via, p.fallback) {
        (PromptVia::Argv, _) if s.prompt.len() <= s.argv_budget => Ok(PromptVia::Argv),
        (PromptVia::Argv, Some(fallback)) => Ok(fallback),
        (PromptVia::Argv, None) => Err(format!(
            "the prompt is {} bytes, over the {} bytes this agent takes in its command line",
            s.prompt.len(),
            s.argv_budget
        )),
        (via, _) => Ok(via),
    }
}

/// `w` with each known `{name}` replaced (one pass: a value is never read for placeholders).
fn fill(w: &str, get: &impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = w;
    while let Some(open) = rest.find('{') {
        let Some(len) = rest[open..].find('}') else { break };
        let name = &rest[open + 1..open + len];
        out.push_str(&rest[..open]);
        match get(name) {
            Some(v) => out.push_str(&v),
            None => out.push_str(&rest[open..=open + len]),
        }
        rest = &rest[open + len + 1..];
    }
    out.push_str(rest);
    out
}

/// The placeholders of a word.
fn placeholders(w: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = w;
    while let Some(open) = rest.find('{') {
        let Some(len) = rest[open..].find('}') else { break };
        out.push(&rest[open + 1..open + len]);
        rest = &rest[open + len + 1..];
    }
    out
}

/// Checks a template; the error is `(where, why)` (`[3].args[1]`, …).
pub fn check(parts: &[ArgPart], caps: &[&str]) -> Result<(), (String, String)> {
    let words_ok = |words: &[String], extra: Option<&str>, at: &str| -> Result<(), (String, String)> {
        for (j, w) in words.iter().enumerate() {
            for p in placeholders(w) {
                if !ALWAYS.contains(&p) && Some(p) != extra {
                    let allowed = ALWAYS.iter().copied().chain(extra).collect::<Vec<_>>().join(", ");
                    return Err((format!("{at}[{j}]"), format!("placeholder {{{p}}} is not one of {allowed} here")));
                }
            }
        }
        Ok(())
    };
    let mut prompt_slots = 0;
    for (i, part) in parts.iter().enumerate() {
        match part {
            ArgPart::Word(w) => words_ok(std::slice::from_ref(w), None, "").map_err(|(_, m)| (format!("[{i}]"), m))?,
            ArgPart::If(g) => {
                let slot = match g.cond.strip_prefix("cap:") {
                    Some(cap) if caps.contains(&cap) => None,
                    Some(cap) => {
                        return Err((format!("[{i}].if"), format!("capability {cap:?} is not in capabilityFlags")))
                    }
                    None if OPTIONAL.contains(&g.cond.as_str()) => Some(g.cond.as_str()),
                    None => {
                        return Err((
                            format!("[{i}].if"),
                            format!("{:?} is not one of {} or cap:<name>", g.cond, OPTIONAL.join(", ")),
                        ))
                    }
                };
                words_ok(&g.args, slot, &format!("[{i}].args"))?;
            }
            ArgPart::Slot(s) if s.slot == "permission" => {}
            ArgPart::Slot(s) if s.slot == "prompt" => prompt_slots += 1,
            ArgPart::Slot(s) => {
                return Err((format!("[{i}].slot"), format!("{:?} is not permission or prompt", s.slot)));
            }
        }
    }
    if prompt_slots > 1 {
        return Err((String::new(), "names the prompt slot more than once".into()));
    }
    Ok(())
}

/// Checks a prompt delivery; the error is `(field, why)`.
pub fn check_prompt(p: &PromptDelivery) -> Result<(), (String, String)> {
    let only = |field: &str, words: &[String], allowed: &[&str]| -> Result<(), (String, String)> {
        for w in words {
            if let Some(bad) = placeholders(w).into_iter().find(|ph| !allowed.contains(ph)) {
                return Err((field.into(), format!("placeholder {{{bad}}} is not one of {}", allowed.join(", "))));
            }
        }
        Ok(())
    };
    only("argvArgs", &p.argv_args, &["prompt", "cwd", "promptFile"])?;
    only("fileArgs", &p.file_args, &["promptFile", "cwd"])?;
    only("stdinArgs", &p.stdin_args, &["cwd"])?;
    let uses = |words: &[String], name: &str| words.iter().any(|w| placeholders(w).contains(&name));
    match (p.via, p.fallback) {
        (PromptVia::Argv, _) if !uses(&p.argv_args, "prompt") => {
            Err(("argvArgs".into(), "must carry {prompt} when via is argv".into()))
        }
        (PromptVia::Argv, Some(PromptVia::Argv)) => Err(("fallback".into(), "must be stdin or file".into())),
        (_, Some(PromptVia::File)) | (PromptVia::File, _) if !uses(&p.file_args, "promptFile") => {
            Err(("fileArgs".into(), "must carry {promptFile} when the prompt may go by file".into()))
        }
        (PromptVia::Stdin | PromptVia::File, Some(_)) => {
            Err(("fallback".into(), "only an argv delivery has a fallback".into()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::catalog::{parse_file, Catalog};

    fn slots(prompt: &str, budget: usize) -> Slots {
        Slots {
            cwd: "/p".into(),
            prompt: prompt.into(),
            prompt_file: "/p/.od/prompts/s-0-1.md".into(),
            permission_mode: "accept-edits".into(),
            argv_budget: budget,
            ..Slots::default()
        }
    }

    #[test]
    fn claude_gets_its_flags_and_the_prompt_on_stdin() {
        let cat = Catalog::built_in();
        let claude = cat.get("claude").unwrap();
        let mut s = slots("hello", 1000);
        s.model = Some("m".into());
        let b = build(claude, &s).unwrap();
        assert_eq!(b.via, PromptVia::Stdin);
        assert_eq!(
            b.args,
            ["-p", "--output-format", "stream-json", "--verbose", "--model", "m", "--permission-mode", "acceptEdits"]
        );
        s.permission_mode = "bypass".into();
        s.caps.insert("partialMessages".into());
        s.resume = Some("sess-1".into());
        let b = build(claude, &s).unwrap();
        assert!(b.args.windows(2).any(|w| w == ["--permission-mode", "bypassPermissions"]), "{:?}", b.args);
        assert!(b.args.contains(&"--include-partial-messages".to_string()), "{:?}", b.args);
        assert!(b.args.windows(2).any(|w| w == ["--resume", "sess-1"]), "{:?}", b.args);
    }

    #[test]
    fn slots_fill_once_and_absent_groups_drop() {
        let cat = Catalog::built_in();
        let codex = cat.get("codex").unwrap();
        let mut s = slots("x", 1000);
        s.reasoning = Some("high".into());
        // A value holding a placeholder is put in as it is.
        s.model = Some("{cwd}".into());
        let b = build(codex, &s).unwrap();
        assert_eq!(
            b.args,
            [
                "exec",
                "--json",
                "--skip-git-repo-check",
                "-C",
                "/p",
                "--sandbox",
                "workspace-write",
                "--model",
                "{cwd}",
                "-c",
                "model_reasoning_effort=\"high\"",
                "-"
            ]
        );
    }

    #[test]
    fn argv_within_the_budget_else_the_fallback() {
        let cat = Catalog::built_in();
        let cursor = cat.get("cursor-agent").unwrap();
        let b = build(cursor, &slots("short prompt", 64)).unwrap();
        assert_eq!((b.via, b.args.last().map(String::as_str)), (PromptVia::Argv, Some("short prompt")));
        let long = "y".repeat(65);
        let b = build(cursor, &slots(&long, 64)).unwrap();
        assert_eq!(b.via, PromptVia::Stdin);
        assert!(!b.args.contains(&long), "{:?}", b.args);
        // copilot falls back to a file it is told to read.
        let copilot = cat.get("copilot").unwrap();
        let b = build(copilot, &slots(&long, 64)).unwrap();
        assert_eq!(b.via, PromptVia::File);
        assert!(b.args.iter().any(|w| w.contains("/p/.od/prompts/s-0-1.md")), "{:?}", b.args);
        let b = build(copilot, &slots("hi", 64)).unwrap();
        assert!(b.args.windows(2).any(|w| w == ["-p", "hi"]), "{:?}", b.args);
        // Without a fallback, a prompt over the budget is an error saying so.
        let def = parse_file(
            "t.json",
            r#"{"id":"t","name":"T","bin":"t","args":[{"slot":"prompt"}],"prompt":{"via":"argv","argvArgs":["{prompt}"]},
                "protocol":"od","permissionModes":{"accept-edits":[]}}"#,
        )
        .unwrap();
        assert!(build(&def[0], &slots(&long, 64)).unwrap_err().contains("over the 64 bytes"));
    }

    #[test]
    fn a_template_with_an_unknown_slot_or_placeholder_is_refused() {
        let bad = |args: &str| {
            let text = format!(
                r#"{{"id":"t","name":"T","bin":"t","args":{args},"prompt":{{"via":"stdin"}},
                "protocol":"od","permissionModes":{{"accept-edits":[]}}}}"#
            );
            parse_file("t.json", &text).unwrap_err().field
        };
        assert_eq!(bad(r#"["--x", {"if":"model","args":["{reasoning}"]}]"#), "args[1].args[0]");
        assert_eq!(bad(r#"[{"if":"colour","args":[]}]"#), "args[0].if");
        assert_eq!(bad(r#"[{"slot":"env"}]"#), "args[0].slot");
        assert_eq!(bad(r#"["{model}"]"#), "args[0]");
        assert_eq!(bad(r#"[{"if":"cap:x","args":[]}]"#), "args[0].if");
    }
}
