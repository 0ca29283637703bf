//! `od agents list|info <id>|test <id>`: the agents a run may name, as the daemon detects them
//! (`GET /api/agents`: path, version, auth, models, diagnostics with the fix), and a tiny real
//! invocation of one (`test`, run here by the CLI with its own environment, bounded in time).

use clap::Subcommand;
use serde_json::{json, Value};

use super::{s, CliError, CliResult, Ctx};

#[derive(Subcommand, Debug)]
pub enum AgentsCmd {
    /// Every agent: od's own and the catalog's, detected (available, version, path, diagnostics).
    List,
    /// One agent, with its models, permission modes and each diagnostic's fix.
    Info { id: String },
    /// Run the agent once with the prompt "say ok" in an empty folder and report what it did.
    Test {
        id: String,
        /// Give up (killing it) after this many ms.
        #[arg(long, default_value_t = crate::limits::AGENT_TEST_TIMEOUT_MS)]
        timeout_ms: u64,
    },
}

pub fn run(ctx: &Ctx, cmd: AgentsCmd) -> CliResult {
    match cmd {
        AgentsCmd::List => {
            let v = ctx.conn()?.get("/api/agents")?;
            ctx.print(&v, table);
            Ok(())
        }
        AgentsCmd::Info { id } => {
            let v = ctx.conn()?.get("/api/agents")?;
            let a = find(&v, &id)?;
            ctx.print(&json!({ "agent": a }), |v| detail(&v["agent"]));
            Ok(())
        }
        AgentsCmd::Test { id, timeout_ms } => {
            let cat = crate::agents::catalog::Catalog::load(&ctx.data_dir)
                .map_err(|e| CliError::new("invalid-input", e.to_string()))?;
            let def = cat.get(&id).ok_or_else(|| not_found(&id, &cat))?;
            let timeout = std::time::Duration::from_millis(timeout_ms.clamp(1, crate::limits::MAX_TIMEOUT_MS));
            let report = crate::runner::trial::trial(def, &crate::agents::detect::ProbeEnv::from_process(), timeout);
            let ok = report["ok"] == true;
            ctx.print(&report, |r| {
                let mut out = vec![format!("{}: {}", s(&r["id"]), if ok { "ok" } else { "FAILED" })];
                for (k, label) in [("error", "error"), ("reportedError", "agent said"), ("text", "text")] {
                    if let Some(t) = r[k].as_str().filter(|t| !t.is_empty()) {
                        out.push(format!("  {label}: {t}"));
                    }
                }
                if let Some(a) = r["argv"].as_array() {
                    let words: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
                    out.push(format!("  ran: {}", words.join(" ")));
                }
                if !r["exitCode"].is_null() || r["timedOut"] == true {
                    out.push(format!("  exit: {}  ({} ms)", r["exitCode"], r["elapsedMs"]));
                }
                if let Some(t) = r["stderrTail"].as_str().filter(|t| !t.trim().is_empty() && !ok) {
                    out.push(format!("  stderr: {}", t.trim()));
                }
                out.join("\n")
            });
            if ok {
                Ok(())
            } else {
                Err(CliError::new("agent-test-failed", format!("agent {id} did not pass its test")).with_data(report))
            }
        }
    }
}

fn not_found(id: &str, cat: &crate::agents::catalog::Catalog) -> CliError {
    let ids: Vec<&str> = cat.agents.iter().map(|a| a.id.as_str()).collect();
    CliError::new("not-found", format!("no agent {id:?} in the catalog ({})", ids.join(", ")))
}

fn find(v: &Value, id: &str) -> CliResult<Value> {
    v["agents"].as_array().into_iter().flatten().find(|a| a["id"] == id).cloned().ok_or_else(|| {
        let ids: Vec<&str> = v["agents"].as_array().into_iter().flatten().filter_map(|a| a["id"].as_str()).collect();
        CliError::new("not-found", format!("no agent {id:?} ({})", ids.join(", ")))
    })
}

/// One line per agent: id, state, version, path or the first problem's fix.
fn table(v: &Value) -> String {
    let mut out = vec![format!("{:<14} {:<11} {:<12} {}", "AGENT", "STATE", "VERSION", "PATH / FIX")];
    for a in v["agents"].as_array().into_iter().flatten() {
        let state = match (a["available"] == true, a["default"] == true) {
            (true, true) => "ready*",
            (true, false) => "ready",
            (false, _) => "unavailable",
        };
        let problem = a["diagnostics"]
            .as_array()
            .and_then(|d| d.first())
            .map(|g| format!("{}: {}", s(&g["reason"]), s(&g["fix"])));
        let where_ = match (a["path"].as_str(), problem) {
            (_, Some(p)) if a["available"] != true => p,
            (Some(p), Some(w)) => format!("{p} ({w})"),
            (Some(p), None) => p.to_string(),
            (None, _) => a["command"].as_str().map(str::to_string).unwrap_or_default(),
        };
        out.push(format!("{:<14} {:<11} {:<12} {}", s(&a["id"]), state, a["version"].as_str().unwrap_or("-"), where_));
    }
    out.push(format!("* default ({})", s(&v["defaultSource"])));
    out.join("\n")
}

fn detail(a: &Value) -> String {
    let mut out = vec![format!("{} — {}", s(&a["id"]), s(&a["name"]))];
    for (k, label) in [
        ("path", "path"),
        ("version", "version"),
        ("authStatus", "auth"),
        ("authMessage", "  "),
        ("installUrl", "install"),
        ("docsUrl", "docs"),
    ] {
        if let Some(t) = a[k].as_str() {
            out.push(format!("  {label:<8} {t}"));
        }
    }
    out.push(format!("  {:<8} {}", "ready", a["available"]));
    let list = |k: &str| {
        a[k].as_array().map(|m| m.iter().filter_map(|x| x["id"].as_str().or(x.as_str())).collect::<Vec<_>>().join(", "))
    };
    if let Some(m) = list("models").filter(|m| !m.is_empty()) {
        out.push(format!("  {:<8} {m} ({})", "models", a["modelsSource"].as_str().unwrap_or("")));
    }
    if let Some(m) = list("permissionModes") {
        out.push(format!("  {:<8} {m} (default {})", "modes", a["defaultPermissionMode"].as_str().unwrap_or("")));
    }
    for g in a["diagnostics"].as_array().into_iter().flatten() {
        out.push(format!(
            "  {} {}: {}\n      fix: {}",
            s(&g["severity"]),
            s(&g["reason"]),
            s(&g["message"]),
            s(&g["fix"])
        ));
    }
    out.join("\n")
}
