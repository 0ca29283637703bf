//! A catalog agent's invocation: at the moment a stage iteration starts, the entry is read again
//! (the data dir's files included), its binary resolved, its command line built from the template
//! and the run's recorded options (model, reasoning, permission mode), the prompt delivered as the
//! entry declares — and the whole handed to the exec machinery (`runner/exec.rs`) unchanged.

use serde_json::{json, Value};
use std::path::PathBuf;

use crate::agents::catalog::{Catalog, PromptVia};
use crate::agents::detect::{resolve, ProbeEnv, Resolved};
use crate::agents::template::{build, Slots};
use crate::engine::gate;
use crate::runner::agent::{AgentFailure, Invocation};
use crate::runner::exec::{prompt_rel, ExecConfig};

/// What [`prepare`] made: the exec options and the binary (`AgentStarted.bin`).
#[derive(Debug)]
pub struct Prepared {
    pub exec: ExecConfig,
    pub bin: PathBuf,
    pub via: PromptVia,
}

/// Builds the invocation of the catalog agent `inv.config.agent` (the catalog read with
/// `data_dir`'s files); a failure is a spawn failure naming what is wrong.
pub fn prepare(
    inv: &Invocation,
    data_dir: &std::path::Path,
    env: &ProbeEnv,
    clock: &dyn crate::clock::Clock,
) -> Result<Prepared, AgentFailure> {
    let bad = AgentFailure::Spawn;
    let config = &inv.config;
    let id = config["agent"].as_str().unwrap_or_default();
    let catalog = Catalog::load(data_dir).map_err(|e| bad(format!("the agent catalog: {e}")))?;
    let def = catalog.get(id).ok_or_else(|| bad(format!("agent {id:?} is not in the agent catalog")))?;
    let right = gate::ExecRight::of_run(config);
    // Bypass lets the agent run anything: it needs the right a command needs (an imported record
    // holds none).
    let mode =
        config[crate::agents::PERMISSION_KEY].as_str().unwrap_or(crate::agents::catalog::DEFAULT_PERMISSION_MODE);
    if mode == "bypass" {
        gate::pass(right, gate::Reach::BypassPermissions, None).map_err(|e| bad(e.to_string()))?;
    }
    if !config["env"].is_null() {
        gate::pass(right, gate::Reach::AgentCommand { field: "agentEnv" }, None).map_err(|e| bad(e.to_string()))?;
    }
    let (bin, mut words) = if def.command_from_request {
        gate::pass(right, gate::Reach::AgentCommand { field: "agentCommand" }, None).map_err(|e| bad(e.to_string()))?;
        let words: Vec<String> = match &config["command"] {
            Value::Array(a) => a.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            Value::String(s) => vec!["sh".into(), "-c".into(), s.clone()],
            _ => Vec::new(),
        };
        let (first, rest) =
            words.split_first().ok_or_else(|| bad(format!("agent {id} needs its command line (agentCommand)")))?;
        (PathBuf::from(first), rest.to_vec())
    } else {
        match resolve(def, env) {
            Resolved::Found(p) => (p, Vec::new()),
            other => return Err(bad(format!("agent {id}: its binary is not usable now ({other:?})"))),
        }
    };
    // Capabilities decide optional flags: the cached detection has them (probing again only when
    // the cache is cold).
    let caps = if def.capability_flags.is_empty() {
        Default::default()
    } else {
        crate::agents::detect::Detector::global().detect(def, env, clock).caps
    };
    let text = |k: &str| config[k].as_str().filter(|s| !s.is_empty()).map(str::to_string);
    let slots = Slots {
        model: text("model"),
        reasoning: text("reasoning"),
        resume: text("resumeSessionId"),
        mcp_config: text("mcpConfigPath"),
        cwd: inv.project_dir.to_string_lossy().into(),
        prompt: inv.prompt.clone(),
        prompt_file: inv.project_dir.join(prompt_rel(inv)).to_string_lossy().into(),
        permission_mode: mode.to_string(),
        caps,
        argv_budget: crate::limits::MAX_PROMPT_ARGV_BYTES,
    };
    let built = build(def, &slots).map_err(|e| bad(format!("agent {id}: {e}")))?;
    words.extend(built.args);
    let mut cfg = config.clone();
    if let Some(o) = cfg.as_object_mut() {
        let mut argv = vec![bin.to_string_lossy().to_string()];
        argv.extend(words);
        o.insert("command".into(), json!(argv));
        o.insert("protocol".into(), json!(def.protocol));
    }
    let mut exec = ExecConfig::parse(&cfg)?;
    exec.stdin_prompt = built.via == PromptVia::Stdin;
    Ok(Prepared { exec, bin, via: built.via })
}

