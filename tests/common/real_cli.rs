//! What the real agent CLIs' tests share (`tests/runs/real_agents.rs`, `tests/runs/real_acp.rs`):
//! where `tests/agents_js/install.sh` put the CLIs, the skip-or-require rule when one is missing,
//! and the config files and variables that point Gemini CLI and Qwen Code at the fake model server.

use serde_json::json;
use std::path::{Path, PathBuf};

/// The fake's model name, as each CLI is told it.
pub const MODEL: &str = "fake-model";

/// The npm bin folder the CLIs are installed in.
pub fn agents_js() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents_js/node_modules/.bin")
}

/// The installed binary `bin`, or `None` when it is not installed — which fails the test when
/// `OD_REAL_AGENTS=required` (as `.ci/run` sets), and is said on stderr otherwise.
pub fn installed(name: &str, bin: &str) -> Option<PathBuf> {
    let path = agents_js().join(bin);
    if path.exists() {
        return Some(path);
    }
    let why = format!("{name} is not installed ({}): run tests/agents_js/install.sh", path.display());
    assert_ne!(std::env::var("OD_REAL_AGENTS").as_deref(), Ok("required"), "{why}");
    eprintln!("skipped: {why}");
    None
}

/// Writes `text` at `path`, making its folder.
pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Gemini CLI against the fake at `url`: its required settings (API-key auth, statistics off)
/// in `home`, and its variables.
pub fn gemini_env(home: &Path, url: &str) -> Vec<(&'static str, String)> {
    write(
        &home.join(".gemini/settings.json"),
        &json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false},
                "general": {"disableAutoUpdate": true, "disableUpdateNag": true}})
        .to_string(),
    );
    vec![
        ("GEMINI_API_KEY", "fake".into()),
        ("GOOGLE_GEMINI_BASE_URL", url.into()),
        ("GEMINI_CLI_TRUST_WORKSPACE", "true".into()),
        // Else it starts itself again in a child Node with a bigger heap: twice the start-up.
        ("GEMINI_CLI_NO_RELAUNCH", "true".into()),
    ]
}

/// Qwen Code against the fake at `url` (OpenAI-compatible): its settings in `home` (OpenAI auth,
/// statistics and telemetry off), and its variables.
pub fn qwen_env(home: &Path, url: &str) -> Vec<(&'static str, String)> {
    write(
        &home.join(".qwen/settings.json"),
        &json!({"security": {"auth": {"selectedType": "openai"}}, "selectedAuthType": "openai",
                "privacy": {"usageStatisticsEnabled": false}, "usageStatisticsEnabled": false,
                "telemetry": {"enabled": false}})
        .to_string(),
    );
    vec![("OPENAI_API_KEY", "sk-fake".into()), ("OPENAI_BASE_URL", format!("{url}/v1")), ("OPENAI_MODEL", MODEL.into())]
}
