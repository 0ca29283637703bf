//! Codex `exec --json`: one event per line, tagged by `type`.
//!
//! - `thread.started` (`thread_id`, what `codex exec resume <id>` takes) → status `initialized`
//!   with `sessionId`;
//! - `item.started` / `item.updated` / `item.completed` with an `item` tagged by its own `type`:
//!   `agent_message` → `text_delta`, `reasoning` → `thinking_delta` (both once, when completed);
//!   `command_execution` (`command`, `aggregated_output`, `exit_code`), `mcp_tool_call`,
//!   `web_search` and `file_change` → `tool_use` when first seen and `tool_result` when completed;
//!   `error` (a warning, the turn goes on) → status `warning`; `todo_list` → status `plan`;
//! - `turn.completed` (`usage`) → `usage` and done; `turn.failed` (`error.message`) → an agent
//!   error; a top-level `error` (`message`, e.g. a stream reconnecting) → status `error`, since
//!   Codex itself says with `turn.failed` or its exit status whether the turn failed.
//!
//! **Artifacts.** A completed `file_change` (Codex's `apply_patch`) names its files with their
//! `kind`: `add` and `update` become artifacts, `delete` does not. Codex also writes files through
//! its shell (`exec_command`, often a heredoc): for a `command_execution` that completed with exit
//! status 0, the targets of its output redirections (`> f`, `>> f`, `tee [-a] f`, not
//! `/dev/…`, not `&N`) become artifacts. A file written another way (a script, `cp`, `sed -i`) is
//! not seen; the executor records each named path as it is on disk at the iteration's end.

use super::{
    agent, artifacts_of, delta, initialized, raw, status, str_of, tool_result, tool_use, u64_of, usage, Parsed,
};
use crate::runner::file_tools::FileTools;
use serde_json::{json, Map, Value};
use std::collections::HashSet;

/// Most item ids remembered as already announced (a turn has a few dozen items).
const MAX_ITEMS: usize = 4096;

/// The state of a Codex stream.
#[derive(Debug, Default)]
pub(super) struct Codex {
    /// Tool-like items whose `tool_use` was already emitted.
    announced: HashSet<String>,
    files: FileTools,
}

impl Codex {
    pub(super) fn finish(&mut self) -> Vec<Parsed> {
        artifacts_of(&mut self.files)
    }

    pub(super) fn line(&mut self, obj: &Map<String, Value>, line: &str) -> Vec<Parsed> {
        match obj.get("type").and_then(Value::as_str).unwrap_or("") {
            "thread.started" => vec![initialized(None, obj.get("thread_id"))],
            "turn.started" => Vec::new(),
            "item.started" | "item.updated" => self.item(obj.get("item").unwrap_or(&Value::Null), false),
            "item.completed" => self.item(obj.get("item").unwrap_or(&Value::Null), true),
            "turn.completed" => {
                let u = obj.get("usage").unwrap_or(&Value::Null);
                let mut out = vec![usage(
                    u64_of(u, "input_tokens"),
                    u64_of(u, "output_tokens"),
                    &[("cachedInputTokens", u.get("cached_input_tokens"))],
                )];
                out.extend(self.finish());
                out.push(Parsed::Done);
                out
            }
            "turn.failed" => {
                let msg = obj.get("error").map(|e| str_of(e, "message")).filter(|m| !m.trim().is_empty());
                vec![Parsed::Error(msg.unwrap_or("the Codex turn failed").to_string())]
            }
            "error" => vec![agent(status("error", Some(json!(str_of(&Value::Object(obj.clone()), "message")))))],
            _ => vec![raw(line)],
        }
    }

    fn item(&mut self, item: &Value, completed: bool) -> Vec<Parsed> {
        let id = str_of(item, "id");
        let kind = str_of(item, "type");
        match kind {
            "agent_message" | "reasoning" if completed => {
                match item.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                    Some(t) => vec![agent(delta(kind == "reasoning", t))],
                    None => Vec::new(),
                }
            }
            "command_execution" | "mcp_tool_call" | "web_search" | "file_change" => {
                let mut out = Vec::new();
                if !self.announced.contains(id) {
                    if self.announced.len() < MAX_ITEMS {
                        self.announced.insert(id.to_string());
                    }
                    let (name, input) = tool_input(kind, item);
                    out.push(agent(tool_use(id, name, input)));
                }
                if completed {
                    self.announced.remove(id);
                    out.push(self.completed_tool(kind, id, item));
                }
                out
            }
            "error" if completed => {
                vec![agent(status("warning", Some(json!(str_of(item, "message")))))]
            }
            "todo_list" if completed => {
                vec![agent(status("plan", Some(item.get("items").cloned().unwrap_or(Value::Null))))]
            }
            _ => Vec::new(),
        }
    }

    fn completed_tool(&mut self, kind: &str, id: &str, item: &Value) -> Parsed {
        let status = str_of(item, "status");
        let (content, failed) = match kind {
            "command_execution" => {
                let ok = item.get("exit_code").and_then(Value::as_i64) == Some(0) && status != "failed";
                if ok {
                    for path in redirect_targets(str_of(item, "command")) {
                        self.files.on_written(&path);
                    }
                }
                (item.get("aggregated_output").cloned().unwrap_or_else(|| json!("")), !ok)
            }
            "file_change" => {
                let ok = status != "failed";
                let changes = item.get("changes").and_then(Value::as_array).cloned().unwrap_or_default();
                if ok {
                    for c in &changes {
                        if matches!(str_of(c, "kind"), "add" | "update") {
                            self.files.on_written(str_of(c, "path"));
                        }
                    }
                }
                (Value::Array(changes), !ok)
            }
            "mcp_tool_call" => {
                let failed = status == "failed" || item.get("error").is_some_and(|e| !e.is_null());
                (item.get("result").or_else(|| item.get("error")).cloned().unwrap_or(Value::Null), failed)
            }
            _ => (json!(""), status == "failed"),
        };
        agent(tool_result(id, content, failed))
    }
}