/// The session id the agent of `stage_id`'s iteration `iteration` named (its dialect's status
/// `initialized` with `sessionId`; the last one wins): what the next iteration resumes with its
/// catalog entry's `resume` slot (`--resume`, `-s`).
pub fn previous_session<'a>(
    history: impl IntoIterator<Item = &'a od_events::Event>,
    stage_id: &str,
    iteration: u32,
) -> Option<String> {
    history
        .into_iter()
        .filter_map(|e| match e {
            od_events::Event::AgentOutput(o)
                if o.stage_id == stage_id
                    && o.iteration == iteration
                    && o.channel == od_events::vocab::Channel::Agent =>
            {
                let v: Value = serde_json::from_str(&o.payload_json).ok()?;
                v["sessionId"].as_str().filter(|id| !id.is_empty()).map(str::to_string)
            }
            _ => None,
        })
        .last()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;
    use std::os::unix::fs::PermissionsExt;

    fn inv(dir: &std::path::Path, config: Value, prompt: &str) -> Invocation {
        Invocation {
            run_id: "run_1".into(),
            project_id: "p".into(),
            project_dir: dir.join("project"),
            snapshot_id: "s".into(),
            task_kind: "new-generation".into(),
            stage_id: "generate".into(),
            iteration: 0,
            attempt: 1,
            atoms: Vec::new(),
            prompt: prompt.into(),
            config,
            daemon_url: String::new(),
            data_dir: dir.to_path_buf(),
            tool_token: String::new(),
        }
    }

    fn env_with(bin: &std::path::Path) -> ProbeEnv {
        let mut vars = std::collections::HashMap::new();
        vars.insert("PATH".to_string(), format!("{}:/usr/bin:/bin", bin.display()));
        ProbeEnv { vars }
    }

    fn fake(bin: &std::path::Path, name: &str) -> PathBuf {
        std::fs::create_dir_all(bin).unwrap();
        let p = bin.join(name);
        std::fs::write(&p, "#!/bin/sh\necho 1.0.0\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn the_command_line_comes_from_the_catalog_and_the_protocol_with_it() {
        let tmp = tempfile::tempdir().unwrap();
        let claude = fake(&tmp.path().join("bin"), "claude");
        let config = json!({"agent": "claude", "model": "m", "permissionMode": "accept-edits"});
        let p = prepare(&inv(tmp.path(), config, "hi"), tmp.path(), &env_with(&tmp.path().join("bin")), &SystemClock)
            .unwrap();
        assert_eq!(p.bin, claude);
        assert_eq!(p.exec.argv[0], claude.to_string_lossy());
        assert!(p.exec.argv.windows(2).any(|w| w == ["--permission-mode", "acceptEdits"]), "{:?}", p.exec.argv);
        assert!(p.exec.argv.windows(2).any(|w| w == ["--model", "m"]), "{:?}", p.exec.argv);
        assert_eq!(p.exec.protocol, crate::runner::dialects::Protocol::ClaudeStreamJson);
        assert!(p.exec.stdin_prompt);
    }

    #[test]
    fn an_argv_agent_gets_the_prompt_in_its_command_line_and_stdin_closed() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("agents")).unwrap();
        std::fs::write(
            tmp.path().join("agents/a.json"),
            r#"{"id":"argvy","name":"Argvy","bin":"argvy","args":["run",{"slot":"prompt"}],
                "prompt":{"via":"argv","argvArgs":["{prompt}"],"fallback":"file","fileArgs":["--file","{promptFile}"]},
                "protocol":"od","permissionModes":{"accept-edits":[]}}"#,
        )
        .unwrap();
        fake(&tmp.path().join("bin"), "argvy");
        let env = env_with(&tmp.path().join("bin"));
        let p = prepare(&inv(tmp.path(), json!({"agent": "argvy"}), "do it"), tmp.path(), &env, &SystemClock).unwrap();
        assert_eq!(&p.exec.argv[1..], ["run", "do it"]);
        assert!(!p.exec.stdin_prompt);
        let long = "z".repeat(crate::limits::MAX_PROMPT_ARGV_BYTES + 1);
        let p = prepare(&inv(tmp.path(), json!({"agent": "argvy"}), &long), tmp.path(), &env, &SystemClock).unwrap();
        assert_eq!(p.via, PromptVia::File);
        assert!(p.exec.argv[3].ends_with(".od/prompts/generate-0-1.md"), "{:?}", p.exec.argv);
    }

    #[test]
    fn the_session_resumed_is_the_last_one_the_stages_previous_iteration_named() {
        let out = |stage: &str, i: u32, channel: &str, payload: Value| {
            od_events::Event::AgentOutput(od_events::runs::AgentOutput {
                run_id: "run_1".into(),
                stage_id: stage.into(),
                iteration: i,
                channel: channel.into(),
                payload_json: payload.to_string(),
            })
        };
        let init = |id: &str| json!({"type": "status", "label": "initialized", "sessionId": id});
        let history = [
            out("generate", 0, "agent", init("s-first")),
            out("generate", 0, "agent", json!({"type": "text_delta", "delta": "hi"})),
            out("generate", 0, "agent", init("s-last")),
            out("generate", 0, "stderr", json!({"chunk": "x", "sessionId": "not-this"})),
            out("critique", 0, "agent", init("s-other-stage")),
            out("generate", 1, "agent", init("s-next")),
        ];
        assert_eq!(previous_session(&history, "generate", 0).as_deref(), Some("s-last"));
        assert_eq!(previous_session(&history, "generate", 1).as_deref(), Some("s-next"));
        assert_eq!(previous_session(&history, "critique", 0).as_deref(), Some("s-other-stage"));
        assert_eq!(previous_session(&history, "generate", 2), None);
    }

    #[test]
    fn bypass_without_the_exec_right_does_not_start() {
        let tmp = tempfile::tempdir().unwrap();
        fake(&tmp.path().join("bin"), "claude");
        let env = env_with(&tmp.path().join("bin"));
        // An imported record (or one made without the right) holds no mayExec.
        let e = prepare(
            &inv(tmp.path(), json!({"agent": "claude", "permissionMode": "bypass"}), "x"),
            tmp.path(),
            &env,
            &SystemClock,
        )
        .unwrap_err();
        assert!(e.to_string().contains("permissionMode"), "{e}");
        let ok = json!({"agent": "claude", "permissionMode": "bypass", crate::engine::gate::MAY_EXEC_KEY: true});
        let p = prepare(&inv(tmp.path(), ok, "x"), tmp.path(), &env, &SystemClock).unwrap();
        assert!(p.exec.argv.contains(&"bypassPermissions".to_string()), "{:?}", p.exec.argv);
    }
}