/// A tool-like item's (name, input) as a `tool_use` shows it.
fn tool_input(kind: &str, item: &Value) -> (String, Value) {
    match kind {
        "command_execution" => {
            ("shell".into(), json!({"command": item.get("command").cloned().unwrap_or(Value::Null)}))
        }
        "mcp_tool_call" => (
            format!("{}.{}", str_of(item, "server"), str_of(item, "tool")),
            item.get("arguments").cloned().unwrap_or_else(|| json!({})),
        ),
        "web_search" => ("web_search".into(), json!({"query": item.get("query").cloned().unwrap_or(Value::Null)})),
        _ => ("apply_patch".into(), json!({"changes": item.get("changes").cloned().unwrap_or_else(|| json!([]))})),
    }
}

/// The files a shell command's output redirections name: `> f`, `>> f`, `>f`, `tee [-a] f …`
/// (quotes removed; `/dev/…` and `&N` skipped). A heuristic: what a heredoc or an `echo >` writes.
pub(super) fn redirect_targets(command: &str) -> Vec<String> {
    let words = shell_words(command);
    let mut out: Vec<String> = Vec::new();
    let mut push = |w: &str| {
        let w = w.trim();
        if !w.is_empty() && !w.starts_with('&') && !w.starts_with("/dev/") && !out.iter().any(|o| o == w) {
            out.push(w.to_string());
        }
    };
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        // `2>` / `2>>` redirect stderr: skip; `>|` is a forced `>`.
        let bare = w.trim_start_matches(|c: char| c.is_ascii_digit());
        let stderr = bare.len() != w.len() && !w.starts_with('1');
        if let Some(rest) =
            bare.strip_prefix(">>").or_else(|| bare.strip_prefix(">|")).or_else(|| bare.strip_prefix('>'))
        {
            let target = if rest.is_empty() { words.get(i + 1).map(String::as_str).unwrap_or("") } else { rest };
            if !stderr {
                push(target);
            }
            i += if rest.is_empty() { 2 } else { 1 };
            continue;
        }
        // `bash -lc '<script>'`: the script's own redirections.
        if w.starts_with('-') && w.ends_with('c') && i > 0 && is_shell(&words[i - 1]) {
            if let Some(script) = words.get(i + 1) {
                for t in redirect_targets(script) {
                    push(&t);
                }
            }
            i += 2;
            continue;
        }
        if w == "tee" {
            let mut j = i + 1;
            while let Some(arg) = words.get(j) {
                if arg == "|" || arg == ";" || arg == "&&" || arg.starts_with('>') || arg.starts_with("<<") {
                    break;
                }
                if !arg.starts_with('-') {
                    push(arg);
                }
                j += 1;
            }
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// Whether `word` names a POSIX-ish shell (`bash`, `/bin/sh`, `zsh`, …).
fn is_shell(word: &str) -> bool {
    matches!(word.rsplit('/').next(), Some("sh" | "bash" | "zsh" | "dash"))
}

/// Splits a command into words, honouring quotes, and splitting off `|`, `;`, `&&`, `>`, `>>`
/// and `<<` as words of their own; a heredoc's body (after the line holding `<<`) is dropped.
fn shell_words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut heredoc = false;
    let mut chars = command.chars().peekable();
    let flush = |cur: &mut String, words: &mut Vec<String>| {
        if !cur.is_empty() {
            words.push(std::mem::take(cur));
        }
    };
    while let Some(c) = chars.next() {
        if heredoc {
            // Skip to the end: a heredoc body is data, not words (its terminator ends the command
            // as far as writing goes).
            continue;
        }
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, '\n') => {
                flush(&mut cur, &mut words);
                if words.iter().any(|w| w.starts_with("<<")) {
                    heredoc = true;
                }
                words.push(";".into());
            }
            (None, c) if c.is_whitespace() => flush(&mut cur, &mut words),
            (None, '|' | ';') => {
                flush(&mut cur, &mut words);
                words.push(c.to_string());
            }
            (None, '>') => {
                // `2>` keeps its digit; `>>` and `>|` stay one word.
                if !cur.chars().all(|d| d.is_ascii_digit()) {
                    flush(&mut cur, &mut words);
                }
                cur.push('>');
                if let Some(&n @ ('>' | '|')) = chars.peek() {
                    cur.push(n);
                    chars.next();
                }
                if chars.peek() == Some(&'&') {
                    // `>&2`: a descriptor, not a file.
                    cur.push('&');
                    chars.next();
                }
                flush(&mut cur, &mut words);
            }
            (None, '<') if chars.peek() == Some(&'<') => {
                flush(&mut cur, &mut words);
                chars.next();
                words.push("<<".into());
            }
            (None, c) => cur.push(c),
        }
    }
    flush(&mut cur, &mut words);
    words
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::Protocol;
    use super::*;

    #[test]
    fn redirect_targets_are_the_files_a_command_writes() {
        let t = |c: &str| redirect_targets(c);
        assert_eq!(t("cat > index.html <<'EOF'\n<h1>a > b</h1>\nEOF"), ["index.html"]);
        assert_eq!(t("/bin/bash -lc \"cat > /p/index.html <<'EOF'\n<p>x</p>\nEOF\""), ["/p/index.html"]);
        assert_eq!(t("echo hi >a.txt && echo there >> 'b c.txt'"), ["a.txt", "b c.txt"]);
        assert_eq!(t("printf x | tee -a log.md out.md >/dev/null"), ["log.md", "out.md"]);
        assert_eq!(t("make 2>/dev/null >&2; ls 2> err.txt 1> out.txt"), ["out.txt"]);
        assert_eq!(t("ls -la; cat index.html"), Vec::<String>::new());
        assert_eq!(t("sh -c 'echo a > x.css'"), ["x.css"]);
    }

    #[test]
    fn recorded_codex_session() {
        let stream = recorded("codex");
        for protocol in [Protocol::CodexJson, Protocol::Auto] {
            let (all, p) = parse_all(protocol, &stream);
            assert_eq!(p.protocol(), Protocol::CodexJson);
            assert_eq!(p.session_id(), Some("01a24ea3-af34-7ad1-bcac-61e0afd28444"));
            let status = payloads(&all, "status");
            assert_eq!(status[0]["label"], "initialized");
            assert_eq!(status[1]["label"], "warning", "the unknown model's warning item");
            let uses = payloads(&all, "tool_use");
            assert_eq!(uses.len(), 1, "announced once, at item.started");
            assert_eq!(uses[0]["name"], "shell");
            assert!(uses[0]["input"]["command"].as_str().unwrap().contains("cat > "));
            assert_eq!(payloads(&all, "tool_result")[0]["isError"], false);
            assert_eq!(text(&all), "I wrote index.html for you.");
            let u = payloads(&all, "usage")[0];
            assert_eq!(
                (u["usage"]["input_tokens"].as_u64(), u["usage"]["output_tokens"].as_u64()),
                (Some(200), Some(40))
            );
            let arts = artifacts(&all);
            assert_eq!(arts.len(), 1, "the heredoc's target: {arts:?}");
            assert!(arts[0].path.ends_with("/index.html"));
            assert!(payloads(&all, "raw").is_empty());
            assert_eq!(all.last(), Some(&Parsed::Done));
        }
    }

    #[test]
    fn file_changes_failures_and_errors() {
        let lines = [
            r#"{"type":"item.started","item":{"id":"i1","type":"file_change","changes":[{"path":"/p/a.html","kind":"add"},{"path":"/p/old.css","kind":"delete"},{"path":"/p/b.md","kind":"update"}],"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"i1","type":"file_change","changes":[{"path":"/p/a.html","kind":"add"},{"path":"/p/old.css","kind":"delete"},{"path":"/p/b.md","kind":"update"}],"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"i2","type":"file_change","changes":[{"path":"/p/c.html","kind":"add"}],"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"i3","type":"command_execution","command":"echo x > d.txt; false","aggregated_output":"","exit_code":1,"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"i4","type":"reasoning","text":"thinking it over"}}"#,
            r#"{"type":"error","message":"Reconnecting... 1/5"}"#,
            r#"{"type":"turn.failed","error":{"message":"stream disconnected"}}"#,
        ]
        .join("\n");
        let (all, _) = parse_all(Protocol::CodexJson, &lines);
        let arts: Vec<&str> = artifacts(&all).iter().map(|a| a.path.as_str()).collect();
        assert_eq!(arts, ["/p/a.html", "/p/b.md"], "added and updated, not deleted, not from failures");
        let results: Vec<bool> = payloads(&all, "tool_result").iter().map(|r| r["isError"] == true).collect();
        assert_eq!(results, [false, true, true]);
        assert_eq!(payloads(&all, "tool_use").len(), 3);
        assert_eq!(payloads(&all, "thinking_delta")[0]["delta"], "thinking it over");
        assert_eq!(payloads(&all, "status")[0]["label"], "error");
        assert!(all.contains(&Parsed::Error("stream disconnected".into())));
    }
}
